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
	// Extensions are the v2 payload's extensions, each as JSON
	// (payment-identifier: identifier.go).
	Extensions map[string]json.RawMessage
}

// Exchange is one paid call handed to a Scheme, whatever transport it
// came by (a REST GET or an MCP tool call): what was asked, what was
// presented, and the gate's ways of answering. Exactly one of Challenge,
// Refuse, Fail, Deliver, Replay or Answer must be called, or Run's
// failure written with WriteFailure. The transport writes each answer in
// its own form (a 402 or an isError tool result; headers or _meta) and
// in the payment's protocol version.
type Exchange struct {
	Requirement *Requirement
	Envelope    *Envelope

	ctx      context.Context
	resource string
	run      func() *Response
	reply    reply
	g        *Gate
}

// reply is how a transport answers one paid call. The gate and the
// schemes decide what to answer; a reply only writes it.
type reply interface {
	// required answers with a payment requirement: v1 and v2 objects
	// (a transport offers what it can carry), and the failed settlement,
	// if one failed.
	required(v1 RequiredV1, v2 RequiredV2, settlement *SettleResponse)
	// refused answers with an error: status, code and message.
	refused(status int, code, message string)
	// failure answers with a failed handler's answer as it is.
	failure(r *Response)
	// paid answers with a handler's answer and its settlement.
	paid(r *Response, s SettleResponse)
}

// Response is a handler's answer, held until the payment is settled: a
// status in HTTP terms (a tool's failure carries the status its REST
// twin would), headers (REST only), and the body.
type Response struct {
	status int
	header http.Header
	body   []byte
}

// NewResponse returns a handler's answer with status, content type and
// body, for a transport that runs its handler itself.
func NewResponse(status int, contentType string, body []byte) *Response {
	h := http.Header{}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	return &Response{status: status, header: h, body: body}
}

// Status is the response's HTTP status.
func (r *Response) Status() int { return r.status }

// Failed reports whether the handler failed (status 400 or more): such
// a response is never charged for.
func (r *Response) Failed() bool { return r.status >= http.StatusBadRequest }

// Body is the response's body.
func (r *Response) Body() []byte { return r.body }

// ContentType is the response's Content-Type.
func (r *Response) ContentType() string { return r.header.Get("Content-Type") }

// Resource identifies what the call buys, the same way on every replica:
// a REST call's request URI ("/rugcheck/0x…?…"), a tool call's
// "mcp://tool/<name>?<arguments>". Two calls buy the same thing when
// SameResource says so; a payment spent on one buys no other.
func (x *Exchange) Resource() string { return x.resource }

// Verified tells the funnel the payment verified and the handler runs.
func (x *Exchange) Verified() { x.g.obs.Verified(x.Requirement.Operation, x.Requirement.transport) }

// Run runs the handler, holding its answer.
func (x *Exchange) Run() *Response { return x.run() }

// WriteFailure writes a failed handler's answer as it is, uncharged.
func (x *Exchange) WriteFailure(r *Response) { x.reply.failure(r) }

// Challenge refuses the payment with its requirement: reason and
// message, the route's accepts entries with the scheme's replaced by
// entry when it is not nil (a corrective requirement carries the state
// the client recovers from), and settlement when a settlement failed.
func (x *Exchange) Challenge(reason, message, payer string, entry *RequirementsV2, settlement *SettleResponse) {
	req := x.Requirement
	if settlement != nil {
		x.g.obs.SettleFailed(req.Operation, req.transport, reason)
	} else {
		x.g.obs.Refused(req.Operation, req.transport, reason)
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
	x.reply.required(v1, v2, settlement)
}

// Refuse answers with an error and status (a malformed payload, an
// unavailable store or facilitator): nothing was charged.
func (x *Exchange) Refuse(status int, code, message string) {
	x.g.obs.Refused(x.Requirement.Operation, x.Requirement.transport, code)
	x.reply.refused(status, code, message)
}

// Fail answers a verified payment whose settlement failed or is not
// established with an error and status.
func (x *Exchange) Fail(status int, code, message string) {
	x.g.obs.SettleFailed(x.Requirement.Operation, x.Requirement.transport, code)
	x.reply.refused(status, code, message)
}

// Deliver writes the handler's answer with its settlement: the payment
// of amount (atomic units) settled, took after the handler (0: settled
// earlier).
func (x *Exchange) Deliver(r *Response, s SettleResponse, amount *big.Int, took time.Duration) {
	x.g.obs.Settled(x.Requirement.Operation, x.Requirement.transport, x.g.usd(amount), took)
	s.Success = true
	x.reply.paid(r, s)
}

// Replay writes an answer already delivered and counted once (a retry of
// the same payment answered from the scheme's records): status 200, the
// stored body and content type, the settlement.
func (x *Exchange) Replay(contentType string, body []byte, s SettleResponse) {
	s.Success = true
	x.reply.paid(NewResponse(http.StatusOK, contentType, body), s)
}

// Answer writes a JSON body with a settlement, the handler skipped (a
// cooperative refund's acknowledgment).
func (x *Exchange) Answer(body any, s SettleResponse) {
	s.Success = true
	b, _ := json.Marshal(body)
	x.reply.paid(NewResponse(http.StatusOK, "application/json", b), s)
}

// Context is the call's context without its cancellation: what a scheme
// does after the handler must survive a client that went away.
func (x *Exchange) Context() context.Context { return context.WithoutCancel(x.ctx) }

// Logger is the gate's logger.
func (x *Exchange) Logger() *slog.Logger { return x.g.logger }
