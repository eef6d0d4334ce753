// Package payment enforces x402 (HTTP 402 pay-per-call) in front of the
// REST gateway: the Gate answers unpaid calls to paid routes with the
// payment requirements (v1 body and v2 PAYMENT-REQUIRED header), and runs a
// paid call only after its payment verified, settling it only if the
// handler succeeded and releasing the body only after the settlement is in
// the ledger. Facilitator is the verifier/settler it declares: *Local does
// the exact-EVM scheme itself on a chain (EIP-3009 on go-ethereum), *Client
// asks a remote facilitator. Ledger is the durable record it declares.
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
	return errors.Join(errs...)
}

// Gate is the x402 interceptor.
type Gate struct {
	cfg         GateConfig
	routes      []*route
	facilitator Facilitator
	ledger      Ledger
	logger      *slog.Logger
	base        string
}

type route struct {
	Route
	amount     *big.Int
	challenges atomic.Uint64
	// The unpaid challenge, pre-encoded around the one part that varies
	// per request (the resource URL): the hot path splices, never marshals.
	v1Body, v2JSON [2][]byte
}

// resourceMark stands for the resource URL in the pre-encoded challenge.
const resourceMark = "\"tollgate-resource-url\""

var errNoPayment = &VerifyError{Reason: "payment_required", Message: "payment required: send " + HeaderPaymentV2 + " (x402 v2) or " + HeaderPaymentV1 + " (x402 v1)"}

// NewGate returns the interceptor for routes; it does no I/O.
func NewGate(cfg GateConfig, routes []Route, f Facilitator, l Ledger, logger *slog.Logger) (*Gate, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Gate{cfg: cfg, facilitator: f, ledger: l, logger: logger, base: strings.TrimSuffix(cfg.PublicURL, "/")}
	for _, r := range routes {
		amount, err := AtomicAmount(r.PriceUSD, cfg.Decimals)
		if err != nil {
			return nil, fmt.Errorf("gate: route %s: %w", r.Name, err)
		}
		rt := &route{Route: r, amount: amount}
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
			g.unpaid(w, rt, g.base+r.URL.RequestURI())
			return
		}
		req := g.requirement(rt, r)
		p, err := DecodeHeader(header, version)
		if err != nil {
			// A header that is not a payment at all is a client bug: 400.
			var ve *VerifyError
			errors.As(err, &ve)
			writeJSONError(w, http.StatusBadRequest, ve.Reason, ve.Message)
			return
		}
		if err := match(p, req); err != nil {
			g.challenge(w, req, err.(*VerifyError))
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
		g.serve(w, r, rt, req, p, next)
	})
}

// match checks a payment against our requirement before anyone is asked
// or anything is written: what was accepted, and the authorization's
// recipient, value and time window (the facilitator checks them again).
func match(p *Payment, req *Requirement) error {
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
	}
	a, now := p.Authorization, time.Now().Unix()
	payer := a.From.Hex()
	switch {
	case a.To != req.PayTo:
		return &VerifyError{Reason: ReasonRecipientMismatch, Message: "the authorization pays " + a.To.Hex(), Payer: payer}
	case a.Value.Cmp(req.Amount) != 0:
		return &VerifyError{Reason: ReasonValueMismatch, Message: "the authorization's value is " + a.Value.String(), Payer: payer}
	case a.ValidAfter.Cmp(big.NewInt(now+clockSkew)) > 0:
		return &VerifyError{Reason: ReasonValidAfter, Message: "the authorization is not valid yet", Payer: payer}
	case a.ValidBefore.Cmp(big.NewInt(now+6)) < 0:
		return &VerifyError{Reason: ReasonValidBefore, Message: "the authorization is expired or about to", Payer: payer}
	}
	return nil
}

// replayWindow bounds how long after a payment a retry of it is answered
// again (never past the authorization's validBefore).
const replayWindow = 10 * time.Minute

// serve runs a matched payment: claim, verify, handler, settle, record,
// respond.
func (g *Gate) serve(w http.ResponseWriter, r *http.Request, rt *route, req *Requirement, p *Payment, next http.Handler) {
	a := p.Authorization
	rec := Record{
		Network: req.Network, Asset: req.Asset.Hex(), Payer: a.From.Hex(), Nonce: hexutil.Encode(a.Nonce[:]),
		Operation: rt.Name, Resource: r.URL.RequestURI(), Amount: req.Amount.String(), Version: p.Version,
		ValidBefore: clampInt64(a.ValidBefore), ClaimID: newClaimID(), SigHash: sigHash(p),
	}
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
		writeJSONError(w, http.StatusServiceUnavailable, "unavailable", "the payment ledger is unavailable; nothing was charged")
		return
	}
	rec = claimed
	v, err := g.facilitator.Verify(ctx, p, req)
	if err != nil {
		g.finish(ctx, rec, StateReleased, "", ReasonUnexpectedVerify)
		g.logger.ErrorContext(ctx, "facilitator verify failed", "op", rt.Name, "err", err)
		writeJSONError(w, http.StatusBadGateway, "bad_gateway", "the payment facilitator failed; nothing was charged, retry later")
		return
	}
	// A key taken over from an unresolved settlement: if the chain says the
	// authorization is used, that settlement landed (it can only have paid
	// us: to and value are ours), so the payment stands.
	paidBefore := !v.Valid && v.Reason == ReasonNonceUsed && (rec.PrevState == StatePending || rec.PrevState == StateVerified)
	if !v.Valid && !paidBefore {
		g.finish(ctx, rec, StateFailed, "", v.Reason)
		g.challenge(w, req, &VerifyError{Reason: v.Reason, Message: v.Message, Payer: a.From.Hex()})
		return
	}

	buf := newBuffer()
	next.ServeHTTP(buf, r)
	if buf.status >= http.StatusBadRequest { // never charge for a failure
		state := StateReleased
		if paidBefore {
			state = StatePending // still paid; a retry is served
		}
		g.finish(ctx, rec, state, rec.PrevTx, fmt.Sprintf("handler status %d", buf.status))
		buf.writeTo(w)
		return
	}

	var s Settlement
	if paidBefore {
		s = Settlement{Success: true, Tx: common.HexToHash(rec.PrevTx), Payer: a.From}
	} else {
		sctx, scancel := context.WithTimeout(base, g.cfg.SettleTimeout) // a fresh budget, whatever verify and the handler took
		s, err = g.facilitator.Settle(sctx, p, req)
		scancel()
	}
	switch {
	case err != nil:
		// The transfer may or may not have been sent: record it as
		// unresolved, and tell the payer to retry this same payment (a
		// retry re-checks the chain), never to pay again.
		g.finish(ctx, rec, StatePending, "", ReasonUnexpectedSettle)
		g.logger.ErrorContext(ctx, "facilitator settle failed", "op", rt.Name, "payer", rec.Payer, "nonce", rec.Nonce, "err", err)
		writeJSONError(w, http.StatusBadGateway, "settlement_unknown", "the settlement's outcome is unknown; do not sign a new payment: retry this same request later to receive the response or a final refusal")
	case s.Pending:
		g.finish(ctx, rec, StatePending, s.Tx.Hex(), s.Reason)
		g.settleFailed(w, req, p, s)
	case !s.Success:
		tx := ""
		if s.Tx != (common.Hash{}) {
			tx = s.Tx.Hex()
		}
		g.finish(ctx, rec, StateFailed, tx, s.Reason)
		g.settleFailed(w, req, p, s)
	default:
		done := withOutcome(rec, StateSettled, s.Tx.Hex(), "")
		done.Response, done.ContentType = buf.body.Bytes(), buf.header.Get("Content-Type")
		fctx, fcancel := context.WithTimeout(base, 5*time.Second)
		err := g.ledger.Finish(fctx, done)
		fcancel()
		if err != nil {
			// Settled on chain but not recorded: the body is not released
			// unrecorded. A retry of the same payment re-checks the chain.
			g.logger.ErrorContext(ctx, "settled payment not recorded", "tx", s.Tx.Hex(), "payer", rec.Payer, "nonce", rec.Nonce, "err", err)
			writeJSONError(w, http.StatusServiceUnavailable, "settlement_unrecorded", "paid, but the ledger is unavailable; retry this same request to receive the response")
			return
		}
		g.logger.InfoContext(ctx, "payment settled", "op", rt.Name, "payer", rec.Payer, "amount", rec.Amount, "tx", s.Tx.Hex())
		setSettlementHeader(w, p, req, SettleResponse{Success: true, Transaction: s.Tx.Hex(), Payer: a.From.Hex()})
		paidHeaders(w)
		buf.writeTo(w)
	}
}

// staleAfter is how long a verified claim may go without an outcome before
// another request may take it over: verify, handler and settle budgets.
func (g *Gate) staleAfter() time.Duration { return 3*g.cfg.SettleTimeout + time.Minute }

// claimed answers a payment whose key is already in the ledger and cannot
// be taken over: a retry of a settled payment, with the very same
// authorization, for the same resource, within the replay window, gets the
// stored response again without a second charge; anything else is refused.
func (g *Gate) claimed(w http.ResponseWriter, r *http.Request, req *Requirement, p *Payment, existing Record, _ http.Handler) {
	now := time.Now()
	switch {
	case existing.State == StateSettled && existing.Resource == r.URL.RequestURI() && existing.SigHash == sigHash(p) &&
		now.Unix() < existing.ValidBefore && now.Sub(existing.UpdatedAt) < replayWindow && existing.Response != nil:
		setSettlementHeader(w, p, req, SettleResponse{Success: true, Transaction: existing.Tx, Payer: existing.Payer})
		paidHeaders(w)
		if existing.ContentType != "" {
			w.Header().Set("Content-Type", existing.ContentType)
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(existing.Response)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(existing.Response)
	case existing.State == StateSettled:
		g.challenge(w, req, &VerifyError{Reason: ReasonAuthorizationReplayed, Message: "this authorization already paid for " + existing.Resource, Payer: existing.Payer})
	default:
		g.challenge(w, req, &VerifyError{Reason: ReasonPaymentInFlight, Message: "this payment is already being processed by another request", Payer: existing.Payer})
	}
}

// finish records an outcome. It has its own deadline: the request's may
// be what just ran out, and an outcome left unrecorded blocks the claim.
func (g *Gate) finish(ctx context.Context, rec Record, state, tx, reason string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := g.ledger.Finish(ctx, withOutcome(rec, state, tx, reason)); err != nil {
		g.logger.ErrorContext(ctx, "ledger finish failed", "state", state, "payer", rec.Payer, "nonce", rec.Nonce, "err", err)
	}
}

func withOutcome(rec Record, state, tx, reason string) Record {
	rec.State, rec.Tx, rec.Reason = state, tx, reason
	return rec
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
		Resource: resource, Description: rt.Description, MimeType: "application/json",
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

// challenge writes a 402: the v1 body and the v2 PAYMENT-REQUIRED header,
// both carrying the requirement and why payment is (still) required.
func (g *Gate) challenge(w http.ResponseWriter, req *Requirement, why *VerifyError) {
	v1, v2 := g.challengeObjects(req, why)
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
func (g *Gate) challengeObjects(req *Requirement, why *VerifyError) (RequiredV1, RequiredV2) {
	v1 := RequiredV1{
		X402Version: 1,
		Error:       why.Reason,
		Payer:       why.Payer,
		Accepts: []RequirementsV1{{
			Scheme: "exact", Network: req.NetworkV1, MaxAmountRequired: req.Amount.String(), Resource: req.Resource,
			Description: req.Description, MimeType: req.MimeType, PayTo: req.PayTo.Hex(),
			MaxTimeoutSeconds: req.MaxTimeout, Asset: req.Asset.Hex(),
			Extra: Extra{Name: req.AssetName, Version: req.AssetVersion},
			OutputSchema: map[string]any{
				"input":  map[string]any{"type": "http", "method": "GET", "discoverable": true},
				"output": map[string]any{"type": "json"},
			},
		}},
	}
	v2 := RequiredV2{
		X402Version: 2,
		Error:       why.Reason,
		Resource:    ResourceV2{URL: req.Resource, Description: req.Description, MimeType: req.MimeType},
		Accepts:     []RequirementsV2{req.V2()},
		Extensions:  map[string]any{"bazaar": bazaar(req)},
	}
	return v1, v2
}

// bazaar is the x402 v2 discovery extension: how to call the resource and
// what it returns, with the JSON Schema of that description.
func bazaar(req *Requirement) map[string]any {
	return map[string]any{
		"info": map[string]any{
			"input":  map[string]any{"type": "http", "method": "GET"},
			"output": map[string]any{"type": "json"},
		},
		"schema": map[string]any{
			"$schema": "https://json-schema.org/draft/2020-12/schema",
			"type":    "object",
			"properties": map[string]any{
				"input": map[string]any{"type": "object", "properties": map[string]any{
					"type": map[string]any{"const": "http"}, "method": map[string]any{"const": "GET"}}, "required": []string{"type", "method"}},
				"output": map[string]any{"type": "object"},
			},
			"required": []string{"input"},
		},
	}
}

// settleFailed answers a refused or pending settlement: 402, the reason,
// the settlement header (with the tx hash when one was sent), no body.
func (g *Gate) settleFailed(w http.ResponseWriter, req *Requirement, p *Payment, s Settlement) {
	resp := SettleResponse{Success: false, ErrorReason: s.Reason, Payer: p.Authorization.From.Hex()}
	if s.Tx != (common.Hash{}) {
		resp.Transaction = s.Tx.Hex()
	}
	setSettlementHeader(w, p, req, resp)
	g.challenge(w, req, &VerifyError{Reason: s.Reason, Message: s.Message, Payer: p.Authorization.From.Hex()})
}

func setSettlementHeader(w http.ResponseWriter, p *Payment, req *Requirement, s SettleResponse) {
	name := HeaderPaymentResponseV2
	s.Network = req.Network
	if p.Version == 1 {
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
	Challenges uint64 // 402s sent for a missing payment, since the process started
	Paid       uint64 // settled payments, from the ledger
	Amount     string // settled atomic units, from the ledger
}

// Counters returns the counters of every paid operation.
func (g *Gate) Counters(ctx context.Context) (map[string]Counter, error) {
	paid, err := g.ledger.PaidByOperation(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]Counter{}
	for _, rt := range g.routes {
		p := paid[rt.Name]
		if p.Amount == "" {
			p.Amount = "0"
		}
		out[rt.Name] = Counter{Challenges: rt.challenges.Load(), Paid: p.Count, Amount: p.Amount}
	}
	return out, nil
}

// Decimals returns the asset's decimals, to turn Counter amounts into USD.
func (g *Gate) Decimals() int { return g.cfg.Decimals }
