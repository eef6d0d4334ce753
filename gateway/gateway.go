// Package gateway serves Tollgate's REST API: grpc-gateway's mux in front of
// the gRPC services, reached through client connections so that the gRPC
// interceptors run in one place, on the server's side: the analytics in
// process (gateway/inprocess), discovery and /health across the gRPC
// listener, which /health thereby proves up. It owns what is REST-only:
// the wire JSON (enum strings, field order), the parameter checks that run
// before a request is proxied (and before any payment logic in front of
// it), the one error body of every non-2xx answer, and the access log.
//
// Routes come only from the protos' google.api.http annotations; the
// catalog tells which are paid, at what price, with which parameter rules.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/tollgate/tollgate/gateway/restjson"
	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service/catalog"
)

// Config holds the gateway's settings.
type Config struct {
	// Timeout bounds each proxied gRPC call; past it the answer is 504.
	Timeout time.Duration
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	if c.Timeout <= 0 {
		return fmt.Errorf("gateway: timeout must be positive, got %s", c.Timeout)
	}
	return nil
}

// New returns the REST handler for the analytics reachable over
// analytics and the discovery service (with /health) over discovery.
func New(ctx context.Context, cfg Config, analytics, discovery grpc.ClientConnInterface, cat *catalog.Catalog, logger *slog.Logger) (http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := restjson.New(protoregistry.GlobalFiles, "tollgate.v1")
	unwrap := map[protoreflect.FullName]protoreflect.OneofDescriptor{}
	for _, op := range cat.Operations() {
		if op.UnwrapOneof != "" {
			out := op.Method.Output()
			unwrap[out.FullName()] = out.Oneofs().ByName(protoreflect.Name(op.UnwrapOneof))
		}
	}
	mux := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, m),
		runtime.WithErrorHandler(errorHandler(logger)),
		runtime.WithRoutingErrorHandler(routingErrorHandler),
		runtime.WithDisablePathLengthFallback(), // no POST-as-GET
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithForwardResponseRewriter(func(_ context.Context, resp proto.Message) (any, error) {
			od, ok := unwrap[resp.ProtoReflect().Descriptor().FullName()]
			if !ok {
				return resp, nil
			}
			fd := resp.ProtoReflect().WhichOneof(od)
			if fd == nil {
				return nil, errors.New("gateway: empty oneof in response")
			}
			return resp.ProtoReflect().Get(fd).Message().Interface(), nil
		}),
	)
	if err := tollgatev1.RegisterAnalyticsServiceHandlerClient(ctx, mux, tollgatev1.NewAnalyticsServiceClient(analytics)); err != nil {
		return nil, err
	}
	if err := tollgatev1.RegisterDiscoveryServiceHandlerClient(ctx, mux, tollgatev1.NewDiscoveryServiceClient(discovery)); err != nil {
		return nil, err
	}
	checked := http.NewServeMux()
	for _, op := range cat.Operations() {
		for _, path := range op.Paths {
			checked.Handle("GET "+servePattern(path), checkParams(op, mux))
		}
	}
	checked.Handle("/", mux) // unknown paths and methods: the mux answers 404/405
	return withTimeout(cfg.Timeout, uncleanPaths(checked)), nil
}

// uncleanPaths answers 404 for paths net/http would redirect to a cleaned
// form ("//health", "/demo/../health"): a redirect would be the only
// non-2xx answer without the Error body, and no client needs it.
func uncleanPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == "" || p[0] != '/' || path.Clean(p) != p && !(strings.HasSuffix(p, "/") && path.Clean(p)+"/" == p) {
			routingErrorHandler(r.Context(), nil, nil, w, r, http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// servePattern turns a google.api.http path template into a net/http
// pattern: "/" must match only the root.
func servePattern(path string) string {
	if path == "/" {
		return "/{$}"
	}
	return path
}

// checkParams refuses bad parameters of op before the call is proxied, and
// hands the gateway the normalized query (clamped integers rewritten).
func checkParams(op *catalog.Operation, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			writeParamError(w, r, &catalog.ParamError{Param: "query", Problem: "is malformed: " + err.Error()})
			return
		}
		norm, err := op.CheckHTTP(r.PathValue, query)
		if err != nil {
			writeParamError(w, r, err)
			return
		}
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.RawQuery = norm.Encode()
		r2.URL = &u
		if r2.Method == http.MethodHead {
			// HEAD is a GET whose body net/http drops (RFC 9110 §9.3.2);
			// grpc-gateway routes GET only.
			r2.Method = http.MethodGet
		}
		next.ServeHTTP(w, r2)
	})
}

func withTimeout(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
