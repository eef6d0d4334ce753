package exact_test

import (
	"context"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/admin"
	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/exact"
)

// nopLedger satisfies exact.Ledger for paths that never reach it.
type nopLedger struct{}

func (nopLedger) Claim(context.Context, exact.Record, time.Time) (exact.Record, error) {
	return exact.Record{}, nil
}
func (nopLedger) Finish(context.Context, exact.Record) error  { return nil }
func (nopLedger) Resolve(context.Context, exact.Record) error { return nil }
func (nopLedger) Lookup(context.Context, exact.Record) (exact.Record, error) {
	return exact.Record{}, exact.ErrNotFound
}
func (nopLedger) Totals(context.Context) (map[string]payment.Totals, error) {
	return nil, nil
}
func (nopLedger) AddChallenges(context.Context, map[string]uint64) error { return nil }

func challengeGate(b *testing.B, obs payment.Observer) http.Handler {
	// No payment is made: the facilitator is never asked.
	scheme, err := exact.NewServer(exact.ServerConfig{SettleTimeout: time.Second}, exact.NewRemote(nil), nopLedger{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	g, err := payment.NewGate(payment.GateConfig{
		PublicURL: "http://tollgate.test", Network: "eip155:8453", NetworkV1: "base", ChainID: big.NewInt(8453),
		Asset: common.HexToAddress("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"), AssetName: "USD Coin", AssetVersion: "2", Decimals: 6,
		PayTo: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"), MaxTimeout: 300,
		Observer: obs, Schemes: []payment.Scheme{scheme},
	}, []payment.Route{{Name: "regime", Pattern: "GET /regime", PriceUSD: "0.05", Description: "ETH regime", Valid: func(*http.Request) bool { return true }}},
		nopLedger{}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	return g.Handler(http.NotFoundHandler())
}

// BenchmarkChallenge compares the gate's unpaid answer (402, v1 body, v2
// PAYMENT-REQUIRED header, built per request for its resource URL) with a
// bare net/http handler writing the same bytes, both served over loopback
// HTTP with keep-alive clients in the same run (target: the gate at least
// 0.6x the bare throughput; compare the req/s metrics). "gate+metrics"
// is the gate as serve runs it, with the Prometheus funnel observer and
// the request counter and histogram around it: the cost of the metrics
// on the 402 path is gate vs gate+metrics.
func BenchmarkChallenge(b *testing.B) {
	gate := challengeGate(b, nil)
	m := admin.NewMetrics(admin.Build{}, nil)
	instrumented := m.Instrument(func(*http.Request) string { return "GET /regime" }, challengeGate(b, m))
	rec := httptest.NewRecorder()
	gate.ServeHTTP(rec, httptest.NewRequest("GET", "/regime", nil))
	body, header := rec.Body.Bytes(), rec.Header().Clone()
	bare := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		for k, v := range header {
			h[k] = v
		}
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = w.Write(body)
	})
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"bare", bare}, {"gate", gate}, {"gate+metrics", instrumented}} {
		b.Run(c.name, func(b *testing.B) {
			srv := httptest.NewServer(c.h)
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			b.SetParallelism(4)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Get(srv.URL + "/regime")
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusPaymentRequired {
						b.Fatalf("status %d", resp.StatusCode)
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
		})
	}
}

// instantChain answers the facilitator's reads at once, so a benchmark of
// Verify measures its CPU alone.
type instantChain struct{ exact.Chain }

func (instantChain) CodeAt(context.Context, common.Address, *big.Int) ([]byte, error) {
	return nil, nil
}
func (instantChain) CallContract(context.Context, ethereum.CallMsg, *big.Int) ([]byte, error) {
	return nil, nil
}

// BenchmarkVerifyCPU is the facilitator's work per payment without chain
// I/O: decode the header, match, check, recover the EIP-712 signer and
// encode the simulation call (target: at most 150 us).
func BenchmarkVerifyCPU(b *testing.B) {
	key, _ := devnet.DeriveKey(devnet.Mnemonic, 0)
	fkey, _ := devnet.DeriveKey(devnet.Mnemonic, 9)
	asset := common.HexToAddress("0x700b6A60ce7EaaEA56F065753d8dcB9653dbAD35")
	payTo := common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
	sender, err := payment.NewLocal(payment.LocalConfig{ChainID: big.NewInt(8453), Key: fkey, ReceiptTimeout: time.Second}, nil)
	if err != nil {
		b.Fatal(err)
	}
	local, err := exact.NewLocal(exact.LocalConfig{ChainID: big.NewInt(8453),
		Assets: []payment.Asset{{Address: asset, Name: "USD Coin", Version: "2"}}}, instantChain{}, sender)
	if err != nil {
		b.Fatal(err)
	}
	req := &payment.Requirement{Network: "eip155:8453", NetworkV1: "base", ChainID: big.NewInt(8453), Asset: asset,
		AssetName: "USD Coin", AssetVersion: "2", PayTo: payTo, Amount: big.NewInt(50_000), MaxTimeout: 300}
	a := payment.Authorization{From: crypto.PubkeyToAddress(key.PublicKey), To: payTo, Value: big.NewInt(50_000),
		ValidAfter: big.NewInt(0), ValidBefore: big.NewInt(time.Now().Add(5 * time.Minute).Unix())}
	sig, _ := req.Domain().Sign(a, key)
	header, _ := exact.EncodePayment(2, exact.Entry(req), "base", a, sig)
	b.ReportAllocs()
	for b.Loop() {
		p, err := exact.DecodeHeader(header, 2)
		if err != nil {
			b.Fatal(err)
		}
		v, err := local.Verify(context.Background(), p, req)
		if err != nil || !v.Valid {
			b.Fatalf("%+v %v", v, err)
		}
	}
}

// BenchmarkPaidCallDevnet is one paid call at a time, end to end on the
// devnet: the gate verifies (eth_call simulation over JSON-RPC), runs the
// handler, settles (the transaction waits for its block: the devnet seals
// at most one a second, at the wall clock, so back-to-back calls take
// about a second each, as they take about a block on Base), confirms the
// receipt and records the outcome in SQLite. Signing is outside the
// timing. Reported: p50 and p99.
func BenchmarkPaidCallDevnet(b *testing.B) {
	w := newWorld(b, nil)
	var durations []time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		h := signedHeader(b, w, 2, "/regime", func(a *payment.Authorization, _ *payment.RequirementsV2) {
			a.Nonce[0], a.Nonce[1] = byte(i), byte(i>>8)
		})
		req, _ := http.NewRequest("GET", w.srv.URL+"/regime", nil)
		req.Header.Set(payment.HeaderPaymentV2, h)
		b.StartTimer()
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		durations = append(durations, time.Since(start))
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkChallengeHandler is BenchmarkChallenge without the network:
// the handler's own cost per 402, gate vs gate with the Prometheus
// observer and request metrics (serve's setup), so the metrics' cost is
// read directly rather than through loopback HTTP noise.
func BenchmarkChallengeHandler(b *testing.B) {
	m := admin.NewMetrics(admin.Build{}, nil)
	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"gate", challengeGate(b, nil)},
		{"gate+metrics", m.Instrument(func(*http.Request) string { return "GET /regime" }, challengeGate(b, m))},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/regime", nil)
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				c.h.ServeHTTP(rec, req)
				if rec.Code != http.StatusPaymentRequired {
					b.Fatalf("status %d", rec.Code)
				}
			}
		})
	}
}
