package exact

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/payment"
)

// AdapterConfig is what exact's side of the facilitator HTTP API
// accepts.
type AdapterConfig struct {
	Network   string // CAIP-2, "eip155:8453"
	NetworkV1 string // "base"
	ChainID   *big.Int
	// PayTo lists the recipients it settles for; the gas key is not spent
	// on anyone else's payments.
	PayTo []common.Address
}

// Adapter serves a Facilitator (Local) as exact's payment.SchemeFacilitator:
// it reads a /verify or /settle request's payload and requirement, in
// either protocol version, and writes the standard answer.
type Adapter struct {
	cfg AdapterConfig
	f   Facilitator
}

var _ payment.SchemeFacilitator = (*Adapter)(nil)

// NewAdapter returns exact's facilitator side over f.
func NewAdapter(cfg AdapterConfig, f Facilitator) *Adapter { return &Adapter{cfg: cfg, f: f} }

// Versions implements payment.SchemeFacilitator: exact takes v1 and v2.
func (a *Adapter) Versions() []int { return []int{2, 1} }

// Extra implements payment.SchemeFacilitator: exact's kinds carry none.
func (a *Adapter) Extra() map[string]any { return nil }

// Verify implements payment.SchemeFacilitator.
func (a *Adapter) Verify(ctx context.Context, payload, requirements json.RawMessage) (any, error) {
	p, req, err := a.request(payload, requirements)
	if err != nil {
		return nil, &payment.RequestError{Err: err}
	}
	v, err := a.f.Verify(ctx, p, req)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"isValid": v.Valid, "payer": v.Payer.Hex()}
	if !v.Valid {
		out["invalidReason"], out["invalidMessage"] = v.Reason, v.Message
	}
	return out, nil
}

// Settle implements payment.SchemeFacilitator.
func (a *Adapter) Settle(ctx context.Context, payload, requirements json.RawMessage) (any, error) {
	p, req, err := a.request(payload, requirements)
	if err != nil {
		return nil, &payment.RequestError{Err: err}
	}
	network := req.Network
	if p.Version == 1 {
		network = req.NetworkV1
	}
	st, err := a.f.Settle(ctx, p, req)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"success": st.Success, "transaction": txOrEmpty(st.Tx), "network": network, "payer": st.Payer.Hex()}
	if !st.Success {
		out["errorReason"], out["errorMessage"] = st.Reason, st.Message
	}
	return out, nil
}

// request decodes a payload and the requirement it must meet.
func (a *Adapter) request(payload, requirements json.RawMessage) (*Payment, *payment.Requirement, error) {
	var version struct {
		X402Version int `json:"x402Version"`
	}
	_ = json.Unmarshal(payload, &version)
	p, err := DecodePayload(payload, version.X402Version)
	if err != nil {
		return nil, nil, err
	}
	req := &payment.Requirement{Network: a.cfg.Network, NetworkV1: a.cfg.NetworkV1, ChainID: a.cfg.ChainID}
	if p.Version == 1 {
		var v1 payment.RequirementsV1
		if err := json.Unmarshal(requirements, &v1); err != nil {
			return nil, nil, err
		}
		err = a.fill(req, v1.Network, v1.Scheme, v1.MaxAmountRequired, v1.Asset, v1.PayTo, v1.Extra, v1.MaxTimeoutSeconds)
		req.Resource, req.Description, req.MimeType = v1.Resource, v1.Description, v1.MimeType
		return p, req, err
	}
	var v2 payment.RequirementsV2
	if err := json.Unmarshal(requirements, &v2); err != nil {
		return nil, nil, err
	}
	return p, req, a.fill(req, v2.Network, v2.Scheme, v2.Amount, v2.Asset, v2.PayTo, v2.Extra, v2.MaxTimeoutSeconds)
}

func (a *Adapter) fill(req *payment.Requirement, network, scheme, amount, asset, payTo string, extra payment.Extra, timeout int) error {
	if network != req.Network && network != req.NetworkV1 {
		return fmt.Errorf("network %q is not supported", network)
	}
	if scheme != Scheme {
		return fmt.Errorf("scheme %q is not supported", scheme)
	}
	v, ok := new(big.Int).SetString(amount, 10)
	if !ok || !common.IsHexAddress(asset) || !common.IsHexAddress(payTo) {
		return fmt.Errorf("requirement amount, asset or payTo is malformed")
	}
	req.Amount, req.Asset, req.PayTo = v, common.HexToAddress(asset), common.HexToAddress(payTo)
	if !slices.Contains(a.cfg.PayTo, req.PayTo) {
		return fmt.Errorf("payTo %s is not served by this facilitator", req.PayTo)
	}
	req.AssetName, req.AssetVersion, req.MaxTimeout = extra.Name, extra.Version, timeout
	return nil
}
