package batch

import (
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
)

// fixture is a payer with a channel to a server on the devnet's chain.
type fixture struct {
	terms Terms
	key   *ecdsa.PrivateKey
	cfg   Config
	id    common.Hash
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	payer := crypto.PubkeyToAddress(key.PublicKey)
	terms := Terms{Escrow: Escrow{ChainID: big.NewInt(8453), Address: EscrowAddress},
		Receiver: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"), ReceiverAuthorizer: common.HexToAddress("0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc"),
		Token: common.HexToAddress("0x700b6A60ce7EaaEA56F065753d8dcB9653dbAD35"), WithdrawDelay: 900, Price: big.NewInt(50_000)}
	cfg := Config{Payer: payer, PayerAuthorizer: payer, Receiver: terms.Receiver, ReceiverAuthorizer: terms.ReceiverAuthorizer,
		Token: terms.Token, WithdrawDelay: 900}
	return fixture{terms: terms, key: key, cfg: cfg, id: terms.Escrow.ChannelID(cfg)}
}

// payload writes a payload as the official client does.
func (f fixture) payload(t *testing.T, typ string, max int64, edit func(m map[string]any)) []byte {
	t.Helper()
	d := f.terms.Escrow.VoucherDigest(f.id, big.NewInt(max))
	sig, err := crypto.Sign(d[:], f.key)
	if err != nil {
		t.Fatal(err)
	}
	sig[64] += 27
	m := map[string]any{
		"type": typ,
		"channelConfig": map[string]any{
			"payer": f.cfg.Payer.Hex(), "payerAuthorizer": f.cfg.PayerAuthorizer.Hex(), "receiver": f.cfg.Receiver.Hex(),
			"receiverAuthorizer": f.cfg.ReceiverAuthorizer.Hex(), "token": f.cfg.Token.Hex(), "withdrawDelay": 900,
			"salt": common.Hash{}.Hex(),
		},
		"voucher": map[string]any{"channelId": f.id.Hex(), "maxClaimableAmount": big.NewInt(max).String(), "signature": hexutil.Encode(sig)},
	}
	if typ == TypeDeposit {
		m["deposit"] = map[string]any{"amount": "1000000", "authorization": map[string]any{"erc3009Authorization": map[string]any{
			"validAfter": "0", "validBefore": "1900000000", "salt": "12345", "signature": hexutil.Encode(sig)}}}
	}
	if edit != nil {
		edit(m)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func reasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	if err != nil {
		return "?" + err.Error()
	}
	return ""
}

// TestDecodePayload: the official client's three payloads decode; every
// malformed field is refused with its reason.
func TestDecodePayload(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	edit := func(path string, v any) func(map[string]any) {
		return func(m map[string]any) {
			parts := strings.Split(path, ".")
			cur := m
			for _, p := range parts[:len(parts)-1] {
				cur = cur[p].(map[string]any)
			}
			if v == nil {
				delete(cur, parts[len(parts)-1])
			} else {
				cur[parts[len(parts)-1]] = v
			}
		}
	}
	for _, tt := range []struct {
		name   string
		typ    string
		edit   func(map[string]any)
		reason string
	}{
		{"voucher", TypeVoucher, nil, ""},
		{"deposit", TypeDeposit, nil, ""},
		{"refund, full", TypeRefund, nil, ""},
		{"refund, partial", TypeRefund, edit("amount", "700"), ""},
		{"unknown type", "topup", nil, ReasonPayloadType},
		{"no voucher", TypeVoucher, edit("voucher", nil), ReasonPayloadType},
		{"bad payer", TypeVoucher, edit("channelConfig.payer", "0x12"), ReasonPayloadType},
		{"delay as a string", TypeVoucher, edit("channelConfig.withdrawDelay", "900"), ReasonPayloadType},
		{"short salt", TypeVoucher, edit("channelConfig.salt", "0x00"), ReasonPayloadType},
		{"amount in hex", TypeVoucher, edit("voucher.maxClaimableAmount", "0x10"), ReasonPayloadType},
		{"negative amount", TypeVoucher, edit("voucher.maxClaimableAmount", "-1"), ReasonPayloadType},
		{"short signature", TypeVoucher, edit("voucher.signature", "0x1234"), ReasonVoucherSignature},
		{"deposit without deposit", TypeDeposit, edit("deposit", nil), ReasonDepositPayload},
		{"permit2 deposit", TypeDeposit, edit("deposit.authorization", map[string]any{"permit2Authorization": map[string]any{}}), ReasonERC3009Required},
		{"zero deposit", TypeDeposit, edit("deposit.amount", "0"), ReasonDepositPayload},
		{"refund of 0", TypeRefund, edit("amount", "0"), ReasonRefundAmountInvalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := DecodePayload(f.payload(t, tt.typ, 100_000, tt.edit))
			if got := reasonOf(err); got != tt.reason {
				t.Fatalf("reason %q, want %q (%v)", got, tt.reason, err)
			}
			if err != nil {
				return
			}
			if p.Config != f.cfg || p.ChannelID != f.id || p.MaxClaimable.Int64() != 100_000 || len(p.Signature) != 65 {
				t.Errorf("decoded %+v", p)
			}
			if err := f.terms.Bind(p); err != nil {
				t.Errorf("bind: %v", err)
			}
		})
	}
}

// TestBind: a channel whose receiver side, token or delay is not ours,
// or whose id is not its config's, is refused.
func TestBind(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	other := common.HexToAddress("0x9999999999999999999999999999999999999999")
	for _, tt := range []struct {
		name   string
		edit   func(p *Payment)
		reason string
	}{
		{"ours", func(*Payment) {}, ""},
		{"receiver", func(p *Payment) { p.Config.Receiver = other }, ReasonReceiverMismatch},
		{"receiver authorizer", func(p *Payment) { p.Config.ReceiverAuthorizer = other }, ReasonReceiverAuthorizerMismatch},
		{"token", func(p *Payment) { p.Config.Token = other }, ReasonTokenMismatch},
		{"delay", func(p *Payment) { p.Config.WithdrawDelay = 3600 }, ReasonWithdrawDelayMismatch},
		{"another salt, same id", func(p *Payment) { p.Config.Salt = common.HexToHash("0x01") }, ReasonChannelIDMismatch},
	} {
		p, err := DecodePayload(f.payload(t, TypeVoucher, 50_000, nil))
		if err != nil {
			t.Fatal(err)
		}
		tt.edit(p)
		if got := reasonOf(f.terms.Bind(p)); got != tt.reason {
			t.Errorf("%s: reason %q, want %q", tt.name, got, tt.reason)
		}
	}
}

// TestCheckCumulative: a voucher must sign exactly charged + price (a
// refund: charged); one below gets the corrective 402, carrying the
// channel's state and the latest voucher the server holds; one above is
// evidence of charges made elsewhere (Ahead), never corrected.
func TestCheckCumulative(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	stored := Channel{ID: f.id, Config: f.cfg, Charged: big.NewInt(150_000), SignedMax: big.NewInt(150_000), Signature: []byte{7},
		Balance: big.NewInt(1_000_000), TotalClaimed: big.NewInt(50_000), RefundNonce: big.NewInt(2), WithdrawRequestedAt: 0, Opened: true}
	for _, tt := range []struct {
		name   string
		typ    string
		max    int64
		reason string // empty: accepted
	}{
		{"next voucher", TypeVoucher, 200_000, ""},
		{"replayed voucher", TypeVoucher, 150_000, ReasonCumulativeAmountMismatch},
		{"one unit less", TypeVoucher, 199_999, ReasonCumulativeAmountMismatch},
		{"one unit more", TypeVoucher, 200_001, ReasonChannelChargedElsewhere},
		{"two prices ahead", TypeVoucher, 250_000, ReasonChannelChargedElsewhere},
		{"deposit with the next voucher", TypeDeposit, 200_000, ""},
		{"deposit ahead", TypeDeposit, 300_000, ReasonChannelChargedElsewhere},
		{"refund at charged", TypeRefund, 150_000, ""},
		{"refund below charged", TypeRefund, 100_000, ReasonCumulativeAmountMismatch},
		{"refund above charged", TypeRefund, 200_000, ReasonChannelChargedElsewhere},
	} {
		p, err := DecodePayload(f.payload(t, tt.typ, tt.max, nil))
		if err != nil {
			t.Fatal(err)
		}
		m := f.terms.CheckCumulative(stored, p)
		if (m == nil) != (tt.reason == "") {
			t.Errorf("%s: mismatch %v, want %q", tt.name, m, tt.reason)
			continue
		}
		if m == nil {
			continue
		}
		if m.Reason != tt.reason || m.Ahead != (tt.reason == ReasonChannelChargedElsewhere) {
			t.Errorf("%s: %s (ahead %v), want %s", tt.name, m.Reason, m.Ahead, tt.reason)
			continue
		}
		if m.Ahead {
			if m.Channel.ChannelID != "" || m.Voucher != nil {
				t.Errorf("%s: a voucher ahead carries state to recover from: %+v %+v", tt.name, m.Channel, m.Voucher)
			}
			continue
		}
		if m.Channel.ChannelID != strings.ToLower(f.id.Hex()) || m.Channel.ChargedCumulativeAmount != "150000" || m.Channel.Balance != "1000000" ||
			m.Channel.TotalClaimed != "50000" || m.Channel.RefundNonce != "2" || m.Voucher == nil || m.Voucher.SignedMaxClaimable != "150000" ||
			m.Voucher.Signature != "0x07" {
			t.Errorf("%s: corrective state %+v %+v", tt.name, m.Channel, m.Voucher)
		}
	}
}

// TestSigned: a voucher is taken only with the signature the escrow
// accepts from the channel's payer authorizer.
func TestSigned(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	stranger, _ := crypto.GenerateKey()
	for _, tt := range []struct {
		name   string
		key    *ecdsa.PrivateKey
		edit   func(p *Payment)
		reason string
	}{
		{"the payer's", nil, nil, ""},
		{"another signer", stranger, nil, ReasonVoucherSignature},
		{"v 0/1, the same signature", nil, func(p *Payment) { p.Signature[64] -= 27 }, ReasonVoucherSignature},
		{"high s, the same signature", nil, func(p *Payment) {
			n := crypto.S256().Params().N
			copy(p.Signature[32:64], common.LeftPadBytes(new(big.Int).Sub(n, new(big.Int).SetBytes(p.Signature[32:64])).Bytes(), 32))
			p.Signature[64] = 55 - p.Signature[64]
		}, ReasonVoucherSignature},
		{"zero payer authorizer", nil, func(p *Payment) { p.Config.PayerAuthorizer = common.Address{} }, ReasonVoucherSignature},
	} {
		g := f
		if tt.key != nil {
			g.key = tt.key
		}
		p, err := DecodePayload(g.payload(t, TypeVoucher, 100_000, nil))
		if err != nil {
			t.Fatal(err)
		}
		if tt.edit != nil {
			tt.edit(p)
		}
		if err := f.terms.Signed(p); reasonOf(err) != tt.reason {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.reason)
		}
	}
}

// TestPayable: a voucher is judged against the channel as the update
// writes it: deposit, claims, a refund in flight; without a read of its
// own, a stale mirror or anything beyond the mirrored balance asks for
// one instead of refusing.
func TestPayable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now()
	c := Channel{ID: f.id, Config: f.cfg, Charged: big.NewInt(50_000), Balance: big.NewInt(500_000), TotalClaimed: big.NewInt(50_000),
		RefundNonce: big.NewInt(0), SyncedAt: now.Add(-time.Minute)}
	inFlight := func(c Channel) Channel {
		c.RefundPending = &PendingRefund{Nonce: big.NewInt(0), Amount: big.NewInt(400_000), At: now}
		return c
	}
	for _, tt := range []struct {
		name     string
		max      int64
		channel  func(Channel) Channel
		verified bool
		want     error // errStale, or a refusal's reason via reasonOf
		reason   string
	}{
		{"within the deposit", 100_000, nil, false, nil, ""},
		{"the whole deposit", 500_000, nil, false, nil, ""},
		{"beyond the mirror: read again", 500_001, nil, false, errStale, ""},
		{"beyond the chain's balance", 500_001, nil, true, nil, ReasonCumulativeExceedsBalance},
		{"not above what is claimed", 50_000, nil, false, nil, ReasonCumulativeBelowClaimed},
		{"no deposit, read", 100_000, func(c Channel) Channel { c.Balance = big.NewInt(0); return c }, true, nil, ReasonChannelNotFound},
		{"no deposit in the mirror: read again", 100_000, func(c Channel) Channel { c.Balance = big.NewInt(0); return c }, false, errStale, ""},
		{"stale mirror", 100_000, func(c Channel) Channel { c.SyncedAt = now.Add(-10 * time.Minute); return c }, false, errStale, ""},
		{"never read", 100_000, func(c Channel) Channel { c.SyncedAt = time.Time{}; return c }, false, errStale, ""},
		{"refund in flight: read again", 100_000, inFlight, false, errStale, ""},
		{"refund in flight, within what stays", 100_000, inFlight, true, nil, ""},
		{"refund in flight, beyond what stays", 100_001, inFlight, true, nil, ReasonCumulativeExceedsBalance},
	} {
		p, err := DecodePayload(f.payload(t, TypeVoucher, tt.max, nil))
		if err != nil {
			t.Fatal(err)
		}
		ch := c
		if tt.channel != nil {
			ch = tt.channel(c)
		}
		err = Payable(ch, p, now, 5*time.Minute, tt.verified)
		if tt.want != nil {
			if err != tt.want {
				t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
			}
			continue
		}
		if reasonOf(err) != tt.reason {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.reason)
		}
	}
}

// TestAdopt: a read of the escrow never undoes a newer one: the refund
// nonce orders reads, claims only grow, a finalized withdrawal lowers the
// balance, and a read past a refund in flight ends it.
func TestAdopt(t *testing.T) {
	t.Parallel()
	now := time.Now()
	base := Channel{Balance: big.NewInt(1000), TotalClaimed: big.NewInt(100), RefundNonce: big.NewInt(1), SyncedAt: now.Add(-time.Second)}
	st := func(balance, claimed, nonce int64, withdraw uint64) OnChain {
		return OnChain{Balance: big.NewInt(balance), TotalClaimed: big.NewInt(claimed), RefundNonce: big.NewInt(nonce), WithdrawRequestedAt: withdraw}
	}
	for _, tt := range []struct {
		name     string
		channel  func(Channel) Channel
		read     OnChain
		balance  int64
		claimed  int64
		withdraw uint64
		pending  bool
	}{
		{"a deposit landed", nil, st(1500, 100, 1, 0), 1500, 100, 0, false},
		{"a read from before a refund", nil, st(5000, 100, 0, 0), 1000, 100, 0, false},
		{"a read from before a deposit", nil, st(800, 100, 1, 0), 1000, 100, 0, false},
		{"a claim", nil, st(1000, 300, 1, 0), 1000, 300, 0, false},
		{"an older claim total", nil, st(1000, 50, 1, 0), 1000, 100, 0, false},
		{"a refund landed", nil, st(400, 100, 2, 0), 400, 100, 0, false},
		{"a withdrawal started", nil, st(1000, 100, 1, 77), 1000, 100, 77, false},
		{"a read from before the watcher saw a withdrawal", func(c Channel) Channel { c.WithdrawRequestedAt = 77; return c }, st(1000, 100, 1, 0), 1000, 100, 77, false},
		{"a withdrawal finalized", func(c Channel) Channel { c.WithdrawRequestedAt = 77; return c }, st(100, 100, 1, 0), 100, 100, 0, false},
		{"a newer read from before the watcher saw a withdrawal", func(c Channel) Channel { c.WithdrawRequestedAt = 77; return c }, st(1200, 100, 2, 0), 1200, 100, 77, false},
		{"a refund that covered the withdrawal", func(c Channel) Channel { c.WithdrawRequestedAt = 77; return c }, st(100, 100, 2, 0), 100, 100, 0, false},
		{"a mirror to read again takes the read", func(c Channel) Channel { c.SyncedAt = time.Time{}; return c }, st(700, 100, 1, 0), 700, 100, 0, false},
		{"a mirror to read again ignores an older read", func(c Channel) Channel { c.SyncedAt = time.Time{}; return c }, st(5000, 100, 0, 0), 1000, 100, 0, false},
		{"the refund in flight landed", func(c Channel) Channel {
			c.RefundPending = &PendingRefund{Nonce: big.NewInt(1), Amount: big.NewInt(900)}
			return c
		}, st(100, 100, 2, 0), 100, 100, 0, false},
		{"the refund in flight not yet", func(c Channel) Channel {
			c.RefundPending = &PendingRefund{Nonce: big.NewInt(1), Amount: big.NewInt(900)}
			return c
		}, st(1000, 100, 1, 0), 1000, 100, 0, true},
	} {
		c := base
		if tt.channel != nil {
			c = tt.channel(c)
		}
		Adopt(&c, tt.read, now)
		if c.Balance.Int64() != tt.balance || c.TotalClaimed.Int64() != tt.claimed || c.WithdrawRequestedAt != tt.withdraw || (c.RefundPending != nil) != tt.pending {
			t.Errorf("%s: balance %s claimed %s withdraw %d pending %v; want %d %d %d %v", tt.name, c.Balance, c.TotalClaimed, c.WithdrawRequestedAt,
				c.RefundPending != nil, tt.balance, tt.claimed, tt.withdraw, tt.pending)
		}
	}
}

// TestReservations: one request per channel at a time; an expired hold
// is taken over; a commit charges the price once, never beyond the
// voucher, and only for the request holding the channel.
func TestReservations(t *testing.T) {
	t.Parallel()
	now := time.Now()
	c := &Channel{Charged: big.NewInt(100)}
	if err := Reserve(c, "a", big.NewInt(150), now, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := Reserve(c, "b", big.NewInt(150), now, now.Add(time.Minute)); reasonOf(err) != ReasonChannelBusy {
		t.Errorf("a second request while the first holds the channel: %v", err)
	}
	if err := Commit(c, "b", big.NewInt(50), big.NewInt(150), []byte{1}, now); reasonOf(err) != ReasonChannelBusy {
		t.Errorf("a commit by a request not holding the channel: %v", err)
	}
	if err := Commit(c, "a", big.NewInt(60), big.NewInt(150), []byte{1}, now); reasonOf(err) != ReasonChargeExceedsSigned {
		t.Errorf("a charge beyond the voucher: %v", err)
	}
	if err := Commit(c, "a", big.NewInt(50), big.NewInt(150), []byte{1}, now); err != nil || c.Charged.Int64() != 150 || c.Pending != nil ||
		c.SignedMax.Int64() != 150 || !c.LastRequest.Equal(now) {
		t.Fatalf("commit: %v, %+v", err, c)
	}
	if err := Reserve(c, "c", big.NewInt(200), now, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	later := now.Add(2 * time.Second)
	if err := Reserve(c, "d", big.NewInt(200), later, later.Add(time.Minute)); err != nil || c.Pending.ID != "d" {
		t.Errorf("an expired hold was not taken over: %v %+v", err, c.Pending)
	}
	if Release(c, "c") || !Release(c, "d") || c.Pending != nil || c.Charged.Int64() != 150 {
		t.Errorf("release: %+v", c)
	}
}
