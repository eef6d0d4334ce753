package payment

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolResult is the outcome of Payer.CallTool.
type ToolResult struct {
	// Result is the tool's last result.
	Result *mcp.CallToolResult
	// Required is the PaymentRequired of a result that asked for payment
	// (the last one, if the payment was refused), nil otherwise.
	Required *RequiredV2
	// Settlement is the result's _meta["x402/payment-response"], if any.
	Settlement *SettleResponse
}

// CallTool calls the tool name with args over session, paying if it asks
// (x402's MCP transport, specs/transports-v2/mcp.md): a result with
// isError and a PaymentRequired as structuredContent is paid with the
// payer's most preferred scheme it offers, and the call is made again
// with the PaymentPayload in params._meta["x402/payment"].
func (p *Payer) CallTool(ctx context.Context, session *mcp.ClientSession, name string, args map[string]any) (*ToolResult, error) {
	first, err := callTool(ctx, session, name, args, nil)
	if err != nil || first.Required == nil {
		return first, err
	}
	o, sc, err := p.chooseFrom(offersV2(*first.Required))
	if err != nil {
		return first, err
	}
	return p.payTool(ctx, session, name, args, o, sc)
}

// PayTool calls the tool name with args paying o, an offer its
// requirement made (ToolOffer's), with the payer's scheme client of that
// scheme, within MaxAmount: no unpaid call first.
func (p *Payer) PayTool(ctx context.Context, session *mcp.ClientSession, name string, args map[string]any, o Offer) (*ToolResult, error) {
	if err := p.affordable(o); err != nil {
		return nil, err
	}
	for _, sc := range p.Schemes {
		if sc.Name() == o.Entry.Scheme {
			return p.payTool(ctx, session, name, args, o, sc)
		}
	}
	return nil, fmt.Errorf("pay: no %s client to pay the offer with", o.Entry.Scheme)
}

// payTool pays o with sc and calls again, once more after a refusal sc
// recovers from.
func (p *Payer) payTool(ctx context.Context, session *mcp.ClientSession, name string, args map[string]any, o Offer, sc SchemeClient) (*ToolResult, error) {
	for attempt := 0; ; attempt++ {
		pay, err := sc.Pay(o)
		if err != nil {
			return nil, err
		}
		payload, err := base64.StdEncoding.DecodeString(pay.Value)
		if err != nil {
			return nil, fmt.Errorf("pay: the %s client's payment is not base64: %w", sc.Name(), err)
		}
		res, err := callTool(ctx, session, name, args, json.RawMessage(payload))
		if err != nil {
			return nil, err
		}
		if res.Required != nil && attempt == 0 && res.Settlement == nil && sc.Recover(*res.Required) {
			continue
		}
		if res.Required == nil && !res.Result.IsError && res.Settlement != nil {
			if err := sc.Paid(o, *res.Settlement); err != nil {
				return res, err
			}
		}
		return res, nil
	}
}

// callTool makes one call, with payment in _meta when it is not nil, and
// reads the result's requirement and settlement.
func callTool(ctx context.Context, session *mcp.ClientSession, name string, args map[string]any, payment json.RawMessage) (*ToolResult, error) {
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	if payment != nil {
		params.Meta = mcp.Meta{MetaPayment: payment}
	}
	r, err := session.CallTool(ctx, params)
	if err != nil {
		return nil, err
	}
	out := &ToolResult{Result: r}
	if v, ok := r.Meta[MetaPaymentResponse]; ok {
		var s SettleResponse
		if err := remarshal(v, &s); err != nil {
			return nil, fmt.Errorf("pay: %s: %w", MetaPaymentResponse, err)
		}
		out.Settlement = &s
	}
	if r.IsError && r.StructuredContent != nil {
		var req RequiredV2
		if err := remarshal(r.StructuredContent, &req); err == nil && req.X402Version == 2 && len(req.Accepts) > 0 {
			out.Required = &req
		}
	}
	return out, nil
}

// remarshal decodes v, JSON decoded as any, into out.
func remarshal(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return errors.New("not the expected object: " + err.Error())
	}
	return nil
}

// ToolOffer calls the tool name with args unpaid and returns its
// requirement's offer of scheme.
func (p *Payer) ToolOffer(ctx context.Context, session *mcp.ClientSession, name string, args map[string]any, scheme string) (Offer, error) {
	first, err := callTool(ctx, session, name, args, nil)
	if err != nil {
		return Offer{}, err
	}
	if first.Required == nil {
		return Offer{}, fmt.Errorf("pay: tool %s asked for no payment", name)
	}
	for _, o := range offersV2(*first.Required) {
		if o.Entry.Scheme == scheme {
			return o, nil
		}
	}
	return Offer{}, fmt.Errorf("pay: tool %s does not offer the %s scheme", name, scheme)
}
