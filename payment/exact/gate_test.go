package exact_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/exact"
	"github.com/tollgate/tollgate/store"
)

// world is a devnet, a local facilitator on it, a ledger and a gate in
// front of a handler that counts its calls.
type world struct {
	chain   *devnet.Chain
	client  *ethclient.Client
	ledger  *store.DB
	local   *exact.Local
	audit   *exact.Auditor
	gate    *payment.Gate
	srv     *httptest.Server
	calls   atomic.Int64
	status  atomic.Int64 // handler status, 200 by default
	token   abi.ABI
	payTo   common.Address
	onServe func(*http.Request)
}

func newWorld(t testing.TB, f func(*exact.Local) exact.Facilitator) *world {
	t.Helper()
	return newWorldWith(t, worldOptions{facilitator: f})
}

// worldOptions change a world's parts: the facilitator and the ledger
// wrapped around the real ones, the gate's clock and its logger.
type worldOptions struct {
	facilitator func(*exact.Local) exact.Facilitator
	ledger      func(*store.DB) exact.Ledger
	now         func() time.Time
	logger      *slog.Logger
	ids         bool // the gate keeps payment identifiers, in the ledger's store
	signIn      bool // the gate lets wallets sign in, with the ledger's store and the devnet
}

func newWorldWith(t testing.TB, o worldOptions) *world {
	t.Helper()
	f := o.facilitator
	chain, client := devnettest.Start(t)
	ledger, err := store.OpenSQLite(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ledger.Close() })
	local := newLocal(t, chain, client, 5*time.Second)
	var fac exact.Facilitator = local
	if f != nil {
		fac = f(local)
	}
	w := &world{chain: chain, client: client, ledger: ledger, local: local, payTo: chain.Account(devnet.PayToAccount).Address}
	audit := exact.DefaultAuditConfig()
	audit.ReceiptWait = 3 * time.Second
	if w.audit, err = exact.NewAuditor(audit, client); err != nil {
		t.Fatal(err)
	}
	w.status.Store(200)
	_, w.token, _ = devnet.TokenArtifact()
	var gateLedger exact.Ledger = ledger
	if o.ledger != nil {
		gateLedger = o.ledger(ledger)
	}
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	scheme, err := exact.NewServer(exact.ServerConfig{SettleTimeout: 2 * time.Second, Now: o.now}, fac, gateLedger, w.audit)
	if err != nil {
		t.Fatal(err)
	}
	gc := gateConfig(chain, w.payTo, scheme)
	if o.ids {
		gc.IDs = ledger
	}
	if o.signIn {
		gc.SignIn = &payment.SignIn{Nonces: ledger, Purchases: ledger, Chain: client}
	}
	gate, err := payment.NewGate(gc, []payment.Route{
		{Name: "regime", Pattern: "GET /regime", PriceUSD: "0.05", Description: "regime", Valid: func(*http.Request) bool { return true }},
		{Name: "rugcheck", Pattern: "GET /rugcheck/{addr}", PriceUSD: "0.10", Description: "rug check",
			Valid: func(r *http.Request) bool { return common.IsHexAddress(r.PathValue("addr")) }},
		{Name: "lanes", Pattern: "GET /lanes", PriceUSD: "0.05", Description: "lanes", Valid: func(*http.Request) bool { return true }},
	}, ledger, logger)
	if err != nil {
		t.Fatal(err)
	}
	w.gate = gate
	handler := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/rugcheck/bad" {
			rw.WriteHeader(400)
			io.WriteString(rw, `{"error":"invalid_argument"}`)
			return
		}
		w.calls.Add(1)
		if w.onServe != nil {
			w.onServe(r)
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(int(w.status.Load()))
		io.WriteString(rw, `{"regime":"RANGE"}`)
	})
	w.srv = httptest.NewServer(gate.Handler(handler))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *world) balance(t testing.TB, a common.Address) *big.Int {
	t.Helper()
	data, _ := w.token.Pack("balanceOf", a)
	out, err := w.client.CallContract(context.Background(), ethereum.CallMsg{To: &w.chain.Token, Data: data}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return new(big.Int).SetBytes(out)
}

func (w *world) payer(version int) *payment.Payer {
	return &payment.Payer{Version: version, Networks: map[string]int64{"base": 8453},
		Schemes: []payment.SchemeClient{exact.Payer{Key: w.chain.Account(devnet.PayerAccount).Key}}}
}

// newLocal returns exact's local facilitator on chain, sending from the
// devnet's facilitator key with receipts awaited up to receiptTimeout.
func newLocal(t testing.TB, chain *devnet.Chain, client *ethclient.Client, receiptTimeout time.Duration) *exact.Local {
	t.Helper()
	sender, err := payment.NewLocal(payment.LocalConfig{
		ChainID: big.NewInt(devnet.ChainID), Key: chain.Account(devnet.FacilitatorAccount).Key, ReceiptTimeout: receiptTimeout,
	}, client)
	if err != nil {
		t.Fatal(err)
	}
	local, err := exact.NewLocal(exact.LocalConfig{
		ChainID: big.NewInt(devnet.ChainID), Grace: 6 * time.Second,
		Assets: []payment.Asset{{Address: chain.Token, Name: devnet.TokenName, Version: devnet.TokenVersion}},
	}, client, sender)
	if err != nil {
		t.Fatal(err)
	}
	return local
}

// gateConfig is the devnet gate's configuration offering scheme.
func gateConfig(chain *devnet.Chain, payTo common.Address, scheme payment.Scheme) payment.GateConfig {
	return payment.GateConfig{
		PublicURL: "http://tollgate.test", Network: "eip155:8453", NetworkV1: "base", ChainID: big.NewInt(devnet.ChainID),
		Asset: chain.Token, AssetName: devnet.TokenName, AssetVersion: devnet.TokenVersion, Decimals: devnet.TokenDecimals,
		PayTo: payTo, MaxTimeout: 300, Schemes: []payment.Scheme{scheme},
	}
}

func TestPaidCallEndToEnd(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	for _, version := range []int{2, 1} {
		before := w.balance(t, w.payTo)
		res, err := w.payer(version).Get(context.Background(), w.srv.URL+"/regime")
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != 200 || string(res.Body) != `{"regime":"RANGE"}` || res.Settlement == nil || !res.Settlement.Success {
			t.Fatalf("v%d: status %d body %s settlement %+v", version, res.Status, res.Body, res.Settlement)
		}
		wantNet := map[int]string{1: "base", 2: "eip155:8453"}[version]
		if res.Settlement.Network != wantNet || !strings.HasPrefix(res.Settlement.Transaction, "0x") {
			t.Errorf("v%d settlement %+v", version, res.Settlement)
		}
		if got := new(big.Int).Sub(w.balance(t, w.payTo), before); got.Int64() != 50_000 {
			t.Errorf("v%d: payTo received %s, want 50000 (0.05 USD)", version, got)
		}
		rcpt, err := w.client.TransactionReceipt(context.Background(), common.HexToHash(res.Settlement.Transaction))
		if err != nil || rcpt.Status != 1 {
			t.Errorf("v%d: receipt %v %v", version, rcpt, err)
		}
	}
	recs, err := w.ledger.Payments(context.Background())
	if err != nil || len(recs) != 2 || recs[0].State != exact.StateSettled || recs[1].Version != 1 || recs[0].Amount != "50000" {
		t.Fatalf("ledger: %+v %v", recs, err)
	}
	c, _ := w.gate.Counters(context.Background())
	if c["regime"].Paid != 2 || c["regime"].Challenges != 2 || c["regime"].Amount != "100000" {
		t.Errorf("counters %+v", c)
	}
	if w.calls.Load() != 2 {
		t.Errorf("handler ran %d times", w.calls.Load())
	}
}

func TestChallenge(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	resp, err := http.Get(w.srv.URL + "/rugcheck/0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913?x=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 402 || resp.Header.Get("Cache-Control") != "no-store" || w.calls.Load() != 0 {
		t.Fatalf("status %d cache %q calls %d", resp.StatusCode, resp.Header.Get("Cache-Control"), w.calls.Load())
	}
	var v1 payment.RequiredV1
	if err := json.Unmarshal(body, &v1); err != nil || v1.X402Version != 1 || len(v1.Accepts) != 1 {
		t.Fatalf("v1 body %s: %v", body, err)
	}
	a := v1.Accepts[0]
	if a.Network != "base" || a.MaxAmountRequired != "100000" || a.Resource != "http://tollgate.test/rugcheck/0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913?x=1" ||
		a.Extra.Name != "USD Coin" || a.Extra.Version != "2" || a.PayTo != w.payTo.Hex() || a.OutputSchema == nil || a.MimeType != "application/json" {
		t.Errorf("v1 requirement %+v", a)
	}
	raw, _ := base64.StdEncoding.DecodeString(resp.Header.Get(payment.HeaderPaymentRequired))
	var v2 payment.RequiredV2
	if err := json.Unmarshal(raw, &v2); err != nil || v2.X402Version != 2 || v2.Accepts[0].Network != "eip155:8453" || v2.Accepts[0].Amount != "100000" || v2.Extensions["bazaar"] == nil {
		t.Errorf("v2 header %s: %v", raw, err)
	}
	if !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "PAYMENT-RESPONSE") {
		t.Errorf("CORS does not expose the payment headers")
	}
	// Bad input is not challenged: the handler refuses it unpaid.
	resp, _ = http.Get(w.srv.URL + "/rugcheck/bad")
	if resp.StatusCode != 400 {
		t.Errorf("bad input: %d", resp.StatusCode)
	}
}

func TestConcurrentPaymentsSettleOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.onServe = func(*http.Request) { time.Sleep(20 * time.Millisecond) }
	header := signedHeader(t, w, 2, "/regime", nil)
	var wg sync.WaitGroup
	var ok atomic.Int64
	txs := sync.Map{}
	for range 20 {
		wg.Go(func() {
			status, h, _ := get(t, w, "/regime", payment.HeaderPaymentV2, header)
			if status == 200 {
				ok.Add(1)
				txs.Store(h.Get(payment.HeaderPaymentResponseV2), true)
			}
		})
	}
	wg.Wait()
	recs, _ := w.ledger.Payments(context.Background())
	if len(recs) != 1 || recs[0].State != exact.StateSettled {
		t.Fatalf("ledger %+v", recs)
	}
	n := 0
	txs.Range(func(any, any) bool { n++; return true })
	if ok.Load() < 1 || n != 1 || w.calls.Load() != 1 {
		t.Errorf("%d answered, %d distinct settlements, handler ran %d times (want once)", ok.Load(), n, w.calls.Load())
	}
	if got := w.balance(t, w.payTo); got.Cmp(new(big.Int).Mul(big.NewInt(1000), big.NewInt(1_000_000))) <= 0 || got.Int64()-1_000_000_000 != 50_000 {
		t.Errorf("payTo balance %s: want exactly one 0.05 USD transfer", got)
	}
}

func get(t *testing.T, w *world, path, header, value string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", w.srv.URL+path, nil)
	if header != "" {
		req.Header.Set(header, value)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}

// signedHeader signs a payment for path's requirement from the payer
// account, letting mutate change the authorization before signing.
func signedHeader(t testing.TB, w *world, version int, path string, mutate func(*payment.Authorization, *payment.RequirementsV2)) string {
	t.Helper()
	key := w.chain.Account(devnet.PayerAccount).Key
	req := payment.RequirementsV2{Scheme: "exact", Network: "eip155:8453", Amount: "50000", Asset: w.chain.Token.Hex(),
		PayTo: w.payTo.Hex(), MaxTimeoutSeconds: 300, Extra: payment.Extra{Name: "USD Coin", Version: "2"}}
	if strings.HasPrefix(path, "/rugcheck") {
		req.Amount = "100000"
	}
	value, _ := new(big.Int).SetString(req.Amount, 10)
	a := payment.Authorization{From: crypto.PubkeyToAddress(key.PublicKey), To: w.payTo, Value: value,
		ValidAfter: big.NewInt(time.Now().Add(-time.Minute).Unix()), ValidBefore: big.NewInt(time.Now().Add(5 * time.Minute).Unix())}
	copy(a.Nonce[:], crypto.Keccak256([]byte(t.Name()+path), big.NewInt(time.Now().UnixNano()).Bytes()))
	if mutate != nil {
		mutate(&a, &req)
	}
	d := payment.Domain{Name: "USD Coin", Version: "2", ChainID: big.NewInt(devnet.ChainID), VerifyingContract: w.chain.Token}
	sig, err := d.Sign(a, key)
	if err != nil {
		t.Fatal(err)
	}
	h, err := exact.EncodePayment(version, req, "base", a, sig)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
