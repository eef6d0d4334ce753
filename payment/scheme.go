package payment

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/big"
	"net/http"
	"time"
)

// Scheme is an x402 scheme the gate offers beside exact (whose serving
// the gate holds itself): batch.Server is one. The gate writes the
// scheme's accepts entry in every v2 challenge and hands it the v2
// payments that chose it, once the envelope matched the route (network,
// asset, payTo, amount and resource); the scheme checks its own payload,
// runs the handler through the Exchange and answers. Schemes are offered
// to v2 clients only: the v1 body keeps exact alone, as v1 clients
// validate every entry as exact.
type Scheme interface {
	// Name is the x402 scheme name: the accepts entry's scheme.
	Name() string
	// Accepts is the scheme's accepts entry for req.
	Accepts(req *Requirement) RequirementsV2
	// Serve answers a paid request whose payment chose the scheme.
	Serve(x *Exchange)
}

// Envelope is a v2 PaymentPayload with its scheme's payload left as JSON.
type Envelope struct {
	Accepted RequirementsV2
	Resource *ResourceV2
	Payload  json.RawMessage
	// Raw is the whole PaymentPayload, passed on to a remote facilitator.
	Raw json.RawMessage
}

// Exchange is one paid request handed to a Scheme: what was asked, what
// was presented, and the gate's ways of answering. Exactly one of
// Challenge, Refuse, Deliver or Answer must be called, or Run's
// failure written with WriteFailure.
type Exchange struct {
	Request     *http.Request
	Requirement *Requirement
	Envelope    *Envelope

	w      http.ResponseWriter
	g      *Gate
	next   http.Handler
	accept []RequirementsV2 // the challenge's accepts entries
}

// Response is a handler's answer, held until the payment is settled.
type Response struct{ buf *buffer }

// Status is the response's HTTP status.
func (r *Response) Status() int { return r.buf.status }

// Failed reports whether the handler failed (status 400 or more): such
// a response is never charged for.
func (r *Response) Failed() bool { return r.buf.status >= http.StatusBadRequest }

// Verified tells the funnel the payment verified and the handler runs.
func (x *Exchange) Verified() { x.g.obs.Verified(x.Requirement.Operation) }

// Run runs the handler, holding its answer.
func (x *Exchange) Run() *Response {
	buf := newBuffer()
	x.next.ServeHTTP(buf, x.Request)
	return &Response{buf: buf}
}

// WriteFailure writes a failed handler's answer as it is, uncharged.
func (x *Exchange) WriteFailure(r *Response) { r.buf.writeTo(x.w) }

// Challenge refuses the payment with a 402: reason and message, the
// route's accepts entries with the scheme's replaced by entry when it is
// not nil (a corrective 402 carries the state the client recovers from),
// and settlement when a settlement failed (its PAYMENT-RESPONSE).
func (x *Exchange) Challenge(reason, message, payer string, entry *RequirementsV2, settlement *SettleResponse) {
	req := x.Requirement
	if settlement != nil {
		setSettlementHeader(x.w, 2, req, *settlement)
		x.g.obs.SettleFailed(req.Operation, reason)
	} else {
		x.g.obs.Refused(req.Operation, reason)
	}
	why := &VerifyError{Reason: reason, Message: message, Payer: payer}
	v1, v2 := x.g.challengeObjects(req, why)
	if entry != nil {
		for i := range v2.Accepts {
			if v2.Accepts[i].Scheme == entry.Scheme {
				v2.Accepts[i] = *entry
			}
		}
	}
	x.g.writeObjects(x.w, v1, v2)
}

// Refuse answers with a JSON error and status (an unavailable store or
// facilitator): nothing was charged.
func (x *Exchange) Refuse(status int, code, message string) {
	x.g.refuseJSON(x.w, x.Requirement, status, code, message)
}

// Deliver writes the handler's answer with its settlement header: the
// payment of amount (atomic units) settled, took after the handler.
func (x *Exchange) Deliver(r *Response, s SettleResponse, amount *big.Int, took time.Duration) {
	x.g.obs.Settled(x.Requirement.Operation, x.g.usd(amount), took)
	s.Success = true
	setSettlementHeader(x.w, 2, x.Requirement, s)
	writePaid(x.w, r.buf.header, "", r.buf.status, r.buf.body.Bytes())
}

// Answer writes a JSON body with a settlement header, the handler
// skipped (a cooperative refund's acknowledgment).
func (x *Exchange) Answer(body any, s SettleResponse) {
	s.Success = true
	setSettlementHeader(x.w, 2, x.Requirement, s)
	b, _ := json.Marshal(body)
	writePaid(x.w, nil, "application/json", http.StatusOK, b)
}

// Context is the request's context without its cancellation: what a
// scheme does after the handler must survive a client that went away.
func (x *Exchange) Context() context.Context { return context.WithoutCancel(x.Request.Context()) }

// Logger is the gate's logger.
func (x *Exchange) Logger() *slog.Logger { return x.g.logger }
