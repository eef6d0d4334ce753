// Package admin owns the operator listener of a Tollgate process: the
// Prometheus exposition (every tollgate_* series, the Go runtime and the
// process), the readiness probe and pprof. It is never the public
// listener: serve binds it to loopback unless told otherwise (--admin).
//
// The series are fed through the small interfaces the other packages
// declare (payment.Observer, the market cache's and the whale scan's
// hooks) and through instrumented clients for the upstreams (HTTP
// transports and a gRPC interceptor), so no other package imports
// Prometheus.
package admin

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Build identifies the running binary in tollgate_build_info.
type Build struct {
	Version, Revision string
}

// Metrics holds every series of the exposition, on a registry of its own
// (nothing registers globally).
type Metrics struct {
	reg *prometheus.Registry

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec

	challenges   *prometheus.CounterVec
	presented    *prometheus.CounterVec
	refused      *prometheus.CounterVec
	verified     *prometheus.CounterVec
	settled      *prometheus.CounterVec
	failed       *prometheus.CounterVec
	revenue      *prometheus.CounterVec
	settleTiming *prometheus.HistogramVec
	deduplicated *prometheus.CounterVec
	signedIn     *prometheus.CounterVec
	signInFailed *prometheus.CounterVec

	upstreamRequests *prometheus.CounterVec
	upstreamDuration *prometheus.HistogramVec

	cache *prometheus.CounterVec

	inferences    *prometheus.CounterVec
	inferenceTime *prometheus.HistogramVec

	scanDuration prometheus.Histogram
	scanLag      prometheus.Gauge
	scanCalls    prometheus.Gauge
	scanCycles   *prometheus.CounterVec

	batchTxs     *prometheus.CounterVec
	batchUSD     *prometheus.CounterVec
	batchStopped *prometheus.CounterVec

	// The escrow watcher's series, registered when it starts (only then
	// is batch-settlement on, and an alert on their age meaningful).
	watchOnce   sync.Once
	watchLast   prometheus.Gauge
	watchErrors prometheus.Counter

	ready prometheus.Gauge
}

// Unresolved reports the payments whose settlement is not established yet
// and how long the oldest has waited; *store.DB's UnresolvedSummary
// provides it (through a small adapter in cmd).
type Unresolved func(ctx context.Context) (n int, oldest time.Duration, err error)

// Label values from closed sets: every value of a set is exposed, at
// zero, as soon as the series' other labels are (a rate cannot see the
// first event of a series that appears with it).
const (
	outcomeOK, outcomeError = "ok", "error" // an upstream call's outcome, a whale scan cycle's result
	cacheHit, cacheMiss     = "hit", "miss"
)

// latency buckets, seconds: from a cached answer (sub-millisecond) to a
// settlement waiting for its block (seconds).
var latency = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2, 4, 8, 16, 32}

// NewMetrics returns the exposition of one process. unresolved is read
// at each scrape (nil: the settlement gauges are left out).
func NewMetrics(b Build, unresolved Unresolved) *Metrics {
	reg := prometheus.NewRegistry()
	f := factory{reg}
	m := &Metrics{reg: reg}
	m.httpRequests = f.counters("tollgate_http_requests_total", "Requests answered on the public listener.", "route", "method", "status")
	m.httpDuration = f.histograms("tollgate_http_request_duration_seconds", "Time to answer a request on the public listener, payment included.", "route")

	// The funnel's transport label is rest (a GET with a payment header)
	// or mcp (an MCP tool call with the payment in _meta).
	m.challenges = f.counters("tollgate_payment_challenges_total", "Payment requirements sent for a call without payment (402s, unpaid tool calls).", "operation", "transport")
	m.presented = f.counters("tollgate_payment_presented_total", "Calls that carried a payment.", "operation", "transport")
	m.refused = f.counters("tollgate_payment_refused_total", "Presented payments refused before any settlement (nothing charged), by reason.", "operation", "transport", "reason")
	m.verified = f.counters("tollgate_payment_verified_total", "Payments verified, whose handler ran.", "operation", "transport")
	m.settled = f.counters("tollgate_payment_settled_total", "Payments settled and confirmed on chain by this process.", "operation", "transport")
	m.failed = f.counters("tollgate_payment_failed_total", "Verified payments whose settlement failed or stayed unresolved, by reason.", "operation", "transport", "reason")
	m.deduplicated = f.counters("tollgate_payment_deduplicated_total",
		"Payments whose payment identifier was answered already: answered from the record, not charged.", "operation", "transport")
	m.signedIn = f.counters("tollgate_siwx_rereads_total",
		"Answers a wallet read again by signing in (sign-in-with-x) instead of paying again.", "operation")
	m.signInFailed = f.counters("tollgate_siwx_refused_total",
		"Sign-ins (sign-in-with-x) answered with the 402 instead of a recorded answer, by reason.", "operation", "reason")
	m.revenue = f.counters("tollgate_payment_revenue_usd_total", "USD settled by this process.", "operation", "transport")
	m.settleTiming = f.histograms("tollgate_payment_settle_duration_seconds", "From asking the facilitator to settle to the confirmed receipt.", "operation")

	m.upstreamRequests = f.counters("tollgate_upstream_requests_total", "Calls to upstreams (chain JSON-RPC by method, candles, equities, model, facilitator), by outcome.", "upstream", "method", "outcome")
	m.upstreamDuration = f.histograms("tollgate_upstream_request_duration_seconds", "Duration of one upstream call (a JSON-RPC batch counts once, as method \"batch\").", "upstream", "method")

	m.cache = f.counters("tollgate_cache_requests_total", "Cache lookups, by cache and result (hit or miss).", "cache", "result")

	m.inferences = f.counters("tollgate_forecast_inferences_total", "Forecasts of the in-process model (Kronos), by outcome (an error: the embedded model answered instead).", "model", "outcome")
	m.inferenceTime = f.histograms("tollgate_forecast_inference_seconds", "Time of one in-process model forecast, from its turn to its answer.", "model")
	m.scanDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tollgate_whale_scan_duration_seconds", Help: "Duration of one whale scan cycle.", Buckets: latency})
	m.scanLag = prometheus.NewGauge(prometheus.GaugeOpts{Name: "tollgate_whale_scan_lag_blocks", Help: "Blocks between the chain head and the last block the whale scan covered."})
	m.scanCalls = prometheus.NewGauge(prometheus.GaugeOpts{Name: "tollgate_whale_scan_rpc_calls", Help: "JSON-RPC round trips of the last whale scan cycle."})
	m.scanCycles = f.counters("tollgate_whale_scan_cycles_total", "Whale scan cycles, by result (ok or error).", "result")
	for _, r := range []string{outcomeOK, outcomeError} {
		m.scanCycles.WithLabelValues(r)
	}
	reg.MustRegister(m.scanDuration, m.scanLag, m.scanCalls)

	m.batchTxs = f.counters("tollgate_batch_transactions_total", "Batch-settlement claims and settles asked of the facilitator by this process, by kind (claim or settle) and result (ok, refused, error, noop).", "kind", "result")
	m.batchUSD = f.counters("tollgate_batch_usd_total", "USD claimed (kind=claim) and swept to the receiver (kind=settle) by this process's batch-settlement transactions.", "kind")
	m.batchStopped = f.counters("tollgate_batch_channels_stopped_total", "Batch-settlement channels this process stopped serving, by the evidence that another server charged them: "+
		"voucher_ahead (a voucher above this store's books), opened_elsewhere (a payment for a funded channel this store did not open), "+
		"claimed_elsewhere (a claimed total on chain above what this store claimed).", "evidence")
	m.watchLast = prometheus.NewGauge(prometheus.GaugeOpts{Name: "tollgate_batch_escrow_watch_last_success_timestamp_seconds",
		Help: "Unix time of the escrow watcher's last pass that read the escrow's events up to the chain head (its start time until then); present while batch-settlement is on."})
	m.watchErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_batch_escrow_watch_errors_total",
		Help: "Passes of the escrow watcher that failed to read the escrow's events (chain RPC); present while batch-settlement is on."})

	m.ready = prometheus.NewGauge(prometheus.GaugeOpts{Name: "tollgate_ready", Help: "1 when the readiness probe last passed, else 0."})
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: "tollgate_build_info", Help: "The running binary: always 1.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision}})
	info.Set(1)
	reg.MustRegister(m.ready, info,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if unresolved != nil {
		reg.MustRegister(unresolvedCollector{
			f:      unresolved,
			count:  prometheus.NewDesc("tollgate_settlements_unresolved", "Payments whose settlement is not established yet (the service's, from the store).", nil, nil),
			oldest: prometheus.NewDesc("tollgate_settlements_oldest_unresolved_age_seconds", "Age of the oldest unresolved payment, 0 when none.", nil, nil),
		})
	}
	return m
}

// Handler serves the exposition in the text format (or OpenMetrics when
// asked).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, EnableOpenMetrics: true})
}

type factory struct{ reg *prometheus.Registry }

func (f factory) counters(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) histograms(name, help string, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latency}, labels)
	f.reg.MustRegister(h)
	return h
}

// unresolvedCollector reads the store at scrape time: the figure is the
// service's, whichever replica is scraped.
type unresolvedCollector struct {
	f             Unresolved
	count, oldest *prometheus.Desc
}

func (c unresolvedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.count; ch <- c.oldest }

func (c unresolvedCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, oldest, err := c.f(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.count, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest.Seconds())
}

// BatchUnclaimed reports the batch-settlement value charged and not
// claimed yet: how many channels hold some, its USD value and how long
// the oldest has waited; *store.DB's BatchUnclaimed provides it (through
// a small adapter in cmd).
type BatchUnclaimed func(ctx context.Context) (channels int, usd float64, oldest time.Duration, err error)

// WatchBatch adds the batch-settlement gauges, read from f at each scrape
// (the service's figures, whichever replica is scraped). Call it once.
func (m *Metrics) WatchBatch(f BatchUnclaimed) {
	m.reg.MustRegister(batchCollector{
		f:        f,
		channels: prometheus.NewDesc("tollgate_batch_unclaimed_channels", "Batch-settlement channels holding value charged and not claimed yet (from the store).", nil, nil),
		usd:      prometheus.NewDesc("tollgate_batch_unclaimed_usd", "USD charged on batch-settlement channels and not claimed yet (from the store).", nil, nil),
		oldest:   prometheus.NewDesc("tollgate_batch_oldest_unclaimed_seconds", "How long the oldest unclaimed batch-settlement value has waited, 0 when none.", nil, nil),
	})
}

type batchCollector struct {
	f                     BatchUnclaimed
	channels, usd, oldest *prometheus.Desc
}

func (c batchCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.channels
	ch <- c.usd
	ch <- c.oldest
}

func (c batchCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, usd, oldest, err := c.f(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.channels, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.channels, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.usd, prometheus.GaugeValue, usd)
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest.Seconds())
}

// ExpectBatch exposes tollgate_batch_transactions_total at zero for every
// kind and result the claimer reports (batch.Claimer's Outcomes), and
// tollgate_batch_usd_total for every kind: the dashboard and the alerts
// see the first claim, and the first failed one, of a fresh process.
func (m *Metrics) ExpectBatch(kinds, results []string) {
	for _, k := range kinds {
		m.batchUSD.WithLabelValues(k)
		for _, r := range results {
			m.batchTxs.WithLabelValues(k, r)
		}
	}
}

// BatchTransaction counts one batch-settlement claim or settle and, when
// it landed, its USD (Metrics implements batch.ClaimObserver).
func (m *Metrics) BatchTransaction(kind, result string, usd float64) {
	m.batchTxs.WithLabelValues(kind, result).Inc()
	if usd > 0 {
		m.batchUSD.WithLabelValues(kind).Add(usd)
	}
}

// BatchChannelStopped counts a batch-settlement channel stopped on
// evidence (Metrics implements batch.StopObserver, for the scheme's
// server, its claimer and its watcher).
func (m *Metrics) BatchChannelStopped(evidence string) {
	m.batchStopped.WithLabelValues(evidence).Inc()
}

// BatchStopEvidences exposes the stopped-channels series of each
// evidence at zero, from the start of a service that offers
// batch-settlement.
func (m *Metrics) BatchStopEvidences(evidences ...string) {
	for _, e := range evidences {
		m.batchStopped.WithLabelValues(e)
	}
}

// EscrowWatchStarted adds the escrow watcher's series, its last success
// set to now: an alert on its age then gives a fresh watcher as long to
// read as a running one.
func (m *Metrics) EscrowWatchStarted() {
	m.watchOnce.Do(func() { m.reg.MustRegister(m.watchLast, m.watchErrors) })
	m.watchLast.SetToCurrentTime()
}

// EscrowWatched records one pass of the escrow watcher: nil when it read
// the escrow's events up to the head.
func (m *Metrics) EscrowWatched(err error) {
	if err != nil {
		m.watchErrors.Inc()
		return
	}
	m.watchLast.SetToCurrentTime()
}

// ExpectPayments exposes the payment funnel at zero for every operation,
// and tollgate_payment_refused_total and tollgate_payment_failed_total
// for every operation and reason a payment can end with (payment.Gate's
// Outcomes): a fresh process's panels have data, and a rate sees the
// first refusal or failure. A reason outside the lists (a remote
// facilitator's own) is still counted, from its first occurrence.
func (m *Metrics) ExpectPayments(ops, transports, refused, failed []string) {
	for _, op := range ops {
		m.settleTiming.WithLabelValues(op)
		for _, tr := range transports {
			for _, v := range []*prometheus.CounterVec{m.challenges, m.presented, m.verified, m.settled, m.revenue, m.deduplicated} {
				v.WithLabelValues(op, tr)
			}
			for _, r := range refused {
				m.refused.WithLabelValues(op, tr, r)
			}
			for _, r := range failed {
				m.failed.WithLabelValues(op, tr, r)
			}
		}
	}
}

// The payment funnel: Metrics implements payment.Observer.

func (m *Metrics) Challenged(op, tr string)   { m.challenges.WithLabelValues(op, tr).Inc() }
func (m *Metrics) Presented(op, tr string)    { m.presented.WithLabelValues(op, tr).Inc() }
func (m *Metrics) Refused(op, tr, why string) { m.refused.WithLabelValues(op, tr, why).Inc() }
func (m *Metrics) Verified(op, tr string)     { m.verified.WithLabelValues(op, tr).Inc() }

// Deduplicated counts a payment answered from its payment identifier's
// record.
func (m *Metrics) Deduplicated(op, tr string) { m.deduplicated.WithLabelValues(op, tr).Inc() }

// SignedIn counts an answer a wallet read again by signing in.
func (m *Metrics) SignedIn(op string) { m.signedIn.WithLabelValues(op).Inc() }

// SignInRefused counts a sign-in answered with the 402, by reason.
func (m *Metrics) SignInRefused(op, why string) { m.signInFailed.WithLabelValues(op, why).Inc() }

// ExpectSignIns exposes the sign-in counters at zero for every operation
// and reason (payment.SIWxReasons).
func (m *Metrics) ExpectSignIns(ops, reasons []string) {
	for _, op := range ops {
		m.signedIn.WithLabelValues(op)
		for _, r := range reasons {
			m.signInFailed.WithLabelValues(op, r)
		}
	}
}
func (m *Metrics) SettleFailed(op, tr, why string) {
	m.failed.WithLabelValues(op, tr, why).Inc()
}

// Settled counts a confirmed settlement of usd, which took took from the
// settle request to the confirmed receipt (0 when it was found on chain
// rather than settled by this request).
func (m *Metrics) Settled(op, tr string, usd float64, took time.Duration) {
	m.settled.WithLabelValues(op, tr).Inc()
	m.revenue.WithLabelValues(op, tr).Add(usd)
	if took > 0 {
		m.settleTiming.WithLabelValues(op).Observe(took.Seconds())
	}
}

// ExpectModel exposes the in-process model's series at zero: its
// forecasts by outcome and their durations.
func (m *Metrics) ExpectModel(model string) {
	m.inferences.WithLabelValues(model, outcomeOK)
	m.inferences.WithLabelValues(model, outcomeError)
	m.inferenceTime.WithLabelValues(model)
}

// Inference records one forecast of the in-process model: its outcome,
// and its duration when it ran.
func (m *Metrics) Inference(model string, took time.Duration, err error) {
	if err != nil {
		m.inferences.WithLabelValues(model, outcomeError).Inc()
		return
	}
	m.inferences.WithLabelValues(model, outcomeOK).Inc()
	m.inferenceTime.WithLabelValues(model).Observe(took.Seconds())
}

// ExpectCaches exposes tollgate_cache_requests_total at zero for caches,
// hits and misses.
func (m *Metrics) ExpectCaches(caches ...string) {
	for _, c := range caches {
		m.cache.WithLabelValues(c, cacheHit)
		m.cache.WithLabelValues(c, cacheMiss)
	}
}

// CacheLookup counts one lookup of cache (ExpectCaches exposes both
// results of every cache from the start).
func (m *Metrics) CacheLookup(cache string, hit bool) {
	result := cacheMiss
	if hit {
		result = cacheHit
	}
	m.cache.WithLabelValues(cache, result).Inc()
}

// WhaleScan records one scan cycle: its duration, its JSON-RPC round
// trips, and how far behind the head it left the scan.
func (m *Metrics) WhaleScan(took time.Duration, calls int64, lag uint64, err error) {
	if err != nil {
		m.scanCycles.WithLabelValues(outcomeError).Inc()
		return
	}
	m.scanCycles.WithLabelValues(outcomeOK).Inc()
	m.scanDuration.Observe(took.Seconds())
	m.scanCalls.Set(float64(calls))
	m.scanLag.Set(float64(lag))
}

// Upstream records one call to upstream.
func (m *Metrics) Upstream(upstream, method string, took time.Duration, err error) {
	m.record(upstream, []string{method}, took, err != nil)
}

// record counts each of methods, made in one call to upstream that took
// took, and times the call once (a JSON-RPC batch as "batch"). A method's
// other outcome is exposed with it, at zero until it happens.
func (m *Metrics) record(upstream string, methods []string, took time.Duration, failed bool) {
	outcome, other := outcomeOK, outcomeError
	if failed {
		outcome, other = outcomeError, outcomeOK
	}
	for _, name := range methods {
		m.upstreamRequests.WithLabelValues(upstream, name, outcome).Inc()
		m.upstreamRequests.WithLabelValues(upstream, name, other)
	}
	timed := "batch"
	if len(methods) == 1 {
		timed = methods[0]
	}
	m.upstreamDuration.WithLabelValues(upstream, timed).Observe(took.Seconds())
}
