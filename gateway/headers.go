package gateway

import (
	"fmt"
	"net/http"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
)

// LimitHeaderBytes answers 431 with the JSON Error body when a request's
// line and headers exceed max bytes, before next runs. net/http's own
// limit (http.Server.MaxHeaderBytes) answers in plain text, so the server
// sets it well above max and this is the limit clients meet.
func LimitHeaderBytes(max int, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := headerBytes(r); n > max {
			writeError(w, r, http.StatusRequestHeaderFieldsTooLarge, &tollgatev1.Error{
				Error:   "request_header_fields_too_large",
				Message: fmt.Sprintf("the request line and headers are %d bytes; at most %d are accepted", n, max),
			})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// headerBytes is about what the request line and headers took on the
// wire: each "Name: value\r\n" and the request line.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4 + len("Host: \r\n") + len(r.Host)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}
