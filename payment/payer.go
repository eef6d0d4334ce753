package payment

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// Payer is an x402 client with an EOA key: it answers a 402 by signing an
// EIP-3009 authorization for the first exact-scheme requirement and
// retrying. It backs `tollgate pay` and the tests.
type Payer struct {
	Key     *ecdsa.PrivateKey
	HTTP    *http.Client
	Version int // 1 or 2
	// Networks maps x402 v1 network names to chain ids.
	Networks map[string]int64
	// MaxAmount caps what one call may cost, in the asset's atomic units;
	// a 402 asking more is refused, not paid.
	MaxAmount *big.Int
	// Scheme, when set, pays v2 402s that offer it instead of exact
	// (batch.Session is one); a 402 without it is paid with exact.
	Scheme SchemeClient
}

// SchemeClient pays one x402 scheme other than exact for a Payer: it
// signs, reads the settlement of what it paid, and recovers from a 402
// refusing its payment.
type SchemeClient interface {
	// Name is the scheme's name in accepts entries.
	Name() string
	// Pay returns the PAYMENT-SIGNATURE value paying entry (on chain
	// chainID) for resource.
	Pay(entry RequirementsV2, resource *ResourceV2, chainID int64) (string, error)
	// Paid reads a paid answer's settlement.
	Paid(entry RequirementsV2, s SettleResponse) error
	// Recover reads the 402 that refused a payment; true: sign again and
	// retry (once).
	Recover(refused RequiredV2) bool
}

// Get fetches url, paying if the server asks.
func (p *Payer) Get(ctx context.Context, url string) (*PaidResult, error) {
	first, err := p.do(ctx, url, "", "")
	if err != nil {
		return nil, err
	}
	if first.status != http.StatusPaymentRequired {
		return &PaidResult{Status: first.status, Body: first.body}, nil
	}
	if p.Scheme != nil && p.Version == 2 {
		if req, err := requiredV2(first.header); err == nil {
			for _, e := range req.Accepts {
				if e.Scheme == p.Scheme.Name() {
					return p.payScheme(ctx, url, e, &req.Resource)
				}
			}
		}
	}
	pay, err := p.sign(first)
	if err != nil {
		return nil, err
	}
	return p.Send(ctx, url, pay)
}

// payScheme pays entry with the payer's SchemeClient, retrying once
// when the client recovers from the 402 that refused its payment.
func (p *Payer) payScheme(ctx context.Context, url string, entry RequirementsV2, resource *ResourceV2) (*PaidResult, error) {
	amount, ok := new(big.Int).SetString(entry.Amount, 10)
	if !ok {
		return nil, fmt.Errorf("pay: amount %q is not an integer", entry.Amount)
	}
	if p.MaxAmount != nil && amount.Cmp(p.MaxAmount) > 0 {
		return nil, fmt.Errorf("pay: the server asks %s atomic units, above the limit of %s", amount, p.MaxAmount)
	}
	chainID, err := strconv.ParseInt(strings.TrimPrefix(entry.Network, "eip155:"), 10, 64)
	if err != nil || !strings.HasPrefix(entry.Network, "eip155:") {
		return nil, fmt.Errorf("pay: network %q is not an EVM chain", entry.Network)
	}
	for attempt := 0; ; attempt++ {
		value, err := p.Scheme.Pay(entry, resource, chainID)
		if err != nil {
			return nil, err
		}
		res, err := p.Send(ctx, url, SignedPayment{Header: HeaderPaymentV2, Value: value})
		if err != nil {
			return nil, err
		}
		if res.Status == http.StatusPaymentRequired && attempt == 0 && res.Settlement == nil {
			if req, err := requiredV2(res.header); err == nil && p.Scheme.Recover(req) {
				continue
			}
		}
		if res.Status == http.StatusOK && res.Settlement != nil {
			if err := p.Scheme.Paid(entry, *res.Settlement); err != nil {
				return res, err
			}
		}
		return res, nil
	}
}

// Offer asks url for its 402 and returns its v2 accepts entry of scheme,
// with the resource it names.
func (p *Payer) Offer(ctx context.Context, url, scheme string) (RequirementsV2, *ResourceV2, error) {
	first, err := p.do(ctx, url, "", "")
	if err != nil {
		return RequirementsV2{}, nil, err
	}
	if first.status != http.StatusPaymentRequired {
		return RequirementsV2{}, nil, fmt.Errorf("pay: %s answered %d, not 402", url, first.status)
	}
	req, err := requiredV2(first.header)
	if err != nil {
		return RequirementsV2{}, nil, err
	}
	for _, e := range req.Accepts {
		if e.Scheme == scheme {
			return e, &req.Resource, nil
		}
	}
	return RequirementsV2{}, nil, fmt.Errorf("pay: %s does not offer the %s scheme", url, scheme)
}

// requiredV2 decodes a 402's PAYMENT-REQUIRED header.
func requiredV2(h http.Header) (RequiredV2, error) {
	var req RequiredV2
	raw, err := base64.StdEncoding.DecodeString(h.Get(HeaderPaymentRequired))
	if err != nil {
		return req, fmt.Errorf("pay: %s header: %w", HeaderPaymentRequired, err)
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		return req, fmt.Errorf("pay: %s header: %w", HeaderPaymentRequired, err)
	}
	return req, nil
}

// SignedPayment is a signed payment header: one payment, which may be sent
// more than once (a retry) and to more than one server.
type SignedPayment struct {
	Header, Value string
	Authorization Authorization // what Value carries
}

// Sign fetches url, which must answer 402, and signs a payment for it
// without sending it.
func (p *Payer) Sign(ctx context.Context, url string) (SignedPayment, error) {
	first, err := p.do(ctx, url, "", "")
	if err != nil {
		return SignedPayment{}, err
	}
	if first.status != http.StatusPaymentRequired {
		return SignedPayment{}, fmt.Errorf("pay: %s answered %d, not 402", url, first.status)
	}
	return p.sign(first)
}

// Send GETs url with pay and returns the answer and its settlement.
func (p *Payer) Send(ctx context.Context, url string, pay SignedPayment) (*PaidResult, error) {
	second, err := p.do(ctx, url, pay.Header, pay.Value)
	if err != nil {
		return nil, err
	}
	out := &PaidResult{Status: second.status, Body: second.body, header: second.header}
	for _, h := range []string{HeaderPaymentResponseV2, HeaderPaymentResponseV1} {
		if v := second.header.Get(h); v != "" {
			var s SettleResponse
			raw, err := base64.StdEncoding.DecodeString(v)
			if err == nil && json.Unmarshal(raw, &s) == nil {
				out.Settlement = &s
			}
		}
	}
	return out, nil
}

// sign answers the 402 first with a signed EIP-3009 authorization.
func (p *Payer) sign(first *response) (SignedPayment, error) {
	req, chainID, networkV1, err := p.requirement(first)
	if err != nil {
		return SignedPayment{}, err
	}
	return p.Authorize(req, chainID, networkV1)
}

// Authorize signs a payment of req, an exact-scheme requirement on chain
// chainID (networkV1 names that network in a v1 payment), with a fresh
// random nonce, valid for req's maxTimeoutSeconds.
func (p *Payer) Authorize(req RequirementsV2, chainID int64, networkV1 string) (SignedPayment, error) {
	a := Authorization{
		From:        crypto.PubkeyToAddress(p.Key.PublicKey),
		To:          common.HexToAddress(req.PayTo),
		ValidAfter:  big.NewInt(time.Now().Add(-10 * time.Minute).Unix()),
		ValidBefore: big.NewInt(time.Now().Add(time.Duration(req.MaxTimeoutSeconds) * time.Second).Unix()),
	}
	var ok bool
	if a.Value, ok = new(big.Int).SetString(req.Amount, 10); !ok {
		return SignedPayment{}, fmt.Errorf("pay: amount %q is not an integer", req.Amount)
	}
	if p.MaxAmount != nil && a.Value.Cmp(p.MaxAmount) > 0 {
		return SignedPayment{}, fmt.Errorf("pay: the server asks %s atomic units, above the limit of %s", a.Value, p.MaxAmount)
	}
	if _, err := rand.Read(a.Nonce[:]); err != nil {
		return SignedPayment{}, err
	}
	d := Domain{Name: req.Extra.Name, Version: req.Extra.Version, ChainID: big.NewInt(chainID), VerifyingContract: common.HexToAddress(req.Asset)}
	sig, err := d.Sign(a, p.Key)
	if err != nil {
		return SignedPayment{}, err
	}
	value, err := EncodePayment(p.Version, req, networkV1, a, sig)
	if err != nil {
		return SignedPayment{}, err
	}
	if p.Version == 1 {
		return SignedPayment{Header: HeaderPaymentV1, Value: value, Authorization: a}, nil
	}
	return SignedPayment{Header: HeaderPaymentV2, Value: value, Authorization: a}, nil
}

// PaidResult is the outcome of Payer.Get.
type PaidResult struct {
	Status     int
	Body       []byte
	Settlement *SettleResponse
	header     http.Header
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (p *Payer) do(ctx context.Context, url, header, value string) (*response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if header != "" {
		req.Header.Set(header, value)
	}
	c := p.HTTP
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return &response{status: resp.StatusCode, header: resp.Header, body: body}, err
}

// requirement picks the exact-scheme requirement of a 402, from the v2
// header or the v1 body according to the payer's version.
func (p *Payer) requirement(r *response) (RequirementsV2, int64, string, error) {
	if p.Version == 1 {
		var body RequiredV1
		if err := json.Unmarshal(r.body, &body); err != nil {
			return RequirementsV2{}, 0, "", fmt.Errorf("pay: 402 body: %w", err)
		}
		for _, a := range body.Accepts {
			id, ok := p.Networks[a.Network]
			if a.Scheme != "exact" || !ok {
				continue
			}
			return RequirementsV2{Scheme: a.Scheme, Network: a.Network, Amount: a.MaxAmountRequired, Asset: a.Asset,
				PayTo: a.PayTo, MaxTimeoutSeconds: a.MaxTimeoutSeconds, Extra: a.Extra}, id, a.Network, nil
		}
		return RequirementsV2{}, 0, "", errors.New("pay: no exact requirement on a known v1 network")
	}
	req, err := requiredV2(r.header)
	if err != nil {
		return RequirementsV2{}, 0, "", err
	}
	for _, a := range req.Accepts {
		id, err := strconv.ParseInt(strings.TrimPrefix(a.Network, "eip155:"), 10, 64)
		if a.Scheme == "exact" && strings.HasPrefix(a.Network, "eip155:") && err == nil {
			return a, id, "", nil
		}
	}
	return RequirementsV2{}, 0, "", errors.New("pay: no exact EVM requirement")
}
