package market

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// CoinbaseConfig configures the Coinbase Exchange candles client.
type CoinbaseConfig struct {
	// BaseURL of the Exchange REST API, e.g. https://api.exchange.coinbase.com.
	BaseURL string
	// RequestTimeout bounds one HTTP request.
	RequestTimeout time.Duration
	// RatePerSecond caps requests; the public limit is 10/s per IP.
	RatePerSecond float64
	// Retries is how many times a 429, a 5xx or a transport error is
	// retried, with exponential backoff from 250 ms (or Retry-After).
	Retries int
	// MaxBackoff caps one wait between attempts.
	MaxBackoff time.Duration
}

// DefaultCoinbaseConfig returns the settings for the public API at baseURL.
func DefaultCoinbaseConfig(baseURL string) CoinbaseConfig {
	return CoinbaseConfig{
		BaseURL:        baseURL,
		RequestTimeout: 10 * time.Second,
		RatePerSecond:  8,
		Retries:        3,
		MaxBackoff:     4 * time.Second,
	}
}

// Validate reports every problem of c at once.
func (c CoinbaseConfig) Validate() error {
	var errs []error
	if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("coinbase: base URL %q is not an absolute http(s) URL", c.BaseURL))
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, errors.New("coinbase: request timeout must be positive"))
	}
	if c.RatePerSecond <= 0 {
		errs = append(errs, errors.New("coinbase: rate must be positive"))
	}
	if c.Retries < 0 || c.MaxBackoff <= 0 {
		errs = append(errs, errors.New("coinbase: retries must be >= 0 and max backoff positive"))
	}
	return errors.Join(errs...)
}

// Coinbase reads candles from Coinbase Exchange's public endpoint
// GET /products/{product}/candles?granularity=&start=&end=, whose rows are
// [time, low, high, open, close, volume], newest first, at most 300 per
// request, with no row for buckets in which nothing traded.
type Coinbase struct {
	cfg     CoinbaseConfig
	base    string
	httpc   *http.Client
	limiter *rate.Limiter
}

// pageSize is the most candles Coinbase returns for one request.
const pageSize = 300

// NewCoinbase returns a client; it does no I/O.
func NewCoinbase(cfg CoinbaseConfig, httpc *http.Client) (*Coinbase, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Coinbase{
		cfg:     cfg,
		base:    strings.TrimSuffix(cfg.BaseURL, "/"),
		httpc:   httpc,
		limiter: rate.NewLimiter(rate.Limit(cfg.RatePerSecond), 1),
	}, nil
}

// Name implements Source.
func (c *Coinbase) Name() string { return "coinbase-exchange" }

// Synthetic implements Source.
func (c *Coinbase) Synthetic() bool { return false }

// Fetch implements Source: the candles whose bucket starts lie in
// [start, end], oldest first, as published (gaps are the cache's to fill).
// Ranges longer than 300 buckets take one request per 300, run
// concurrently under the rate limit.
func (c *Coinbase) Fetch(ctx context.Context, product string, g time.Duration, start, end time.Time) ([]Candle, error) {
	if !validGranularity(g) {
		return nil, fmt.Errorf("coinbase: granularity %s is not served", g)
	}
	start, end = start.Truncate(g).UTC(), end.Truncate(g).UTC()
	if end.Before(start) {
		return nil, nil
	}
	type page struct{ from, to time.Time }
	var pages []page
	for to := end; !to.Before(start); to = to.Add(-pageSize * g) {
		from := to.Add(-(pageSize - 1) * g)
		if from.Before(start) {
			from = start
		}
		pages = append(pages, page{from, to})
	}
	results := make([][]Candle, len(pages))
	errs := make([]error, len(pages))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, p := range pages {
		wg.Go(func() {
			results[i], errs[i] = c.page(ctx, product, g, p.from, p.to)
			if errs[i] != nil {
				cancel() // one page failing fails the fetch: stop the others
			}
		})
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return nil, err
	}
	var out []Candle
	for i := len(results) - 1; i >= 0; i-- { // pages are newest first
		out = append(out, results[i]...)
	}
	return out, nil
}

// firstError prefers a real failure over the cancellations it caused.
func firstError(errs []error) error {
	var first error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if !errors.Is(err, context.Canceled) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// page fetches one request's worth of candles, retrying 429, 5xx and
// transport errors with bounded backoff.
func (c *Coinbase) page(ctx context.Context, product string, g time.Duration, from, to time.Time) ([]Candle, error) {
	q := url.Values{}
	q.Set("granularity", strconv.Itoa(int(g/time.Second)))
	q.Set("start", from.Format(time.RFC3339))
	q.Set("end", to.Format(time.RFC3339))
	u := c.base + "/products/" + url.PathEscape(product) + "/candles?" + q.Encode()
	backoff := 250 * time.Millisecond
	for attempt := 0; ; attempt++ {
		if err := c.limiter.Wait(ctx); err != nil {
			return nil, fmt.Errorf("coinbase: %w", err)
		}
		body, status, retryAfter, err := c.get(ctx, u)
		retryable := err != nil || status == http.StatusTooManyRequests || status >= 500
		if err == nil && status == http.StatusOK {
			return parseCandles(body, g, from, to)
		}
		if !retryable || attempt >= c.cfg.Retries {
			return nil, c.failure(product, status, body, err)
		}
		wait := backoff
		if retryAfter > 0 {
			wait = retryAfter
		}
		wait = min(wait, c.cfg.MaxBackoff)
		backoff *= 2
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("coinbase: %w (after %v)", ctx.Err(), c.failure(product, status, body, err))
		case <-t.C:
		}
	}
}

// get performs one request under the per-request timeout.
func (c *Coinbase) get(ctx context.Context, u string) (body []byte, status int, retryAfter time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, 0, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "tollgate (+https://github.com/tollgate/tollgate)")
	resp, err := c.httpc.Do(req)
	if err != nil {
		return nil, 0, 0, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, resp.StatusCode, 0, err
	}
	if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
		retryAfter = time.Duration(s) * time.Second
	}
	return body, resp.StatusCode, retryAfter, nil
}

// failure describes a final failure, wrapping ErrUnknownProduct for 404
// and ErrUnavailable otherwise.
func (c *Coinbase) failure(product string, status int, body []byte, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("%w: coinbase: %v", ErrUnavailable, err)
	case status == http.StatusNotFound:
		return fmt.Errorf("%w: coinbase: %s: %s", ErrUnknownProduct, product, apiMessage(body))
	}
	return fmt.Errorf("%w: coinbase: HTTP %d: %s", ErrUnavailable, status, apiMessage(body))
}

// apiMessage extracts Coinbase's {"message": "..."} error text, trimmed.
func apiMessage(body []byte) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		return e.Message
	}
	s := string(bytes.TrimSpace(body))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// parseCandles decodes rows [time, low, high, open, close, volume], keeps
// those whose bucket start lies in [from, to] (the API may return a few
// before start) and returns them oldest first. A row that is not six
// finite numbers with a sane OHLC is a malformed answer.
func parseCandles(body []byte, g time.Duration, from, to time.Time) ([]Candle, error) {
	var rows [][]json.Number
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&rows); err != nil {
		return nil, fmt.Errorf("%w: coinbase: malformed candles: %v", ErrUnavailable, err)
	}
	out := make([]Candle, 0, len(rows))
	seen := map[int64]bool{}
	for i, row := range rows {
		if len(row) != 6 {
			return nil, fmt.Errorf("%w: coinbase: row %d has %d fields, want 6", ErrUnavailable, i, len(row))
		}
		sec, err := row[0].Int64()
		if err != nil {
			return nil, fmt.Errorf("%w: coinbase: row %d time %q: %v", ErrUnavailable, i, row[0], err)
		}
		var v [5]float64 // low, high, open, close, volume
		for j := range v {
			f, err := strconv.ParseFloat(row[j+1].String(), 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
				return nil, fmt.Errorf("%w: coinbase: row %d field %d %q is not a finite non-negative number", ErrUnavailable, i, j+1, row[j+1])
			}
			v[j] = f
		}
		c := Candle{Time: time.Unix(sec, 0).UTC(), Low: v[0], High: v[1], Open: v[2], Close: v[3], Volume: v[4]}
		if c.Low <= 0 || c.Low > c.High || c.Open < c.Low || c.Open > c.High || c.Close < c.Low || c.Close > c.High {
			return nil, fmt.Errorf("%w: coinbase: row %d has an impossible OHLC %v", ErrUnavailable, i, row)
		}
		if c.Time.Truncate(g) != c.Time {
			return nil, fmt.Errorf("%w: coinbase: row %d time %d is not on a %s boundary", ErrUnavailable, i, sec, g)
		}
		if c.Time.Before(from) || c.Time.After(to) || seen[sec] {
			continue
		}
		seen[sec] = true
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Candle) int { return a.Time.Compare(b.Time) })
	return out, nil
}
