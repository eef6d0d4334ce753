package payment

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
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
}

// Server serves a facilitator over the standard x402 HTTP API, so other
// x402 servers can use Tollgate's self-hosted one: POST /verify and POST
// /settle take {x402Version, paymentPayload, paymentRequirements} and
// answer 200 with the outcome (valid or not), 400 for an unparseable
// request, 5xx only when the chain cannot be asked; GET /supported lists
// the kinds and the signer.
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
	writeJSON(w, http.StatusOK, map[string]any{
		"kinds": []map[string]any{
			{"x402Version": 2, "scheme": "exact", "network": s.cfg.Network},
			{"x402Version": 1, "scheme": "exact", "network": s.cfg.NetworkV1},
		},
		"extensions": []string{},
		"signers":    map[string][]string{"eip155:*": {s.signer.Hex()}},
	})
}

// request decodes a /verify or /settle body into a payment and the
// server-side requirement it must meet.
func (s *Server) request(r *http.Request) (*Payment, *Requirement, error) {
	var body struct {
		X402Version         int             `json:"x402Version"`
		PaymentPayload      json.RawMessage `json:"paymentPayload"`
		PaymentRequirements json.RawMessage `json:"paymentRequirements"`
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		return nil, nil, err
	}
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
	p, req, err := s.request(r)
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
	p, req, err := s.request(r)
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

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
