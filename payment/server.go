package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// ServerConfig describes what a standalone facilitator accepts.
type ServerConfig struct {
	Network   string // CAIP-2, "eip155:8453"
	NetworkV1 string // "base", listed for the schemes that take x402 v1
	// Schemes are the facilitator sides of the schemes it speaks, by
	// scheme name ("exact", "batch-settlement"): /verify and /settle
	// requests go to the one their paymentRequirements.scheme names.
	Schemes map[string]SchemeFacilitator
}

// SchemeFacilitator is a scheme's facilitator side as the HTTP API
// serves it: it takes a request's paymentPayload and paymentRequirements
// as they came and returns the answer to write as JSON (200), a
// *RequestError for a request it cannot read (400), or another error
// when the chain could not be asked (502). exact.Adapter and
// batch.Adapter are two.
type SchemeFacilitator interface {
	Verify(ctx context.Context, payload, requirements json.RawMessage) (any, error)
	Settle(ctx context.Context, payload, requirements json.RawMessage) (any, error)
	// Extra is the extra object of the scheme's /supported kinds; nil or
	// empty for none.
	Extra() map[string]any
	// Versions are the x402 versions it takes, one /supported kind each.
	Versions() []int
}

// RequestError is a /verify or /settle request a scheme could not read
// (a malformed payload or requirement, a payTo not served): 400.
type RequestError struct{ Err error }

func (e *RequestError) Error() string { return e.Err.Error() }

func (e *RequestError) Unwrap() error { return e.Err }

// Server serves a facilitator over the standard x402 HTTP API, so other
// x402 servers can use Tollgate's self-hosted one: POST /verify and POST
// /settle take {x402Version, paymentPayload, paymentRequirements} and
// answer 200 with the outcome (valid or not), 400 for an unreadable
// request or a scheme it does not speak, 5xx only when the chain cannot
// be asked; GET /supported lists the kinds and the signer.
type Server struct {
	cfg    ServerConfig
	signer common.Address
}

// NewServer returns the facilitator HTTP API; signer is the gas key's
// address, listed in /supported.
func NewServer(cfg ServerConfig, signer common.Address) *Server {
	return &Server{cfg: cfg, signer: signer}
}

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /supported", s.supported)
	mux.HandleFunc("POST /verify", func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, false, SchemeFacilitator.Verify)
	})
	mux.HandleFunc("POST /settle", func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, true, SchemeFacilitator.Settle)
	})
	return mux
}

func (s *Server) supported(w http.ResponseWriter, _ *http.Request) {
	names := make([]string, 0, len(s.cfg.Schemes))
	for name := range s.cfg.Schemes {
		names = append(names, name)
	}
	sort.Strings(names)
	kinds := []map[string]any{}
	for _, version := range []int{2, 1} {
		for _, name := range names {
			f := s.cfg.Schemes[name]
			if !slices.Contains(f.Versions(), version) {
				continue
			}
			kind := map[string]any{"x402Version": version, "scheme": name, "network": s.cfg.Network}
			if version == 1 {
				kind["network"] = s.cfg.NetworkV1
			}
			if extra := f.Extra(); len(extra) > 0 {
				kind["extra"] = extra
			}
			kinds = append(kinds, kind)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"kinds":      kinds,
		"extensions": []string{},
		"signers":    map[string][]string{"eip155:*": {s.signer.Hex()}},
	})
}

// facilitatorBody is a /verify or /settle request.
type facilitatorBody struct {
	X402Version         int             `json:"x402Version"`
	PaymentPayload      json.RawMessage `json:"paymentPayload"`
	PaymentRequirements json.RawMessage `json:"paymentRequirements"`
}

// maxBody bounds a /verify or /settle request: a claim of a hundred
// batch-settlement vouchers is about 70 KB, an exact payment under 1 KB.
const maxBody = 1 << 20

// serve answers a /verify or /settle request (settle tells which) with
// the facilitator side of the scheme its paymentRequirements.scheme
// names: 400 for a request without its payload or requirements, for a
// scheme not spoken or one the scheme cannot read; 502 when the chain
// could not be asked.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, settle bool, do func(SchemeFacilitator, context.Context, json.RawMessage, json.RawMessage) (any, error)) {
	ctx := r.Context()
	if settle {
		// What a scheme sends is sent whatever the caller does meanwhile.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
	}
	var body facilitatorBody
	var scheme struct {
		Scheme string `json:"scheme"`
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	if err != nil || absent(body.PaymentPayload) || absent(body.PaymentRequirements) {
		refuseRequest(w, settle, "want {x402Version, paymentPayload, paymentRequirements}")
		return
	}
	_ = json.Unmarshal(body.PaymentRequirements, &scheme)
	f := s.cfg.Schemes[scheme.Scheme]
	if f == nil {
		refuseRequest(w, settle, fmt.Sprintf("scheme %q is not supported", scheme.Scheme))
		return
	}
	out, err := do(f, ctx, body.PaymentPayload, body.PaymentRequirements)
	var bad *RequestError
	switch {
	case errors.As(err, &bad):
		refuseRequest(w, settle, bad.Error())
	case err != nil:
		writeJSON(w, http.StatusBadGateway, map[string]any{"error": "the chain could not be asked"})
	default:
		writeJSON(w, http.StatusOK, out)
	}
}

// refuseRequest answers 400 in the shape of the request's answer.
func refuseRequest(w http.ResponseWriter, settle bool, msg string) {
	if settle {
		writeJSON(w, http.StatusBadRequest, map[string]any{"success": false, "errorReason": ReasonInvalidPayload, "errorMessage": msg, "transaction": "", "network": ""})
	} else {
		writeJSON(w, http.StatusBadRequest, map[string]any{"isValid": false, "invalidReason": ReasonInvalidPayload, "invalidMessage": msg})
	}
}

func absent(v json.RawMessage) bool { return len(v) == 0 || string(v) == "null" }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
