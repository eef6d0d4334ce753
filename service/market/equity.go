package market

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Equities are the NSE large caps /forecast serves (SPEC §4.1).
var Equities = []string{"RELIANCE.NS", "TCS.NS", "HDFCBANK.NS", "INFY.NS", "ICICIBANK.NS"}

// IsEquity reports whether product is one of Equities.
func IsEquity(product string) bool { return slices.Contains(Equities, product) }

// ist is India Standard Time (UTC+5:30, no daylight saving).
var ist = time.FixedZone("IST", 5*3600+1800)

// NSE session: Monday to Friday, 09:15 to 15:30 IST. Hourly bars start at
// 09:15, 10:15, …, 15:15; the last one is 15 minutes long.
const (
	sessionOpen  = 9*time.Hour + 15*time.Minute
	sessionClose = 15*time.Hour + 30*time.Minute
)

// barEnd is when the hourly bar starting at t closes: an hour later, or at
// the session close for the last bar of the day.
func barEnd(t time.Time) time.Time {
	local := t.In(ist)
	day := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, ist)
	return minTime(t.Add(time.Hour), day.Add(sessionClose))
}

// NextBars returns the start times of the n bars that follow the bar
// starting at last in a series of product at granularity g: for an NSE
// equity the next session bars (Monday to Friday, 09:15 … 15:15 IST,
// hourly; the exchange's holidays are not known here and count as
// trading days, and after a special weekend session come Monday's bars),
// for any other product every g.
func NextBars(product string, g time.Duration, last time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	if !IsEquity(product) || g != time.Hour {
		for i := 1; i <= n; i++ {
			out = append(out, last.Add(time.Duration(i)*g))
		}
		return out
	}
	t := last.In(ist)
	for len(out) < n {
		t = t.Add(time.Hour)
		day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, ist)
		switch lastBar := sessionClose - 15*time.Minute; {
		case t.Sub(day) > lastBar: // past the day's last bar: the next day's first
			t = day.AddDate(0, 0, 1).Add(sessionOpen)
		case t.Sub(day) < sessionOpen:
			t = day.Add(sessionOpen)
		}
		for t.Weekday() == time.Saturday || t.Weekday() == time.Sunday { // a weekend: Monday's first bar
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, ist).Add(sessionOpen)
		}
		out = append(out, t.In(last.Location()))
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// YahooConfig configures the Yahoo Finance chart client.
type YahooConfig struct {
	// BaseURL, e.g. https://query1.finance.yahoo.com.
	BaseURL string
	// RequestTimeout bounds one request.
	RequestTimeout time.Duration
	// Days of history asked for (hourly bars exist for the last 730).
	Days int
}

// Yahoo reads hourly bars of NSE symbols from the Yahoo Finance chart API
// (GET /v8/finance/chart/{symbol}?interval=60m&period1=…&period2=…).
type Yahoo struct {
	cfg   YahooConfig
	httpc *http.Client
	now   func() time.Time
}

// NewYahoo returns a client; it does no I/O.
func NewYahoo(cfg YahooConfig, httpc *http.Client) (*Yahoo, error) {
	if _, err := url.Parse(cfg.BaseURL); err != nil || cfg.BaseURL == "" || cfg.RequestTimeout <= 0 || cfg.Days <= 0 || cfg.Days > 730 {
		return nil, fmt.Errorf("market: yahoo: a base URL, a positive timeout and 1-730 days are required")
	}
	cfg.BaseURL = strings.TrimSuffix(cfg.BaseURL, "/")
	return &Yahoo{cfg: cfg, httpc: httpc, now: time.Now}, nil
}

// chartResponse is the part of the chart API's answer the client reads.
type chartResponse struct {
	Chart struct {
		Result []struct {
			Meta struct {
				Symbol           string `json:"symbol"`
				DataGranularity  string `json:"dataGranularity"`
				ExchangeTimezone string `json:"exchangeTimezoneName"`
			} `json:"meta"`
			Timestamp  []int64 `json:"timestamp"`
			Indicators struct {
				Quote []struct {
					Open   []*float64 `json:"open"`
					High   []*float64 `json:"high"`
					Low    []*float64 `json:"low"`
					Close  []*float64 `json:"close"`
					Volume []*float64 `json:"volume"`
				} `json:"quote"`
			} `json:"indicators"`
		} `json:"result"`
		Error *struct {
			Code        string `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	} `json:"chart"`
}

// Bars returns the last n closed hourly bars of symbol, oldest first.
// Only traded hours appear (nights, weekends and holidays have no bar, and
// none is invented); bars the API leaves null are skipped, and so is the
// bar still open.
func (y *Yahoo) Bars(ctx context.Context, symbol string, n int) (Series, error) {
	if !IsEquity(symbol) {
		return Series{}, fmt.Errorf("%w: %q is not on the equity whitelist", ErrUnknownProduct, symbol)
	}
	now := y.now()
	q := url.Values{
		"interval": {"60m"},
		"period1":  {fmt.Sprint(now.AddDate(0, 0, -y.cfg.Days).Unix())},
		"period2":  {fmt.Sprint(now.Unix())},
	}
	ctx, cancel := context.WithTimeout(ctx, y.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, y.cfg.BaseURL+"/v8/finance/chart/"+url.PathEscape(symbol)+"?"+q.Encode(), nil)
	if err != nil {
		return Series{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := y.httpc.Do(req)
	if err != nil {
		return Series{}, fmt.Errorf("%w: yahoo: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return Series{}, fmt.Errorf("%w: yahoo: %v", ErrUnavailable, err)
	}
	var cr chartResponse
	if jerr := json.Unmarshal(body, &cr); jerr != nil || resp.StatusCode != http.StatusOK {
		if cr.Chart.Error != nil {
			return Series{}, fmt.Errorf("%w: yahoo %d: %s: %s", ErrUnavailable, resp.StatusCode, cr.Chart.Error.Code, cr.Chart.Error.Description)
		}
		return Series{}, fmt.Errorf("%w: yahoo: status %d", ErrUnavailable, resp.StatusCode)
	}
	if cr.Chart.Error != nil || len(cr.Chart.Result) != 1 || len(cr.Chart.Result[0].Indicators.Quote) != 1 {
		return Series{}, fmt.Errorf("%w: yahoo: no chart for %s", ErrUnavailable, symbol)
	}
	r := cr.Chart.Result[0]
	qt := r.Indicators.Quote[0]
	var candles []Candle
	for i, ts := range r.Timestamp {
		at := func(xs []*float64) (float64, bool) {
			if i >= len(xs) || xs[i] == nil {
				return 0, false
			}
			return *xs[i], true
		}
		o, ok1 := at(qt.Open)
		h, ok2 := at(qt.High)
		l, ok3 := at(qt.Low)
		c, ok4 := at(qt.Close)
		v, _ := at(qt.Volume)
		start := time.Unix(ts, 0).UTC()
		if !(ok1 && ok2 && ok3 && ok4) || !(c > 0) || barEnd(start).After(now) {
			continue
		}
		candles = append(candles, Candle{Time: start, Open: o, High: h, Low: l, Close: c, Volume: v})
	}
	if len(candles) > n {
		candles = candles[len(candles)-n:]
	}
	return Series{Product: symbol, Granularity: time.Hour, Candles: candles, FetchedAt: now.UTC(), Source: "yahoo-finance"}, nil
}

// DevnetEquities makes NSE-shaped hourly bars from the devnet walk: only
// session hours, bars at 09:15 IST onwards aggregated from 15-minute
// candles, the last bar of a day 15 minutes long.
type DevnetEquities struct {
	dev *Devnet
	now func() time.Time
}

// NewDevnetEquities returns the devnet's equity feed.
func NewDevnetEquities() *DevnetEquities { return &DevnetEquities{dev: NewDevnet(), now: time.Now} }

// Bars returns the last n closed session bars of symbol.
func (d *DevnetEquities) Bars(ctx context.Context, symbol string, n int) (Series, error) {
	if !IsEquity(symbol) {
		return Series{}, fmt.Errorf("%w: %q is not on the equity whitelist", ErrUnknownProduct, symbol)
	}
	now := d.now().UTC()
	var bars []Candle
	// Walk back day by day until n bars are found (a week has 35).
	for day := now.In(ist); len(bars) < n && now.Sub(day) < 3*365*24*time.Hour; day = day.AddDate(0, 0, -1) {
		if wd := day.Weekday(); wd == time.Saturday || wd == time.Sunday {
			continue
		}
		d0 := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, ist)
		open, shut := d0.Add(sessionOpen), d0.Add(sessionClose)
		if !open.Before(now) {
			continue
		}
		quarter, err := d.dev.Fetch(ctx, symbol, 15*time.Minute, open, shut.Add(-15*time.Minute))
		if err != nil {
			return Series{}, err
		}
		var today []Candle
		for start := open; start.Before(shut); start = start.Add(time.Hour) {
			end := barEnd(start)
			if end.After(now) {
				break
			}
			var bar Candle
			for _, q := range quarter {
				if q.Time.Before(start) || !q.Time.Before(end) {
					continue
				}
				if bar.Time.IsZero() {
					bar = Candle{Time: start.UTC(), Open: q.Open, High: q.High, Low: q.Low}
				}
				bar.High, bar.Low = max(bar.High, q.High), min(bar.Low, q.Low)
				bar.Close, bar.Volume = q.Close, bar.Volume+q.Volume
			}
			if !bar.Time.IsZero() {
				today = append(today, bar)
			}
		}
		bars = append(today, bars...)
	}
	if len(bars) > n {
		bars = bars[len(bars)-n:]
	}
	return Series{Product: symbol, Granularity: time.Hour, Candles: bars, FetchedAt: now, Source: "devnet-synthetic", Synthetic: true}, nil
}
