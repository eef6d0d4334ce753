package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file is the gate's MCP transport: x402's MCP transport
// (specs/transports-v2/mcp.md, the tool-result binding) around a paid
// operation offered as an MCP tool. A call without payment is answered
// with a tool result whose isError is set and whose structuredContent
// (and content[0].text) is the v2 PaymentRequired; the client retries the
// same call with the PaymentPayload in params._meta["x402/payment"]; the
// paid answer carries the SettleResponse in result._meta
// ["x402/payment-response"]. The money rules are the REST path's, in the
// same Exchange and the same schemes.

// The _meta keys of x402's MCP transport.
const (
	// MetaPayment holds the PaymentPayload of a tool call.
	MetaPayment = "x402/payment"
	// MetaPaymentResponse holds the SettleResponse of a paid result.
	MetaPaymentResponse = "x402/payment-response"
	// MetaError repeats a requirement's PaymentRequired in result._meta,
	// where Cloudflare's x402 MCP client (agents/x402, withX402Client)
	// reads it instead of structuredContent.
	MetaError = "x402/error"
)

// ToolResource is the resource URL of the paid tool called name.
func ToolResource(name string) string { return "mcp://tool/" + name }

// ToolCall is one call of a paid operation as an MCP tool, its arguments
// already checked (invalid arguments never reach the gate).
type ToolCall struct {
	// Name is the tool's name, the operation's.
	Name string
	// Arguments are the checked arguments in the REST query's form, as
	// the service reads them (every parameter, defaults written, integers
	// clamped, addresses checksummed); with Name they identify what the
	// call buys, so two spellings of one call buy the same thing.
	Arguments url.Values
	// Payment is params._meta["x402/payment"] as decoded JSON: the
	// PaymentPayload object (the spec's form) or a string holding its
	// base64 JSON (the form Cloudflare's client sends); nil when absent.
	Payment any
	// Run runs the tool: its answer in REST terms (status, JSON body).
	Run func(ctx context.Context) *Response
}

// CallTool answers a call of a paid tool: the requirement when it carries
// no payment, else the payment's scheme verifies, runs, settles and
// records it as on REST, and the result is written the MCP transport's
// way. It returns an error only for a tool the gate does not price.
func (g *Gate) CallTool(ctx context.Context, c ToolCall) (*mcp.CallToolResult, error) {
	rt := g.tools[c.Name]
	if rt == nil {
		return nil, fmt.Errorf("gate: no paid operation called %q", c.Name)
	}
	req := g.requirementFor(rt, ToolResource(c.Name))
	req.transport = TransportMCP
	if c.Payment == nil {
		rt.challenges.Add(1)
		g.obs.Challenged(rt.Name, TransportMCP)
		return requiredResult(rt.toolRequired, nil), nil
	}
	g.obs.Presented(rt.Name, TransportMCP)
	reply := &toolReply{g: g, req: req}
	env, err := toolEnvelope(c.Payment)
	if err != nil {
		var ve *VerifyError
		errors.As(err, &ve)
		g.obs.Refused(rt.Name, TransportMCP, ve.Reason)
		reply.refused(http.StatusBadRequest, ve.Reason, ve.Message)
		return reply.result, nil
	}
	id, bad := paymentID(env)
	if bad != nil {
		g.obs.Refused(rt.Name, TransportMCP, bad.Reason)
		reply.refused(http.StatusBadRequest, bad.Reason, bad.Message)
		return reply.result, nil
	}
	x := &Exchange{
		Requirement: req, Envelope: env, ctx: ctx, g: g, reply: reply,
		resource: ToolResource(c.Name) + "?" + c.Arguments.Encode(),
		run:      func() *Response { return c.Run(ctx) },
	}
	s, why := g.match(env, req, func(paid string) bool { return paid == req.Resource })
	if why != nil {
		x.Challenge(why.Reason, why.Message, "", nil, nil)
		return reply.result, nil
	}
	g.serve(s, x, id)
	return reply.result, nil
}

// toolEnvelope decodes params._meta["x402/payment"]: a v2 PaymentPayload
// object, or a string of its base64 JSON.
func toolEnvelope(v any) (*Envelope, error) {
	const where = `_meta["x402/payment"]`
	var raw []byte
	switch v := v.(type) {
	case string:
		b, err := decodeBase64(v)
		if err != nil {
			return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: where + " is a string but not base64 of a PaymentPayload's JSON"}
		}
		raw = b
	case map[string]any:
		// The SDK decoded _meta already: the payload is written back as
		// JSON (keys sorted, numbers as float64, exact up to 2^53, which
		// every integer a PaymentPayload holds as a number is within; its
		// amounts and nonces are strings). Raw, passed on to a remote
		// facilitator, is this JSON, not the client's bytes.
		b, err := json.Marshal(v)
		if err != nil {
			return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: where + ": " + err.Error()}
		}
		raw = b
	default:
		return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: where + " must be a PaymentPayload object"}
	}
	return parseEnvelope(raw, 2, where)
}

// toolReply answers a paid tool call with an MCP tool result.
type toolReply struct {
	g      *Gate
	req    *Requirement
	result *mcp.CallToolResult
}

func (t *toolReply) required(_ RequiredV1, v2 RequiredV2, settlement *SettleResponse) {
	b, _ := json.Marshal(v2)
	if settlement != nil {
		settlement.Network = t.req.Network
	}
	t.result = requiredResult(b, settlement)
}

// refused answers a payment that is no payment (a client's mistake: it
// may sign again) with the requirement and the reason, and the gate's
// own troubles (an unavailable store or facilitator, a settlement whose
// outcome is unknown: the client must not sign again) with an error
// whose text is the REST error body.
func (t *toolReply) refused(status int, code, message string) {
	if status < http.StatusInternalServerError {
		_, v2 := t.g.challengeObjects(t.req, &VerifyError{Reason: code, Message: message})
		t.required(RequiredV1{}, v2, nil)
		return
	}
	t.result = errorResult(errorBody(status, code, message))
}

// errorBody is the JSON error body of the gate's own refusals, the REST
// API's Error shape: code, message, status.
func errorBody(status int, code, message string) []byte {
	b, _ := json.Marshal(map[string]any{"error": code, "message": message, "status": status, "accepted": []string{}})
	return b
}

func (t *toolReply) failure(r *Response) { t.result = errorResult(r.body) }

func (t *toolReply) paid(r *Response, s SettleResponse) {
	s.Network = t.req.Network
	t.result = &mcp.CallToolResult{
		Meta:              mcp.Meta{MetaPaymentResponse: s},
		Content:           []mcp.Content{&mcp.TextContent{Text: string(r.body)}},
		StructuredContent: json.RawMessage(r.body),
	}
}

// requiredResult is the tool result of a requirement: isError, the
// PaymentRequired as structuredContent, as content[0].text and as
// _meta["x402/error"], and the failed settlement, if any.
func requiredResult(paymentRequired json.RawMessage, settlement *SettleResponse) *mcp.CallToolResult {
	meta := mcp.Meta{MetaError: paymentRequired}
	if settlement != nil {
		meta[MetaPaymentResponse] = settlement
	}
	return &mcp.CallToolResult{
		Meta:              meta,
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: string(paymentRequired)}},
		StructuredContent: paymentRequired,
	}
}

// errorResult is the tool result of a failure: isError and the error
// body as text, with no structuredContent (it is no record and no
// requirement).
func errorResult(body []byte) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(body)}}}
}
