// Package service implements Tollgate's gRPC services. Analytics answers the
// paid operations; its methods come with the market and chain issues and
// until then answer Unimplemented (REST 501). Discovery answers the free
// operations: catalogs, health, the OpenAPI document, demo samples and
// counters, all derived from the catalog the protos declare.
//
// Requests are checked against the catalog's rules in one interceptor
// (interceptor.go) and domain errors become gRPC codes in one place
// (errors.go). The service knows nothing of HTTP or payments.
package service

import (
	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
)

// Analytics implements tollgatev1.AnalyticsServiceServer.
type Analytics struct {
	tollgatev1.UnimplementedAnalyticsServiceServer
}

// NewAnalytics returns the analytics service.
func NewAnalytics() *Analytics { return &Analytics{} }
