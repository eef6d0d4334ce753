package mcpserver

import (
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/tollgate/tollgate/payment"
)

// This file makes every error the MCP handlers return, each with a
// standard JSON-RPC code (https://www.jsonrpc.org/specification#error_object).
// The SDK writes a handler's error that is no *jsonrpc.Error with code 0,
// which JSON-RPC does not define. A tool's own failure is no JSON-RPC
// error but a result with isError (the REST error body, or the payment's
// requirement), as MCP asks of tools.

// readError is the error of a resource read that failed with resp, REST's
// answer to the same GET (MCP resources, "Error handling"): a URI or
// path value that names nothing (4xx, e.g. /demo/{op} of no operation)
// is Invalid params, -32602, which is MCP's "resource not found" since
// SEP-2164 (-32002 before it); the server's or an upstream's failure
// (5xx) is Internal error, -32603. The message is REST's, and data holds
// the URI, as MCP asks, and REST's error body.
func readError(uri string, resp *payment.Response) error {
	code := int64(jsonrpc.CodeInvalidParams)
	if resp.Status() >= http.StatusInternalServerError {
		code = jsonrpc.CodeInternalError
	}
	var rest struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(resp.Body(), &rest) != nil || rest.Message == "" {
		rest.Message = http.StatusText(resp.Status())
	}
	data := map[string]any{"uri": uri}
	if json.Valid(resp.Body()) {
		data["error"] = json.RawMessage(resp.Body())
	}
	b, _ := json.Marshal(data) // a string and valid JSON
	return &jsonrpc.Error{Code: code, Message: rest.Message, Data: b}
}

// internalError is a handler's failure that is the server's fault, its
// cause logged and not sent: Internal error, -32603, with a fixed text.
func internalError() error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
}
