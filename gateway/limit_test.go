package gateway

import (
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/payment"
)

// limitStep is one request to a Limiter's handler, after moving its clock
// by advance.
type limitStep struct {
	advance time.Duration
	remote  string // RemoteAddr; "192.0.2.1:1000" if empty
	path    string // "/regime" if empty
	header  http.Header
	want    int    // status
	retry   string // Retry-After of a 429
}

// newClockedLimiter returns a Limiter whose clock moves only by hand.
func newClockedLimiter(t testing.TB, cfg LimitConfig) (*Limiter, *time.Time) {
	t.Helper()
	l, err := NewLimiter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	l.now = func() time.Time { return now }
	return l, &now
}

func okHandler(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }

func TestLimiter(t *testing.T) {
	t.Parallel()
	pay := func(name string) http.Header { return http.Header{name: {"junk"}} }
	xff := func(v string) http.Header { return http.Header{"X-Forwarded-For": {v}} }
	free := func(perSecond float64, burst int) LimitConfig {
		return LimitConfig{Free: RateLimit{perSecond, burst}, MaxClients: 100}
	}
	for _, tt := range []struct {
		name  string
		cfg   LimitConfig
		steps []limitStep
	}{
		{"free burst, then 429 until a token is back", free(1, 2), []limitStep{
			{want: 200}, {want: 200}, {want: 429, retry: "1"},
			{advance: 999 * time.Millisecond, want: 429, retry: "1"},
			{advance: time.Millisecond, want: 200}, {want: 429, retry: "1"},
		}},
		{"Retry-After rounds the wait up to whole seconds", free(0.1, 1), []limitStep{
			{want: 200}, {want: 429, retry: "10"},
			{advance: 4 * time.Second, want: 429, retry: "6"},
			{advance: 500 * time.Millisecond, want: 429, retry: "6"},
			{advance: 5500 * time.Millisecond, want: 200},
		}},
		{"clients are independent", free(1, 1), []limitStep{
			{want: 200}, {want: 429, retry: "1"},
			{remote: "192.0.2.2:1000", want: 200}, {remote: "192.0.2.2:1001", want: 429, retry: "1"},
			{remote: "198.51.100.1:1000", want: 200},
		}},
		{"payment headers draw on the paid bucket", LimitConfig{Free: RateLimit{1, 1}, Paid: RateLimit{1, 3}, MaxClients: 100}, []limitStep{
			{want: 200}, {want: 429, retry: "1"},
			{header: pay(payment.HeaderPaymentV2), want: 200},
			{header: pay(payment.HeaderPaymentV1), want: 200},
			{header: pay(payment.HeaderPaymentV2), want: 200},
			{header: pay(payment.HeaderPaymentV1), want: 429, retry: "1"},
			{header: http.Header{payment.HeaderPaymentV2: {""}}, want: 429, retry: "1"}, // empty is no payment
			{remote: "192.0.2.2:1000", header: pay(payment.HeaderPaymentV2), want: 200},
		}},
		{"/health is never limited", free(1, 1), []limitStep{
			{want: 200}, {path: "/health", want: 200}, {path: "/health", want: 200},
			{path: "/health", header: pay(payment.HeaderPaymentV2), want: 200},
			{want: 429, retry: "1"}, {path: "/health/", want: 429, retry: "1"},
		}},
		{"disabled limits pass everything", LimitConfig{}, []limitStep{
			{want: 200}, {want: 200}, {want: 200},
			{header: pay(payment.HeaderPaymentV2), want: 200}, {header: pay(payment.HeaderPaymentV2), want: 200},
		}},
		{"a disabled paid limit leaves payments alone", free(1, 1), []limitStep{
			{want: 200}, {want: 429, retry: "1"},
			{header: pay(payment.HeaderPaymentV2), want: 200}, {header: pay(payment.HeaderPaymentV2), want: 200},
		}},
		{"a disabled free limit leaves free requests alone", LimitConfig{Paid: RateLimit{1, 1}, MaxClients: 1}, []limitStep{
			{want: 200}, {want: 200},
			{header: pay(payment.HeaderPaymentV1), want: 200}, {header: pay(payment.HeaderPaymentV1), want: 429, retry: "1"},
		}},
		{"IPv6 clients are their /64", free(1, 1), []limitStep{
			{remote: "[2001:db8:1:2::1]:1000", want: 200},
			{remote: "[2001:db8:1:2:ffff:ffff:ffff:ffff]:1000", want: 429, retry: "1"},
			{remote: "[2001:db8:1:3::1]:1000", want: 200},
		}},
		{"IPv4-mapped IPv6 is IPv4", free(1, 1), []limitStep{
			{remote: "[::ffff:192.0.2.1]:1000", want: 200},
			{remote: "192.0.2.1:1001", want: 429, retry: "1"},
		}},
		{"X-Forwarded-For from an untrusted peer is ignored", free(1, 1), []limitStep{
			{header: xff("203.0.113.1"), want: 200},
			{header: xff("203.0.113.2"), want: 429, retry: "1"},
		}},
		{"X-Forwarded-For from a trusted proxy names the client", LimitConfig{
			Free: RateLimit{1, 1}, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, MaxClients: 100,
		}, []limitStep{
			{remote: "10.0.0.1:1000", header: xff("203.0.113.1"), want: 200},
			{remote: "10.0.0.2:1000", header: xff("203.0.113.2"), want: 200},
			{remote: "10.0.0.2:1000", header: xff("198.51.100.9, 203.0.113.1"), want: 429, retry: "1"}, // spoofed left part
			{remote: "10.0.0.1:1000", header: xff("203.0.113.2, 10.9.9.9"), want: 429, retry: "1"},     // two proxies
			{remote: "10.0.0.1:1000", want: 200},                                                       // the proxy itself
			{remote: "10.0.0.1:1000", header: xff("203.0.113.3, junk"), want: 429, retry: "1"},         // malformed: the proxy
			{remote: "192.0.2.1:1000", header: xff("203.0.113.4"), want: 200},                          // untrusted peer
			{remote: "192.0.2.1:1000", header: xff("203.0.113.5"), want: 429, retry: "1"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, now := newClockedLimiter(t, tt.cfg)
			h := l.Handler(http.HandlerFunc(okHandler))
			for i, s := range tt.steps {
				*now = now.Add(s.advance)
				r := httptest.NewRequest(http.MethodGet, cmp(s.path, "/regime"), nil)
				r.RemoteAddr = cmp(s.remote, "192.0.2.1:1000")
				for k, vs := range s.header {
					for _, v := range vs {
						r.Header.Add(k, v) // canonicalizes k
					}
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != s.want {
					t.Fatalf("step %d (%+v): status %d, want %d: %s", i, s, w.Code, s.want, w.Body)
				}
				if got := w.Header().Get("Retry-After"); got != s.retry {
					t.Errorf("step %d: Retry-After %q, want %q", i, got, s.retry)
				}
				if s.want == http.StatusTooManyRequests {
					checkLimitBody(t, w, s.retry)
				}
			}
		})
	}
}

func cmp(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// checkLimitBody checks that a 429 has the gateway's Error body.
func checkLimitBody(t *testing.T, w *httptest.ResponseRecorder, retry string) {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var e tollgatev1.Error
	if err := protojson.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("429 body %s: %v", w.Body, err)
	}
	if e.Error != "resource_exhausted" || e.Status != http.StatusTooManyRequests || e.Param != nil ||
		!strings.Contains(e.Message, "per second") || !strings.HasSuffix(e.Message, "retry in "+retry+" s") {
		t.Errorf("429 body %s", w.Body)
	}
}

func TestClientAddr(t *testing.T) {
	t.Parallel()
	l, err := NewLimiter(LimitConfig{TrustedProxies: []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("2001:db8:ffff::/48"),
		netip.MustParsePrefix("::ffff:172.16.0.0/108"), // 172.16.0.0/12
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, remote string
		xff          []string
		want         string // "" for the zero Addr
	}{
		{"no proxy", "192.0.2.1:1000", nil, "192.0.2.1"},
		{"spoofed from an untrusted peer", "192.0.2.1:1000", []string{"203.0.113.1"}, "192.0.2.1"},
		{"trusted proxy without the header", "10.0.0.1:1000", nil, "10.0.0.1"},
		{"one trusted proxy", "10.0.0.1:1000", []string{"203.0.113.1"}, "203.0.113.1"},
		{"client-written entries are skipped", "10.0.0.1:1000", []string{"1.1.1.1, 203.0.113.1"}, "203.0.113.1"},
		{"two trusted proxies", "10.0.0.1:1000", []string{"1.1.1.1, 203.0.113.1, 10.0.0.2"}, "203.0.113.1"},
		{"two trusted proxies, two header lines", "10.0.0.1:1000", []string{"1.1.1.1, 203.0.113.1", "10.0.0.2"}, "203.0.113.1"},
		{"IPv6 proxy and client", "[2001:db8:ffff::1]:443", []string{"2001:db8:1::7"}, "2001:db8:1::7"},
		{"mapped peer in a trusted prefix", "[::ffff:10.0.0.1]:1000", []string{"203.0.113.1"}, "203.0.113.1"},
		{"mapped prefix is trusted as IPv4", "172.16.3.4:1000", []string{"203.0.113.1"}, "203.0.113.1"},
		{"mapped client is IPv4", "10.0.0.1:1000", []string{"::ffff:203.0.113.1"}, "203.0.113.1"},
		{"every hop trusted: the leftmost", "10.0.0.1:1000", []string{"10.0.0.3, 10.0.0.2"}, "10.0.0.3"},
		{"malformed rightmost entry: the peer", "10.0.0.1:1000", []string{"203.0.113.1, junk"}, "10.0.0.1"},
		{"malformed after a proxy: the peer", "10.0.0.1:1000", []string{"203.0.113.1, 10.0.0.2:80"}, "10.0.0.1"},
		{"empty entry: the peer", "10.0.0.1:1000", []string{"203.0.113.1,"}, "10.0.0.1"},
		{"malformed left of the client is ignored", "10.0.0.1:1000", []string{"junk, 203.0.113.1"}, "203.0.113.1"},
		{"empty header: the peer", "10.0.0.1:1000", []string{""}, "10.0.0.1"},
		{"no port", "192.0.2.1", nil, "192.0.2.1"},
		{"zone dropped", "[fe80::1%eth0]:1000", nil, "fe80::1"},
		{"unix socket", "@", []string{"203.0.113.1"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.remote
			r.Header["X-Forwarded-For"] = tt.xff
			var want netip.Addr
			if tt.want != "" {
				want = netip.MustParseAddr(tt.want)
			}
			if got := l.ClientAddr(r); got != want {
				t.Errorf("ClientAddr = %v, want %v", got, want)
			}
		})
	}
}

// TestLimiterForgets: idle clients are forgotten once their buckets are
// full again, and past MaxClients the least recently seen is.
func TestLimiterForgets(t *testing.T) {
	t.Parallel()
	l, now := newClockedLimiter(t, LimitConfig{Free: RateLimit{1, 2}, Paid: RateLimit{10, 10}, MaxClients: 3})
	h := l.Handler(http.HandlerFunc(okHandler))
	get := func(remote string) int {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, remote := range []string{"192.0.2.1:1", "192.0.2.1:1", "192.0.2.2:1", "192.0.2.3:1"} {
		get(remote)
	}
	checkClients(t, l, "192.0.2.3", "192.0.2.2", "192.0.2.1")
	if got := get("192.0.2.1:1"); got != 429 { // seen again: now the most recent
		t.Fatalf("192.0.2.1 after its burst: %d", got)
	}
	get("192.0.2.4:1")
	checkClients(t, l, "192.0.2.4", "192.0.2.1", "192.0.2.3")

	*now = now.Add(1999 * time.Millisecond) // refill takes max(2/1, 10/10) = 2 s
	get("192.0.2.3:1")
	checkClients(t, l, "192.0.2.3", "192.0.2.4", "192.0.2.1")
	*now = now.Add(time.Millisecond)
	get("192.0.2.5:1")
	checkClients(t, l, "192.0.2.5", "192.0.2.3")

	for i := range 1000 { // a flood from many addresses
		get(netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}).String() + ":1")
	}
	checkClients(t, l, "198.51.3.231", "198.51.3.230", "198.51.3.229")
}

// checkClients checks that l tracks exactly want, most recently seen
// first, and that its map and ring agree.
func checkClients(t *testing.T, l *Limiter, want ...string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var got []string
	for c := l.lru.next; c != &l.lru; c = c.next {
		if c.next.prev != c || l.clients[c.key] != c {
			t.Fatalf("ring broken at %v", c.key)
		}
		got = append(got, c.key.String())
	}
	if strings.Join(got, " ") != strings.Join(want, " ") || len(l.clients) != len(want) {
		t.Errorf("clients %v (map %d), want %v", got, len(l.clients), want)
	}
}

// TestLimiterConcurrent runs clients in parallel through a small table;
// run with -race.
func TestLimiterConcurrent(t *testing.T) {
	t.Parallel()
	l, err := NewLimiter(LimitConfig{Free: RateLimit{1000, 5}, Paid: RateLimit{1000, 5}, MaxClients: 8})
	if err != nil {
		t.Fatal(err)
	}
	h := l.Handler(http.HandlerFunc(okHandler))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.RemoteAddr = netip.AddrFrom4([4]byte{192, 0, byte(g), byte(i % 20)}).String() + ":1"
				if i%3 == 0 {
					r.Header.Set(payment.HeaderPaymentV2, "x")
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != 200 && w.Code != 429 {
					t.Errorf("status %d", w.Code)
				}
			}
		})
	}
	wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for c := l.lru.next; c != &l.lru; c = c.next {
		n++
	}
	if n != len(l.clients) || n > 8 {
		t.Errorf("ring %d, map %d, cap 8", n, len(l.clients))
	}
}

func TestParseTrustedProxies(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in, want string // want: prefixes joined by " ", or "error: ..." substrings
	}{
		{"", ""},
		{" , ", ""},
		{"10.0.0.0/8", "10.0.0.0/8"},
		{" 192.0.2.7 , 2001:db8::/32,", "192.0.2.7/32 2001:db8::/32"},
		{"2001:db8::1", "2001:db8::1/128"},
		{"10.1.2.3/8", "10.0.0.0/8"},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8"},
		{"::ffff:192.0.2.7", "192.0.2.7/32"},
		{"10.0.0.0/33", `error: "10.0.0.0/33"`},
		{"example.com", `error: "example.com"`},
		{"10.0.0.0/8, nope, 1.2.3.4/", `error: "nope" "1.2.3.4/"`},
		{"fe80::1%eth0", `error: "fe80::1%eth0"`},
		{"192.0.2.1:80", `error: "192.0.2.1:80"`},
	} {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseTrustedProxies(tt.in)
			if want, ok := strings.CutPrefix(tt.want, "error: "); ok {
				if err == nil {
					t.Fatalf("got %v, want an error", got)
				}
				for _, s := range strings.Fields(want) {
					if !strings.Contains(err.Error(), s) || !strings.Contains(err.Error(), "CIDR prefix") {
						t.Errorf("error %q does not name %s", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, p := range got {
				s = append(s, p.String())
			}
			if strings.Join(s, " ") != tt.want {
				t.Errorf("got %v, want %s", s, tt.want)
			}
		})
	}
}

func TestNewLimiter(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  LimitConfig
		want []string // substrings of the error; none: valid
	}{
		{"default", DefaultLimitConfig(), nil},
		{"all disabled", LimitConfig{}, nil},
		{"negative rate", LimitConfig{Free: RateLimit{-1, 1}, MaxClients: 1}, []string{"free rate limit"}},
		{"NaN rate", LimitConfig{Paid: RateLimit{math.NaN(), 1}, MaxClients: 1}, []string{"paid rate limit"}},
		{"infinite rate", LimitConfig{Free: RateLimit{math.Inf(1), 1}, MaxClients: 1}, []string{"free rate limit"}},
		{"no burst", LimitConfig{Free: RateLimit{1, 0}, MaxClients: 1}, []string{"free rate limit burst"}},
		{"no room", LimitConfig{Paid: RateLimit{1, 1}}, []string{"max clients"}},
		{"bad prefix", LimitConfig{TrustedProxies: []netip.Prefix{{}}}, []string{"trusted proxy 0"}},
		{"every problem at once", LimitConfig{Free: RateLimit{1, 0}, Paid: RateLimit{-1, 1}, TrustedProxies: []netip.Prefix{{}}},
			[]string{"free rate limit burst", "paid rate limit", "max clients", "trusted proxy 0"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, err := NewLimiter(tt.cfg)
			if len(tt.want) == 0 {
				if err != nil || l == nil {
					t.Fatalf("NewLimiter: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("NewLimiter accepted it")
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

// BenchmarkLimiter measures the handler's cost per request with the
// default limits: "allowed" over 4096 known clients (raised limits, so
// every request passes), "refused" for one client over its limit, and
// "new clients" for a flood of addresses at MaxClients.
func BenchmarkLimiter(b *testing.B) {
	reqs := make([]*http.Request, 4096)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodGet, "/regime", nil)
		reqs[i].RemoteAddr = netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}).String() + ":" + strconv.Itoa(40000+i)
		if i%4 == 0 {
			reqs[i].Header.Set(payment.HeaderPaymentV2, "x")
		}
	}
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	run := func(b *testing.B, cfg LimitConfig, reqs []*http.Request) {
		l, err := NewLimiter(cfg)
		if err != nil {
			b.Fatal(err)
		}
		h := l.Handler(next)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			w := &discardWriter{h: http.Header{}}
			i := 0
			for pb.Next() {
				h.ServeHTTP(w, reqs[i%len(reqs)])
				i++
			}
		})
	}
	b.Run("allowed", func(b *testing.B) {
		cfg := DefaultLimitConfig()
		cfg.Free, cfg.Paid = RateLimit{1e9, 1e9}, RateLimit{1e9, 1e9}
		run(b, cfg, reqs)
	})
	b.Run("refused", func(b *testing.B) {
		run(b, DefaultLimitConfig(), reqs[1:2])
	})
	b.Run("new clients", func(b *testing.B) {
		cfg := DefaultLimitConfig()
		cfg.MaxClients = 1024
		run(b, cfg, reqs)
	})
}
