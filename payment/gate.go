// Package payment enforces x402 (pay-per-call) in front of Tollgate's
// paid operations, whatever the scheme paid with and whatever the
// transport the call came by. The money rules are one Gate: it answers
// unpaid calls with every registered scheme's requirement, decodes a
// presented payment's envelope, matches it against the operation's
// requirement and hands it to the Scheme it chose through an Exchange,
// which runs the handler and answers (scheme.go). Two thin adapters carry
// it: the REST middleware (http.go: the 402 with its v1 body and v2
// PAYMENT-REQUIRED header, the payment headers in, PAYMENT-RESPONSE out)
// and the MCP tool wrapper (mcp.go: x402's MCP transport, the requirement
// as an isError tool result, the payment and the settlement in _meta).
// It also holds what the schemes share: the wire format of the envelopes
// and requirements, EIP-3009/EIP-712 signing, the gas key's transaction
// sender (Local, with its nonce manager), the remote facilitator
// transport (Client), the facilitator HTTP API (Server, one
// SchemeFacilitator per scheme) and the payer (Payer, one SchemeClient
// per scheme, over HTTP or MCP). Each scheme is a package of its own
// beside it (payment/exact, payment/batch), and none imports another.
//
// payment knows nothing of protobuf, gRPC or the analytics: operations,
// prices and parameter checks are handed to it.
package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Route is one paid operation.
type Route struct {
	// Name is the operation's catalog name, e.g. "regime".
	Name string
	// Pattern is its net/http pattern, e.g. "GET /rugcheck/{addr}".
	Pattern string
	// PriceUSD is the exact decimal price of one call.
	PriceUSD string
	// Description is shown to payers.
	Description string
	// Valid reports whether the request's parameters are acceptable; an
	// invalid request is passed to the handler unpaid, which refuses it
	// with 400, so bad input never meets payment logic.
	Valid func(*http.Request) bool
	// Discovery describes the operation's parameters and response for
	// the challenge's discovery fields (v2 bazaar extension, v1
	// outputSchema); nil says only "GET, returns JSON".
	Discovery *Discovery
}

// GateConfig is the payment side of the deployment.
type GateConfig struct {
	// PublicURL is the base of the absolute resource URLs.
	PublicURL string
	// Network is the CAIP-2 chain, "eip155:8453"; NetworkV1 its x402 v1 name, "base".
	Network   string
	NetworkV1 string
	ChainID   *big.Int
	// Asset is the EIP-3009 token paid in, with its EIP-712 domain and decimals.
	Asset        common.Address
	AssetName    string
	AssetVersion string
	Decimals     int
	// PayTo receives the payments.
	PayTo common.Address
	// MaxTimeout is the requirements' maxTimeoutSeconds.
	MaxTimeout int
	// Observer is told of each step of the payment funnel; nil: nobody.
	Observer Observer
	// Schemes are offered in this order (v1 clients are offered the
	// V1Schemes among them); at least one.
	Schemes []Scheme
	// IDs keeps the payment identifiers (identifier.go); nil: the
	// payment-identifier extension is not offered.
	IDs IDBook
	// SignIn lets wallets read again what they bought (siwx.go); nil:
	// the sign-in-with-x extension is not offered.
	SignIn *SignIn
}

// Validate reports every problem of c at once.
func (c GateConfig) Validate() error {
	var errs []error
	if u, err := url.Parse(c.PublicURL); err != nil || u.Host == "" {
		errs = append(errs, fmt.Errorf("gate: public URL %q is not absolute", c.PublicURL))
	}
	if c.Network == "" || c.NetworkV1 == "" || c.ChainID == nil {
		errs = append(errs, errors.New("gate: network, v1 network name and chain id are required"))
	}
	if c.Asset == (common.Address{}) || c.AssetName == "" || c.AssetVersion == "" || c.Decimals <= 0 {
		errs = append(errs, errors.New("gate: asset address, EIP-712 name and version, and decimals are required"))
	}
	if c.PayTo == (common.Address{}) {
		errs = append(errs, errors.New("gate: payTo is required"))
	}
	if c.MaxTimeout <= 0 {
		errs = append(errs, errors.New("gate: max timeout must be positive"))
	}
	if len(c.Schemes) == 0 {
		errs = append(errs, errors.New("gate: no scheme offered"))
	}
	seen := map[string]bool{}
	for _, s := range c.Schemes {
		if s == nil || seen[s.Name()] {
			errs = append(errs, fmt.Errorf("gate: scheme %v is nil or offered twice", s))
			continue
		}
		seen[s.Name()] = true
	}
	return errors.Join(errs...)
}

// Gate is the x402 interceptor.
type Gate struct {
	cfg    GateConfig
	routes []*route
	tally  Tally
	logger *slog.Logger
	base   string
	origin *url.URL // base parsed, once: the sign-in's domain and origin
	obs    Observer
	tools  map[string]*route // each operation's first route, by name: the MCP tools
}

type route struct {
	Route
	amount     *big.Int
	discovery  *discovery
	challenges atomic.Uint64
	// The unpaid challenge, pre-encoded around the parts that vary per
	// request (the resource URL; the sign-in's nonce and times): the hot
	// path splices, never marshals.
	v1Body [2][]byte
	v2JSON template
	// The unpaid tool call's PaymentRequired, whole: a tool's resource
	// URL does not vary.
	toolRequired json.RawMessage
}

// resourceMark stands for the resource URL in the pre-encoded challenge.
const resourceMark = "\"tollgate-resource-url\""

var errNoPayment = &VerifyError{Reason: "payment_required", Message: "payment required: send " + HeaderPaymentV2 + " (x402 v2) or " + HeaderPaymentV1 + " (x402 v1)"}

// Tally keeps the paid operations' durable counters; *store.DB
// implements it.
type Tally interface {
	// Totals returns the counters of every operation that has any.
	Totals(ctx context.Context) (map[string]Totals, error)
	// AddChallenges adds to the operations' challenge counts, in one
	// write.
	AddChallenges(ctx context.Context, counts map[string]uint64) error
}

// Totals are one operation's durable counters.
type Totals struct {
	Paid       uint64 // settled payments
	Amount     string // settled atomic units, decimal
	Challenges uint64 // 402s sent for a missing payment, as flushed
}

// NewGate returns the interceptor for routes, paid with cfg's schemes
// and counted in tally; it does no I/O.
func NewGate(cfg GateConfig, routes []Route, tally Tally, logger *slog.Logger) (*Gate, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Gate{cfg: cfg, tally: tally, logger: logger, base: strings.TrimSuffix(cfg.PublicURL, "/"), tools: map[string]*route{}}
	g.origin, _ = url.Parse(g.base) // Validate checked it
	if g.obs = cfg.Observer; g.obs == nil {
		g.obs = nopObserver{}
	}
	for _, r := range routes {
		amount, err := AtomicAmount(r.PriceUSD, cfg.Decimals)
		if err != nil {
			return nil, fmt.Errorf("gate: route %s: %w", r.Name, err)
		}
		disc, err := newDiscovery(r.Name, r.Description, r.Pattern, r.Discovery)
		if err != nil {
			return nil, fmt.Errorf("gate: route %s: discovery: %w", r.Name, err)
		}
		rt := &route{Route: r, amount: amount, discovery: disc}
		req := g.requirementFor(rt, "tollgate-resource-url")
		v1, v2 := g.challengeWith(req, errNoPayment, siwxMarkValues)
		b, err := json.Marshal(v1)
		if err != nil {
			return nil, err
		}
		before, after, _ := bytes.Cut(b, []byte(resourceMark)) // a v1 body offering no scheme names none
		if bytes.Contains(after, []byte(resourceMark)) {
			return nil, errors.New("gate: the v1 challenge must name its resource at most once")
		}
		rt.v1Body = [2][]byte{before, after}
		if b, err = json.Marshal(v2); err != nil {
			return nil, err
		}
		rt.v2JSON = newTemplate(b, append([]string{resourceMark}, siwxMarks[:]...))
		if rt.v2JSON.count(0) == 0 {
			return nil, errors.New("gate: the challenge must name its resource")
		}
		g.routes = append(g.routes, rt)
		if g.tools[r.Name] == nil {
			treq := g.requirementFor(rt, ToolResource(r.Name))
			treq.transport = TransportMCP
			_, v2 := g.challengeObjects(treq, errNoPayment)
			if rt.toolRequired, err = json.Marshal(v2); err != nil {
				return nil, err
			}
			g.tools[r.Name] = rt
		}
	}
	return g, nil
}

// Outcomes are the label values the gate reports to its Observer: the
// operations of its routes, and the reasons it and its schemes refuse or
// fail a payment with; each list sorted, without repeats.
func (g *Gate) Outcomes() (ops []string, reasons Reasons) {
	for _, rt := range g.routes {
		ops = append(ops, rt.Name)
	}
	// The gate's own refusals: a header that is no payment, one matching
	// no requirement (paid, match).
	reasons.Refused = []string{ReasonInvalidPayload, ReasonInvalidVersion, ReasonNoMatch, ReasonResourceMismatch}
	if g.cfg.IDs != nil {
		reasons.Refused = append(reasons.Refused, IDReasons()...)
	}
	for _, s := range g.cfg.Schemes {
		r := s.Reasons()
		reasons.Refused = append(reasons.Refused, r.Refused...)
		reasons.Failed = append(reasons.Failed, r.Failed...)
	}
	for _, l := range []*[]string{&ops, &reasons.Refused, &reasons.Failed} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
	return ops, reasons
}

// match finds the scheme a payment chose and checks what it accepted
// against the route's requirement: for v2 the network, amount, asset and
// payTo (the extra is the scheme's to check) and the resource it pays
// for; for v1 the network. The scheme checks its own payload.
func (g *Gate) match(env *Envelope, req *Requirement, sameResource func(paid string) bool) (Scheme, *VerifyError) {
	got := env.Accepted
	s := g.scheme(got.Scheme, env.Version)
	switch {
	case env.Version == 1 && (s == nil || got.Network != req.NetworkV1):
		return nil, &VerifyError{Reason: ReasonNoMatch, Message: fmt.Sprintf("no requirement for scheme %q on %q; want %s on %s", got.Scheme, got.Network, g.v1Names(), req.NetworkV1)}
	case env.Version == 1:
		return s, nil
	case s == nil || got.Network != req.Network || got.Amount != req.Amount.String() || !sameAddress(got.Asset, req.Asset) || !sameAddress(got.PayTo, req.PayTo):
		return nil, &VerifyError{Reason: ReasonNoMatch, Message: "accepted does not match this resource's requirement (scheme, network, amount, asset, payTo)"}
	case env.Resource != nil && !sameResource(env.Resource.URL):
		return nil, &VerifyError{Reason: ReasonResourceMismatch, Message: fmt.Sprintf("the payment is for %q, not %s", env.Resource.URL, req.Resource)}
	}
	return s, nil
}

// sameAddress reports whether s is address a in hex, whatever its case.
func sameAddress(s string, a common.Address) bool {
	return len(s) == 2+2*common.AddressLength && common.IsHexAddress(s) && common.HexToAddress(s) == a
}

// scheme returns the scheme named, if it is offered in x402 version.
func (g *Gate) scheme(name string, version int) Scheme {
	for _, s := range g.cfg.Schemes {
		if s.Name() != name {
			continue
		}
		if _, v1 := s.(V1Scheme); version == 2 || v1 {
			return s
		}
	}
	return nil
}

// v1Names names the schemes offered to v1 clients.
func (g *Gate) v1Names() string {
	var names []string
	for _, s := range g.cfg.Schemes {
		if _, ok := s.(V1Scheme); ok {
			names = append(names, s.Name())
		}
	}
	return strings.Join(names, " or ")
}

// SameResource compares two request URIs (path and query) as resources:
// the paths must be equal, and the query strings must carry the same
// parameters with the same values, in any order ("?a=1&b=2" is
// "?b=2&a=1"; "?a=1" is not "?a=1&a=1", nor "?a=01").
func SameResource(a, b string) bool {
	pa, qa, _ := strings.Cut(a, "?")
	pb, qb, _ := strings.Cut(b, "?")
	if pa != pb {
		return false
	}
	va, errA := url.ParseQuery(qa)
	vb, errB := url.ParseQuery(qb)
	if errA != nil || errB != nil {
		return qa == qb
	}
	if len(va) != len(vb) {
		return false
	}
	for k, xs := range va {
		ys, ok := vb[k]
		if !ok || len(xs) != len(ys) {
			return false
		}
		xs, ys = slices.Clone(xs), slices.Clone(ys)
		slices.Sort(xs)
		slices.Sort(ys)
		if !slices.Equal(xs, ys) {
			return false
		}
	}
	return true
}

func (g *Gate) requirementFor(rt *route, resource string) *Requirement {
	return &Requirement{
		Network: g.cfg.Network, NetworkV1: g.cfg.NetworkV1, ChainID: g.cfg.ChainID,
		Asset: g.cfg.Asset, AssetName: g.cfg.AssetName, AssetVersion: g.cfg.AssetVersion,
		PayTo: g.cfg.PayTo, Amount: rt.amount, MaxTimeout: g.cfg.MaxTimeout,
		Resource: resource, Description: rt.Description, MimeType: "application/json", Operation: rt.Name, transport: TransportREST,
		discovery: rt.discovery,
	}
}

// usd converts atomic units of the asset to dollars, for the metrics.
func (g *Gate) usd(amount *big.Int) float64 {
	return USD(amount, g.cfg.Decimals)
}

// challengeObjects builds the v1 body and the v2 object of a challenge,
// with a fresh sign-in challenge.
func (g *Gate) challengeObjects(req *Requirement, why *VerifyError) (RequiredV1, RequiredV2) {
	return g.challengeWith(req, why, func() [3][]byte { return siwxValues(time.Now()) })
}

// challengeWith is challengeObjects with the sign-in's nonce, issue time
// and expiry from signIn (called only when the challenge offers a
// sign-in): NewGate passes siwxMarkValues to cut its templates at them.
// The discovery fields were rendered once, with the route.
func (g *Gate) challengeWith(req *Requirement, why *VerifyError, signIn func() [3][]byte) (RequiredV1, RequiredV2) {
	d := req.discovery
	if d == nil { // a requirement made outside NewGate's routes
		d, _ = newDiscovery("", "", "GET /", nil)
	}
	v1 := RequiredV1{X402Version: 1, Error: why.Reason, Payer: why.Payer, Accepts: []RequirementsV1{}}
	v2 := RequiredV2{
		X402Version: 2,
		Error:       why.Reason,
		Resource:    ResourceV2{URL: req.Resource, Description: req.Description, MimeType: req.MimeType},
		Extensions:  map[string]any{"bazaar": d.bazaar},
	}
	if req.transport == TransportMCP {
		v2.Extensions["bazaar"] = d.tool
	}
	if g.cfg.IDs != nil {
		v2.Extensions[ExtensionPaymentIdentifier] = identifierExtension
	}
	if g.cfg.SignIn != nil && req.transport == TransportREST {
		v2.Extensions[ExtensionSIWx] = g.siwxExtension(req.Resource, signIn())
	}
	for _, s := range g.cfg.Schemes {
		v2.Accepts = append(v2.Accepts, s.Accepts(req))
		if s, ok := s.(V1Scheme); ok {
			e := s.AcceptsV1(req)
			e.OutputSchema = d.v1
			v1.Accepts = append(v1.Accepts, e)
		}
	}
	return v1, v2
}

// Counter is one operation's payment counters.
type Counter struct {
	Challenges uint64 // 402s sent for a missing payment: flushed to the ledger, plus those not flushed yet
	Paid       uint64 // settled payments, from the ledger
	Amount     string // settled atomic units, from the ledger
}

// Counters returns the counters of every paid operation.
func (g *Gate) Counters(ctx context.Context) (map[string]Counter, error) {
	totals, err := g.tally.Totals(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]Counter{}
	for _, rt := range g.routes {
		t := totals[rt.Name]
		if t.Amount == "" {
			t.Amount = "0"
		}
		out[rt.Name] = Counter{Challenges: t.Challenges + rt.challenges.Load(), Paid: t.Paid, Amount: t.Amount}
	}
	return out, nil
}

// RunCounters flushes the challenge counts to the ledger every interval
// (one write for all operations, never one per 402) and once more when
// ctx ends, logging how many challenges were sent since the last flush:
// 402s are logged at DEBUG one by one, so this count is what INFO shows.
func (g *Gate) RunCounters(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			g.FlushCounters(fctx)
			cancel()
			return
		case <-t.C:
			g.FlushCounters(ctx)
		}
	}
}

// FlushCounters writes the challenges counted since the last flush.
func (g *Gate) FlushCounters(ctx context.Context) {
	counts := map[string]uint64{}
	var total uint64
	for _, rt := range g.routes {
		if n := rt.challenges.Swap(0); n > 0 {
			counts[rt.Name], total = n, total+n
		}
	}
	if total == 0 {
		return
	}
	if err := g.tally.AddChallenges(ctx, counts); err != nil {
		for _, rt := range g.routes { // counted again at the next flush
			rt.challenges.Add(counts[rt.Name])
		}
		g.logger.WarnContext(ctx, "challenge counts not flushed", "err", err)
		return
	}
	g.logger.InfoContext(ctx, "payment challenges sent", "count", total, "by_operation", counts)
}

// Decimals returns the asset's decimals, to turn Counter amounts into USD.
func (g *Gate) Decimals() int { return g.cfg.Decimals }
