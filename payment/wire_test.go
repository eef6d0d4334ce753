package payment

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// TestDecodeEnvelopeErrors: a header that is not what x402 sends is
// answered in x402's terms (what the header should be), never with a
// decoder's complaint about a stray byte.
func TestDecodeEnvelopeErrors(t *testing.T) {
	t.Parallel()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name, header string
		version      int
		want         string
	}{
		{"junk that passes for base64", "junk", 2, "the PAYMENT-SIGNATURE header is not base64-encoded JSON"},
		{"junk, v1", "junk", 1, "the X-PAYMENT header is not base64-encoded JSON"},
		{"not base64 at all", "%%%", 2, "not base64"},
		{"JSON of another shape", b64(`[1,2]`), 2, "header's JSON is not an x402 PaymentPayload"},
		{"no version", b64(`{"payload":{}}`), 2, "x402Version is missing"},
	}
	for _, tt := range tests {
		_, err := DecodeEnvelope(tt.header, tt.version)
		var ve *VerifyError
		if !errors.As(err, &ve) || ve.Reason != ReasonInvalidPayload && ve.Reason != ReasonInvalidVersion || !strings.Contains(ve.Message, tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
		if err != nil && strings.ContainsRune(err.Error(), '\u0081') {
			t.Errorf("%s: %q quotes the decoded bytes", tt.name, err)
		}
	}
}
