package payment

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/big"
	"net/http"
	"time"
)

// Scheme is one x402 scheme the gate offers (exact.Server and
// batch.Server are two). The gate writes the scheme's accepts entry in
// every v2 challenge and hands it the payments that chose it, once the
// envelope matched the route (network, and for v2 asset, payTo, amount
// and resource); the scheme checks its own payload, runs the handler
// through the Exchange and answers. A scheme is offered to v1 clients
// too when it implements V1Scheme.
type Scheme interface {
	// Name is the x402 scheme name: the accepts entry's scheme.
	Name() string
	// Accepts is the scheme's accepts entry for req.
	Accepts(req *Requirement) RequirementsV2
	// Serve answers a paid request whose payment chose the scheme.
	Serve(x *Exchange)
	// Reasons are the codes Serve refuses or fails a payment with (a
	// remote facilitator may answer others).
	Reasons() Reasons
}

// Reasons are the codes a presented payment ends with when it is not
// delivered, by the step it ends at: Refused before any settlement
// (Observer.Refused: nothing charged), Failed once verified, its
// settlement failed or not established (Observer.SettleFailed). Knowing
// them ahead lets the metrics start each at zero: a series that appears
// with its first event hides that event from a rate.
type Reasons struct {
	Refused, Failed []string
}

// V1Scheme is a Scheme x402 v1 clients may pay: its entry is written in
// the v1 body of every challenge, and v1 payments naming it are its.
// Only exact is: v1 clients validate every entry they are offered as
// exact's.
type V1Scheme interface {
	Scheme
	// AcceptsV1 is the scheme's v1 accepts entry for req (the gate adds
	// the outputSchema).
	AcceptsV1(req *Requirement) RequirementsV1
}

// Envelope is a PaymentPayload with its scheme's payload left as JSON.
type Envelope struct {
	// Version is the x402 version, 1 or 2.
	Version int
	// Accepted is what a v2 payment accepted; for v1 only its Scheme and
	// Network are set, from the payload's own fields.
	Accepted RequirementsV2
	// Resource is the v2 payload's resource (clients copy it from the
	// PAYMENT-REQUIRED they were answered), nil when it names none.
	Resource *ResourceV2
	Payload  json.RawMessage
	// Raw is the whole PaymentPayload, passed on to a remote facilitator.
	Raw json.RawMessage
}

// Exchange is one paid request handed to a Scheme: what was asked, what
// was presented, and the gate's ways of answering. Exactly one of
// Challenge, Refuse, Fail, Deliver, Replay or Answer must be called, or
// Run's failure written with WriteFailure. Settlement headers are
// written in the payment's protocol version.
type Exchange struct {
	Request     *http.Request
	Requirement *Requirement
	Envelope    *Envelope

	w    http.ResponseWriter
	g    *Gate
	next http.Handler
}

// Response is a handler's answer, held until the payment is settled.
type Response struct{ buf *buffer }

// Status is the response's HTTP status.
func (r *Response) Status() int { return r.buf.status }

// Failed reports whether the handler failed (status 400 or more): such
// a response is never charged for.
func (r *Response) Failed() bool { return r.buf.status >= http.StatusBadRequest }

// Body is the response's body.
func (r *Response) Body() []byte { return r.buf.body.Bytes() }

// ContentType is the response's Content-Type.
func (r *Response) ContentType() string { return r.buf.header.Get("Content-Type") }

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
		setSettlementHeader(x.w, x.Envelope.Version, req, *settlement)
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

// Refuse answers with a JSON error and status (a malformed payload, an
// unavailable store or facilitator): nothing was charged.
func (x *Exchange) Refuse(status int, code, message string) {
	x.g.obs.Refused(x.Requirement.Operation, code)
	writeJSONError(x.w, status, code, message)
}

// Fail answers a verified payment whose settlement failed or is not
// established with a JSON error and status.
func (x *Exchange) Fail(status int, code, message string) {
	x.g.obs.SettleFailed(x.Requirement.Operation, code)
	writeJSONError(x.w, status, code, message)
}

// Deliver writes the handler's answer with its settlement header: the
// payment of amount (atomic units) settled, took after the handler (0:
// settled earlier).
func (x *Exchange) Deliver(r *Response, s SettleResponse, amount *big.Int, took time.Duration) {
	x.g.obs.Settled(x.Requirement.Operation, x.g.usd(amount), took)
	s.Success = true
	setSettlementHeader(x.w, x.Envelope.Version, x.Requirement, s)
	writePaid(x.w, r.buf.header, "", r.buf.status, r.buf.body.Bytes())
}

// Replay writes an answer already delivered and counted once (a retry of
// the same payment answered from the scheme's records): status 200, the
// stored body and content type, the settlement header.
func (x *Exchange) Replay(contentType string, body []byte, s SettleResponse) {
	s.Success = true
	setSettlementHeader(x.w, x.Envelope.Version, x.Requirement, s)
	writePaid(x.w, nil, contentType, http.StatusOK, body)
}

// Answer writes a JSON body with a settlement header, the handler
// skipped (a cooperative refund's acknowledgment).
func (x *Exchange) Answer(body any, s SettleResponse) {
	s.Success = true
	setSettlementHeader(x.w, x.Envelope.Version, x.Requirement, s)
	b, _ := json.Marshal(body)
	writePaid(x.w, nil, "application/json", http.StatusOK, b)
}

// Context is the request's context without its cancellation: what a
// scheme does after the handler must survive a client that went away.
func (x *Exchange) Context() context.Context { return context.WithoutCancel(x.Request.Context()) }

// Logger is the gate's logger.
func (x *Exchange) Logger() *slog.Logger { return x.g.logger }
