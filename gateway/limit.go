package gateway

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"

	"github.com/tollgate/tollgate/gateway/restjson"
	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/payment"
)

// RateLimit is one token bucket per client: PerSecond requests a second on
// average, with bursts of up to Burst. A PerSecond of 0 disables it.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// LimitConfig configures a [Limiter].
type LimitConfig struct {
	// Free limits each client's requests that carry no payment header:
	// the free endpoints and the 402 challenges of paid ones.
	Free RateLimit
	// Paid limits each client's requests that carry a payment header
	// (PAYMENT-SIGNATURE or X-PAYMENT). Those pay for themselves, but a
	// junk header still costs a signature check, so this only stops floods.
	Paid RateLimit
	// TrustedProxies are the peers whose X-Forwarded-For is believed (the
	// load balancer's addresses). Empty: the TCP peer is the client.
	TrustedProxies []netip.Prefix
	// MaxClients caps the clients tracked at once; past it the least
	// recently seen one is forgotten (and starts again with a full bucket).
	MaxClients int
}

// DefaultLimitConfig returns limits that an honest agent never meets.
// Free: 20 requests a second with bursts of 100. An agent discovering the
// API reads /, /tollgate, /openapi.json and every /demo sample at once,
// well under 100, and then asks for a 402 challenge per paid call; the
// sustained 20/s leaves room for many agents behind one NAT address.
// Paid: 100 a second with bursts of 200. An honest payer signs and settles
// every call, so it is slowed by its own payments long before this; the
// bucket only bounds the signature checks a flood of junk headers costs.
// MaxClients: 100,000, about 30 MB at most (some 300 bytes a client with
// both buckets); an idle client is forgotten once its buckets are full
// again (5 s with these limits), so the cap is reached only by a flood
// from that many addresses (or IPv6 /64s) within seconds.
func DefaultLimitConfig() LimitConfig {
	return LimitConfig{
		Free:       RateLimit{PerSecond: 20, Burst: 100},
		Paid:       RateLimit{PerSecond: 100, Burst: 200},
		MaxClients: 100_000,
	}
}

// Validate reports every problem of c at once.
func (c LimitConfig) Validate() error {
	var errs []error
	for _, l := range []struct {
		name string
		RateLimit
	}{{"free", c.Free}, {"paid", c.Paid}} {
		switch {
		case math.IsNaN(l.PerSecond) || math.IsInf(l.PerSecond, 0) || l.PerSecond < 0:
			errs = append(errs, fmt.Errorf("gateway: %s rate limit must be a finite number of requests per second, 0 to disable; got %v", l.name, l.PerSecond))
		case l.PerSecond > 0 && l.Burst < 1:
			errs = append(errs, fmt.Errorf("gateway: %s rate limit burst must be at least 1, got %d", l.name, l.Burst))
		}
	}
	if (c.Free.PerSecond > 0 || c.Paid.PerSecond > 0) && c.MaxClients < 1 {
		errs = append(errs, fmt.Errorf("gateway: rate limit max clients must be at least 1, got %d", c.MaxClients))
	}
	for i, p := range c.TrustedProxies {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("gateway: trusted proxy %d is not a valid prefix", i))
		}
	}
	return errors.Join(errs...)
}

// ParseTrustedProxies parses a comma-separated list of CIDR prefixes or
// bare IP addresses ("10.0.0.0/8, 192.0.2.7, 2001:db8::/32"); a bare address
// stands for itself (/32 or /128). Empty items are skipped, so "" gives
// none. Prefixes are masked, and IPv4-mapped IPv6 ones become IPv4.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	var errs []error
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		var p netip.Prefix
		var err error
		if strings.Contains(item, "/") {
			p, err = netip.ParsePrefix(item)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(item); err == nil {
				if a.Zone() != "" {
					err = errors.New("a zone is not allowed")
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("trusted proxy %q: want a CIDR prefix (10.0.0.0/8) or an IP address: %w", item, err))
			continue
		}
		out = append(out, unmapPrefix(p))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// unmapPrefix masks p and turns an IPv4-mapped IPv6 prefix
// (::ffff:10.0.0.0/104) into its IPv4 form (10.0.0.0/8).
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() {
		bits := max(p.Bits()-96, 0)
		p = netip.PrefixFrom(a.Unmap(), bits)
	}
	return p.Masked()
}

// Limiter limits the request rate of each client, in front of the payment
// gate, so that unpaid load and junk payment headers cannot take the
// service down. Requests without a payment header draw on the client's
// free bucket, requests with one on its (larger) paid bucket; /health is
// never limited, for the load balancer's checks. A refused request is
// answered 429 with Retry-After and the Error body (error
// "resource_exhausted"), and costs no token.
//
// A client is an IPv4 address or an IPv6 /64 (what one host usually
// gets). Its buckets are forgotten once idle long enough to be full again,
// which loses nothing; at most MaxClients are kept.
//
// A Limiter is safe for concurrent use. It keeps its state in memory, so
// each replica limits on its own.
type Limiter struct {
	free, paid RateLimit
	trusted    []netip.Prefix
	maxClients int
	idle       time.Duration    // after this long unseen, both buckets are full
	now        func() time.Time // time.Now; tests move it by hand
	payHeaders [2]string        // canonical, so that looking them up does not allocate

	mu      sync.Mutex
	clients map[netip.Addr]*client
	lru     client // sentinel of a ring, most recently seen first
}

// client is one tracked client: its buckets (nil until first used) and its
// place in the Limiter's ring of clients by last use.
type client struct {
	key        netip.Addr
	free, paid *rate.Limiter
	seen       time.Time
	prev, next *client
}

// NewLimiter returns a Limiter configured by cfg.
func NewLimiter(cfg LimitConfig) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Limiter{
		free:       cfg.Free,
		paid:       cfg.Paid,
		maxClients: cfg.MaxClients,
		idle:       max(refill(cfg.Free), refill(cfg.Paid)),
		now:        time.Now,
		payHeaders: [2]string{http.CanonicalHeaderKey(payment.HeaderPaymentV2), http.CanonicalHeaderKey(payment.HeaderPaymentV1)},
		clients:    map[netip.Addr]*client{},
	}
	for _, p := range cfg.TrustedProxies {
		l.trusted = append(l.trusted, unmapPrefix(p))
	}
	l.lru.prev, l.lru.next = &l.lru, &l.lru
	return l, nil
}

// refill returns how long an empty bucket of rl takes to fill.
func refill(rl RateLimit) time.Duration {
	if rl.PerSecond == 0 {
		return 0
	}
	s := float64(rl.Burst) / rl.PerSecond
	if s >= math.MaxInt64/float64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(math.Ceil(s * float64(time.Second)))
}

// Handler returns next behind the limits. Put it inside the access log
// (so 429s are logged) and outside the payment gate (so a refused request
// costs no signature check).
func (l *Limiter) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			next.ServeHTTP(w, r)
			return
		}
		paid := l.hasPayment(r.Header)
		if wait, ok := l.Allow(r, paid); !ok {
			rl := l.free
			if paid {
				rl = l.paid
			}
			refuse(w, r, rl, paid, wait)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Allow takes a token from the bucket of r's client, paid or free, and
// reports whether there was one; if not, it says how long until there
// is. Handler calls it for each request; a facade that carries payments
// elsewhere than in headers (MCP, in the body) calls it itself.
func (l *Limiter) Allow(r *http.Request, paid bool) (time.Duration, bool) {
	rl := l.free
	if paid {
		rl = l.paid
	}
	if rl.PerSecond == 0 {
		return 0, true
	}
	return l.allow(clientKey(l.ClientAddr(r)), paid)
}

// hasPayment reports whether h carries a payment header, as the gate
// reads it (Header.Get: the first value, if not empty).
func (l *Limiter) hasPayment(h http.Header) bool {
	for _, k := range l.payHeaders {
		if v := h[k]; len(v) > 0 && v[0] != "" {
			return true
		}
	}
	return false
}

// allow takes a token from the bucket of key (paid or free) and reports
// whether there was one; if not, it says how long until there is.
func (l *Limiter) allow(key netip.Addr, paid bool) (time.Duration, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	// Forget clients idle long enough for their buckets to be full: a new
	// bucket is the same. The ring is in order of last use, so this stops
	// at the first client seen recently, and costs nothing per request on
	// average (each client is removed once).
	for c := l.lru.prev; c != &l.lru && now.Sub(c.seen) >= l.idle; c = l.lru.prev {
		l.remove(c)
	}
	c := l.clients[key]
	if c == nil {
		if len(l.clients) >= l.maxClients {
			l.remove(l.lru.prev) // a flood from many addresses: forget the oldest
		}
		c = &client{key: key}
		l.clients[key] = c
	} else {
		c.prev.next, c.next.prev = c.next, c.prev
	}
	c.seen = now
	c.prev, c.next = &l.lru, l.lru.next
	c.next.prev, l.lru.next = c, c

	b, rl := &c.free, l.free
	if paid {
		b, rl = &c.paid, l.paid
	}
	if *b == nil {
		*b = rate.NewLimiter(rate.Limit(rl.PerSecond), rl.Burst)
	}
	if (*b).AllowN(now, 1) { // a refusal takes no token
		return 0, true
	}
	// The delay a reservation would get, without making one.
	missing := 1 - (*b).TokensAt(now)
	return time.Duration(missing / rl.PerSecond * float64(time.Second)), false
}

// remove forgets c; l.mu is held.
func (l *Limiter) remove(c *client) {
	c.prev.next, c.next.prev = c.next, c.prev
	c.prev, c.next = nil, nil
	delete(l.clients, c.key)
}

// refuse answers 429 for a request over rl, retryable after wait.
func refuse(w http.ResponseWriter, r *http.Request, rl RateLimit, paid bool, wait time.Duration) {
	secs := max(int64(math.Ceil(wait.Seconds())), 1)
	kind := "without a payment header"
	if paid {
		kind = "with a payment header"
	}
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	writeError(w, r, http.StatusTooManyRequests, &tollgatev1.Error{
		Error: restjson.CodeName(codes.ResourceExhausted),
		Message: fmt.Sprintf("rate limit exceeded: at most %s requests per second (bursts of %d) per client %s; retry in %d s",
			strconv.FormatFloat(rl.PerSecond, 'g', -1, 64), rl.Burst, kind, secs),
	})
}

// ClientAddr returns the address of the client that sent r: the TCP peer,
// or, when the peer is a trusted proxy, the rightmost address of
// X-Forwarded-For that is not a trusted proxy (each proxy appends the
// address it got the request from, so what lies left of that was written
// by the client and proves nothing). A malformed entry met on the way
// makes it the peer again. IPv4-mapped IPv6 addresses are returned as
// IPv4. A peer that is not an IP address (a Unix socket) gives the zero
// Addr, and all such requests share one bucket.
func (l *Limiter) ClientAddr(r *http.Request) netip.Addr {
	peer := parseHost(r.RemoteAddr)
	if !l.isTrusted(peer) {
		return peer
	}
	client := peer
	xff := r.Header.Values("X-Forwarded-For")
	for i := len(xff) - 1; i >= 0; i-- {
		line := xff[i]
		for line != "" {
			var item string
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				line, item = line[:j], line[j+1:]
			} else {
				line, item = "", line
			}
			a, err := netip.ParseAddr(strings.TrimSpace(item))
			if err != nil {
				return peer
			}
			client = a.WithZone("").Unmap()
			if !l.isTrusted(client) {
				return client
			}
		}
	}
	return client // every hop trusted: the leftmost is an internal client
}

// parseHost returns the IP address of a "host:port" or bare host, or the
// zero Addr.
func parseHost(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().WithZone("").Unmap()
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.WithZone("").Unmap()
	}
	return netip.Addr{}
}

func (l *Limiter) isTrusted(a netip.Addr) bool {
	for _, p := range l.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientKey returns the key of a's buckets: an IPv4 address itself, an
// IPv6 one its /64.
func clientKey(a netip.Addr) netip.Addr {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}
