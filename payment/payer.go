package payment

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strconv"
	"strings"
)

// Payer is an x402 client: it answers a 402 with the first of its
// scheme clients the 402 offers (exact.Payer signs EIP-3009
// authorizations, batch.Session vouchers) and retries. It backs `tollgate
// pay` and the tests.
type Payer struct {
	HTTP    *http.Client
	Version int // 1 or 2
	// Networks maps x402 v1 network names to chain ids.
	Networks map[string]int64
	// MaxAmount caps what one call may cost, in the asset's atomic units;
	// a 402 asking more is refused, not paid.
	MaxAmount *big.Int
	// Schemes pay, in order of preference.
	Schemes []SchemeClient
}

// Offer is one accepts entry of a 402 that a scheme client is asked to
// pay.
type Offer struct {
	Version int // x402 version
	// Entry is the accepts entry; a v1 entry is read into its v2 form
	// (Amount is maxAmountRequired).
	Entry RequirementsV2
	// Resource is what a v2 402 names; nil for v1.
	Resource *ResourceV2
	ChainID  int64
	// NetworkV1 is the v1 entry's network name; empty for v2.
	NetworkV1 string
}

// SchemeClient pays one x402 scheme for a Payer: it signs, reads the
// settlement of what it paid, and recovers from a 402 refusing its
// payment.
type SchemeClient interface {
	// Name is the scheme's name in accepts entries.
	Name() string
	// Pay signs a payment of o.
	Pay(o Offer) (SignedPayment, error)
	// Paid reads a paid answer's settlement.
	Paid(o Offer, s SettleResponse) error
	// Recover reads the (v2) 402 that refused a payment; true: sign again
	// and retry (once).
	Recover(refused RequiredV2) bool
}

// SignedPayment is a signed payment header: one payment, which may be sent
// more than once (a retry) and to more than one server.
type SignedPayment struct {
	Header, Value string
	// ID identifies the payment to its payer (exact: the authorization's
	// nonce, 0x-hex); empty when the scheme has none.
	ID string
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
	o, sc, err := p.choose(first)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		pay, err := sc.Pay(o)
		if err != nil {
			return nil, err
		}
		res, err := p.Send(ctx, url, pay)
		if err != nil {
			return nil, err
		}
		if res.Status == http.StatusPaymentRequired && attempt == 0 && res.Settlement == nil && o.Version == 2 {
			if req, err := requiredV2(res.header); err == nil && sc.Recover(req) {
				continue
			}
		}
		if res.Status == http.StatusOK && res.Settlement != nil {
			if err := sc.Paid(o, *res.Settlement); err != nil {
				return res, err
			}
		}
		return res, nil
	}
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
	o, sc, err := p.choose(first)
	if err != nil {
		return SignedPayment{}, err
	}
	return sc.Pay(o)
}

// Offer asks url for its 402 and returns its offer of scheme.
func (p *Payer) Offer(ctx context.Context, url, scheme string) (Offer, error) {
	first, err := p.do(ctx, url, "", "")
	if err != nil {
		return Offer{}, err
	}
	if first.status != http.StatusPaymentRequired {
		return Offer{}, fmt.Errorf("pay: %s answered %d, not 402", url, first.status)
	}
	offers, err := p.offers(first)
	if err != nil {
		return Offer{}, err
	}
	for _, o := range offers {
		if o.Entry.Scheme == scheme {
			return o, nil
		}
	}
	return Offer{}, fmt.Errorf("pay: %s does not offer the %s scheme", url, scheme)
}

// choose picks the offer of the payer's most preferred scheme client
// that the 402 offers, within MaxAmount.
func (p *Payer) choose(r *response) (Offer, SchemeClient, error) {
	offers, err := p.offers(r)
	if err != nil {
		return Offer{}, nil, err
	}
	return p.chooseFrom(offers)
}

// chooseFrom picks the offer of the payer's most preferred scheme client
// among offers, within MaxAmount.
func (p *Payer) chooseFrom(offers []Offer) (Offer, SchemeClient, error) {
	for _, sc := range p.Schemes {
		for _, o := range offers {
			if o.Entry.Scheme != sc.Name() {
				continue
			}
			if err := p.affordable(o); err != nil {
				return Offer{}, nil, err
			}
			return o, sc, nil
		}
	}
	names := make([]string, 0, len(p.Schemes))
	for _, sc := range p.Schemes {
		names = append(names, sc.Name())
	}
	return Offer{}, nil, fmt.Errorf("pay: the 402 offers none of the schemes %v on an EVM network this payer knows", names)
}

// affordable checks o's amount against MaxAmount.
func (p *Payer) affordable(o Offer) error {
	amount, ok := new(big.Int).SetString(o.Entry.Amount, 10)
	if !ok {
		return fmt.Errorf("pay: amount %q is not an integer", o.Entry.Amount)
	}
	if p.MaxAmount != nil && amount.Cmp(p.MaxAmount) > 0 {
		return fmt.Errorf("pay: the server asks %s atomic units, above the limit of %s", amount, p.MaxAmount)
	}
	return nil
}

// offers reads a 402's EVM accepts entries, from the v2 header or the v1
// body according to the payer's version.
func (p *Payer) offers(r *response) ([]Offer, error) {
	var out []Offer
	if p.Version == 1 {
		var body RequiredV1
		if err := json.Unmarshal(r.body, &body); err != nil {
			return nil, fmt.Errorf("pay: 402 body: %w", err)
		}
		for _, a := range body.Accepts {
			if id, ok := p.Networks[a.Network]; ok {
				out = append(out, Offer{Version: 1, ChainID: id, NetworkV1: a.Network, Entry: RequirementsV2{Scheme: a.Scheme, Network: a.Network,
					Amount: a.MaxAmountRequired, Asset: a.Asset, PayTo: a.PayTo, MaxTimeoutSeconds: a.MaxTimeoutSeconds, Extra: a.Extra}})
			}
		}
		return out, nil
	}
	req, err := requiredV2(r.header)
	if err != nil {
		return nil, err
	}
	return offersV2(req), nil
}

// offersV2 reads a v2 requirement's EVM accepts entries.
func offersV2(req RequiredV2) []Offer {
	var out []Offer
	for _, a := range req.Accepts {
		id, err := strconv.ParseInt(strings.TrimPrefix(a.Network, "eip155:"), 10, 64)
		if strings.HasPrefix(a.Network, "eip155:") && err == nil {
			out = append(out, Offer{Version: 2, Entry: a, Resource: &req.Resource, ChainID: id})
		}
	}
	return out
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

// PaidResult is the outcome of Payer.Get.
type PaidResult struct {
	Status     int
	Body       []byte
	Settlement *SettleResponse
	header     http.Header
}

// Refusal is why a 402 refused the payment: the v2 PAYMENT-REQUIRED's
// error, else the v1 body's; "" when it names none.
func (r *PaidResult) Refusal() string {
	if req, err := requiredV2(r.header); err == nil && req.Error != "" {
		return req.Error
	}
	var v1 struct{ Error string }
	_ = json.Unmarshal(r.Body, &v1)
	return v1.Error
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
