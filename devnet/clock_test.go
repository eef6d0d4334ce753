package devnet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
)

// feeCap returns a fee cap that covers twice the head's base fee.
func (e *env) feeCap(t *testing.T, ctx context.Context) *big.Int {
	t.Helper()
	head, err := e.client.HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), big.NewInt(1e9))
}

// transfer signs a token transfer of one unit from account i to account
// to; the gas covers a transfer to a fresh holder.
func (e *env) transfer(i, to int, nonce uint64, feeCap *big.Int) (*types.Transaction, error) {
	data, err := e.token.Pack("transfer", e.chain.Account(to).Address, big.NewInt(1))
	if err != nil {
		return nil, err
	}
	return types.SignNewTx(e.chain.Account(i).Key, types.LatestSignerForChainID(big.NewInt(devnet.ChainID)), &types.DynamicFeeTx{
		ChainID: big.NewInt(devnet.ChainID), Nonce: nonce, GasTipCap: big.NewInt(1e9), GasFeeCap: feeCap, Gas: 100_000,
		To: &e.chain.Token, Data: data,
	})
}

// receipt polls for a transaction's receipt, as a client of a real node
// does.
func (e *env) receipt(t *testing.T, ctx context.Context, h common.Hash) *types.Receipt {
	t.Helper()
	for {
		rcpt, err := e.client.TransactionReceipt(ctx, h)
		if err == nil {
			return rcpt
		}
		if !errors.Is(err, ethereum.NotFound) {
			t.Fatalf("receipt of %s: %v", h, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("receipt of %s: %v", h, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestBlocksFollowTheWallClock sends 200 token transfers at once from the
// ten funded accounts and checks the blocks that hold them: every block's
// timestamp is no later than the wall clock seen right after the block
// appeared, timestamps strictly increase (at most one block a second),
// blocks hold several transactions, and the head ends no later than the
// wall clock.
func TestBlocksFollowTheWallClock(t *testing.T) {
	t.Parallel()
	e := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, err := e.client.BlockNumber(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// seen[n] is a wall-clock reading taken after block n was sealed.
	var mu sync.Mutex
	seen := map[uint64]time.Time{}
	observe := func() {
		n, err := e.client.BlockNumber(ctx)
		now := time.Now()
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for b := first; b <= n; b++ {
			if _, ok := seen[b]; !ok {
				seen[b] = now
			}
		}
	}
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		for {
			observe()
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()

	const senders, perSender = 10, 20
	feeCap := e.feeCap(t, ctx)
	hashes := make([][]common.Hash, senders)
	var wg sync.WaitGroup
	for i := range senders {
		wg.Go(func() {
			nonce, err := e.client.PendingNonceAt(ctx, e.chain.Account(i).Address)
			if err != nil {
				t.Error(err)
				return
			}
			for k := range uint64(perSender) {
				tx, err := e.transfer(i, (i+1)%senders, nonce+k, feeCap)
				if err == nil {
					err = e.client.SendTransaction(ctx, tx)
				}
				if err != nil {
					t.Errorf("account %d, transfer %d: %v", i, k, err)
					return
				}
				hashes[i] = append(hashes[i], tx.Hash())
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	txsIn := map[uint64]int{}
	last := first
	for _, hs := range hashes {
		for _, h := range hs {
			rcpt := e.receipt(t, ctx, h)
			if rcpt.Status != types.ReceiptStatusSuccessful {
				t.Errorf("transfer %s reverted", h)
			}
			n := rcpt.BlockNumber.Uint64()
			txsIn[n]++
			last = max(last, n)
		}
	}
	close(stop)
	<-watched
	observe()

	most := 0
	prev, err := e.client.HeaderByNumber(ctx, new(big.Int).SetUint64(first))
	if err != nil {
		t.Fatal(err)
	}
	for n := first + 1; n <= last; n++ {
		h, err := e.client.HeaderByNumber(ctx, new(big.Int).SetUint64(n))
		if err != nil {
			t.Fatal(err)
		}
		if h.Time <= prev.Time {
			t.Errorf("block %d at %d, its parent at %d", n, h.Time, prev.Time)
		}
		if wall := seen[n].Unix(); int64(h.Time) > wall {
			t.Errorf("block %d at %d, sealed by %d: %d s in the future", n, h.Time, wall, int64(h.Time)-wall)
		}
		most = max(most, txsIn[n])
		prev = h
	}
	t.Logf("%d transfers in %d blocks (%d-%d), at most %d in one", senders*perSender, len(txsIn), first+1, last, most)
	if most < 2 || len(txsIn) >= senders*perSender {
		t.Errorf("%d transfers in %d blocks, at most %d in one: transactions do not share blocks", senders*perSender, len(txsIn), most)
	}
	head, err := e.client.HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if now := time.Now().Unix(); int64(head.Time) > now {
		t.Errorf("head at %d, %d s ahead of the wall clock", head.Time, int64(head.Time)-now)
	}
}

// TestSendRawTransactionAnswersOnAcceptance: eth_sendRawTransaction,
// alone or in a batch, gives the standard JSON-RPC answer (the hash) once
// the pool has the transaction, not once a block holds it. A transaction
// whose nonce leaves a gap cannot be sealed, yet is answered; once the gap
// is filled both land in one block.
func TestSendRawTransactionAnswersOnAcceptance(t *testing.T) {
	t.Parallel()
	e := start(t)
	type call struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      int             `json:"id"`
		Method  string          `json:"method"`
		Params  []hexutil.Bytes `json:"params"`
	}
	// post sends calls (as a batch if batch) and returns the raw answers.
	post := func(t *testing.T, batch bool, calls ...call) []map[string]json.RawMessage {
		t.Helper()
		var body any = calls
		if !batch {
			body = calls[0]
		}
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(e.chain.URL(), "application/json", bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		var answers []map[string]json.RawMessage
		dec := json.NewDecoder(resp.Body)
		if batch {
			err = dec.Decode(&answers)
		} else {
			answers = make([]map[string]json.RawMessage, 1)
			err = dec.Decode(&answers[0])
		}
		if err != nil {
			t.Fatal(err)
		}
		return answers
	}
	sendRaw := func(id int, tx *types.Transaction) call {
		raw, err := tx.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return call{JSONRPC: "2.0", ID: id, Method: "eth_sendRawTransaction", Params: []hexutil.Bytes{raw}}
	}
	// check wants exactly {"jsonrpc":"2.0","id":id,"result":"<hash>"}.
	check := func(t *testing.T, a map[string]json.RawMessage, id int, tx *types.Transaction) {
		t.Helper()
		want := map[string]string{"jsonrpc": `"2.0"`, "id": fmt.Sprint(id), "result": fmt.Sprintf("%q", tx.Hash().Hex())}
		if len(a) != len(want) {
			t.Errorf("answer %v, want the keys of %v", a, want)
		}
		for k, v := range want {
			if got := strings.ToLower(string(a[k])); got != strings.ToLower(v) {
				t.Errorf("answer %s = %s, want %s", k, a[k], v)
			}
		}
	}

	for _, tc := range []struct {
		name   string
		sender int
		batch  bool
	}{
		{"single", 6, false},
		{"batch", 7, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			nonce, err := e.client.PendingNonceAt(ctx, e.chain.Account(tc.sender).Address)
			if err != nil {
				t.Fatal(err)
			}
			feeCap := e.feeCap(t, ctx)
			gapped, err := e.transfer(tc.sender, 1, nonce+1, feeCap)
			if err != nil {
				t.Fatal(err)
			}
			filler, err := e.transfer(tc.sender, 1, nonce, feeCap)
			if err != nil {
				t.Fatal(err)
			}
			if tc.batch {
				answers := post(t, true, sendRaw(1, gapped), sendRaw(2, filler))
				if len(answers) != 2 {
					t.Fatalf("%d answers to a batch of 2", len(answers))
				}
				check(t, answers[0], 1, gapped)
				check(t, answers[1], 2, filler)
			} else {
				check(t, post(t, false, sendRaw(1, gapped))[0], 1, gapped)
				if _, err := e.client.TransactionReceipt(ctx, gapped.Hash()); !errors.Is(err, ethereum.NotFound) {
					t.Fatalf("receipt of a transaction behind a nonce gap: %v", err)
				}
				check(t, post(t, false, sendRaw(2, filler))[0], 2, filler)
			}
			a, b := e.receipt(t, ctx, filler.Hash()), e.receipt(t, ctx, gapped.Hash())
			if a.Status != types.ReceiptStatusSuccessful || b.Status != types.ReceiptStatusSuccessful {
				t.Errorf("statuses %d and %d", a.Status, b.Status)
			}
			if a.BlockNumber.Cmp(b.BlockNumber) != 0 {
				t.Errorf("blocks %s and %s, want one", a.BlockNumber, b.BlockNumber)
			}
		})
	}
}

// TestTransact: Transact returns the receipt whether the call succeeded or
// reverted on chain, and an error when the estimate reverts.
func TestTransact(t *testing.T) {
	t.Parallel()
	e := start(t)
	payer, payee := e.chain.Account(0), e.chain.Account(1)
	d := payment.Domain{Name: devnet.TokenName, Version: devnet.TokenVersion, ChainID: big.NewInt(devnet.ChainID), VerifyingContract: e.chain.Token}
	// expiring returns a transfer authorization valid until the head's
	// second is over: it passes the estimate, made on the head, and
	// reverts in any later block.
	expiring := func(t *testing.T, nonce byte) []byte {
		t.Helper()
		head, err := e.client.HeaderByNumber(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		a := payment.Authorization{From: payer.Address, To: payee.Address, Value: big.NewInt(1),
			ValidAfter: big.NewInt(0), ValidBefore: new(big.Int).SetUint64(head.Time + 1)}
		a.Nonce[31] = nonce
		sig, err := d.Sign(a, payer.Key)
		if err != nil {
			t.Fatal(err)
		}
		return e.pack(t, "transferWithAuthorization", a.From, a.To, a.Value, a.ValidAfter, a.ValidBefore, a.Nonce, sig)
	}
	for _, tc := range []struct {
		name    string
		from    int
		data    func(t *testing.T) []byte
		status  uint64 // of the receipt, if no error
		wantErr string
	}{
		{"succeeds", 2, func(t *testing.T) []byte { return e.pack(t, "transfer", payee.Address, big.NewInt(1)) }, types.ReceiptStatusSuccessful, ""},
		{"reverts on chain", 3, func(t *testing.T) []byte { return expiring(t, 1) }, types.ReceiptStatusFailed, ""},
		{"reverts at estimate", 4, func(t *testing.T) []byte {
			return e.pack(t, "transfer", payee.Address, big.NewInt(2_000_000_000))
		}, 0, "execution reverted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rcpt, err := e.chain.Transact(ctx, e.chain.Account(tc.from), e.chain.Token, tc.data(t))
			for attempt := 0; tc.status == types.ReceiptStatusFailed && err != nil && strings.Contains(err.Error(), "expired") && attempt < 5; attempt++ {
				// A block came between reading the head and the estimate:
				// authorize again against the new head.
				rcpt, err = e.chain.Transact(ctx, e.chain.Account(tc.from), e.chain.Token, tc.data(t))
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || rcpt != nil {
					t.Fatalf("receipt %v, error %v; want error %q", rcpt, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rcpt.Status != tc.status || rcpt.BlockNumber == nil {
				t.Errorf("receipt status %d in block %v, want %d", rcpt.Status, rcpt.BlockNumber, tc.status)
			}
		})
	}
}

// TestFixedBlockTime: with a block time of 2 s the devnet seals a block
// every 2 s, empty or not, at timestamps that are multiples of 2, and a
// transaction waits for the next one (Base's rhythm).
func TestFixedBlockTime(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := devnet.StartWith(ctx, lis, devnet.Options{BlockTime: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	client, err := ethclient.Dial(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	first, err := client.BlockNumber(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data := crypto.Keccak256([]byte("ping()"))[:4] // any transaction: a call to an account without code
	rcpt, err := c.Transact(ctx, c.Account(devnet.PayerAccount), c.Accounts[1].Address, data)
	if err != nil {
		t.Fatal(err)
	}
	for {
		n, err := client.BlockNumber(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n >= first+3 && n > rcpt.BlockNumber.Uint64() {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var prev uint64
	for n := first + 1; n <= first+3; n++ {
		h, err := client.HeaderByNumber(ctx, new(big.Int).SetUint64(n))
		if err != nil {
			t.Fatal(err)
		}
		if h.Time%2 != 0 || prev != 0 && h.Time != prev+2 {
			t.Errorf("block %d at %d (previous %d): want every 2 s, on even seconds", n, h.Time, prev)
		}
		prev = h.Time
	}
	if _, err := devnet.StartWith(ctx, lis, devnet.Options{BlockTime: 1500 * time.Millisecond}); err == nil {
		t.Error("a block time of 1.5 s was accepted")
	}
}
