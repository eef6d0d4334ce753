package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
)

// Every non-2xx answer of the gateway has the tollgatev1.Error body:
//
//	{"error":"invalid_argument","message":"...","status":400,"param":"product","accepted":["BTC-USD","ETH-USD"]}
//
// "error" is the gRPC code in snake case (or "method_not_allowed"),
// "status" repeats the HTTP status, "param" and "accepted" appear when a
// parameter is to blame. gRPC codes become HTTP statuses here and nowhere
// else, by grpc-gateway's standard table (runtime.HTTPStatusFromCode):
//
//	InvalidArgument, FailedPrecondition, OutOfRange  400
//	NotFound                                         404
//	Unimplemented                                    501
//	Unavailable                                      503
//	DeadlineExceeded                                 504
//	Internal, Unknown, DataLoss                      500

// errorHandler returns the handler of errors from proxied calls: gRPC
// statuses from the service, and the gateway's own failures (a response it
// cannot write, say), which are logged and answered 500 with a fixed text.
func errorHandler(logger *slog.Logger) runtime.ErrorHandlerFunc {
	return func(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
		st, ok := status.FromError(err)
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			st = status.New(codes.DeadlineExceeded, "deadline exceeded")
		case !ok:
			logger.ErrorContext(ctx, "gateway error", "path", r.URL.Path, "err", err)
			st = status.New(codes.Internal, "internal error")
		}
		writeStatus(w, r, st)
	}
}

// writeStatus writes a gRPC status as the Error body.
func writeStatus(w http.ResponseWriter, r *http.Request, st *status.Status) {
	code := st.Code()
	body := &tollgatev1.Error{Error: codeName(code), Message: st.Message()}
	for _, d := range st.Details() {
		if e, ok := d.(*tollgatev1.Error); ok {
			body.Param, body.Accepted = e.Param, e.Accepted
		}
	}
	writeError(w, r, runtime.HTTPStatusFromCode(code), body)
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

// writeError writes body with the given status. The body's status field is
// set here, so it always equals the HTTP status, and text that echoes the
// request (paths, parameter names) is made valid UTF-8, so that a request
// with %FF in it gets its 400 or 404 rather than a marshaling failure.
func writeError(w http.ResponseWriter, _ *http.Request, httpStatus int, body *tollgatev1.Error) {
	body.Status = int32(httpStatus)
	body.Message = strings.ToValidUTF8(body.Message, "\uFFFD")
	if body.Param != nil {
		p := strings.ToValidUTF8(body.GetParam(), "\uFFFD")
		body.Param = &p
	}
	for i, a := range body.Accepted {
		body.Accepted[i] = strings.ToValidUTF8(a, "\uFFFD")
	}
	out, err := (&restJSON{}).Marshal(body)
	if err != nil { // unreachable: every string above is valid UTF-8
		out = []byte(`{"error":"internal","message":"internal error","status":500,"accepted":[]}`)
		httpStatus = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(httpStatus)
	_, _ = w.Write(out)
}

// codeName returns a gRPC code in snake case: InvalidArgument ->
// "invalid_argument".
func codeName(c codes.Code) string {
	var out []rune
	for i, r := range c.String() {
		if unicode.IsUpper(r) {
			if i > 0 {
				out = append(out, '_')
			}
			r = unicode.ToLower(r)
		}
		out = append(out, r)
	}
	return string(out)
}
