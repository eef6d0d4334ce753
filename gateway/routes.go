package gateway

import (
	"net/http"
	"net/url"

	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/service/catalog"
)

// PaidRoutes returns the paid operations of cat as payment routes: their
// net/http patterns, the prices declared in the protos, and the parameter
// checks the gateway itself runs, so the gate asks no payment for a request
// the gateway would refuse.
func PaidRoutes(cat *catalog.Catalog) []payment.Route {
	var routes []payment.Route
	for _, op := range cat.Paid() {
		for _, path := range op.Paths {
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
			})
		}
	}
	return routes
}

// RouteOf returns the function naming a request's route for metrics: the
// net/http pattern of the operation it matches ("GET /rugcheck/{addr}"),
// or "other" for anything else (unknown paths, other methods), so that
// label values stay bounded.
func RouteOf(cat *catalog.Catalog) func(*http.Request) string {
	mux := http.NewServeMux()
	for _, op := range cat.Operations() {
		for _, path := range op.Paths {
			mux.Handle("GET "+servePattern(path), http.NotFoundHandler())
		}
	}
	return func(r *http.Request) string {
		if _, pattern := mux.Handler(r); pattern != "" {
			return pattern
		}
		return "other"
	}
}
