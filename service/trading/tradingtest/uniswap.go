// Package tradingtest puts a genuine Uniswap V2 (WETH9, UniswapV2Factory
// and UniswapV2Router02 from their npm builds) on a devnet, so that tests
// measure on chain, through the router everyone trades with, what a
// token's buyer faces: the buy tax, the sell tax, whether a sale reverts.
// It also deploys the fixed-trap catalogue (service/trading/testdata,
// [Catalogue]). Only tests import it; judging a token is left to the code
// under test.
//
// Every measurement is a balance change between the block before a
// transaction and its own block, so a test keeps each token and trading
// account to itself while it trades (parallel tests on one devnet each
// take their own). The devnet cannot move its clock ahead of the wall
// clock (devnet/clock.go): [V2.Wait] waits for it instead.
package tradingtest

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/tollgate/tollgate/devnet"
)

// V2 is a genuine Uniswap V2 deployed on a devnet.
type V2 struct {
	Chain   *devnet.Chain
	WETH    common.Address // WETH9
	Factory common.Address // UniswapV2Factory; its pairs' CREATE2 init code hash is the router's
	// Router is UniswapV2Router02: the msg.sender a token sees in the
	// transferFrom of a sale or of addLiquidityETH, and so the caller to
	// give Call to see what a token lets the router do.
	Router common.Address

	client                                   *ethclient.Client
	factoryABI, routerABI, pairABI, erc20ABI abi.ABI
}

// erc20JSON is the part of ERC-20 the harness calls.
const erc20JSON = `[
{"type":"function","name":"balanceOf","stateMutability":"view","inputs":[{"name":"owner","type":"address"}],"outputs":[{"name":"","type":"uint256"}]},
{"type":"function","name":"approve","stateMutability":"nonpayable","inputs":[{"name":"spender","type":"address"},{"name":"amount","type":"uint256"}],"outputs":[{"name":"","type":"bool"}]},
{"type":"function","name":"transfer","stateMutability":"nonpayable","inputs":[{"name":"to","type":"address"},{"name":"amount","type":"uint256"}],"outputs":[{"name":"","type":"bool"}]}
]`

// UniswapV2 deploys WETH9, UniswapV2Factory (deployer its feeToSetter) and
// UniswapV2Router02 on c from deployer, and reads the chain through c's
// JSON-RPC endpoint until the test ends.
func UniswapV2(t testing.TB, c *devnet.Chain, deployer devnet.Account) *V2 {
	t.Helper()
	ctx := context.Background()
	client, err := ethclient.Dial(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	erc20ABI, err := abi.JSON(strings.NewReader(erc20JSON))
	if err != nil {
		t.Fatal(err)
	}
	_, pairABI, err := devnet.LoadArtifact("UniswapV2Pair")
	if err != nil {
		t.Fatal(err)
	}
	v := &V2{Chain: c, client: client, pairABI: pairABI, erc20ABI: erc20ABI}
	// WETH and the factory do not depend on each other: one block.
	var wg sync.WaitGroup
	var wethErr, factoryErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		v.WETH, _, wethErr = c.Deploy(ctx, deployer, "WETH9")
	}()
	go func() {
		defer wg.Done()
		v.Factory, v.factoryABI, factoryErr = c.Deploy(ctx, deployer, "UniswapV2Factory", deployer.Address)
	}()
	wg.Wait()
	if err := errors.Join(wethErr, factoryErr); err != nil {
		t.Fatal(err)
	}
	if v.Router, v.routerABI, err = c.Deploy(ctx, deployer, "UniswapV2Router02", v.Factory, v.WETH); err != nil {
		t.Fatal(err)
	}
	return v
}

// AddLiquidity seeds token's pool against WETH from `from`, who approves
// the router for tokens and calls addLiquidityETH with eth wei (the pair
// is created first if the token has none, and `from` gets the liquidity
// tokens), and returns the pair. A token that taxes or refuses the
// transfer into its pair fails the test: seeding is setup.
func (v *V2) AddLiquidity(t testing.TB, from devnet.Account, token common.Address, tokens, eth *big.Int) common.Address {
	t.Helper()
	if _, err := v.transact(from, token, nil, v.erc20ABI, "approve", v.Router, tokens); err != nil {
		t.Fatalf("approve the router: %v", err)
	}
	v.settle(t, v.Pair(t, token))
	if _, err := v.transact(from, v.Router, eth, v.routerABI, "addLiquidityETH", token, tokens, tokens, eth, from.Address, abi.MaxUint256); err != nil {
		t.Fatalf("addLiquidityETH: %v", err)
	}
	return v.Pair(t, token)
}

// Pair returns token's pair against WETH, the zero address if it has
// none.
func (v *V2) Pair(t testing.TB, token common.Address) common.Address {
	t.Helper()
	return v.call(t, v.Factory, v.factoryABI, "getPair", nil, token, v.WETH)[0].(common.Address)
}

// Buy swaps ethIn wei for token from who through the router
// (swapExactETHForTokensSupportingFeeOnTransferTokens, no minimum out,
// no deadline)
// and returns what who received and what the pair sent, each its balance
// change in the swap's block: the buy tax is 1 - received/poolSent. A
// swap that reverts, in the node's estimate or on chain, is an error.
func (v *V2) Buy(t testing.TB, who devnet.Account, token common.Address, ethIn *big.Int) (received, poolSent *big.Int, err error) {
	t.Helper()
	pair := v.Pair(t, token)
	v.settle(t, pair)
	rcpt, err := v.transact(who, v.Router, ethIn, v.routerABI, "swapExactETHForTokensSupportingFeeOnTransferTokens",
		big.NewInt(0), []common.Address{v.WETH, token}, who.Address, abi.MaxUint256)
	if err != nil {
		return nil, nil, fmt.Errorf("buy: %w", err)
	}
	received = v.tokenDelta(t, token, who.Address, rcpt.BlockNumber)
	return received, new(big.Int).Neg(v.tokenDelta(t, token, pair, rcpt.BlockNumber)), nil
}

// Sell sells amount of token from who through the router: who approves
// it for amount, then calls
// swapExactTokensForETHSupportingFeeOnTransferTokens (no minimum out, no
// deadline).
// It returns the ETH who received (its balance change in the swap's
// block plus the swap's gas) and what the pair received (its token
// balance change): the sell tax is 1 - poolReceived/amount. An approval
// or a swap that reverts is an error.
func (v *V2) Sell(t testing.TB, who devnet.Account, token common.Address, amount *big.Int) (ethOut, poolReceived *big.Int, err error) {
	t.Helper()
	pair := v.Pair(t, token)
	if _, err := v.transact(who, token, nil, v.erc20ABI, "approve", v.Router, amount); err != nil {
		return nil, nil, fmt.Errorf("approve the router: %w", err)
	}
	v.settle(t, pair)
	rcpt, err := v.transact(who, v.Router, nil, v.routerABI, "swapExactTokensForETHSupportingFeeOnTransferTokens",
		amount, big.NewInt(0), []common.Address{token, v.WETH}, who.Address, abi.MaxUint256)
	if err != nil {
		return nil, nil, fmt.Errorf("sell: %w", err)
	}
	ethOut = v.ethDelta(t, who.Address, rcpt.BlockNumber)
	gas := new(big.Int).Mul(new(big.Int).SetUint64(rcpt.GasUsed), rcpt.EffectiveGasPrice)
	return ethOut.Add(ethOut, gas), v.tokenDelta(t, token, pair, rcpt.BlockNumber), nil
}

// Transfer sends amount of token from `from` to `to` (transfer) and
// returns what `to` received, its balance change in the transfer's
// block. A transfer that reverts is an error.
func (v *V2) Transfer(t testing.TB, from devnet.Account, token, to common.Address, amount *big.Int) (received *big.Int, err error) {
	t.Helper()
	rcpt, err := v.transact(from, token, nil, v.erc20ABI, "transfer", to, amount)
	if err != nil {
		return nil, fmt.Errorf("transfer: %w", err)
	}
	return v.tokenDelta(t, token, to, rcpt.BlockNumber), nil
}

// BalanceOf returns holder's balance of token at the head.
func (v *V2) BalanceOf(t testing.TB, token, holder common.Address) *big.Int {
	t.Helper()
	return v.call(t, token, v.erc20ABI, "balanceOf", nil, holder)[0].(*big.Int)
}

// Call runs data on `to` as an eth_call from `from` at the head, which
// needs no key: e.g. a token's transferFrom with the router as caller. It
// returns the call's output; a revert is an error.
func (v *V2) Call(t testing.TB, from, to common.Address, data []byte) ([]byte, error) {
	t.Helper()
	return v.client.CallContract(context.Background(), ethereum.CallMsg{From: from, To: &to, Data: data}, nil)
}

// Now returns the timestamp of the devnet's head.
func (v *V2) Now(t testing.TB) uint64 {
	t.Helper()
	head, err := v.client.HeaderByNumber(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return head.Time
}

// Wait waits, on the wall clock, until the devnet's head is at least d
// later than it is now. The devnet never seals a block ahead of the wall
// clock, so its time cannot be moved forward, only waited for; it seals
// an empty block once its head is 2 s old, so the wait lasts about d plus
// up to two seconds. Waiting for the head, not only the clock, matters:
// the node estimates a transaction's gas on the head's timestamp.
func (v *V2) Wait(t testing.TB, d time.Duration) {
	t.Helper()
	target := v.Now(t) + uint64((d+time.Second-1)/time.Second)
	for v.Now(t) < target {
		time.Sleep(250 * time.Millisecond)
	}
}

// settle waits until the devnet's head is later than pair's last update
// (none: no wait). A pair adds to its cumulative prices, two storage
// writes, only in a block later than its last update, and the node
// estimates a transaction's gas on the head: a trade estimated in the
// block of the pair's previous one lands a second later with too little
// gas for those writes (Transact adds a fifth to the estimate, not the
// 44,200 gas of two fresh slots) and reverts out of gas in the pair.
func (v *V2) settle(t testing.TB, pair common.Address) {
	t.Helper()
	if pair == (common.Address{}) {
		return
	}
	last := v.call(t, pair, v.pairABI, "getReserves", nil)[2].(uint32)
	for v.Now(t) <= uint64(last) {
		time.Sleep(100 * time.Millisecond)
	}
}

// transact sends a call of method from `from` with value wei (nil: none)
// and returns its receipt; a revert, in the estimate or on chain, is an
// error.
func (v *V2) transact(from devnet.Account, to common.Address, value *big.Int, parsed abi.ABI, method string, args ...any) (*types.Receipt, error) {
	data, err := parsed.Pack(method, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	rcpt, err := v.Chain.TransactValue(context.Background(), from, to, value, data)
	if err != nil {
		return nil, err
	}
	if rcpt.Status != types.ReceiptStatusSuccessful {
		return nil, fmt.Errorf("%s: transaction %s reverted", method, rcpt.TxHash)
	}
	return rcpt, nil
}

// call makes a read-only call at block (nil: the head) and unpacks its
// outputs; any failure fails the test.
func (v *V2) call(t testing.TB, to common.Address, parsed abi.ABI, method string, block *big.Int, args ...any) []any {
	t.Helper()
	data, err := parsed.Pack(method, args...)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	out, err := v.client.CallContract(context.Background(), ethereum.CallMsg{To: &to, Data: data}, block)
	if err != nil {
		t.Fatalf("%s on %s: %v", method, to, err)
	}
	res, err := parsed.Unpack(method, out)
	if err != nil {
		t.Fatalf("%s on %s: %v", method, to, err)
	}
	return res
}

// tokenDelta is holder's balance change of token in block.
func (v *V2) tokenDelta(t testing.TB, token, holder common.Address, block *big.Int) *big.Int {
	t.Helper()
	before := v.call(t, token, v.erc20ABI, "balanceOf", new(big.Int).Sub(block, big.NewInt(1)), holder)[0].(*big.Int)
	after := v.call(t, token, v.erc20ABI, "balanceOf", block, holder)[0].(*big.Int)
	return after.Sub(after, before)
}

// ethDelta is holder's ETH balance change in block.
func (v *V2) ethDelta(t testing.TB, holder common.Address, block *big.Int) *big.Int {
	t.Helper()
	ctx := context.Background()
	before, err := v.client.BalanceAt(ctx, holder, new(big.Int).Sub(block, big.NewInt(1)))
	if err != nil {
		t.Fatal(err)
	}
	after, err := v.client.BalanceAt(ctx, holder, block)
	if err != nil {
		t.Fatal(err)
	}
	return after.Sub(after, before)
}
