package kronos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/bench/rig"
	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/exact"
	"github.com/tollgate/tollgate/service/forecast/kronos"
	"github.com/tollgate/tollgate/service/market"
)

// products are the /forecast products: BTC and ETH from the candle
// feed, the NSE equities from the equity feed.
var products = append([]string{"BTC-USD", "ETH-USD"}, market.Equities...)

// BenchmarkPaidColdBurst: 50 paid /forecast requests at once, over the 7
// products with distinct horizons drawn from 1–48, against a `tollgate
// serve` that has just started on its devnet with Kronos-small (random
// weights of the published shape): a cold forecast cache. Each request is
// paid with exact by the devnet's payer (a 402, then the paid request).
// ns/op is the time from the first request to the last answer. Each run
// starts its own server, untimed (its start runs Kronos' warm-up
// inference), and stops it after.
//
// Besides ns/op: fits/op, the inferences the server counted
// (tollgate_forecast_inferences_total, every outcome); fallbacks/op, the
// answers the embedded model gave because Kronos failed or passed
// --forecast-timeout (20 s, its wait for its turn included); failed/op,
// the requests not answered 200 (none expected).
//
//	go test -run x -bench PaidColdBurst -benchtime 3x ./bench/kronos/
func BenchmarkPaidColdBurst(b *testing.B) {
	bin := *tollgateBin
	if bin == "" {
		bin = rig.BuildTollgate(b)
	}
	mc, tc, _ := kronos.PublishedShape("Kronos-small")
	md, td, err := kronos.WriteRandom(filepath.Join(b.TempDir(), "small"), mc, tc, 1)
	if err != nil {
		b.Fatal(err)
	}
	key, err := devnet.DeriveKey(devnet.Mnemonic, devnet.PayerAccount)
	if err != nil {
		b.Fatal(err)
	}
	payer := &payment.Payer{Version: 2, Schemes: []payment.SchemeClient{exact.Payer{Key: key}},
		HTTP: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	calls := burst(50)
	var fits, fallbacks, failed int
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		s := rig.StartServe(b, bin, "--kronos-model", md, "--kronos-tokenizer", td,
			"--rate-limit", "0", "--paid-rate-limit", "0", "--whale-interval", "1h")
		b.StartTimer()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, c := range calls {
			wg.Go(func() {
				fellBack, err := paidForecast(payer, s.URL, c)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					failed++
					b.Logf("%s: %v", c, err)
				case fellBack:
					fallbacks++
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		fits += inferences(b, s.Admin)
		s.Stop()
		b.StartTimer()
	}
	b.ReportMetric(float64(fits)/float64(b.N), "fits/op")
	b.ReportMetric(float64(fallbacks)/float64(b.N), "fallbacks/op")
	b.ReportMetric(float64(failed)/float64(b.N), "failed/op")
}

// burst is n distinct /forecast requests, the products in turn, each with
// a horizon drawn from 1–48 (seeded: the same requests every run).
func burst(n int) []string {
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	var calls []string
	for len(calls) < n {
		c := fmt.Sprintf("/forecast?product=%s&pred_len=%d", products[len(calls)%len(products)], 1+rng.IntN(48))
		if !seen[c] {
			seen[c] = true
			calls = append(calls, c)
		}
	}
	return calls
}

// paidForecast pays for one /forecast and reports whether its answer came
// from the fallback model; an answer other than a paid 200 with the
// horizon's closes is an error.
func paidForecast(p *payment.Payer, base, call string) (fellBack bool, err error) {
	res, err := p.Get(context.Background(), base+call)
	if err != nil {
		return false, err
	}
	if res.Status != http.StatusOK || res.Settlement == nil {
		return false, fmt.Errorf("answered %d (settlement %v): %s", res.Status, res.Settlement, res.Body)
	}
	var f struct {
		Fallback string
		Closes   []float64
	}
	if err := json.Unmarshal(res.Body, &f); err != nil || len(f.Closes) == 0 {
		return false, fmt.Errorf("not a forecast: %v %s", err, res.Body)
	}
	return f.Fallback != "", nil
}

var inferenceLine = regexp.MustCompile(`(?m)^tollgate_forecast_inferences_total\{[^}]*\} (\d+)`)

// inferences is the server's count of model inferences, every outcome.
func inferences(b *testing.B, admin string) int {
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, m := range inferenceLine.FindAllSubmatch(text, -1) {
		v, _ := strconv.Atoi(string(m[1]))
		n += v
	}
	return n
}
