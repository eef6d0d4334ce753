package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/gateway/restjson"
	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
)

// Every non-2xx answer of the gateway has the tollgatev1.Error body of
// restjson.StatusBody, gRPC codes mapped to HTTP statuses there.

// errorHandler returns the handler of errors from proxied calls: gRPC
// statuses from the service, and the gateway's own failures (a response it
// cannot write, say), which are logged and answered 500 with a fixed text.
func errorHandler(logger *slog.Logger) runtime.ErrorHandlerFunc {
	return func(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
		st, unexpected := restjson.StatusOf(err)
		if unexpected {
			logger.ErrorContext(ctx, "gateway error", "path", r.URL.Path, "err", err)
		}
		writeStatus(w, r, st)
	}
}

// writeStatus writes a gRPC status as the Error body.
func writeStatus(w http.ResponseWriter, _ *http.Request, st *status.Status) {
	httpStatus, body := restjson.StatusBody(st)
	writeBody(w, httpStatus, body)
}

// routingErrorHandler writes the gateway's own 404 and 405.
func routingErrorHandler(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, httpStatus int) {
	switch httpStatus {
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, r, httpStatus, &tollgatev1.Error{
			Error:   "method_not_allowed",
			Message: "method " + r.Method + " is not allowed; every operation is a GET (or HEAD)",
		})
	case http.StatusNotFound:
		writeError(w, r, httpStatus, &tollgatev1.Error{
			Error:   "not_found",
			Message: "no such path: " + r.URL.Path + "; see /openapi.json or /tollgate for the operations",
		})
	default: // grpc-gateway routes nothing else here but a malformed path (400)
		writeStatus(w, r, status.New(codes.InvalidArgument, "malformed request path: "+r.URL.Path))
	}
}

// writeParamError answers a refused parameter with the status the catalog
// gives it, exactly as a gRPC caller would see it.
func writeParamError(w http.ResponseWriter, r *http.Request, err error) {
	writeStatus(w, r, status.Convert(err))
}

// writeError writes body with the given status.
func writeError(w http.ResponseWriter, _ *http.Request, httpStatus int, body *tollgatev1.Error) {
	httpStatus, out := restjson.ErrorBody(httpStatus, body)
	writeBody(w, httpStatus, out)
}

func writeBody(w http.ResponseWriter, httpStatus int, out []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(httpStatus)
	_, _ = w.Write(out)
}
