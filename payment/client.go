package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// ClientConfig configures the remote facilitator client.
type ClientConfig struct {
	// URL is the facilitator's base URL; /verify and /settle are appended.
	URL string
	// Timeout bounds one request (settlement waits for a block: 60-90 s).
	Timeout time.Duration
	// CDPKeyID and CDPKeySecret, when set, sign each request with a
	// Coinbase Developer Platform JWT (ES256 PEM or Ed25519 base64 key).
	CDPKeyID     string
	CDPKeySecret string
}

// Validate reports every problem of c at once.
func (c ClientConfig) Validate() error {
	var errs []error
	if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("facilitator: URL %q is not an absolute http(s) URL", c.URL))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("facilitator: timeout must be positive"))
	}
	if (c.CDPKeyID == "") != (c.CDPKeySecret == "") {
		errs = append(errs, errors.New("facilitator: CDP key id and secret go together"))
	}
	return errors.Join(errs...)
}

// Client asks a remote facilitator over the standard x402 HTTP API
// (POST /verify, POST /settle). It decodes strictly (a reply without
// isValid or success is an error, not a "no"), never retries a settle,
// and bounds every request.
type Client struct {
	cfg   ClientConfig
	base  string
	httpc *http.Client
	auth  func(method, rawURL string) (string, error) // Authorization header, or ""
}

var _ Facilitator = (*Client)(nil)

// NewClient returns a facilitator client; it does no I/O.
func NewClient(cfg ClientConfig, httpc *http.Client) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, base: strings.TrimSuffix(cfg.URL, "/"), httpc: httpc}
	if cfg.CDPKeyID != "" {
		signer, err := newCDPSigner(cfg.CDPKeyID, cfg.CDPKeySecret)
		if err != nil {
			return nil, err
		}
		c.auth = func(method, rawURL string) (string, error) {
			tok, err := signer.token(method, rawURL, time.Now())
			return "Bearer " + tok, err
		}
	}
	return c, nil
}

type facilitatorRequest struct {
	X402Version         int             `json:"x402Version"`
	PaymentPayload      json.RawMessage `json:"paymentPayload"`
	PaymentRequirements any             `json:"paymentRequirements"`
}

// requirementsFor returns r in the payment's protocol version.
func requirementsFor(p *Payment, r *Requirement) any {
	if p.Version == 1 {
		return RequirementsV1{
			Scheme: "exact", Network: r.NetworkV1, MaxAmountRequired: r.Amount.String(), Resource: r.Resource,
			Description: r.Description, MimeType: r.MimeType, PayTo: r.PayTo.Hex(), MaxTimeoutSeconds: r.MaxTimeout,
			Asset: r.Asset.Hex(), Extra: Extra{Name: r.AssetName, Version: r.AssetVersion}, OutputSchema: map[string]any{},
		}
	}
	return r.V2()
}

// Verify implements Facilitator.
func (c *Client) Verify(ctx context.Context, p *Payment, r *Requirement) (Verification, error) {
	var out struct {
		IsValid        *bool  `json:"isValid"`
		InvalidReason  string `json:"invalidReason"`
		InvalidMessage string `json:"invalidMessage"`
		Payer          string `json:"payer"`
	}
	if err := c.post(ctx, "verify", p, r, &out, func() bool { return out.IsValid != nil }); err != nil {
		return Verification{}, err
	}
	v := Verification{Valid: *out.IsValid, Reason: out.InvalidReason, Message: out.InvalidMessage, Payer: p.Authorization.From}
	if !v.Valid && v.Reason == "" {
		v.Reason = ReasonUnexpectedVerify
	}
	return v, nil
}

// Settle implements Facilitator. It is never retried: a settle that may
// have been broadcast must not be sent twice.
func (c *Client) Settle(ctx context.Context, p *Payment, r *Requirement) (Settlement, error) {
	var out struct {
		Success      *bool  `json:"success"`
		ErrorReason  string `json:"errorReason"`
		ErrorMessage string `json:"errorMessage"`
		Transaction  string `json:"transaction"`
		Payer        string `json:"payer"`
	}
	if err := c.post(ctx, "settle", p, r, &out, func() bool { return out.Success != nil }); err != nil {
		return Settlement{}, err
	}
	s := Settlement{Success: *out.Success, Reason: out.ErrorReason, Message: out.ErrorMessage, Payer: p.Authorization.From}
	if out.Transaction != "" {
		s.Tx = common.HexToHash(out.Transaction)
	}
	if !s.Success && s.Reason == ReasonSettlementPending && out.Transaction != "" {
		s.Pending = true
	}
	if s.Success && out.Transaction == "" {
		return Settlement{}, &FacilitatorError{Op: "settle", Err: errors.New("success without a transaction")}
	}
	return s, nil
}

// post sends one request and decodes the reply into out. A reply counts
// as an outcome when decoded() says its verdict field is present, whatever
// the status (facilitators differ); anything else is a FacilitatorError.
func (c *Client) post(ctx context.Context, op string, p *Payment, r *Requirement, out any, decoded func() bool) error {
	return c.Post(ctx, op, facilitatorRequest{X402Version: p.Version, PaymentPayload: p.Raw, PaymentRequirements: requirementsFor(p, r)}, out, decoded)
}

// Post sends body as JSON to the facilitator's op endpoint (POST /verify,
// POST /settle) and decodes the reply into out, with the client's
// timeout, authentication and error handling: the transport a scheme's
// facilitator client (batch.Remote) shares with exact's. A reply counts as
// an answer when decoded() says its verdict field is present, whatever the
// status; anything else is a *FacilitatorError.
func (c *Client) Post(ctx context.Context, op string, body, out any, decoded func() bool) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return c.send(ctx, op, b, out, decoded)
}

func (c *Client) send(ctx context.Context, op string, body []byte, out any, decoded func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	u := c.base + "/" + op
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return &FacilitatorError{Op: op, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if c.auth != nil {
		h, err := c.auth(http.MethodPost, u)
		if err != nil {
			return &FacilitatorError{Op: op, Err: fmt.Errorf("auth: %w", err)}
		}
		req.Header.Set("Authorization", h)
	}
	resp, err := c.httpc.Do(req)
	if err != nil {
		return &FacilitatorError{Op: op, Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return &FacilitatorError{Op: op, Err: err}
	}
	if jerr := json.Unmarshal(raw, out); jerr == nil && decoded() {
		return nil
	}
	snippet := string(raw)
	if len(snippet) > 200 {
		snippet = snippet[:200] + "..."
	}
	return &FacilitatorError{Op: op, Err: fmt.Errorf("HTTP %d: %s", resp.StatusCode, snippet)}
}
