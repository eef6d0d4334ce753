package exact_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/exact"
	"github.com/tollgate/tollgate/store"
)

// settleBench is a devnet with the real gate in front of a trivial
// handler: Local facilitator, SQLite ledger, loopback HTTP.
type settleBench struct {
	chain *devnet.Chain
	url   string
	req   payment.RequirementsV2
}

func newSettleBench(b *testing.B) *settleBench {
	b.Helper()
	chain, client := devnettest.Start(b)
	ledger, err := store.OpenSQLite(context.Background(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ledger.Close() })
	local := newLocal(b, chain, client, 10*time.Second)
	payTo := chain.Account(devnet.PayToAccount).Address
	scheme, err := exact.NewServer(exact.ServerConfig{SettleTimeout: 20 * time.Second}, local, ledger, nil)
	if err != nil {
		b.Fatal(err)
	}
	gate, err := payment.NewGate(gateConfig(chain, payTo, scheme),
		[]payment.Route{{Name: "regime", Pattern: "GET /regime", PriceUSD: "0.05", Description: "regime", Valid: func(*http.Request) bool { return true }}},
		ledger, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(gate.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"regime":"RANGE"}`)
	})))
	b.Cleanup(srv.Close)
	return &settleBench{chain: chain, url: srv.URL + "/regime", req: payment.RequirementsV2{
		Scheme: "exact", Network: "eip155:8453", Amount: "50000", Asset: chain.Token.Hex(), PayTo: payTo.Hex(),
		MaxTimeoutSeconds: 300, Extra: payment.Extra{Name: devnet.TokenName, Version: devnet.TokenVersion},
	}}
}

// benchPayers are the funded test accounts that pay (#1 is payTo, #9 the
// facilitator): 1,000 USD each, 20,000 calls at 0.05.
var benchPayers = []int{0, 2, 3, 4, 5, 6, 7, 8}

// header signs a fresh v2 payment of the requirement from test account
// payer, as an x402 client does: validBefore = now + maxTimeoutSeconds.
func (sb *settleBench) header(b *testing.B, payer int) string {
	key := sb.chain.Account(payer).Key
	a := payment.Authorization{From: crypto.PubkeyToAddress(key.PublicKey), To: sb.chain.Account(devnet.PayToAccount).Address,
		Value: big.NewInt(50_000), ValidAfter: big.NewInt(time.Now().Add(-10 * time.Minute).Unix()),
		ValidBefore: big.NewInt(time.Now().Add(300 * time.Second).Unix())}
	if _, err := rand.Read(a.Nonce[:]); err != nil {
		b.Fatal(err)
	}
	d := payment.Domain{Name: devnet.TokenName, Version: devnet.TokenVersion, ChainID: big.NewInt(devnet.ChainID), VerifyingContract: sb.chain.Token}
	sig, err := d.Sign(a, key)
	if err != nil {
		b.Fatal(err)
	}
	h, err := exact.EncodePayment(2, sb.req, "base", a, sig)
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// BenchmarkPaidCallsConcurrent is paid calls through the real gate, Local
// facilitator and SQLite ledger on a devnet, 16 and 64 at a time, each with
// a fresh payment (signed before the timing) from eight payers, each
// settled on chain from the one gas key. Reported: paid calls/s and the
// p50 and p99 of one call's latency. Run with -benchtime of a few hundred
// calls (e.g. 300x): each call waits for its block, so the devnet's block
// clock (at most one block a second) bounds the latency from below.
func BenchmarkPaidCallsConcurrent(b *testing.B) {
	sb := newSettleBench(b)
	for _, concurrency := range []int{16, 64} {
		b.Run(fmt.Sprintf("c%d", concurrency), func(b *testing.B) {
			headers := make([]string, b.N)
			for i := range headers {
				headers[i] = sb.header(b, benchPayers[i%len(benchPayers)])
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency}}
			durations := make([]time.Duration, b.N)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range concurrency {
				wg.Go(func() {
					for i := int(next.Add(1) - 1); i < b.N; i = int(next.Add(1) - 1) {
						req, _ := http.NewRequest("GET", sb.url, nil)
						req.Header.Set(payment.HeaderPaymentV2, headers[i])
						t0 := time.Now()
						resp, err := client.Do(req)
						if err != nil {
							b.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						durations[i] = time.Since(t0)
						if resp.StatusCode != http.StatusOK {
							b.Errorf("call %d: status %d", i, resp.StatusCode)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			slices.Sort(durations)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
			b.ReportMetric(float64(durations[len(durations)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
