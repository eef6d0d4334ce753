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

// Client is the transport to a remote facilitator over the standard
// x402 HTTP API (POST /verify, POST /settle) that every scheme's remote
// facilitator (exact.Remote, batch.Remote) speaks through: it decodes
// strictly (a reply without its verdict field is an error, not a "no"),
// never retries, authenticates and bounds every request.
type Client struct {
	cfg   ClientConfig
	base  string
	httpc *http.Client
	auth  func(method, rawURL string) (string, error) // Authorization header, or ""
}

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

// Post sends body as JSON to the facilitator's op endpoint (POST /verify,
// POST /settle) and decodes the reply into out, with the client's
// timeout, authentication and error handling. A reply counts as
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
