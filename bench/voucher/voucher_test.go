// Package voucher measures what a batch-settlement voucher call costs the
// server, against an unpaid 402 on the same gate (issue 20, item 9): the
// real gate and scheme server over the real store (SQLite, PostgreSQL),
// a facilitator that answers from memory (no chain I/O, as a voucher
// served from a fresh mirror needs none), over loopback HTTP.
//
//	go test -run x -bench . -benchtime 2000x ./bench/voucher/
package voucher

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/pgtest"
)

var (
	token = common.HexToAddress("0x700b6A60ce7EaaEA56F065753d8dcB9653dbAD35")
	payTo = common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
	price = big.NewInt(10_000)
)

// chain answers the facilitator's questions from memory: a channel holds
// a large deposit once its first deposit, which opens it, landed.
type chain struct{ opened *sync.Map }

func (c chain) Verify(_ context.Context, p *batch.Payment, _ payment.RequirementsV2, _ []byte) (batch.Verdict, error) {
	st := batch.OnChain{Balance: new(big.Int), TotalClaimed: new(big.Int), RefundNonce: new(big.Int)}
	if _, ok := c.opened.Load(p.ChannelID); ok {
		st.Balance = big.NewInt(1e12)
	}
	return batch.Verdict{Valid: true, Payer: p.Config.Payer, State: st}, nil
}

func (c chain) Deposit(_ context.Context, p *batch.Payment, _ payment.RequirementsV2, _ []byte) (batch.Outcome, error) {
	_, was := c.opened.LoadOrStore(p.ChannelID, true)
	st := batch.OnChain{Balance: big.NewInt(1e12), TotalClaimed: new(big.Int), RefundNonce: new(big.Int)}
	return batch.Outcome{Success: true, Tx: common.HexToHash("0xd0"), Amount: p.Deposit.Amount, State: &st, Opened: !was}, nil
}

func (chain) Claim(context.Context, []batch.Claim, []byte) (batch.Outcome, error) {
	return batch.Outcome{}, nil
}
func (chain) Settle(context.Context, common.Address, common.Address) (batch.Outcome, error) {
	return batch.Outcome{}, nil
}
func (chain) Refund(context.Context, batch.RefundOrder) (batch.Outcome, error) {
	return batch.Outcome{}, nil
}

type server struct {
	url   string
	terms batch.Terms
	entry json.RawMessage
}

func newServer(b *testing.B, st batch.Store) *server {
	b.Helper()
	authorizer, _ := crypto.GenerateKey()
	escrow := batch.Escrow{ChainID: big.NewInt(8453), Address: batch.EscrowAddress}
	scheme, err := batch.NewServer(batch.ServerConfig{Escrow: escrow, Authorizer: authorizer, WithdrawDelay: 3600}, st, chain{opened: new(sync.Map)})
	if err != nil {
		b.Fatal(err)
	}
	gate, err := payment.NewGate(payment.GateConfig{
		PublicURL: "http://tollgate.test", Network: "eip155:8453", NetworkV1: "base", ChainID: big.NewInt(8453),
		Asset: token, AssetName: "USD Coin", AssetVersion: "2", Decimals: 6, PayTo: payTo, MaxTimeout: 60,
		Schemes: []payment.Scheme{scheme},
	}, []payment.Route{{Name: "regime", Pattern: "GET /regime", PriceUSD: "0.01", Description: "regime", Valid: func(*http.Request) bool { return true }}},
		nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(gate.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"regime":"calm","confidence":0.8}`))
	})))
	b.Cleanup(srv.Close)
	s := &server{url: srv.URL, terms: batch.Terms{Escrow: escrow, Receiver: payTo, ReceiverAuthorizer: scheme.ReceiverAuthorizer(), Token: token,
		WithdrawDelay: 3600, Price: price}}
	resp, err := http.Get(srv.URL + "/regime")
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	raw, _ := base64.StdEncoding.DecodeString(resp.Header.Get(payment.HeaderPaymentRequired))
	var req struct{ Accepts []json.RawMessage }
	if err := json.Unmarshal(raw, &req); err != nil || len(req.Accepts) != 1 {
		b.Fatalf("402: %v", err)
	}
	s.entry = req.Accepts[0]
	return s
}

// payer is one channel's client.
type payer struct {
	p       batch.Payer
	charged int64
}

// envelope is p's PAYMENT-SIGNATURE paying cumulative max with a payload
// of typ.
func (s *server) envelope(b *testing.B, p *payer, typ string, max int64) string {
	var dep *batch.DepositRequest
	if typ == batch.TypeDeposit {
		dep = &batch.DepositRequest{Amount: big.NewInt(1e9), Token: payment.Domain{Name: "USD Coin", Version: "2", ChainID: big.NewInt(8453),
			VerifyingContract: token}, ValidBefore: big.NewInt(time.Now().Unix() + 300), Salt: big.NewInt(1)}
	}
	inner, err := p.p.Payload(s.terms, typ, big.NewInt(max), dep, nil)
	if err != nil {
		b.Fatal(err)
	}
	env, _ := json.Marshal(map[string]any{"x402Version": 2, "accepted": s.entry, "payload": json.RawMessage(inner),
		"resource": map[string]any{"url": "http://tollgate.test/regime"}})
	return base64.StdEncoding.EncodeToString(env)
}

// call sends env, p's next payment of typ.
func (s *server) call(b *testing.B, c *http.Client, p *payer, typ, env string) {
	req, _ := http.NewRequest(http.MethodGet, s.url+"/regime", nil)
	req.Header.Set(payment.HeaderPaymentV2, env)
	resp, err := c.Do(req)
	if err != nil {
		b.Error(err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Errorf("%s: %d", typ, resp.StatusCode)
		return
	}
	p.charged += price.Int64()
}

const payers = 16

// run makes b.N paid voucher calls from 16 payers at once, each on its
// own channel, and reports calls/s; with challenge set it makes unpaid
// calls (the 402) instead.
func run(b *testing.B, st batch.Store, challenge bool) {
	s := newServer(b, st)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: payers}}
	ps := make([]*payer, payers)
	for i := range ps {
		k, _ := crypto.GenerateKey()
		ps[i] = &payer{p: batch.Payer{Key: k, Escrow: s.terms.Escrow}}
		s.call(b, c, ps[i], batch.TypeDeposit, s.envelope(b, ps[i], batch.TypeDeposit, price.Int64()))
	}
	// The vouchers are signed in advance, as a payer's would be by the
	// time it sends them: the load generator shares the server's cores.
	signed := make([][]string, payers)
	if !challenge {
		for i, p := range ps {
			for n := int64(1); n <= int64(b.N/payers+2); n++ {
				signed[i] = append(signed[i], s.envelope(b, p, batch.TypeVoucher, p.charged+n*price.Int64()))
			}
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if challenge {
					resp, err := c.Get(s.url + "/regime")
					if err != nil || resp.StatusCode != http.StatusPaymentRequired {
						b.Errorf("402: %v", err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					continue
				}
				if len(signed[i]) == 0 {
					return // this payer's share is done; the others take the rest
				}
				s.call(b, c, p, batch.TypeVoucher, signed[i][0])
				signed[i] = signed[i][1:]
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
}

func BenchmarkVoucher(b *testing.B) {
	for _, e := range []struct {
		name string
		open func(b *testing.B) *store.DB
	}{
		{"sqlite", func(b *testing.B) *store.DB {
			db, err := store.OpenSQLite(context.Background(), b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return db
		}},
		{"postgres", func(b *testing.B) *store.DB {
			db, err := store.OpenPostgres(context.Background(), pgtest.URL(b))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return db
		}},
	} {
		for _, kind := range []string{"voucher", "challenge"} {
			b.Run(fmt.Sprintf("%s/%s", e.name, kind), func(b *testing.B) { run(b, e.open(b), kind == "challenge") })
		}
	}
}
