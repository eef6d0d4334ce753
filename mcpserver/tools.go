package mcpserver

import (
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/service/catalog"
)

// tool is one paid operation as an MCP tool.
type tool struct {
	*mcp.Tool
	op *catalog.Operation
}

// tools describes each paid operation of cat as a tool, from the payment
// route of the same name (the first, if it has several paths): its price
// and its discovery, which the OpenAPI document of the same protos gave.
func tools(cat *catalog.Catalog, routes []payment.Route) ([]tool, error) {
	byName := map[string]*payment.Route{}
	for i := range routes {
		if byName[routes[i].Name] == nil {
			byName[routes[i].Name] = &routes[i]
		}
	}
	var out []tool
	for _, op := range cat.Paid() {
		rt := byName[op.Name]
		if rt == nil || rt.Discovery == nil || rt.Discovery.Output == nil {
			return nil, fmt.Errorf("mcp: paid operation %s has no payment route with its parameters and record", op.Name)
		}
		out = append(out, tool{op: op, Tool: &mcp.Tool{
			Name:  op.Name,
			Title: op.Summary,
			Description: fmt.Sprintf("%s. Price: %s USD a call, paid with x402 in USDC on Base (eip155:8453): "+
				"a call without payment returns the payment requirements (isError, structuredContent = x402 PaymentRequired); "+
				"retry it with the PaymentPayload in _meta[\"x402/payment\"]. Invalid arguments cost nothing. "+
				"The same record as GET %s; a free sample is at /demo/%s.", op.Summary, op.PriceUSD, op.Path(), op.Name),
			InputSchema:  rt.Discovery.InputSchema(),
			OutputSchema: outputSchema(rt.Discovery.Output),
			Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(true), DestructiveHint: ptr(false)},
		}})
	}
	return out, nil
}

// outputSchema is a tool's outputSchema: its record, or the x402
// PaymentRequired of a call not (yet) paid, or a batch-settlement
// refund's acknowledgment. MCP clients validate structuredContent
// against it even on an error result (the official TypeScript SDK does),
// so it must admit the requirement too.
func outputSchema(record map[string]any) map[string]any {
	str := map[string]any{"type": "string"}
	paymentRequired := map[string]any{
		"type":        "object",
		"description": "x402 v2 PaymentRequired: the call was not run; pay one of accepts and call again with the payment in _meta[\"x402/payment\"].",
		"properties": map[string]any{
			"x402Version": map[string]any{"type": "integer", "const": 2},
			"error":       str,
			"resource":    map[string]any{"type": "object"},
			"accepts":     map[string]any{"type": "array", "items": map[string]any{"type": "object"}},
			"extensions":  map[string]any{"type": "object"},
		},
		"required": []string{"x402Version", "accepts"},
	}
	refund := map[string]any{
		"type":        "object",
		"description": "The acknowledgment of a batch-settlement refund paid through this tool.",
		"properties":  map[string]any{"message": str, "channelId": str},
		"required":    []string{"message", "channelId"},
	}
	return map[string]any{"type": "object", "anyOf": []any{record, paymentRequired, refund}}
}

func ptr[T any](v T) *T { return &v }
