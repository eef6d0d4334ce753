package payment

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
)

// This file is the gate's REST transport (x402's HTTP transport,
// specs/transports-v2/http.md): the middleware in front of the gateway,
// the 402 with its v1 body and v2 PAYMENT-REQUIRED header, the payment
// headers in, PAYMENT-RESPONSE out.

// Handler returns next guarded by x402: free routes pass through; paid
// routes are verified before next runs and settled only if it succeeds.
func (g *Gate) Handler(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range g.routes {
		mux.Handle(rt.Pattern, g.paid(rt, next))
	}
	mux.Handle("/", next)
	return cors(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == "" || p[0] != '/' || path.Clean(p) != strings.TrimSuffix(p, "/") && p != "/" {
			next.ServeHTTP(w, r) // unclean paths are the handler's to refuse, not ServeMux's to redirect
			return
		}
		mux.ServeHTTP(w, r)
	}))
}

// cors lets browser clients pay: the payment headers are exposed and may
// be sent.
func cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Expose-Headers", HeaderPaymentRequired+", "+HeaderPaymentResponseV2+", "+HeaderPaymentResponseV1)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
			h.Set("Access-Control-Allow-Headers", HeaderPaymentV1+", "+HeaderPaymentV2+", "+HeaderSIWx+", Content-Type")
			h.Set("Access-Control-Max-Age", "86400")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (g *Gate) paid(rt *route, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rt.Valid(r) {
			next.ServeHTTP(w, r) // the handler answers 400; nothing is charged
			return
		}
		header, version := r.Header.Get(HeaderPaymentV2), 2
		if header == "" {
			header, version = r.Header.Get(HeaderPaymentV1), 1
		}
		if signIn := r.Header.Get(HeaderSIWx); header == "" && signIn != "" && g.cfg.SignIn != nil && r.Method == http.MethodGet {
			g.signedIn(w, r, rt, signIn)
			return
		}
		if header == "" || r.Method == http.MethodHead {
			// HEAD is never charged: it would buy headers and no body.
			rt.challenges.Add(1)
			g.obs.Challenged(rt.Name, TransportREST)
			g.unpaid(w, rt, g.base+r.URL.RequestURI())
			return
		}
		g.obs.Presented(rt.Name, TransportREST)
		req := g.requirement(rt, r)
		raw, err := decodeBase64(header)
		var env *Envelope
		if err == nil {
			env, err = ParseEnvelope(raw, version)
		}
		if err != nil {
			// A header that is not a payment at all is a client bug: 400.
			var ve *VerifyError
			errors.As(err, &ve)
			g.obs.Refused(req.Operation, TransportREST, ve.Reason)
			writeJSONError(w, http.StatusBadRequest, ve.Reason, ve.Message)
			return
		}
		id, bad := paymentID(env)
		if bad != nil {
			g.obs.Refused(req.Operation, TransportREST, bad.Reason)
			writeJSONError(w, http.StatusBadRequest, bad.Reason, bad.Message)
			return
		}
		x := &Exchange{
			Requirement: req, Envelope: env, ctx: r.Context(), resource: r.URL.RequestURI(), g: g,
			run:   func() *Response { return runHandler(next, r) },
			reply: &httpReply{w: w, version: version, req: req},
		}
		s, why := g.match(env, req, func(paid string) bool { return g.sameResourceURL(paid, r.URL) })
		if why != nil {
			x.Challenge(why.Reason, why.Message, "", nil, nil)
			return
		}
		g.serve(s, x, id)
	})
}

// sameResourceURL reports whether a v2 payment's resource URL names the
// requested resource: our public origin, the same path and the same query
// parameters (see SameResource).
func (g *Gate) sameResourceURL(paid string, requested *url.URL) bool {
	u, err := url.Parse(paid)
	base := g.origin
	if err != nil || base == nil || !strings.EqualFold(u.Scheme, base.Scheme) || !strings.EqualFold(u.Host, base.Host) {
		return false
	}
	return SameResource(u.RequestURI(), requested.RequestURI())
}

// writePaid writes a paid answer (its settlement header already set):
// the handler's headers, kept out of shared caches, then the body.
func writePaid(w http.ResponseWriter, header http.Header, status int, body []byte) {
	for k, v := range header {
		w.Header()[k] = v
	}
	paidHeaders(w)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// paidHeaders keep a paid answer out of shared caches.
func paidHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Cache-Control", "private, no-store")
	h.Add("Vary", HeaderPaymentV2+", "+HeaderPaymentV1+", "+HeaderSIWx)
}

// requirement is what r must pay.
func (g *Gate) requirement(rt *route, r *http.Request) *Requirement {
	return g.requirementFor(rt, g.base+r.URL.RequestURI())
}

// unpaid writes the challenge for a request that carries no payment, from
// the route's pre-encoded template.
func (g *Gate) unpaid(w http.ResponseWriter, rt *route, resource string) {
	quoted, _ := json.Marshal(resource)
	values := [4][]byte{quoted}
	if g.cfg.SignIn != nil {
		siwx := siwxValues(time.Now())
		copy(values[1:], siwx[:])
	}
	v2 := rt.v2JSON.render(values[:])
	body := rt.v1Body[0]
	if rt.v1Body[1] != nil {
		body = make([]byte, 0, len(rt.v1Body[0])+len(quoted)+len(rt.v1Body[1]))
		body = append(append(append(body, rt.v1Body[0]...), quoted...), rt.v1Body[1]...)
	}
	h := w.Header()
	h.Set(HeaderPaymentRequired, base64.StdEncoding.EncodeToString(v2))
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusPaymentRequired)
	_, _ = w.Write(body)
}

// writeObjects writes a 402: v1 as the body, v2 as PAYMENT-REQUIRED.
func writeObjects(w http.ResponseWriter, v1 RequiredV1, v2 RequiredV2) {
	h := w.Header()
	if hv, err := EncodeHeader(v2); err == nil {
		h.Set(HeaderPaymentRequired, hv)
	}
	body, _ := json.Marshal(v1)
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusPaymentRequired)
	_, _ = w.Write(body)
}

// setSettlementHeader sets the settlement header of protocol version
// for req.
func setSettlementHeader(w http.ResponseWriter, version int, req *Requirement, s SettleResponse) {
	name := HeaderPaymentResponseV2
	s.Network = req.Network
	if version == 1 {
		name, s.Network = HeaderPaymentResponseV1, req.NetworkV1
	}
	if v, err := EncodeHeader(s); err == nil {
		w.Header().Set(name, v)
	}
}

func writeJSONError(w http.ResponseWriter, status int, code, message string) {
	body := errorBody(status, code, message)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// runHandler runs next for r, holding its answer.
func runHandler(next http.Handler, r *http.Request) *Response {
	buf := &buffer{header: http.Header{}, status: http.StatusOK}
	next.ServeHTTP(buf, r)
	return &Response{status: buf.status, header: buf.header, body: buf.body.Bytes()}
}

// httpReply answers a paid REST call: a 402 with the v1 body and the v2
// PAYMENT-REQUIRED header, a JSON error, or the answer with its
// PAYMENT-RESPONSE (X-PAYMENT-RESPONSE for v1).
type httpReply struct {
	w       http.ResponseWriter
	version int
	req     *Requirement
}

func (h *httpReply) required(v1 RequiredV1, v2 RequiredV2, settlement *SettleResponse) {
	if settlement != nil {
		setSettlementHeader(h.w, h.version, h.req, *settlement)
	}
	writeObjects(h.w, v1, v2)
}

func (h *httpReply) refused(status int, code, message string) {
	writeJSONError(h.w, status, code, message)
}

// retryAfter asks a REST client to retry in seconds.
func (h *httpReply) retryAfter(seconds int) { h.w.Header().Set("Retry-After", strconv.Itoa(seconds)) }

func (h *httpReply) failure(r *Response) {
	for k, v := range r.header {
		h.w.Header()[k] = v
	}
	h.w.WriteHeader(r.status)
	_, _ = h.w.Write(r.body)
}

func (h *httpReply) paid(r *Response, s SettleResponse) {
	setSettlementHeader(h.w, h.version, h.req, s)
	writePaid(h.w, r.header, r.status, r.body)
}

// buffer holds a handler's response until the payment settles.
type buffer struct {
	header http.Header
	status int
	body   bytes.Buffer
	wrote  bool
}

func (b *buffer) Header() http.Header { return b.header }

func (b *buffer) WriteHeader(status int) {
	if !b.wrote {
		b.status, b.wrote = status, true
	}
}

func (b *buffer) Write(p []byte) (int, error) {
	b.wrote = true
	return b.body.Write(p)
}
