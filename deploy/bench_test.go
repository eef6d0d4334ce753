package deploy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/exact"
)

// BenchmarkLoadBalancer measures the service through HAProxy with one
// and with three replicas (PostgreSQL store, one devnet chain): 402
// challenges per second, and paid calls per second with 64 and 256 calls
// in flight, with the p50 and p99 of one paid call (signed in advance: the time is the server's, from
// the request to the settled answer). bench/scale-out runs it.
//
// The devnet seals at most one block a second and every paid call waits
// for the block holding its settlement, so paid calls/s is about the
// number of calls in flight per second of block time: the figure shows
// the replicas keep up with that, not a CPU limit.
func BenchmarkLoadBalancer(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			// No rate limit: one load generator is one client.
			c := startCluster(b, clusterConfig{replicas: n, whaleInterval: time.Minute, serveArgs: []string{"--rate-limit", "0"}})
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
			b.Run("challenge", func(b *testing.B) {
				b.SetParallelism(16)
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						resp, err := client.Get(c.lb + "/regime")
						if err != nil {
							b.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusPaymentRequired {
							b.Errorf("unpaid /regime: %d", resp.StatusCode)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "challenges/s")
			})
			for _, inFlight := range []int{64, 256} {
				b.Run(fmt.Sprintf("paid/in-flight=%d", inFlight), func(b *testing.B) {
					s := newSigner(b, c, "/regime")
					pays := make([]payment.SignedPayment, b.N)
					for i := range pays {
						pays[i] = s.sign(b)
					}
					var mu sync.Mutex
					var took []time.Duration
					var next int
					b.SetParallelism(max(1, inFlight/runtime.GOMAXPROCS(0)))
					b.ResetTimer()
					start := time.Now()
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							mu.Lock()
							pay := pays[next]
							next++
							mu.Unlock()
							t0 := time.Now()
							res, err := s.payer.Send(context.Background(), c.lb+"/regime", pay)
							d := time.Since(t0)
							if err != nil || res.Status != http.StatusOK {
								b.Errorf("paid /regime: %v %+v", err, res)
								return
							}
							mu.Lock()
							took = append(took, d)
							mu.Unlock()
						}
					})
					elapsed := time.Since(start)
					b.StopTimer()
					slices.Sort(took)
					if len(took) > 0 {
						b.ReportMetric(float64(len(took))/elapsed.Seconds(), "paid/s")
						b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
						b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
					}
				})
			}
		})
	}
}

// signer signs payments for one path offline, from one 402, so that a
// benchmark times the paid call alone.
type signer struct {
	payer   payment.Payer
	exact   exact.Payer
	req     payment.RequirementsV2
	chainID int64
}

func newSigner(b *testing.B, c *cluster, path string) *signer {
	b.Helper()
	key, err := devnet.DeriveKey(c.desc.Mnemonic, devnet.PayerAccount)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := http.Get(c.lb + path)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	raw, err := base64.StdEncoding.DecodeString(resp.Header.Get(payment.HeaderPaymentRequired))
	if err != nil {
		b.Fatal(err)
	}
	var required payment.RequiredV2
	if err := json.Unmarshal(raw, &required); err != nil || len(required.Accepts) == 0 {
		b.Fatalf("402 of %s: %v", path, err)
	}
	req := required.Accepts[0]
	chainID, err := strconv.ParseInt(strings.TrimPrefix(req.Network, "eip155:"), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return &signer{
		payer:   payment.Payer{Version: 2, HTTP: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}},
		exact:   exact.Payer{Key: key},
		req:     req,
		chainID: chainID,
	}
}

func (s *signer) sign(b *testing.B) payment.SignedPayment {
	pay, err := s.exact.Pay(payment.Offer{Version: 2, Entry: s.req, ChainID: s.chainID})
	if err != nil {
		b.Fatal(err)
	}
	return pay
}
