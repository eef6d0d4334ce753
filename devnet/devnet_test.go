package devnet_test

import (
	"context"
	"math/big"
	"net/http"
	"strings"
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
	"github.com/tollgate/tollgate/payment"
)

// TestDeriveKey: the mnemonic's first accounts are the well-known ones
// (Hardhat and Anvil publish the same addresses).
func TestDeriveKey(t *testing.T) {
	t.Parallel()
	for i, want := range map[uint32]string{
		0: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
		1: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
		9: "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720",
	} {
		k, err := devnet.DeriveKey(devnet.Mnemonic, i)
		if err != nil {
			t.Fatal(err)
		}
		if got := crypto.PubkeyToAddress(k.PublicKey).Hex(); got != want {
			t.Errorf("account %d = %s, want %s", i, got, want)
		}
	}
}

type env struct {
	chain  *devnet.Chain
	client *ethclient.Client
	token  abi.ABI
}

func start(t *testing.T) *env {
	t.Helper()
	c, cl := devnettest.Start(t)
	_, parsed, err := devnet.TokenArtifact()
	if err != nil {
		t.Fatal(err)
	}
	return &env{chain: c, client: cl, token: parsed}
}

// pack encodes a call to the overload of name that takes len(args)
// arguments (the token has v,r,s and bytes-signature forms).
func (e *env) pack(t *testing.T, name string, args ...any) []byte {
	t.Helper()
	for _, m := range e.token.Methods {
		if m.RawName == name && len(m.Inputs) == len(args) {
			data, err := m.Inputs.Pack(args...)
			if err != nil {
				t.Fatal(err)
			}
			return append(append([]byte{}, m.ID...), data...)
		}
	}
	t.Fatalf("no %s with %d arguments", name, len(args))
	return nil
}

func (e *env) call(t *testing.T, method string, args ...any) []any {
	t.Helper()
	data, err := e.token.Pack(method, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.client.CallContract(context.Background(), ethereum.CallMsg{To: &e.chain.Token, Data: data}, nil)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	vals, err := e.token.Unpack(method, out)
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// send calls the token from account i through Transact: the receipt, or
// the node's error (a revert shows at gas estimation).
func (e *env) send(t *testing.T, i int, data []byte) (*types.Receipt, error) {
	t.Helper()
	return e.chain.Transact(context.Background(), e.chain.Account(i), e.chain.Token, data)
}

func TestChainAndToken(t *testing.T) {
	t.Parallel()
	e := start(t)
	ctx := context.Background()
	if id, err := e.client.ChainID(ctx); err != nil || id.Int64() != 8453 {
		t.Fatalf("chain id %v %v", id, err)
	}
	if got := e.call(t, "name")[0]; got != "USD Coin" {
		t.Errorf("name %v", got)
	}
	if got := e.call(t, "version")[0]; got != "2" {
		t.Errorf("version %v", got)
	}
	if got := e.call(t, "decimals")[0]; got != uint8(6) {
		t.Errorf("decimals %v", got)
	}
	d := payment.Domain{Name: "USD Coin", Version: "2", ChainID: big.NewInt(8453), VerifyingContract: e.chain.Token}
	if got := e.call(t, "DOMAIN_SEPARATOR")[0].([32]byte); common.Hash(got) != d.Separator() {
		t.Errorf("DOMAIN_SEPARATOR %x, EIP-712 computes %s", got, d.Separator())
	}
	for i := range 10 {
		a := e.chain.Account(i).Address
		if bal := e.call(t, "balanceOf", a)[0].(*big.Int); bal.Cmp(big.NewInt(1_000_000_000)) != 0 {
			t.Errorf("account %d holds %s, want 1000 USD", i, bal)
		}
		if eth, _ := e.client.BalanceAt(ctx, a, nil); eth.Sign() <= 0 {
			t.Errorf("account %d has no ETH", i)
		}
	}
	if !strings.Contains(e.chain.Banner("http://x"), "DEVNET") || !strings.Contains(e.chain.Banner("http://x"), e.chain.Token.Hex()) {
		t.Error("banner lacks DEVNET or the token address")
	}
}

// TestEIP3009 exercises the authorization functions in both signature
// forms and their FiatToken revert strings.
func TestEIP3009(t *testing.T) {
	t.Parallel()
	e := start(t)
	payer, payee := e.chain.Account(0), e.chain.Account(1)
	d := payment.Domain{Name: "USD Coin", Version: "2", ChainID: big.NewInt(8453), VerifyingContract: e.chain.Token}
	auth := func(nonce byte, validBefore int64) (payment.Authorization, []byte) {
		a := payment.Authorization{From: payer.Address, To: payee.Address, Value: big.NewInt(10_000),
			ValidAfter: big.NewInt(0), ValidBefore: big.NewInt(validBefore)}
		a.Nonce[31] = nonce
		sig, err := d.Sign(a, payer.Key)
		if err != nil {
			t.Fatal(err)
		}
		return a, sig
	}
	later := time.Now().Add(time.Hour).Unix()

	// bytes-signature form, relayed by account 5.
	a, sig := auth(1, later)
	data := e.pack(t, "transferWithAuthorization", a.From, a.To, a.Value, a.ValidAfter, a.ValidBefore, a.Nonce, sig)
	if rcpt, err := e.send(t, 5, data); err != nil || rcpt.Status != 1 {
		t.Fatalf("transferWithAuthorization(bytes): %v %v", rcpt, err)
	}
	if used := e.call(t, "authorizationState", payer.Address, a.Nonce)[0]; used != true {
		t.Error("authorizationState is false after use")
	}
	if _, err := e.send(t, 5, data); err == nil || !strings.Contains(err.Error(), "FiatTokenV2: authorization is used or canceled") {
		t.Errorf("replay: %v", err)
	}

	// v,r,s form.
	a, sig = auth(2, later)
	var r, s [32]byte
	copy(r[:], sig[:32])
	copy(s[:], sig[32:64])
	data = e.pack(t, "transferWithAuthorization", a.From, a.To, a.Value, a.ValidAfter, a.ValidBefore, a.Nonce, sig[64], r, s)
	if rcpt, err := e.send(t, 5, data); err != nil || rcpt.Status != 1 {
		t.Fatalf("transferWithAuthorization(v,r,s): %v %v", rcpt, err)
	}
	if bal := e.call(t, "balanceOf", payee.Address)[0].(*big.Int); bal.Int64() != 1_000_020_000 {
		t.Errorf("payee holds %s", bal)
	}

	// Expired, bad signature, receive by a non-payee.
	a, sig = auth(3, time.Now().Add(-time.Hour).Unix())
	data = e.pack(t, "transferWithAuthorization", a.From, a.To, a.Value, a.ValidAfter, a.ValidBefore, a.Nonce, sig)
	if _, err := e.send(t, 5, data); err == nil || !strings.Contains(err.Error(), "authorization is expired") {
		t.Errorf("expired: %v", err)
	}
	a, sig = auth(4, later)
	a.Value = big.NewInt(10_001)
	data = e.pack(t, "transferWithAuthorization", a.From, a.To, a.Value, a.ValidAfter, a.ValidBefore, a.Nonce, sig)
	if _, err := e.send(t, 5, data); err == nil || !strings.Contains(err.Error(), "invalid signature") {
		t.Errorf("tampered value: %v", err)
	}
	a, sig = auth(5, later)
	data = e.pack(t, "receiveWithAuthorization", a.From, a.To, a.Value, a.ValidAfter, a.ValidBefore, a.Nonce, sig)
	if _, err := e.send(t, 5, data); err == nil || !strings.Contains(err.Error(), "caller must be the payee") {
		t.Errorf("receive by a non-payee: %v", err)
	}
	if _, err := e.send(t, 1, data); err == nil || !strings.Contains(err.Error(), "invalid signature") {
		t.Errorf("a transfer authorization used to receive: %v", err)
	}
	recvHash := crypto.Keccak256Hash(
		crypto.Keccak256([]byte("ReceiveWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)")),
		common.LeftPadBytes(a.From[:], 32), common.LeftPadBytes(a.To[:], 32), common.LeftPadBytes(a.Value.Bytes(), 32),
		common.LeftPadBytes(a.ValidAfter.Bytes(), 32), common.LeftPadBytes(a.ValidBefore.Bytes(), 32), a.Nonce[:])
	rdigest := crypto.Keccak256Hash([]byte{0x19, 0x01}, d.Separator().Bytes(), recvHash[:])
	rsig, _ := crypto.Sign(rdigest[:], payer.Key)
	rsig[64] += 27
	data = e.pack(t, "receiveWithAuthorization", a.From, a.To, a.Value, a.ValidAfter, a.ValidBefore, a.Nonce, rsig)
	if rcpt, err := e.send(t, 1, data); err != nil || rcpt.Status != 1 {
		t.Errorf("receive by the payee: %v %v", rcpt, err)
	}

	// cancelAuthorization burns a nonce.
	var nonce [32]byte
	nonce[31] = 6
	cancelHash := crypto.Keccak256Hash(
		crypto.Keccak256([]byte("CancelAuthorization(address authorizer,bytes32 nonce)")),
		common.LeftPadBytes(payer.Address[:], 32), nonce[:])
	digest := crypto.Keccak256Hash([]byte{0x19, 0x01}, d.Separator().Bytes(), cancelHash[:])
	csig, _ := crypto.Sign(digest[:], payer.Key)
	csig[64] += 27
	data = e.pack(t, "cancelAuthorization", payer.Address, nonce, csig)
	if rcpt, err := e.send(t, 5, data); err != nil || rcpt.Status != 1 {
		t.Fatalf("cancelAuthorization: %v %v", rcpt, err)
	}
	a, sig = auth(6, later)
	data = e.pack(t, "transferWithAuthorization", a.From, a.To, a.Value, a.ValidAfter, a.ValidBefore, a.Nonce, sig)
	if _, err := e.send(t, 5, data); err == nil || !strings.Contains(err.Error(), "used or canceled") {
		t.Errorf("canceled nonce: %v", err)
	}
}

// TestHeartbeat: an idle devnet keeps its head near the wall clock.
func TestHeartbeat(t *testing.T) {
	t.Parallel()
	e := start(t)
	time.Sleep(3500 * time.Millisecond)
	head, err := e.client.HeaderByNumber(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if lag := time.Now().Unix() - int64(head.Time); lag > 3 {
		t.Errorf("head is %d s behind the wall clock", lag)
	}
}

// TestRPCServesOnlyPublicNamespaces: admin and debug stay closed.
func TestRPCServesOnlyPublicNamespaces(t *testing.T) {
	t.Parallel()
	e := start(t)
	for body, want := range map[string]int{
		`{"jsonrpc":"2.0","id":1,"method":"admin_nodeInfo","params":[]}`:                                      403,
		`[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"debug_setHead"}]`: 403,
		`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`:                                         200,
	} {
		resp, err := http.Post(e.chain.URL(), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", body, resp.StatusCode, want)
		}
	}
}

// TestDexHistory: the scripted launches end as their fates say (rugged
// pools hold no liquidity, the V4 one in the PoolManager too, the dumped
// one lost most of its price, the live one kept its pool), and the
// history lies in the past: every block before the head is older than
// Start, and the head is no later than the wall clock.
func TestDexHistory(t *testing.T) {
	t.Parallel()
	started := time.Now().Unix()
	e := start(t)
	ctx := context.Background()
	dex := e.chain.Dex
	if dex == nil || len(dex.Tokens) != 5 || dex.V4 == nil {
		t.Fatalf("dex %+v", dex)
	}
	_, pairABI, err := devnet.LoadArtifact("MiniPair")
	if err != nil {
		t.Fatal(err)
	}
	wethPerToken := func(pair, token common.Address) float64 {
		data, _ := pairABI.Pack("getReserves")
		out, err := e.client.CallContract(ctx, ethereum.CallMsg{To: &pair, Data: data}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := pairABI.Unpack("getReserves", out)
		if err != nil {
			t.Fatal(err)
		}
		tr, wr := new(big.Float).SetInt(r[0].(*big.Int)), new(big.Float).SetInt(r[1].(*big.Int))
		if token.Cmp(dex.WETH) > 0 {
			tr, wr = wr, tr
		}
		if tr.Sign() == 0 {
			return 0
		}
		p, _ := new(big.Float).Quo(wr, tr).Float64()
		return p
	}
	// v4Liquidity reads a V4 pool's active liquidity from the PoolManager's
	// storage: Pool.State of pools[id] (slot 6), liquidity at offset 3
	// (v4-core StateLibrary.getLiquidity).
	v4Liquidity := func(id common.Hash) *big.Int {
		state := new(big.Int).SetBytes(crypto.Keccak256(id[:], common.LeftPadBytes([]byte{6}, 32)))
		word, err := e.client.StorageAt(ctx, dex.V4.PoolManager, common.BigToHash(state.Add(state, big.NewInt(3))), nil)
		if err != nil {
			t.Fatal(err)
		}
		return new(big.Int).SetBytes(word[16:]) // uint128
	}
	launch := 20.0 / 100_000_000 // seeded price
	for _, tok := range dex.Tokens {
		if tok.Venue == devnet.VenueV4 {
			if tok.Fate != "rug" || tok.PoolID == (common.Hash{}) || tok.Pool() != tok.PoolID.Hex() {
				t.Errorf("%s: %+v, want the V4 rug", tok.Name, tok)
			}
			if l := v4Liquidity(tok.PoolID); l.Sign() != 0 {
				t.Errorf("%s: liquidity %s left after the rug", tok.Name, l)
			}
			if len(tok.Buyers) != 6 {
				t.Errorf("%s: %d buyers", tok.Name, len(tok.Buyers))
			}
			continue
		}
		p := wethPerToken(tok.Pair, tok.Token)
		switch tok.Fate {
		case "rug":
			data, _ := pairABI.Pack("totalSupply")
			out, _ := e.client.CallContract(ctx, ethereum.CallMsg{To: &tok.Pair, Data: data}, nil)
			if new(big.Int).SetBytes(out).Sign() != 0 {
				t.Errorf("%s: liquidity left after the rug", tok.Name)
			}
		case "dump":
			if p > launch/10 {
				t.Errorf("%s: price %g after the dump, launch %g", tok.Name, p, launch)
			}
		case "alive":
			if p < launch {
				t.Errorf("%s: price %g below launch %g", tok.Name, p, launch)
			}
		}
		if len(tok.Buyers) < 6 {
			t.Errorf("%s: %d buyers", tok.Name, len(tok.Buyers))
		}
	}
	head, err := e.client.HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if now := time.Now().Unix(); int64(head.Time) > now {
		t.Errorf("head %d (time %d) is %d s ahead of the wall clock after Start", head.Number, head.Time, int64(head.Time)-now)
	}
	prev := uint64(0)
	for n := range head.Number.Uint64() {
		h, err := e.client.HeaderByNumber(ctx, new(big.Int).SetUint64(n))
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 && h.Time <= prev {
			t.Errorf("block %d at %d, its parent at %d", n, h.Time, prev)
		}
		if int64(h.Time) >= started {
			t.Errorf("history block %d at %d, not before Start (%d)", n, h.Time, started)
		}
		prev = h.Time
	}
}
