package payment

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// ServerConfig describes what a standalone facilitator accepts.
type ServerConfig struct {
	Network   string // CAIP-2, "eip155:8453"
	NetworkV1 string // "base"
	ChainID   *big.Int
	// PayTo lists the recipients it settles for; the gas key is not spent
	// on anyone else's payments.
	PayTo []common.Address
	// Schemes are the facilitator sides of the schemes it speaks besides
	// exact, by scheme name ("batch-settlement"): /verify and /settle
	// requests whose paymentRequirements.scheme names one are theirs.
	Schemes map[string]SchemeFacilitator
}

// SchemeFacilitator is a scheme's facilitator side as the HTTP API
// serves it: it takes a request's paymentPayload and paymentRequirements
// as they came and returns the answer to write as JSON (200), or an
// error when the chain could not be asked (502). batch.Adapter is one.
type SchemeFacilitator interface {
	Verify(ctx context.Context, payload, requirements json.RawMessage) (any, error)
	Settle(ctx context.Context, payload, requirements json.RawMessage) (any, error)
	// Extra is the extra object of the scheme's /supported kind; nil or
	// empty for none.
	Extra() map[string]any
}

// Server serves a facilitator over the standard x402 HTTP API, so other
// x402 servers can use Tollgate's self-hosted one: POST /verify and POST
// /settle take {x402Version, paymentPayload, paymentRequirements} and
// answer 200 with the outcome (valid or not), 400 for an unparseable
// request, 5xx only when the chain cannot be asked; GET /supported lists
// the kinds and the signer. Requests for a scheme of ServerConfig.Schemes
// go to it.
type Server struct {
	cfg    ServerConfig
	local  *Local
	signer common.Address
}

// NewServer returns the facilitator HTTP API over local.
func NewServer(cfg ServerConfig, local *Local) *Server {
	return &Server{cfg: cfg, local: local, signer: local.Signer()}
}

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /supported", s.supported)
	mux.HandleFunc("POST /verify", s.verify)
	mux.HandleFunc("POST /settle", s.settle)
	return mux
}

func (s *Server) supported(w http.ResponseWriter, _ *http.Request) {
	kinds := []map[string]any{
		{"x402Version": 2, "scheme": "exact", "network": s.cfg.Network},
		{"x402Version": 1, "scheme": "exact", "network": s.cfg.NetworkV1},
	}
	names := make([]string, 0, len(s.cfg.Schemes))
	for name := range s.cfg.Schemes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		kind := map[string]any{"x402Version": 2, "scheme": name, "network": s.cfg.Network}
		if extra := s.cfg.Schemes[name].Extra(); len(extra) > 0 {
			kind["extra"] = extra
		}
		kinds = append(kinds, kind)
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

// incoming is a /verify or /settle request as read: its bytes (or why
// they could not be read), and the scheme facilitator it is for with its
// decoded body (nil: exact's, decoded by request).
type incoming struct {
	raw     []byte
	readErr error
	scheme  SchemeFacilitator
	body    facilitatorBody
}

// read reads a /verify or /settle request and dispatches it on
// paymentRequirements.scheme.
// A scheme's request may be larger than an exact payment (a claim of a
// hundred vouchers is about 70 KB); exact's requests are read up to
// exactBody, as they always were.
const (
	exactBody  = 64 << 10
	schemeBody = 1 << 20
)

func (s *Server) read(r *http.Request) incoming {
	var in incoming
	limit := int64(exactBody)
	if len(s.cfg.Schemes) > 0 {
		limit = schemeBody
	}
	in.raw, in.readErr = io.ReadAll(io.LimitReader(r.Body, limit))
	if in.readErr == nil && len(s.cfg.Schemes) > 0 && json.Unmarshal(in.raw, &in.body) == nil {
		var req struct {
			Scheme string `json:"scheme"`
		}
		if json.Unmarshal(in.body.PaymentRequirements, &req) == nil {
			in.scheme = s.cfg.Schemes[req.Scheme]
		}
	}
	if in.scheme == nil && len(in.raw) > exactBody {
		in.raw = in.raw[:exactBody]
	}
	return in
}

// request decodes a /verify or /settle body into a payment and the
// server-side requirement it must meet.
func (s *Server) request(in incoming) (*Payment, *Requirement, error) {
	var body facilitatorBody
	if in.readErr != nil {
		return nil, nil, in.readErr
	}
	raw := in.raw
	if err := json.Unmarshal(raw, &body); err != nil || body.PaymentPayload == nil || body.PaymentRequirements == nil {
		return nil, nil, fmt.Errorf("want {x402Version, paymentPayload, paymentRequirements}")
	}
	var version struct {
		X402Version int `json:"x402Version"`
	}
	_ = json.Unmarshal(body.PaymentPayload, &version)
	p, err := DecodePayload(body.PaymentPayload, version.X402Version)
	if err != nil {
		return nil, nil, err
	}
	req := &Requirement{Network: s.cfg.Network, NetworkV1: s.cfg.NetworkV1, ChainID: s.cfg.ChainID}
	if p.Version == 1 {
		var v1 RequirementsV1
		if err := json.Unmarshal(body.PaymentRequirements, &v1); err != nil {
			return nil, nil, err
		}
		err = fill(req, s.cfg.PayTo, v1.Network, v1.Scheme, v1.MaxAmountRequired, v1.Asset, v1.PayTo, v1.Extra, v1.MaxTimeoutSeconds)
		req.Resource, req.Description, req.MimeType = v1.Resource, v1.Description, v1.MimeType
		return p, req, err
	}
	var v2 RequirementsV2
	if err := json.Unmarshal(body.PaymentRequirements, &v2); err != nil {
		return nil, nil, err
	}
	return p, req, fill(req, s.cfg.PayTo, v2.Network, v2.Scheme, v2.Amount, v2.Asset, v2.PayTo, v2.Extra, v2.MaxTimeoutSeconds)
}

func fill(req *Requirement, allowed []common.Address, network, scheme, amount, asset, payTo string, extra Extra, timeout int) error {
	if network != req.Network && network != req.NetworkV1 {
		return fmt.Errorf("network %q is not supported", network)
	}
	if scheme != "exact" {
		return fmt.Errorf("scheme %q is not supported", scheme)
	}
	v, ok := new(big.Int).SetString(amount, 10)
	if !ok || !common.IsHexAddress(asset) || !common.IsHexAddress(payTo) {
		return fmt.Errorf("requirement amount, asset or payTo is malformed")
	}
	req.Amount, req.Asset, req.PayTo = v, common.HexToAddress(asset), common.HexToAddress(payTo)
	if !slices.Contains(allowed, req.PayTo) {
		return fmt.Errorf("payTo %s is not served by this facilitator", req.PayTo)
	}
	req.AssetName, req.AssetVersion, req.MaxTimeout = extra.Name, extra.Version, timeout
	return nil
}

func (s *Server) verify(w http.ResponseWriter, r *http.Request) {
	in := s.read(r)
	if in.scheme != nil {
		s.answer(w, in.body, false, func(payload, requirements json.RawMessage) (any, error) {
			return in.scheme.Verify(r.Context(), payload, requirements)
		})
		return
	}
	p, req, err := s.request(in)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"isValid": false, "invalidReason": ReasonInvalidPayload, "invalidMessage": err.Error()})
		return
	}
	v, err := s.local.Verify(r.Context(), p, req)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]any{"error": "the chain could not be asked"})
		return
	}
	out := map[string]any{"isValid": v.Valid, "payer": v.Payer.Hex()}
	if !v.Valid {
		out["invalidReason"], out["invalidMessage"] = v.Reason, v.Message
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) settle(w http.ResponseWriter, r *http.Request) {
	in := s.read(r)
	if in.scheme != nil {
		// What a scheme sends is sent whatever the caller does meanwhile.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Minute)
		defer cancel()
		s.answer(w, in.body, true, func(payload, requirements json.RawMessage) (any, error) {
			return in.scheme.Settle(ctx, payload, requirements)
		})
		return
	}
	p, req, err := s.request(in)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"success": false, "errorReason": ReasonInvalidPayload, "errorMessage": err.Error(), "transaction": "", "network": ""})
		return
	}
	network := req.Network
	if p.Version == 1 {
		network = req.NetworkV1
	}
	// The transfer is sent whatever the caller does meanwhile.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Minute)
	defer cancel()
	st, err := s.local.Settle(ctx, p, req)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]any{"error": "the chain could not be asked"})
		return
	}
	out := map[string]any{"success": st.Success, "transaction": "", "network": network, "payer": st.Payer.Hex()}
	if st.Tx != (common.Hash{}) {
		out["transaction"] = st.Tx.Hex()
	}
	if !st.Success {
		out["errorReason"], out["errorMessage"] = st.Reason, st.Message
	}
	writeJSON(w, http.StatusOK, out)
}

// answer writes a scheme facilitator's answer to a /verify or /settle
// request (settle tells which), as exact's are written: 400 for a
// request without its payload or requirements, 502 when the chain could
// not be asked.
func (s *Server) answer(w http.ResponseWriter, body facilitatorBody, settle bool, do func(payload, requirements json.RawMessage) (any, error)) {
	if absent(body.PaymentPayload) || absent(body.PaymentRequirements) {
		msg := "want {x402Version, paymentPayload, paymentRequirements}"
		if settle {
			writeJSON(w, http.StatusBadRequest, map[string]any{"success": false, "errorReason": ReasonInvalidPayload, "errorMessage": msg, "transaction": "", "network": ""})
		} else {
			writeJSON(w, http.StatusBadRequest, map[string]any{"isValid": false, "invalidReason": ReasonInvalidPayload, "invalidMessage": msg})
		}
		return
	}
	out, err := do(body.PaymentPayload, body.PaymentRequirements)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]any{"error": "the chain could not be asked"})
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func absent(v json.RawMessage) bool { return len(v) == 0 || string(v) == "null" }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
