package mcpserver

import (
	"context"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/service/catalog"
)

// addResources offers the free operations of cat as MCP resources at
// their public URLs, so an agent reads the documents where a person
// would: each free operation without path parameters is a resource
// ("/llms.txt", "/openapi.json", "/.well-known/x402", "/tollgate", …),
// one with path parameters a resource template ("/demo/{op}", a sample
// record of each tool). Reading one runs its RPC over the same client
// connection as a tool call, free, and answers the REST body.
func addResources(s *mcp.Server, base string, cat *catalog.Catalog, newCaller func(*catalog.Operation) *caller) {
	for _, op := range cat.Operations() {
		if op.Paid() {
			continue
		}
		c := newCaller(op)
		mime := op.ContentType
		if mime == "" {
			mime = "application/json"
		}
		uri := base + op.Path()
		if !strings.Contains(op.Path(), "{") {
			s.AddResource(&mcp.Resource{URI: uri, Name: op.Name, Title: op.Summary, Description: op.Summary + " (free; the body of GET " + op.Path() + ").", MIMEType: mime},
				c.readHandler(base))
			continue
		}
		s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: uri, Name: op.Name, Title: op.Summary, Description: op.Summary + " (free; the body of GET " + op.Path() + ").", MIMEType: mime},
			c.readHandler(base))
	}
}

// readHandler reads the resource at a URI under base: the operation's
// path parameters taken from the URI's path, checked by the catalog. A
// failed read is a JSON-RPC error (readError).
func (c *caller) readHandler(base string) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		args, ok := pathArguments(c.op.Path(), strings.TrimPrefix(uri, base))
		if !ok || !strings.HasPrefix(uri, base) {
			return nil, readError(uri, errorResponse(status.New(codes.NotFound, "no resource at "+uri)))
		}
		r := c.call(ctx, args)
		if r.Failed() {
			return nil, readError(uri, r)
		}
		mime := r.ContentType()
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Text: string(r.Body())}}}, nil
	}
}

// pathArguments matches path against the template ("/demo/{op}") and
// returns its variables' values; ok is false when it does not match.
func pathArguments(template, path string) (url.Values, bool) {
	ts, ps := strings.Split(template, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return nil, false
	}
	args := url.Values{}
	for i, t := range ts {
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
			v, err := url.PathUnescape(ps[i])
			if err != nil || v == "" {
				return nil, false
			}
			args.Set(strings.Trim(t, "{}"), v)
			continue
		}
		if t != ps[i] {
			return nil, false
		}
	}
	return args, true
}
