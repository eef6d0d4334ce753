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
