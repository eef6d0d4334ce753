package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/service/catalog"
)

// TestInteropBatchClient (issue 14, item 5): the official batch-settlement
// client of @x402/evm 2.27.0 (@x402/fetch wrapFetchWithPayment, pinned in
// .ci/interop/package-lock.json), unmodified, makes 100 paid calls to a
// devnet `tollgate serve` with one deposit, the claimer inside serve
// claims and settles them to payTo, and the client's cooperative refund
// returns the rest. Everything is checked on chain: one Deposited, the
// claim and settle moving exactly 100 prices, the refundable rest refunded
// to the payer, and four escrow transactions in all (vouchers send none).
//
// The server announces a minimum deposit of 120 prices, so the client's
// one deposit covers the 100 calls with 20 to spare; the claim threshold
// is exactly 100 prices and the claim interval 27 minutes (the longest an hour's withdraw delay allows), so the claimer
// claims once, right after the 100th call (it polls every second). The
// devnet seals a block every 2 s, as Base does: only the deposit waits for
// one.
func TestInteropBatchClient(t *testing.T) {
	t.Parallel()
	dir := interopDir(t, "@x402/evm")
	const (
		calls  = 100
		spare  = 20
		route  = "candles"
		params = "?product=BTC-USD"
	)
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	op, ok := cat.ByName(route)
	if !ok || !op.Paid() {
		t.Fatalf("%s is not a paid operation", route)
	}
	price, err := payment.AtomicAmount(op.PriceUSD, devnet.TokenDecimals)
	if err != nil {
		t.Fatal(err)
	}
	times := func(n int64) *big.Int { return new(big.Int).Mul(price, big.NewInt(n)) }
	deposit, served := times(calls+spare), times(calls)
	s, err := serveFor(t, []string{"--data-dir", t.TempDir(),
		"--batch-min-deposit", atomicUSD(deposit), "--batch-claim-threshold", atomicUSD(served), "--batch-claim-interval", "27m", "--devnet-block-time", "2s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	w, payer, payTo := watchDevnet(t, ctx, s)
	client, token := w.c, w.token

	start, err := client.BlockNumber(ctx)
	if err != nil {
		t.Fatal(err)
	}
	payerNonce, err := client.NonceAt(ctx, payer, nil)
	if err != nil {
		t.Fatal(err)
	}
	payer0, payTo0, escrow0 := w.balance(payer), w.balance(payTo), w.balance(batch.EscrowAddress)

	// 100 calls through the official client.
	url := s.base + op.Path() + params
	state := t.TempDir()
	var paid struct {
		Payer        common.Address
		ChannelID    common.Hash
		Requirements struct {
			Amount, Asset, PayTo string
			Extra                struct {
				MinDeposit         string
				ReceiverAuthorizer common.Address
				WithdrawDelay      int
			}
		}
		Calls    int
		Charged  string
		Sent     map[string]int
		Unpaid   int
		Deposits []struct {
			Call        int
			Transaction common.Hash
			Amount      string
		}
		WallMs int64
	}
	runBatchClient(t, ctx, dir, &paid, "pay", url, s.devnetRPC, state, fmt.Sprint(calls))
	req := paid.Requirements
	switch {
	case paid.Payer != payer:
		t.Fatalf("the client paid from %s, want the devnet payer %s", paid.Payer, payer)
	case req.Amount != price.String() || !strings.EqualFold(req.PayTo, payTo.Hex()) || !strings.EqualFold(req.Asset, token.Hex()):
		t.Fatalf("402 batch entry %+v: want amount %s, payTo %s, asset %s", req, price, payTo, token)
	case req.Extra.MinDeposit != deposit.String() || req.Extra.ReceiverAuthorizer != payTo:
		t.Fatalf("402 batch entry extra %+v: want minDeposit %s and payTo %s as receiverAuthorizer", req.Extra, deposit, payTo)
	case paid.Calls != calls || paid.Charged != served.String() || paid.Unpaid != calls:
		t.Fatalf("client: %d calls charged %s after %d unpaid 402s; want %d, %s, %d", paid.Calls, paid.Charged, paid.Unpaid, calls, served, calls)
	case len(paid.Sent) != 2 || paid.Sent["deposit"] != 1 || paid.Sent["voucher"] != calls-1:
		t.Fatalf("the client sent %v, want one deposit and %d vouchers (no corrective 402)", paid.Sent, calls-1)
	case len(paid.Deposits) != 1 || paid.Deposits[0].Call != 1 || paid.Deposits[0].Amount != deposit.String():
		t.Fatalf("deposits seen in PAYMENT-RESPONSE: %+v; want one of %s on the first call", paid.Deposits, deposit)
	}
	id := paid.ChannelID
	t.Logf("%d calls of %s (price %s) from channel %s in %d ms (%.1f ms a call)", calls, op.Path(), price, id.Hex(), paid.WallMs,
		float64(paid.WallMs)/calls)

	// One deposit on chain, the one the client was told of.
	deps := w.logs(start, "Deposited(bytes32,address,uint128,uint128)", id)
	if len(deps) != 1 || deps[0].TxHash != paid.Deposits[0].Transaction || w.word(deps[0], 0).Cmp(deposit) != 0 {
		t.Fatalf("Deposited events of %s: %+v; want one of %s in %s", id, deps, deposit, paid.Deposits[0].Transaction)
	}

	// The claimer claims once the threshold is reached, and settles.
	var settled []types.Log
	for deadline := time.Now().Add(90 * time.Second); ; {
		if settled = w.logs(start, "Settled(address,address,address,uint128)", common.BytesToHash(payTo.Bytes())); len(settled) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no Settled to payTo within 90 s of the 100th call")
		}
		time.Sleep(250 * time.Millisecond)
	}
	claims := w.logs(start, "Claimed(bytes32,address,uint128,uint128)", id)
	switch {
	case len(claims) != 1 || w.word(claims[0], 0).Cmp(served) != 0 || w.word(claims[0], 1).Cmp(served) != 0:
		t.Fatalf("Claimed events of %s: %d; want one claiming %s", id, len(claims), served)
	case len(settled) != 1 || w.word(settled[0], 0).Cmp(served) != 0 || common.BytesToAddress(settled[0].Topics[2].Bytes()) != token:
		t.Fatalf("Settled events to payTo: %+v; want one of %s", settled, served)
	case claims[0].BlockNumber > settled[0].BlockNumber:
		t.Fatalf("settled in block %d before the claim in block %d", settled[0].BlockNumber, claims[0].BlockNumber)
	}
	if got := new(big.Int).Sub(w.balance(payTo), payTo0); got.Cmp(served) != 0 {
		t.Fatalf("payTo received %s, want %s", got, served)
	}
	balance, claimed := w.channel(id)
	refundable := new(big.Int).Sub(deposit, served)
	if balance.Cmp(deposit) != 0 || claimed.Cmp(served) != 0 {
		t.Fatalf("channel after the claim: balance %s, totalClaimed %s; want %s, %s", balance, claimed, deposit, served)
	}

	// The cooperative refund of the rest, by the same client (its records
	// kept in state).
	payerBefore := w.balance(payer)
	var refunded struct {
		ChannelID common.Hash
		Refund    struct {
			Success             bool
			Transaction, Amount string
			ErrorReason         string
		}
	}
	runBatchClient(t, ctx, dir, &refunded, "refund", url, s.devnetRPC, state)
	if refunded.ChannelID != id || !refunded.Refund.Success || refunded.Refund.Transaction == "" || refunded.Refund.Amount != refundable.String() {
		t.Fatalf("refund of %s: %+v; want %s refunded in a transaction", refunded.ChannelID, refunded.Refund, refundable)
	}
	refunds := w.logs(start, "Refunded(bytes32,address,uint128)", id)
	if len(refunds) != 1 || refunds[0].TxHash != common.HexToHash(refunded.Refund.Transaction) || w.word(refunds[0], 0).Cmp(refundable) != 0 {
		t.Fatalf("Refunded events of %s: %+v; want one of %s in %s", id, refunds, refundable, refunded.Refund.Transaction)
	}
	if got := new(big.Int).Sub(w.balance(payer), payerBefore); got.Cmp(refundable) != 0 {
		t.Fatalf("the refund gave the payer %s, want %s", got, refundable)
	}
	balance, claimed = w.channel(id)
	if left := new(big.Int).Sub(balance, claimed); left.Sign() != 0 || claimed.Cmp(served) != 0 {
		t.Fatalf("channel after the refund: balance %s, totalClaimed %s; want nothing refundable and %s claimed", balance, claimed, served)
	}

	// In all: the payer paid exactly 100 prices, payTo got them, the escrow
	// holds nothing more, and the payer sent no transaction.
	if got := new(big.Int).Sub(payer0, w.balance(payer)); got.Cmp(served) != 0 {
		t.Errorf("the payer paid %s in all, want %s", got, served)
	}
	if got := w.balance(batch.EscrowAddress); got.Cmp(escrow0) != 0 {
		t.Errorf("the escrow holds %s, want %s as before", got, escrow0)
	}
	if n, err := client.NonceAt(ctx, payer, nil); err != nil || n != payerNonce {
		t.Errorf("the payer's nonce went from %d to %d (%v): it should only sign", payerNonce, n, err)
	}

	// Vouchers cost no transaction: the escrow saw the deposit, the claim,
	// the settle and the refund, nothing else.
	txs := w.escrowTxs(start)
	want := []common.Hash{deps[0].TxHash, claims[0].TxHash, settled[0].TxHash, refunds[0].TxHash}
	if !slices.Equal(txs, want) {
		t.Errorf("transactions to the escrow since block %d: %v; want deposit, claim, settle, refund %v", start, txs, want)
	}
	t.Logf("on chain: %d escrow transactions for %d calls (deposit %s, claim %s, settle %s, refund %s of %s)",
		len(txs), calls, deps[0].TxHash.Hex(), claims[0].TxHash.Hex(), settled[0].TxHash.Hex(), refunds[0].TxHash.Hex(), refundable)
}

// atomicUSD writes atomic units of the 6-decimal token as a USD amount.
func atomicUSD(atomic *big.Int) string {
	q, r := new(big.Int).QuoRem(atomic, big.NewInt(1_000_000), new(big.Int))
	return fmt.Sprintf("%s.%06d", q, r.Int64())
}

// runBatchClient runs batch-client.mjs with args and decodes its one JSON line into v.
func runBatchClient(t *testing.T, ctx context.Context, dir string, v any, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(dir, "batch-client.mjs")}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("node batch-client.mjs %s: %v\n%s\n%s", args[0], err, out.String(), errOut.String())
	}
	if err := json.Unmarshal(out.Bytes(), v); err != nil {
		t.Fatalf("batch-client.mjs %s wrote %q: %v (stderr %s)", args[0], out.String(), err, errOut.String())
	}
}

// watchDevnet reads s's devnet description and returns a watch of its
// token, with the payer's and payTo's addresses; the client is closed
// with the test.
func watchDevnet(t *testing.T, ctx context.Context, s *served) (w *escrowWatch, payer, payTo common.Address) {
	t.Helper()
	desc, err := devnet.Fetch(ctx, http.DefaultClient, s.devnetRPC)
	if err != nil {
		t.Fatal(err)
	}
	payerRole, _ := desc.Account(devnet.RolePayer)
	payToRole, _ := desc.Account(devnet.RolePayTo)
	client, err := ethclient.Dial(s.devnetRPC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return &escrowWatch{t: t, ctx: ctx, c: client, token: desc.Token.Address}, payerRole.Address, payToRole.Address
}

// escrowWatch reads the escrow, its events and the token from the chain.
type escrowWatch struct {
	t     testing.TB
	ctx   context.Context
	c     *ethclient.Client
	token common.Address
}

func (w *escrowWatch) call(to common.Address, data []byte) []byte {
	w.t.Helper()
	out, err := w.c.CallContract(w.ctx, ethereum.CallMsg{To: &to, Data: data}, nil)
	if err != nil {
		w.t.Fatalf("eth_call %s %x: %v", to, data[:4], err)
	}
	return out
}

// balance is who's token balance.
func (w *escrowWatch) balance(who common.Address) *big.Int {
	w.t.Helper()
	out := w.call(w.token, append(crypto.Keccak256([]byte("balanceOf(address)"))[:4], common.LeftPadBytes(who.Bytes(), 32)...))
	return new(big.Int).SetBytes(out)
}

// channel is the escrow's channels(id): balance and totalClaimed.
func (w *escrowWatch) channel(id common.Hash) (balance, totalClaimed *big.Int) {
	w.t.Helper()
	out := w.call(batch.EscrowAddress, append(crypto.Keccak256([]byte("channels(bytes32)"))[:4], id.Bytes()...))
	if len(out) != 64 {
		w.t.Fatalf("channels(%s): %x", id, out)
	}
	return new(big.Int).SetBytes(out[:32]), new(big.Int).SetBytes(out[32:])
}

// logs are the escrow's events of signature since block from whose first
// indexed topic is topic1.
func (w *escrowWatch) logs(from uint64, signature string, topic1 common.Hash) []types.Log {
	w.t.Helper()
	logs, err := w.c.FilterLogs(w.ctx, ethereum.FilterQuery{FromBlock: new(big.Int).SetUint64(from), Addresses: []common.Address{batch.EscrowAddress},
		Topics: [][]common.Hash{{crypto.Keccak256Hash([]byte(signature))}, {topic1}}})
	if err != nil {
		w.t.Fatal(err)
	}
	return logs
}

// word is the i-th 32-byte word of l's data.
func (w *escrowWatch) word(l types.Log, i int) *big.Int {
	if len(l.Data) < 32*(i+1) {
		return new(big.Int).SetInt64(-1)
	}
	return new(big.Int).SetBytes(l.Data[32*i : 32*(i+1)])
}

// escrowTxs are the transactions sent to the escrow since block from, in
// chain order.
func (w *escrowWatch) escrowTxs(from uint64) []common.Hash {
	w.t.Helper()
	head, err := w.c.BlockNumber(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []common.Hash
	for n := from + 1; n <= head; n++ {
		b, err := w.c.BlockByNumber(w.ctx, new(big.Int).SetUint64(n))
		if err != nil {
			w.t.Fatal(err)
		}
		for _, tx := range b.Transactions() {
			if to := tx.To(); to != nil && *to == batch.EscrowAddress {
				out = append(out, tx.Hash())
			}
		}
	}
	return out
}
