// Package payment enforces x402 (HTTP 402 pay-per-call) in front of the
// REST gateway: the Gate answers unpaid calls to paid routes with the
// payment requirements (v1 body and v2 PAYMENT-REQUIRED header), and runs a
// paid call only after its payment verified, settling it only if the
// handler succeeded and releasing the body only after the settlement is
// confirmed on chain and in the ledger. Facilitator is the verifier/settler
// it declares: *Local does the exact-EVM scheme itself on a chain (EIP-3009
// on go-ethereum, with a nonce manager for its gas key), *Client asks a
// remote facilitator. Ledger is the durable record it declares. *Auditor
// reads what the chain says of an authorization (paid us, canceled,
// unused), the only evidence of payment the gate accepts; *Reconciler
// resolves from it the payments whose settlement's outcome was lost.
//
// payment knows nothing of protobuf, gRPC or the analytics: routes, prices
// and parameter checks are handed to it.
package payment

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
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
	// MaxTimeout is the validity window asked of authorizations, seconds.
	MaxTimeout int
	// SettleTimeout bounds verify-to-settle work done after the handler.
	SettleTimeout time.Duration
	// Now is the clock authorizations are checked against; nil means
	// time.Now.
	Now func() time.Time
	// Observer is told of each step of the payment funnel; nil: nobody.
	Observer Observer
	// Schemes are offered beside exact, in this order, to v2 clients.
	Schemes []Scheme
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
	if c.MaxTimeout <= 0 || c.SettleTimeout <= 0 {
		errs = append(errs, errors.New("gate: max timeout and settle timeout must be positive"))
	}
	seen := map[string]bool{"exact": true}
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
	cfg         GateConfig
	routes      []*route
	facilitator Facilitator
	ledger      Ledger
	audit       *Auditor // nil: no chain to confirm settlements against
	logger      *slog.Logger
	now         func() time.Time
	base        string
	obs         Observer
}

type route struct {
	Route
	amount     *big.Int
	discovery  *discovery
	challenges atomic.Uint64
	// The unpaid challenge, pre-encoded around the one part that varies
	// per request (the resource URL): the hot path splices, never marshals.
	v1Body, v2JSON [2][]byte
}

// resourceMark stands for the resource URL in the pre-encoded challenge.
const resourceMark = "\"tollgate-resource-url\""

var errNoPayment = &VerifyError{Reason: "payment_required", Message: "payment required: send " + HeaderPaymentV2 + " (x402 v2) or " + HeaderPaymentV1 + " (x402 v1)"}

// NewGate returns the interceptor for routes; it does no I/O. audit reads
// the chain the payments are made on; with nil, facilitator settlements
// are taken at their word and a lost settlement cannot be found again
// (the caller should say so at startup).
func NewGate(cfg GateConfig, routes []Route, f Facilitator, l Ledger, audit *Auditor, logger *slog.Logger) (*Gate, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Gate{cfg: cfg, facilitator: f, ledger: l, audit: audit, logger: logger, base: strings.TrimSuffix(cfg.PublicURL, "/"), now: cfg.Now}
	if g.obs = cfg.Observer; g.obs == nil {
		g.obs = nopObserver{}
	}
	if g.now == nil {
		g.now = time.Now
	}
	for _, r := range routes {
		amount, err := AtomicAmount(r.PriceUSD, cfg.Decimals)
		if err != nil {
			return nil, fmt.Errorf("gate: route %s: %w", r.Name, err)
		}
		disc, err := newDiscovery(r.Pattern, r.Discovery)
		if err != nil {
			return nil, fmt.Errorf("gate: route %s: discovery: %w", r.Name, err)
		}
		rt := &route{Route: r, amount: amount, discovery: disc}
		req := g.requirementFor(rt, "tollgate-resource-url")
		v1, v2 := g.challengeObjects(req, errNoPayment)
		for i, v := range []any{v1, v2} {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			before, after, ok := bytes.Cut(b, []byte(resourceMark))
			if !ok || bytes.Contains(after, []byte(resourceMark)) {
				return nil, errors.New("gate: the challenge must name its resource exactly once")
			}
			parts := [2][]byte{before, after}
			if i == 0 {
				rt.v1Body = parts
			} else {
				rt.v2JSON = parts
			}
		}
		g.routes = append(g.routes, rt)
	}
	return g, nil
}

// Handler returns next guarded by x402: free routes pass through; paid
// routes are verified before next runs and settled only if it succeeds.
func (g *Gate) Handler(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range g.routes {
		mux.Handle(rt.Pattern, g.paid(rt, next))
	}
	mux.Handle("/", next)
	return cors(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == "" || p[0] != '/' || path.Clean(p) != strings.TrimSuffix(p, "/") && p != "/" {
			next.ServeHTTP(w, r) // unclean paths are the handler's to refuse, not ServeMux's to redirect
			return
		}
		mux.ServeHTTP(w, r)
	}))
}

// cors lets browser clients pay: the payment headers are exposed and may
// be sent.
func cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Expose-Headers", HeaderPaymentRequired+", "+HeaderPaymentResponseV2+", "+HeaderPaymentResponseV1)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
			h.Set("Access-Control-Allow-Headers", HeaderPaymentV1+", "+HeaderPaymentV2+", Content-Type")
			h.Set("Access-Control-Max-Age", "86400")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (g *Gate) paid(rt *route, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rt.Valid(r) {
			next.ServeHTTP(w, r) // the handler answers 400; nothing is charged
			return
		}
		header, version := r.Header.Get(HeaderPaymentV2), 2
		if header == "" {
			header, version = r.Header.Get(HeaderPaymentV1), 1
		}
		if header == "" || r.Method == http.MethodHead {
			// HEAD is never charged: it would buy headers and no body.
			rt.challenges.Add(1)
			g.obs.Challenged(rt.Name)
			g.unpaid(w, rt, g.base+r.URL.RequestURI())
			return
		}
		g.obs.Presented(rt.Name)
		req := g.requirement(rt, r)
		raw, err := decodeBase64(header)
		var env *wirePayload
		if err == nil {
			env, err = decodeEnvelope(raw, version)
		}
		var p *Payment
		if err == nil {
			if s := g.scheme(env); s != nil {
				g.other(w, r, req, s, env, raw, next)
				return
			}
			p, err = exactPayment(env, raw)
		}
		if err != nil {
			// A header that is not a payment at all is a client bug: 400.
			var ve *VerifyError
			errors.As(err, &ve)
			g.refuseJSON(w, req, http.StatusBadRequest, ve.Reason, ve.Message)
			return
		}
		mismatch := g.match(p, req, r)
		if mismatch != nil && mismatch.Reason != ReasonValidBefore {
			g.challenge(w, req, mismatch)
			return
		}
		// Refuse a signature that is not the payer's before anything is
		// written or asked: junk costs a recovery, not a ledger row.
		if len(p.Signature) == 65 {
			if signer, err := req.Domain().Recover(p.Authorization, p.Signature); err != nil || signer != p.Authorization.From {
				g.challenge(w, req, &VerifyError{Reason: ReasonInvalidSignature, Message: "the signature is not from the authorization's from address", Payer: p.Authorization.From.Hex()})
				return
			}
		}
		if mismatch != nil {
			// Expired by our clock: a payment we claimed is still ours to
			// answer (the ledger decides, not the clock); any other is refused.
			g.expired(w, r, rt, req, p, mismatch, next)
			return
		}
		g.serve(w, r, rt, req, p, next)
	})
}

// scheme returns the scheme other than exact a v2 payment chose, if any.
func (g *Gate) scheme(env *wirePayload) Scheme {
	if *env.X402Version != 2 {
		return nil
	}
	for _, s := range g.cfg.Schemes {
		if s.Name() == env.Accepted.Scheme {
			return s
		}
	}
	return nil
}

// other hands a v2 payment to the scheme it chose, once what it accepted
// matches the route's entry for that scheme (the extra is the scheme's to
// check) and it pays for the requested resource.
func (g *Gate) other(w http.ResponseWriter, r *http.Request, req *Requirement, s Scheme, env *wirePayload, raw []byte, next http.Handler) {
	x := &Exchange{Request: r, Requirement: req, w: w, g: g, next: next,
		Envelope: &Envelope{Accepted: *env.Accepted, Resource: env.Resource, Payload: env.Payload, Raw: raw}}
	got := *env.Accepted // a scheme's entry names the route's network, price, asset and payTo
	switch {
	case got.Network != req.Network || got.Amount != req.Amount.String() || !strings.EqualFold(got.Asset, req.Asset.Hex()) || !strings.EqualFold(got.PayTo, req.PayTo.Hex()):
		x.Challenge(ReasonNoMatch, "accepted does not match this resource's requirement (scheme, network, amount, asset, payTo)", "", nil, nil)
	case env.Resource != nil && !g.sameResourceURL(env.Resource.URL, r.URL):
		x.Challenge(ReasonResourceMismatch, fmt.Sprintf("the payment is for %q, not %s", env.Resource.URL, g.base+r.URL.RequestURI()), "", nil, nil)
	default:
		s.Serve(x)
	}
}

// validitySlack is how much longer than maxTimeoutSeconds an
// authorization may be valid: the payer's clock may run ahead of ours.
const validitySlack = 30

// match checks a payment against our requirement before anyone is asked
// or anything is written: what was accepted, the v2 resource, and the
// authorization's recipient, value and time window (the facilitator
// checks them again). Expiry is checked last, so a ReasonValidBefore
// means everything else matched.
func (g *Gate) match(p *Payment, req *Requirement, r *http.Request) *VerifyError {
	if p.Version == 1 {
		if p.Scheme != "exact" || p.Network != req.NetworkV1 {
			return &VerifyError{Reason: ReasonNoMatch, Message: fmt.Sprintf("no requirement for scheme %q on %q; want exact on %s", p.Scheme, p.Network, req.NetworkV1)}
		}
	} else {
		want, got := req.V2(), *p.Accepted
		if got.Scheme != want.Scheme || got.Network != want.Network || got.Amount != want.Amount ||
			!strings.EqualFold(got.Asset, want.Asset) || !strings.EqualFold(got.PayTo, want.PayTo) {
			return &VerifyError{Reason: ReasonNoMatch, Message: "accepted does not match this resource's requirement (scheme, network, amount, asset, payTo)"}
		}
		if p.Resource != nil && !g.sameResourceURL(p.Resource.URL, r.URL) {
			return &VerifyError{Reason: ReasonResourceMismatch, Message: fmt.Sprintf("the payment is for %q, not %s", p.Resource.URL, g.base+r.URL.RequestURI()), Payer: p.Authorization.From.Hex()}
		}
	}
	a, now := p.Authorization, g.now().Unix()
	payer := a.From.Hex()
	switch {
	case a.To != req.PayTo:
		return &VerifyError{Reason: ReasonRecipientMismatch, Message: "the authorization pays " + a.To.Hex(), Payer: payer}
	case a.Value.Cmp(req.Amount) != 0:
		return &VerifyError{Reason: ReasonValueMismatch, Message: "the authorization's value is " + a.Value.String(), Payer: payer}
	case a.ValidAfter.Cmp(big.NewInt(now+clockSkew)) > 0:
		return &VerifyError{Reason: ReasonValidAfter, Message: "the authorization is not valid yet", Payer: payer}
	case a.ValidBefore.Cmp(big.NewInt(now+int64(req.MaxTimeout)+validitySlack)) > 0:
		return &VerifyError{Reason: ReasonValidityTooLong, Message: fmt.Sprintf("the authorization is valid until %s; at most maxTimeoutSeconds (%d) + %d s from now is accepted", a.ValidBefore, req.MaxTimeout, validitySlack), Payer: payer}
	case a.ValidBefore.Cmp(big.NewInt(now+6)) < 0:
		return &VerifyError{Reason: ReasonValidBefore, Message: "the authorization is expired or about to", Payer: payer}
	}
	return nil
}

// sameResourceURL reports whether a v2 payment's resource URL names the
// requested resource: our public origin, the same path and the same query
// parameters (see sameResource).
func (g *Gate) sameResourceURL(paid string, requested *url.URL) bool {
	u, err := url.Parse(paid)
	base, _ := url.Parse(g.base)
	if err != nil || base == nil || !strings.EqualFold(u.Scheme, base.Scheme) || !strings.EqualFold(u.Host, base.Host) {
		return false
	}
	return sameResource(u.RequestURI(), requested.RequestURI())
}

// sameResource compares two request URIs (path and query) as resources:
// the paths must be equal, and the query strings must carry the same
// parameters with the same values, in any order ("?a=1&b=2" is
// "?b=2&a=1"; "?a=1" is not "?a=1&a=1", nor "?a=01").
func sameResource(a, b string) bool {
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

// replayWindow bounds how long after a payment a retry of it is answered
// again from the stored response.
const replayWindow = 10 * time.Minute

// record is the ledger row of a payment for r.
func (g *Gate) record(rt *route, r *http.Request, req *Requirement, p *Payment) Record {
	a := p.Authorization
	return Record{
		Network: req.Network, Asset: req.Asset.Hex(), Payer: a.From.Hex(), Nonce: hexutil.Encode(a.Nonce[:]),
		Operation: rt.Name, Resource: r.URL.RequestURI(), Amount: req.Amount.String(), PayTo: req.PayTo.Hex(), Version: p.Version,
		ValidBefore: clampInt64(a.ValidBefore), ClaimID: newClaimID(), SigHash: sigHash(p),
	}
}

// transfer is what the chain must show for p to have paid req.
func transfer(req *Requirement, p *Payment) Transfer {
	a := p.Authorization
	return Transfer{Asset: req.Asset, From: a.From, To: req.PayTo, Value: req.Amount, Nonce: a.Nonce}
}

// serve runs a matched payment: claim, verify, handler, settle, confirm on
// chain, record, respond.
func (g *Gate) serve(w http.ResponseWriter, r *http.Request, rt *route, req *Requirement, p *Payment, next http.Handler) {
	a := p.Authorization
	rec := g.record(rt, r, req, p)
	// Everything after the handler must survive a client that goes away.
	base := context.WithoutCancel(r.Context())
	ctx, cancel := context.WithTimeout(base, g.cfg.SettleTimeout)
	defer cancel()

	claimed, err := g.ledger.Claim(ctx, rec, time.Now().Add(-g.staleAfter()))
	if errors.Is(err, ErrClaimed) {
		g.claimed(w, r, req, p, claimed, next)
		return
	}
	if err != nil {
		g.logger.ErrorContext(ctx, "ledger claim failed", "err", err)
		g.refuseJSON(w, req, http.StatusServiceUnavailable, "unavailable", "the payment ledger is unavailable; nothing was charged")
		return
	}
	rec = claimed
	// A key taken over from an unresolved settlement keeps that status on
	// any failure of ours: an earlier transaction may still land.
	unresolved := rec.PrevState == StatePending || rec.PrevState == StateVerified
	fallback, fallbackTx := StateReleased, ""
	if unresolved {
		fallback, fallbackTx = StatePending, rec.PrevTx
	}
	v, err := g.facilitator.Verify(ctx, p, req)
	if err != nil {
		g.finish(ctx, rec, fallback, fallbackTx, ReasonUnexpectedVerify)
		g.logger.ErrorContext(ctx, "facilitator verify failed", "op", rt.Name, "err", err)
		g.refuseJSON(w, req, http.StatusBadGateway, "bad_gateway", "the payment facilitator failed; nothing was charged, retry later")
		return
	}
	// paidTx is set when the chain already shows this authorization paying
	// us: an earlier settlement of ours landed, so nothing is settled again.
	var paidTx common.Hash
	if !v.Valid {
		if !unresolved || g.audit == nil {
			g.finish(ctx, rec, StateFailed, "", v.Reason)
			g.challenge(w, req, &VerifyError{Reason: v.Reason, Message: v.Message, Payer: a.From.Hex()})
			return
		}
		// An earlier attempt may have paid (the nonce is then "used"), or
		// the payer may have canceled it: only the chain can say.
		f, err := g.find(ctx, req, p, rec)
		switch {
		case err != nil:
			g.finish(ctx, rec, StatePending, rec.PrevTx, ReasonUnexpectedSettle)
			g.logger.ErrorContext(ctx, "chain lookup failed", "op", rt.Name, "payer", rec.Payer, "nonce", rec.Nonce, "err", err)
			g.failJSON(w, req, http.StatusBadGateway, "settlement_unknown", "the settlement could not be checked on chain; do not sign a new payment: retry this same request later")
			return
		case f.Verdict == VerdictPaid:
			paidTx = f.Tx
		case f.Verdict == VerdictUnused && rec.PrevTx != "":
			g.finish(ctx, rec, StatePending, rec.PrevTx, v.Reason) // the transaction sent earlier may still land
			g.challenge(w, req, &VerifyError{Reason: v.Reason, Message: v.Message, Payer: a.From.Hex()})
			return
		default:
			g.refuseFound(ctx, w, req, rec, f, v.Reason, v.Message)
			return
		}
	}

	g.obs.Verified(rt.Name)
	buf := newBuffer()
	next.ServeHTTP(buf, r)
	if buf.status >= http.StatusBadRequest { // never charge for a failure
		if paidTx != (common.Hash{}) {
			g.resolve(ctx, withOutcome(rec, StateSettled, paidTx.Hex(), "")) // paid earlier; the response is still owed
		} else {
			g.finish(ctx, rec, fallback, fallbackTx, fmt.Sprintf("handler status %d", buf.status))
		}
		buf.writeTo(w)
		return
	}

	var took time.Duration // settling; 0 when the chain showed it paid already
	if paidTx == (common.Hash{}) {
		start := time.Now()
		var ok bool
		if paidTx, ok = g.settle(w, base, rt, req, p, rec, unresolved); !ok {
			return
		}
		took = time.Since(start)
	}
	done := withOutcome(rec, StateSettled, paidTx.Hex(), "")
	done.Response, done.ContentType = buf.body.Bytes(), buf.header.Get("Content-Type")
	fctx, fcancel := context.WithTimeout(base, 5*time.Second)
	answer, err := g.recordAnswer(fctx, done)
	fcancel()
	if err != nil {
		// Settled on chain but not recorded: the body is not released
		// unrecorded. A retry of the same payment finds the transfer on
		// chain at once and is served.
		g.logger.ErrorContext(ctx, "settled payment not recorded", "tx", paidTx.Hex(), "payer", rec.Payer, "nonce", rec.Nonce, "err", err)
		g.failJSON(w, req, http.StatusServiceUnavailable, "settlement_unrecorded", "paid, but the ledger is unavailable; retry this same request to receive the response")
		return
	}
	g.logger.InfoContext(ctx, "payment settled", "op", rt.Name, "payer", rec.Payer, "amount", rec.Amount, "tx", paidTx.Hex())
	if answer != nil { // answered, and counted, by the request that recorded first
		g.deliver(w, req, p, answer.Tx, answer.ContentType, http.StatusOK, answer.Response, nil)
		return
	}
	g.obs.Settled(rt.Name, g.usd(rt.amount), took)
	g.deliver(w, req, p, paidTx.Hex(), buf.header.Get("Content-Type"), buf.status, buf.body.Bytes(), buf.header)
}

// recordAnswer stores a settlement with its response. When another request
// stored a response for the same payment first (a retry on another
// replica that found the transfer on chain), that one is the answer and
// is returned, so that one payment is never answered with two different
// bodies; otherwise answer is nil and done's response is the answer.
func (g *Gate) recordAnswer(ctx context.Context, done Record) (answer *Record, err error) {
	err = g.ledger.Resolve(ctx, done)
	if !errors.Is(err, ErrAnswered) {
		return nil, err
	}
	stored, err := g.ledger.Lookup(ctx, done)
	if err != nil {
		return nil, err
	}
	return &stored, nil
}

// settle asks the facilitator to settle and establishes the outcome on
// chain: the hash of the transaction that paid us, or false after
// answering the payer and recording why not.
func (g *Gate) settle(w http.ResponseWriter, base context.Context, rt *route, req *Requirement, p *Payment, rec Record, unresolved bool) (common.Hash, bool) {
	payer := p.Authorization.From.Hex()
	sctx, scancel := context.WithTimeout(base, g.cfg.SettleTimeout) // a fresh budget, whatever verify and the handler took
	defer scancel()
	s, err := g.facilitator.Settle(sctx, p, req)
	ctx, cancel := context.WithTimeout(base, g.cfg.SettleTimeout)
	defer cancel()
	switch {
	case err != nil:
		// The transfer may or may not have been sent: look for it once,
		// then record it as unresolved and tell the payer to retry this
		// same payment (a retry re-checks the chain), never to pay again.
		g.logger.ErrorContext(ctx, "facilitator settle failed", "op", rt.Name, "payer", rec.Payer, "nonce", rec.Nonce, "err", err)
		if f, ferr := g.find(ctx, req, p, rec); ferr == nil && f.Verdict == VerdictPaid {
			return f.Tx, true
		}
		g.finish(ctx, rec, StatePending, "", ReasonUnexpectedSettle)
		g.failJSON(w, req, http.StatusBadGateway, "settlement_unknown", "the settlement's outcome is unknown; do not sign a new payment: retry this same request later to receive the response or a final refusal")
		return common.Hash{}, false
	case s.Pending:
		g.finish(ctx, rec, StatePending, s.Tx.Hex(), s.Reason)
		g.logger.WarnContext(ctx, "settlement pending", "op", rt.Name, "payer", rec.Payer, "nonce", rec.Nonce, "tx", s.Tx.Hex())
		g.settleFailed(w, req, p, s)
		return common.Hash{}, false
	case !s.Success:
		g.logger.WarnContext(ctx, "settlement failed", "op", rt.Name, "payer", rec.Payer, "nonce", rec.Nonce, "reason", s.Reason, "message", s.Message, "tx", txOrEmpty(s.Tx))
		if s.Reason == ReasonNonceUsed || unresolved {
			// Someone used the nonce first (another replica or request
			// settling this same payment, or the payer canceling it).
			if f, ferr := g.find(ctx, req, p, rec); ferr == nil {
				if f.Verdict == VerdictPaid {
					return f.Tx, true
				}
				if f.Verdict != VerdictUnused {
					g.refuseFound(ctx, w, req, rec, f, s.Reason, s.Message)
					return common.Hash{}, false
				}
			}
		}
		g.finish(ctx, rec, StateFailed, txOrEmpty(s.Tx), s.Reason)
		g.settleFailed(w, req, p, s)
		return common.Hash{}, false
	}
	if g.audit == nil {
		return s.Tx, true
	}
	// Never trust the facilitator's word: the receipt must show the
	// token's transfer of this authorization to us (read from the chain,
	// unless the in-process facilitator just read it there).
	var f Finding
	if s.Receipt != nil && s.Receipt.TxHash == s.Tx {
		f = Finding{Verdict: judge(s.Receipt, transfer(req, p)), Tx: s.Tx}
	} else {
		f, err = g.audit.Confirm(ctx, s.Tx, transfer(req, p))
	}
	if err == nil && f.Verdict == VerdictPaid {
		return s.Tx, true
	}
	g.logger.ErrorContext(ctx, "facilitator reported a settlement the chain does not show", "op", rt.Name, "payer", payer, "nonce", rec.Nonce, "tx", s.Tx.Hex(), "verdict", f.Verdict, "err", err)
	if f, ferr := g.find(ctx, req, p, rec); ferr == nil && f.Verdict == VerdictPaid {
		return f.Tx, true // another transaction did pay: its hash is the real one
	}
	g.finish(ctx, rec, StatePending, "", ReasonSettlementUnconfirmed)
	g.failJSON(w, req, http.StatusBadGateway, ReasonSettlementUnconfirmed, "the facilitator reported a settlement the chain does not show; do not sign a new payment: retry this same request later")
	return common.Hash{}, false
}

// find asks the chain about p, when a chain is configured.
func (g *Gate) find(ctx context.Context, req *Requirement, p *Payment, rec Record) (Finding, error) {
	if g.audit == nil {
		return Finding{}, errors.New("no chain to check")
	}
	return g.audit.Find(ctx, transfer(req, p), rec.CreatedAt)
}

// refuseFound records and answers an authorization the chain shows will
// not pay: canceled, used by a transaction that did not pay us, or unused
// (refused for reason, or expired when reason is empty).
func (g *Gate) refuseFound(ctx context.Context, w http.ResponseWriter, req *Requirement, rec Record, f Finding, reason, message string) {
	recorded := reason
	switch {
	case f.Verdict == VerdictCanceled:
		reason, message = ReasonAuthorizationCanceled, "the payer canceled this authorization on chain (transaction "+f.Tx.Hex()+")"
		recorded = reason
	case f.Verdict == VerdictMisused:
		reason, message = ReasonNonceUsed, "the authorization's nonce was used by a transaction that did not pay this resource"
		recorded = reason
	case reason == "":
		reason, message = ReasonValidBefore, "the authorization expired without being used; nothing was paid"
		recorded = ReasonExpiredUnused
	}
	g.resolve(ctx, withOutcome(rec, StateFailed, txOrEmpty(f.Tx), recorded))
	g.challenge(w, req, &VerifyError{Reason: reason, Message: message, Payer: rec.Payer})
}

// staleAfter is how long a verified claim may go without an outcome before
// another request may take it over: the verify and settle budgets and a
// minute for the handler. A retry does not wait for it when the chain
// already tells the outcome (see claimed).
func (g *Gate) staleAfter() time.Duration { return 2*g.cfg.SettleTimeout + time.Minute }

// expired answers a payment whose authorization our clock says is
// expired: if the ledger has it, it is answered as a retry of a claimed
// payment; otherwise it is refused.
func (g *Gate) expired(w http.ResponseWriter, r *http.Request, rt *route, req *Requirement, p *Payment, why *VerifyError, next http.Handler) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), g.cfg.SettleTimeout)
	defer cancel()
	existing, err := g.ledger.Lookup(ctx, g.record(rt, r, req, p))
	switch {
	case errors.Is(err, ErrNotFound):
		g.challenge(w, req, why)
	case err != nil:
		g.logger.ErrorContext(ctx, "ledger lookup failed", "err", err)
		g.refuseJSON(w, req, http.StatusServiceUnavailable, "unavailable", "the payment ledger is unavailable; nothing was charged")
	case existing.State == StateFailed || existing.State == StateReleased:
		g.challenge(w, req, why) // never paid, and now too late to
	default:
		g.claimed(w, r, req, p, existing, next)
	}
}

// claimed answers a payment whose key is already in the ledger and cannot
// be taken over.
//
// Settled: a retry with the very same authorization for the same resource
// gets the stored response again without a second charge (within the
// replay window), or the response it is still owed if none was stored
// (settled from the chain after its answer was lost); anything else is
// refused. Unresolved (verified or pending): the chain decides at once —
// a transfer to us is served, a cancellation or an expiry is refused, an
// unused authorization still valid is in flight elsewhere.
func (g *Gate) claimed(w http.ResponseWriter, r *http.Request, req *Requirement, p *Payment, existing Record, next http.Handler) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), g.cfg.SettleTimeout)
	defer cancel()
	same := existing.SigHash == sigHash(p) && sameResource(existing.Resource, r.URL.RequestURI())
	switch {
	case existing.State == StateSettled && same && existing.Response != nil && time.Since(existing.UpdatedAt) < replayWindow:
		g.deliver(w, req, p, existing.Tx, existing.ContentType, http.StatusOK, existing.Response, nil)
	case existing.State == StateSettled && same && existing.Response == nil:
		g.serveOwed(ctx, w, r, req, p, existing, common.HexToHash(existing.Tx), next)
	case existing.State == StateSettled:
		g.challenge(w, req, &VerifyError{Reason: ReasonAuthorizationReplayed, Message: "this authorization already paid for " + existing.Resource, Payer: existing.Payer})
	case (existing.State == StateVerified || existing.State == StatePending) && g.audit != nil:
		f, err := g.find(ctx, req, p, existing)
		switch {
		case err != nil:
			g.logger.ErrorContext(ctx, "chain lookup failed", "payer", existing.Payer, "nonce", existing.Nonce, "err", err)
			g.failJSON(w, req, http.StatusBadGateway, "settlement_unknown", "the settlement could not be checked on chain; do not sign a new payment: retry this same request later")
		case f.Verdict == VerdictPaid && same:
			g.serveOwed(ctx, w, r, req, p, existing, f.Tx, next)
		case f.Verdict == VerdictPaid:
			g.resolve(ctx, withOutcome(existing, StateSettled, f.Tx.Hex(), ""))
			g.challenge(w, req, &VerifyError{Reason: ReasonAuthorizationReplayed, Message: "this authorization already paid for " + existing.Resource, Payer: existing.Payer})
		case f.Verdict != VerdictUnused || f.Expired(existing.ValidBefore):
			g.refuseFound(ctx, w, req, existing, f, "", "")
		default:
			g.challenge(w, req, &VerifyError{Reason: ReasonPaymentInFlight, Message: "this payment is being processed by another request; retry this same request in a few seconds", Payer: existing.Payer})
		}
	default:
		g.challenge(w, req, &VerifyError{Reason: ReasonPaymentInFlight, Message: "this payment is already being processed by another request", Payer: existing.Payer})
	}
}

// serveOwed answers a payment the chain shows settled (transaction tx)
// whose response was never delivered: it runs the handler, records the
// settlement with the response, and delivers it. A failing handler
// leaves the settlement recorded without a response, still owed.
func (g *Gate) serveOwed(ctx context.Context, w http.ResponseWriter, r *http.Request, req *Requirement, p *Payment, rec Record, tx common.Hash, next http.Handler) {
	buf := newBuffer()
	next.ServeHTTP(buf, r)
	done := withOutcome(rec, StateSettled, tx.Hex(), "")
	if buf.status >= http.StatusBadRequest {
		g.resolve(ctx, done)
		buf.writeTo(w)
		return
	}
	done.Response, done.ContentType = buf.body.Bytes(), buf.header.Get("Content-Type")
	answer, err := g.recordAnswer(ctx, done)
	if err != nil {
		g.logger.ErrorContext(ctx, "settled payment not recorded", "tx", tx.Hex(), "payer", rec.Payer, "nonce", rec.Nonce, "err", err)
		g.failJSON(w, req, http.StatusServiceUnavailable, "settlement_unrecorded", "paid, but the ledger is unavailable; retry this same request to receive the response")
		return
	}
	if answer != nil {
		g.deliver(w, req, p, answer.Tx, answer.ContentType, http.StatusOK, answer.Response, nil)
		return
	}
	g.logger.InfoContext(ctx, "settled payment served on retry", "payer", rec.Payer, "nonce", rec.Nonce, "tx", tx.Hex())
	g.obs.Settled(req.Operation, g.usd(req.Amount), 0)
	g.deliver(w, req, p, tx.Hex(), buf.header.Get("Content-Type"), buf.status, buf.body.Bytes(), buf.header)
}

// deliver writes a paid response with its settlement header.
func (g *Gate) deliver(w http.ResponseWriter, req *Requirement, p *Payment, tx, contentType string, status int, body []byte, header http.Header) {
	setSettlementHeader(w, p.Version, req, SettleResponse{Success: true, Transaction: tx, Payer: p.Authorization.From.Hex()})
	writePaid(w, header, contentType, status, body)
}

// writePaid writes a paid answer (its settlement header already set):
// the handler's headers, kept out of shared caches, then the body.
func writePaid(w http.ResponseWriter, header http.Header, contentType string, status int, body []byte) {
	for k, v := range header {
		w.Header()[k] = v
	}
	paidHeaders(w)
	if contentType != "" {
		w.Header().Set("Content-Type", contentType)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// finish records an outcome decided by the claim's holder. It has its
// own deadline: the request's may be what just ran out, and an outcome
// left unrecorded blocks the claim.
func (g *Gate) finish(ctx context.Context, rec Record, state, tx, reason string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := g.ledger.Finish(ctx, withOutcome(rec, state, tx, reason)); err != nil {
		g.logger.ErrorContext(ctx, "ledger finish failed", "state", state, "payer", rec.Payer, "nonce", rec.Nonce, "err", err)
	}
}

// resolve records an outcome the chain established.
func (g *Gate) resolve(ctx context.Context, rec Record) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := g.ledger.Resolve(ctx, rec); err != nil && !errors.Is(err, ErrLostClaim) {
		g.logger.ErrorContext(ctx, "ledger resolve failed", "state", rec.State, "payer", rec.Payer, "nonce", rec.Nonce, "err", err)
	}
}

func withOutcome(rec Record, state, tx, reason string) Record {
	rec.State, rec.Tx, rec.Reason = state, tx, reason
	return rec
}

func txOrEmpty(h common.Hash) string {
	if h == (common.Hash{}) {
		return ""
	}
	return h.Hex()
}

// paidHeaders keep a paid answer out of shared caches.
func paidHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Cache-Control", "private, no-store")
	h.Add("Vary", HeaderPaymentV2+", "+HeaderPaymentV1)
}

func newClaimID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sigHash identifies an authorization's exact signature and value.
func sigHash(p *Payment) string {
	return crypto.Keccak256Hash(p.Signature, p.Authorization.Value.Bytes()).Hex()
}

// requirement is what r must pay.
func (g *Gate) requirement(rt *route, r *http.Request) *Requirement {
	return g.requirementFor(rt, g.base+r.URL.RequestURI())
}

func (g *Gate) requirementFor(rt *route, resource string) *Requirement {
	return &Requirement{
		Network: g.cfg.Network, NetworkV1: g.cfg.NetworkV1, ChainID: g.cfg.ChainID,
		Asset: g.cfg.Asset, AssetName: g.cfg.AssetName, AssetVersion: g.cfg.AssetVersion,
		PayTo: g.cfg.PayTo, Amount: rt.amount, MaxTimeout: g.cfg.MaxTimeout,
		Resource: resource, Description: rt.Description, MimeType: "application/json", Operation: rt.Name,
		discovery: rt.discovery,
	}
}

// unpaid writes the challenge for a request that carries no payment, from
// the route's pre-encoded template.
func (g *Gate) unpaid(w http.ResponseWriter, rt *route, resource string) {
	quoted, _ := json.Marshal(resource)
	v2 := make([]byte, 0, len(rt.v2JSON[0])+len(quoted)+len(rt.v2JSON[1]))
	v2 = append(append(append(v2, rt.v2JSON[0]...), quoted...), rt.v2JSON[1]...)
	body := make([]byte, 0, len(rt.v1Body[0])+len(quoted)+len(rt.v1Body[1]))
	body = append(append(append(body, rt.v1Body[0]...), quoted...), rt.v1Body[1]...)
	h := w.Header()
	h.Set(HeaderPaymentRequired, base64.StdEncoding.EncodeToString(v2))
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusPaymentRequired)
	_, _ = w.Write(body)
}

// challenge refuses a presented payment with a 402: the v1 body and the
// v2 PAYMENT-REQUIRED header, both carrying the requirement and why
// payment is (still) required.
func (g *Gate) challenge(w http.ResponseWriter, req *Requirement, why *VerifyError) {
	g.obs.Refused(req.Operation, why.Reason)
	g.writeChallenge(w, req, why)
}

// refuseJSON refuses a presented payment with a JSON error; nothing was
// charged.
func (g *Gate) refuseJSON(w http.ResponseWriter, req *Requirement, status int, code, message string) {
	g.obs.Refused(req.Operation, code)
	writeJSONError(w, status, code, message)
}

// failJSON answers a verified payment whose settlement failed or is not
// established, with a JSON error.
func (g *Gate) failJSON(w http.ResponseWriter, req *Requirement, status int, code, message string) {
	g.obs.SettleFailed(req.Operation, code)
	writeJSONError(w, status, code, message)
}

// usd converts atomic units of the asset to dollars, for the metrics.
func (g *Gate) usd(amount *big.Int) float64 {
	return USD(amount, g.cfg.Decimals)
}

func (g *Gate) writeChallenge(w http.ResponseWriter, req *Requirement, why *VerifyError) {
	v1, v2 := g.challengeObjects(req, why)
	g.writeObjects(w, v1, v2)
}

// writeObjects writes a 402: v1 as the body, v2 as PAYMENT-REQUIRED.
func (g *Gate) writeObjects(w http.ResponseWriter, v1 RequiredV1, v2 RequiredV2) {
	h := w.Header()
	if hv, err := EncodeHeader(v2); err == nil {
		h.Set(HeaderPaymentRequired, hv)
	}
	body, _ := json.Marshal(v1)
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusPaymentRequired)
	_, _ = w.Write(body)
}

// challengeObjects builds the v1 body and the v2 header object of a 402.
// Their discovery fields were rendered once, with the route.
func (g *Gate) challengeObjects(req *Requirement, why *VerifyError) (RequiredV1, RequiredV2) {
	d := req.discovery
	if d == nil { // a requirement made outside NewGate's routes
		d, _ = newDiscovery("GET /", nil)
	}
	v1 := RequiredV1{
		X402Version: 1,
		Error:       why.Reason,
		Payer:       why.Payer,
		Accepts: []RequirementsV1{{
			Scheme: "exact", Network: req.NetworkV1, MaxAmountRequired: req.Amount.String(), Resource: req.Resource,
			Description: req.Description, MimeType: req.MimeType, PayTo: req.PayTo.Hex(),
			MaxTimeoutSeconds: req.MaxTimeout, Asset: req.Asset.Hex(),
			Extra:        Extra{Name: req.AssetName, Version: req.AssetVersion},
			OutputSchema: d.v1,
		}},
	}
	v2 := RequiredV2{
		X402Version: 2,
		Error:       why.Reason,
		Resource:    ResourceV2{URL: req.Resource, Description: req.Description, MimeType: req.MimeType},
		Accepts:     []RequirementsV2{req.V2()},
		Extensions:  map[string]any{"bazaar": d.bazaar},
	}
	for _, s := range g.cfg.Schemes {
		v2.Accepts = append(v2.Accepts, s.Accepts(req))
	}
	return v1, v2
}

// settleFailed answers a refused or pending settlement: 402, the reason,
// the settlement header (with the tx hash when one was sent), no body.
func (g *Gate) settleFailed(w http.ResponseWriter, req *Requirement, p *Payment, s Settlement) {
	resp := SettleResponse{Success: false, ErrorReason: s.Reason, Payer: p.Authorization.From.Hex()}
	if s.Tx != (common.Hash{}) {
		resp.Transaction = s.Tx.Hex()
	}
	setSettlementHeader(w, p.Version, req, resp)
	g.obs.SettleFailed(req.Operation, s.Reason)
	g.writeChallenge(w, req, &VerifyError{Reason: s.Reason, Message: s.Message, Payer: p.Authorization.From.Hex()})
}

// setSettlementHeader sets the settlement header of protocol version
// for req.
func setSettlementHeader(w http.ResponseWriter, version int, req *Requirement, s SettleResponse) {
	name := HeaderPaymentResponseV2
	s.Network = req.Network
	if version == 1 {
		name, s.Network = HeaderPaymentResponseV1, req.NetworkV1
	}
	if v, err := EncodeHeader(s); err == nil {
		w.Header().Set(name, v)
	}
}

func writeJSONError(w http.ResponseWriter, status int, code, message string) {
	body, _ := json.Marshal(map[string]any{"error": code, "message": message, "status": status, "accepted": []string{}})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func clampInt64(v *big.Int) int64 {
	if v.IsInt64() {
		return v.Int64()
	}
	return 1<<63 - 1
}

// buffer holds a handler's response until the payment settles.
type buffer struct {
	header http.Header
	status int
	body   bytes.Buffer
	wrote  bool
}

func newBuffer() *buffer { return &buffer{header: http.Header{}, status: http.StatusOK} }

func (b *buffer) Header() http.Header { return b.header }

func (b *buffer) WriteHeader(status int) {
	if !b.wrote {
		b.status, b.wrote = status, true
	}
}

func (b *buffer) Write(p []byte) (int, error) {
	b.wrote = true
	return b.body.Write(p)
}

func (b *buffer) writeTo(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	w.WriteHeader(b.status)
	_, _ = w.Write(b.body.Bytes())
}

// Counter is one operation's payment counters.
type Counter struct {
	Challenges uint64 // 402s sent for a missing payment: flushed to the ledger, plus those not flushed yet
	Paid       uint64 // settled payments, from the ledger
	Amount     string // settled atomic units, from the ledger
}

// Counters returns the counters of every paid operation.
func (g *Gate) Counters(ctx context.Context) (map[string]Counter, error) {
	totals, err := g.ledger.Totals(ctx)
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
	if err := g.ledger.AddChallenges(ctx, counts); err != nil {
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
