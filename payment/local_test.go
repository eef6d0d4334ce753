package payment

import (
	"context"
	"crypto/rand"
	"errors"
	"math/big"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
)

// settleFixture is a devnet with a client, the requirement payments are
// signed for, and the token's ABI to read balances. The sender's tests
// send what exact's facilitator sends, EIP-3009 transfers, through
// Transact.
type settleFixture struct {
	chain  *devnet.Chain
	client *ethclient.Client
	req    *Requirement
	token  abi.ABI
}

func newSettleFixture(t *testing.T) *settleFixture {
	t.Helper()
	chain, client := devnettest.Start(t)
	_, token, err := devnet.TokenArtifact()
	if err != nil {
		t.Fatal(err)
	}
	req := &Requirement{Network: "eip155:8453", NetworkV1: "base", ChainID: big.NewInt(devnet.ChainID), Asset: chain.Token,
		AssetName: devnet.TokenName, AssetVersion: devnet.TokenVersion, PayTo: chain.Account(devnet.PayToAccount).Address,
		Amount: big.NewInt(50_000), MaxTimeout: 300}
	return &settleFixture{chain: chain, client: client, req: req, token: token}
}

// local returns a facilitator over c (the fixture's client if nil) that
// heals quickly: a missing transaction is rebroadcast after one block (or
// half a second without one) and replaced after two blocks.
func (fx *settleFixture) local(t *testing.T, c Chain) *Local {
	t.Helper()
	if c == nil {
		c = fx.client
	}
	l, err := NewLocal(LocalConfig{
		ChainID: big.NewInt(devnet.ChainID), Key: fx.chain.Account(devnet.FacilitatorAccount).Key,
		ReceiptTimeout: time.Minute, // generous: no test here is about the timeout
	}, c)
	if err != nil {
		t.Fatal(err)
	}
	l.txs.probeAfter, l.txs.replaceAfter, l.txs.probeEvery = 1, 2, 500*time.Millisecond
	return l
}

// payment is the transferWithAuthorization call of a fresh authorization
// of the requirement, signed by test account payer.
func (fx *settleFixture) payment(t *testing.T, payer int) []byte {
	t.Helper()
	key := fx.chain.Account(payer).Key
	a := Authorization{From: crypto.PubkeyToAddress(key.PublicKey), To: fx.req.PayTo, Value: fx.req.Amount,
		ValidAfter: big.NewInt(0), ValidBefore: big.NewInt(time.Now().Add(time.Duration(fx.req.MaxTimeout) * time.Second).Unix())}
	if _, err := rand.Read(a.Nonce[:]); err != nil {
		t.Fatal(err)
	}
	sig, err := fx.req.Domain().Sign(a, key)
	if err != nil {
		t.Fatal(err)
	}
	data, err := fx.token.Pack("transferWithAuthorization", a.From, a.To, a.Value, a.ValidAfter, a.ValidBefore, a.Nonce, sig)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// settle sends a payment's transfer from l's gas key, as exact's
// facilitator does.
func (fx *settleFixture) settle(l *Local, data []byte) (Sent, error) {
	return l.Transact(context.Background(), fx.req.Asset, data, 0)
}

// landed reports whether s was mined and succeeded.
func landed(s Sent) bool {
	return s.Refused == "" && s.Receipt != nil && s.Receipt.Status == types.ReceiptStatusSuccessful
}

func (fx *settleFixture) balance(t *testing.T, a common.Address) *big.Int {
	t.Helper()
	data, _ := fx.token.Pack("balanceOf", a)
	out, err := fx.client.CallContract(context.Background(), ethereum.CallMsg{To: &fx.chain.Token, Data: data}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return new(big.Int).SetBytes(out)
}

// nonceOf returns the account nonce a mined settlement used.
func (fx *settleFixture) nonceOf(t *testing.T, h common.Hash) uint64 {
	t.Helper()
	tx, _, err := fx.client.TransactionByHash(context.Background(), h)
	if err != nil {
		t.Fatalf("transaction %s: %v", h, err)
	}
	return tx.Nonce()
}

// payers are the funded test accounts that may pay (not payTo, not the
// facilitator).
var payers = []int{0, 2, 3, 4, 5, 6, 7, 8}

// fakeChain is the real chain with some calls replaced: function fields,
// nil meaning the real call.
type fakeChain struct {
	Chain
	send     func(ctx context.Context, tx *types.Transaction) error
	estimate func(ctx context.Context, msg ethereum.CallMsg) (uint64, error)
	tipCap   func(ctx context.Context) (*big.Int, error)
	header   func(ctx context.Context, number *big.Int) (*types.Header, error)
}

func (c *fakeChain) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	if c.send != nil {
		return c.send(ctx, tx)
	}
	return c.Chain.SendTransaction(ctx, tx)
}

func (c *fakeChain) EstimateGas(ctx context.Context, msg ethereum.CallMsg) (uint64, error) {
	if c.estimate != nil {
		return c.estimate(ctx, msg)
	}
	return c.Chain.EstimateGas(ctx, msg)
}

func (c *fakeChain) SuggestGasTipCap(ctx context.Context) (*big.Int, error) {
	if c.tipCap != nil {
		return c.tipCap(ctx)
	}
	return c.Chain.SuggestGasTipCap(ctx)
}

func (c *fakeChain) HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error) {
	if c.header != nil {
		return c.header(ctx, number)
	}
	return c.Chain.HeaderByNumber(ctx, number)
}

var _ Chain = (*ethclient.Client)(nil)

// nodeError is a JSON-RPC error answer of the node (rpc.Error).
type nodeError string

func (e nodeError) Error() string  { return string(e) }
func (e nodeError) ErrorCode() int { return -32000 }

// TestSettleConcurrentOneKey: settlements from one gas key, all at once,
// each land on their own nonce and each Settle answers its own hash.
func TestSettleConcurrentOneKey(t *testing.T) {
	t.Parallel()
	fx := newSettleFixture(t)
	l := fx.local(t, nil)
	before := fx.balance(t, fx.req.PayTo)
	const n = 24
	results := make([]Sent, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		p := fx.payment(t, payers[i%len(payers)])
		wg.Go(func() { results[i], errs[i] = fx.settle(l, p) })
	}
	wg.Wait()
	hashes, nonces := map[common.Hash]bool{}, map[uint64]bool{}
	for i, s := range results {
		if errs[i] != nil || !landed(s) || s.Tx == (common.Hash{}) {
			t.Fatalf("settlement %d: %+v %v", i, s, errs[i])
		}
		hashes[s.Tx] = true
		rcpt, err := fx.client.TransactionReceipt(context.Background(), s.Tx)
		if err != nil || rcpt.Status != types.ReceiptStatusSuccessful {
			t.Fatalf("settlement %d: receipt %+v %v", i, rcpt, err)
		}
		nonces[fx.nonceOf(t, s.Tx)] = true
	}
	if len(hashes) != n || len(nonces) != n {
		t.Errorf("%d distinct hashes and %d distinct nonces for %d settlements", len(hashes), len(nonces), n)
	}
	if got := new(big.Int).Sub(fx.balance(t, fx.req.PayTo), before); got.Cmp(big.NewInt(n*50_000)) != 0 {
		t.Errorf("payTo received %s, want %d", got, n*50_000)
	}
}

// TestSettleHealsSend: a send the node lost, refused once or answered
// with a transport error is healed (re-read nonce, rebroadcast, or a
// replacement on the same nonce), and the payment lands exactly once.
func TestSettleHealsSend(t *testing.T) {
	t.Parallel()
	fx := newSettleFixture(t)
	errReset := errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: connection reset by peer")
	type sendFunc = func(context.Context, *types.Transaction) error
	tests := []struct {
		name string
		// first replaces the first send; the real send is passed in.
		first func(ctx context.Context, tx *types.Transaction, send sendFunc) error
		// refuse, if set, answers every later send of the first
		// transaction: Settle must fail, and leave the nonce free for the
		// next case.
		refuse error
	}{
		{name: "dropped by the node", first: func(context.Context, *types.Transaction, sendFunc) error { return nil }},
		{name: "nonce too low", first: func(context.Context, *types.Transaction, sendFunc) error {
			return errors.New("nonce too low: next nonce 7, tx nonce 6")
		}},
		{name: "replacement underpriced", first: func(context.Context, *types.Transaction, sendFunc) error {
			return errors.New("replacement transaction underpriced")
		}},
		{name: "reset before the node", first: func(context.Context, *types.Transaction, sendFunc) error { return errReset }},
		{name: "reset, then refused", first: func(context.Context, *types.Transaction, sendFunc) error { return errReset },
			refuse: nodeError("insufficient funds for gas * price + value")},
		{name: "reset after the node", first: func(ctx context.Context, tx *types.Transaction, send sendFunc) error {
			if err := send(ctx, tx); err != nil {
				return err
			}
			return errReset
		}},
	}
	// The cases share the devnet and the gas key, one after the other:
	// each must leave the key's nonce sound for the next.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sends, underpriced atomic.Int64
			var first atomic.Pointer[common.Hash]
			fake := &fakeChain{Chain: fx.client}
			fake.send = func(ctx context.Context, tx *types.Transaction) error {
				if sends.Add(1) == 1 {
					h := tx.Hash()
					first.Store(&h)
					return tt.first(ctx, tx, fx.client.SendTransaction)
				}
				if tt.refuse != nil && tx.Hash() == *first.Load() {
					return tt.refuse
				}
				err := fx.client.SendTransaction(ctx, tx)
				if err != nil && strings.Contains(err.Error(), "replacement transaction underpriced") {
					underpriced.Add(1)
				}
				return err
			}
			before := fx.balance(t, fx.req.PayTo)
			l := fx.local(t, fake)
			s, err := fx.settle(l, fx.payment(t, 2))
			if tt.refuse != nil {
				if err == nil || !strings.Contains(err.Error(), "insufficient funds") {
					t.Errorf("settlement %+v %v, want the node's refusal", s, err)
				}
				if fx.balance(t, fx.req.PayTo).Cmp(before) != 0 {
					t.Error("a refused settlement moved funds")
				}
				// The same Local goes on: the refused nonce is free, not a gap.
				s, err = fx.settle(l, fx.payment(t, 2))
			}
			if err != nil || !landed(s) {
				t.Fatalf("settlement %+v %v", s, err)
			}
			if got := new(big.Int).Sub(fx.balance(t, fx.req.PayTo), before); got.Cmp(fx.req.Amount) != 0 {
				t.Errorf("payTo received %s, want exactly one payment", got)
			}
			if underpriced.Load() != 0 {
				t.Errorf("the node answered replacement transaction underpriced %d times", underpriced.Load())
			}
		})
	}
}

// TestSettleReplacesStuck: a transaction stuck in the pool below the
// miner's tip is replaced on the same nonce with fees the pool accepts as a
// replacement, and only the replacement lands.
func TestSettleReplacesStuck(t *testing.T) {
	t.Parallel()
	fx := newSettleFixture(t)
	var tips, sends atomic.Int64
	var mu sync.Mutex
	var sent []*types.Transaction
	fake := &fakeChain{Chain: fx.client}
	fake.tipCap = func(ctx context.Context) (*big.Int, error) {
		if tips.Add(1) == 1 {
			return big.NewInt(1), nil // the pool takes it; the miner (1 mwei minimum) never includes it
		}
		return fx.client.SuggestGasTipCap(ctx)
	}
	fake.send = func(ctx context.Context, tx *types.Transaction) error {
		sends.Add(1)
		err := fx.client.SendTransaction(ctx, tx)
		if err == nil {
			mu.Lock()
			sent = append(sent, tx)
			mu.Unlock()
		}
		if err != nil && strings.Contains(err.Error(), "underpriced") {
			t.Errorf("send of nonce %d: %v", tx.Nonce(), err)
		}
		return err
	}
	before := fx.balance(t, fx.req.PayTo)
	s, err := fx.settle(fx.local(t, fake), fx.payment(t, 3))
	if err != nil || !landed(s) {
		t.Fatalf("settlement %+v %v", s, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) < 2 || sent[0].Hash() == s.Tx {
		t.Fatalf("%d versions sent; the stuck first one was reported mined", len(sent))
	}
	for _, tx := range sent[1:] {
		if tx.Nonce() != sent[0].Nonce() {
			t.Errorf("replacement on nonce %d, want %d", tx.Nonce(), sent[0].Nonce())
		}
	}
	if got := new(big.Int).Sub(fx.balance(t, fx.req.PayTo), before); got.Cmp(fx.req.Amount) != 0 {
		t.Errorf("payTo received %s, want exactly one payment", got)
	}
}

// TestSettleFillsGap: a nonce lost without trace below the ones in flight
// (a send that vanished before a restart) is filled, so the settlements
// above it land.
func TestSettleFillsGap(t *testing.T) {
	t.Parallel()
	fx := newSettleFixture(t)
	l := fx.local(t, nil)
	if s, err := fx.settle(l, fx.payment(t, 4)); err != nil || !landed(s) {
		t.Fatalf("first settlement: %+v %v", s, err)
	}
	l.txs.sendMu.Lock()
	lost := l.txs.next
	l.txs.next++ // a nonce taken and never sent
	l.txs.sendMu.Unlock()
	s, err := fx.settle(l, fx.payment(t, 4))
	if err != nil || !landed(s) {
		t.Fatalf("settlement above the gap: %+v %v", s, err)
	}
	if n := fx.nonceOf(t, s.Tx); n != lost+1 {
		t.Errorf("settled on nonce %d, want %d", n, lost+1)
	}
	if n, err := fx.client.NonceAt(context.Background(), l.Signer(), nil); err != nil || n != lost+2 {
		t.Errorf("account nonce %d %v, want %d", n, err, lost+2)
	}
}

// TestSettleAfterRestart: a new Local on the same key, started while the
// previous one's settlements are still in flight, continues after them.
func TestSettleAfterRestart(t *testing.T) {
	t.Parallel()
	fx := newSettleFixture(t)
	sentAll := make(chan struct{})
	var sends atomic.Int64
	first := &fakeChain{Chain: fx.client}
	first.send = func(ctx context.Context, tx *types.Transaction) error {
		err := fx.client.SendTransaction(ctx, tx)
		if sends.Add(1) == 3 {
			close(sentAll)
		}
		return err
	}
	var wg sync.WaitGroup
	results := make([]Sent, 6)
	errs := make([]error, 6)
	old := fx.local(t, first)
	for i := range 3 {
		p := fx.payment(t, payers[i])
		wg.Go(func() { results[i], errs[i] = fx.settle(old, p) })
	}
	<-sentAll
	restarted := fx.local(t, nil)
	for i := 3; i < 6; i++ {
		p := fx.payment(t, payers[i])
		wg.Go(func() { results[i], errs[i] = fx.settle(restarted, p) })
	}
	wg.Wait()
	nonces := map[uint64]bool{}
	for i, s := range results {
		if errs[i] != nil || !landed(s) {
			t.Fatalf("settlement %d: %+v %v", i, s, errs[i])
		}
		nonces[fx.nonceOf(t, s.Tx)] = true
	}
	if len(nonces) != 6 {
		t.Errorf("%d distinct nonces for 6 settlements", len(nonces))
	}
}
