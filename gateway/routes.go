package gateway

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/tollgate/tollgate/gen/openapi"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/service/catalog"
)

// PaidRoutes returns the paid operations of cat as payment routes: their
// net/http patterns, the prices declared in the protos, the parameter
// checks the gateway itself runs, so the gate asks no payment for a request
// the gateway would refuse, and their discovery descriptions (parameters
// and response schema) as the generated OpenAPI document renders the same
// protos. An operation the document lacks (it cannot: both are generated
// together) is described as "GET, returns JSON" only.
func PaidRoutes(cat *catalog.Catalog) []payment.Route {
	doc, docErr := catalog.ParseOpenAPI(openapi.Document())
	var routes []payment.Route
	for _, op := range cat.Paid() {
		for _, path := range op.Paths {
			var disc *payment.Discovery
			if docErr == nil {
				disc, _ = discovery(doc, op, path)
			}
			routes = append(routes, payment.Route{
				Name:        op.Name,
				Pattern:     "GET " + servePattern(path),
				PriceUSD:    op.PriceUSD,
				Description: op.Summary,
				Valid: func(r *http.Request) bool {
					q, err := url.ParseQuery(r.URL.RawQuery)
					if err != nil {
						return false
					}
					_, err = op.CheckHTTP(r.PathValue, q)
					return err == nil
				},
				Discovery: disc,
			})
		}
	}
	return routes
}

// discovery describes op at path from doc: its parameters exactly as the
// document declares them (which must be the catalog's), each with an
// example value, and the JSON Schema of its 200 response.
func discovery(doc *catalog.OpenAPI, op *catalog.Operation, path string) (*payment.Discovery, error) {
	params, output, err := doc.Operation(path)
	if err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	if len(params) != len(op.Params) {
		return nil, fmt.Errorf("openapi document: GET %s has %d parameters, the catalog %d", path, len(params), len(op.Params))
	}
	out := &payment.Discovery{Output: output}
	for i, p := range params {
		if p.Name != op.Params[i].Name || p.In != op.Params[i].In {
			return nil, fmt.Errorf("openapi document: GET %s parameter %s (%s) is %s (%s) in the catalog", path, p.Name, p.In, op.Params[i].Name, op.Params[i].In)
		}
		ex := p.Example
		if ex == nil {
			ex = exampleOf(p.Schema)
		}
		out.Params = append(out.Params, payment.Param{
			Name: p.Name, In: p.In, Required: p.Required, Description: p.Description, Schema: p.Schema, Example: ex,
		})
	}
	return out, nil
}

// exampleOf picks a value a parameter schema accepts: its default, its
// first enum value or its minimum; nil when it has none of them.
func exampleOf(s map[string]any) any {
	if v, ok := s["default"]; ok {
		return v
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	return s["minimum"]
}

// RouteOf returns the function naming a request's route for metrics: the
// net/http pattern of the operation it matches ("GET /rugcheck/{addr}"),
// or "other" for anything else (unknown paths, other methods), so that
// label values stay bounded. Routes lists them all.
func RouteOf(cat *catalog.Catalog) func(*http.Request) string {
	mux := http.NewServeMux()
	for _, pattern := range Routes(cat) {
		if pattern != otherRoute {
			mux.Handle(pattern, http.NotFoundHandler())
		}
	}
	return func(r *http.Request) string {
		if _, pattern := mux.Handler(r); pattern != "" {
			return pattern
		}
		return otherRoute
	}
}

// otherRoute names, for metrics, every request no operation matches.
const otherRoute = "other"

// Routes are the names RouteOf gives: the pattern of each operation's
// paths, then "other".
func Routes(cat *catalog.Catalog) []string {
	var out []string
	for _, op := range cat.Operations() {
		for _, path := range op.Paths {
			out = append(out, "GET "+servePattern(path))
		}
	}
	return append(out, otherRoute)
}

// Statuses are the statuses the public listener answers a GET with by
// design, as docs/api.md's table of errors lists them: 200; 400 bad
// input or a header that is no payment; 402 payment required or refused;
// 404 unknown path; 429 past a rate limit; 431 oversized headers; 500;
// 501 not implemented; 502 the facilitator failed or a settlement is
// unknown; 503 an upstream or the store unavailable; 504 past the
// deadline. (405 answers other methods only.)
func Statuses() []int {
	return []int{http.StatusOK, http.StatusBadRequest, http.StatusPaymentRequired, http.StatusNotFound, http.StatusTooManyRequests,
		http.StatusRequestHeaderFieldsTooLarge, http.StatusInternalServerError, http.StatusNotImplemented, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout}
}
