package whales_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/big"
	"slices"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
	"github.com/tollgate/tollgate/service/whales"
)

// The genuine-venue tests deploy each venue's real contracts from their
// npm builds (devnet/contracts/prebuilt.txt) on a devnet, script the same
// four launches through the venue's own routers, scan them and check the
// collapses and the exact ranking docs/rules.md implies:
//
//   - RUG: the deployer pulls all its liquidity after the smart and lucky
//     traders sold; DUMP: the deployer sells 800,000,000 tokens into the
//     pool after the smart trader sold; TRIM: the deployer removes 10 % of
//     its liquidity (no collapse); LIVE: nothing happens.
//   - Every launch is seeded with 100,000,000 tokens against 20 of the
//     venue's quote (WETH, or native ETH) over the full tick range; every
//     buy is 1 of the quote; a sale sells the whole bag.
//   - Nobody but the traders is ranked (no router, PoolManager or hook),
//     each with exactly the launches it bought in.
//
// Scores (smart entries + 2 × dodged − caught): smart 4 + 2·2 = 8, lucky
// 2 + 2 − 1 = 3, holder 4 − 2 = 2; crowd #10, #11, #13, #14 early twice
// and caught once (1), #15 early once (1), #12 early once and caught once
// (0, not listed); late never early and caught twice (−2, not listed).

// genuineLaunches are the scripted launches; who are devnet accounts.
var genuineLaunches = []struct {
	symbol, fate string
	buyers       []int
	sellers      []int // after the buys, before the fate
}{
	{"RUG", "rug", []int{devnet.SmartTrader, devnet.HolderTrader, devnet.LuckyTrader, 10, 11, devnet.LateTrader, 12},
		[]int{devnet.SmartTrader, devnet.LuckyTrader}},
	{"DUMP", "dump", []int{devnet.SmartTrader, devnet.HolderTrader, devnet.LuckyTrader, 13, 14, devnet.LateTrader},
		[]int{devnet.SmartTrader}},
	{"TRIM", "trim", []int{devnet.SmartTrader, devnet.HolderTrader, 13, 14, 15, devnet.LateTrader}, nil},
	{"LIVE", "live", []int{devnet.SmartTrader, devnet.HolderTrader, 10, 11, 12, devnet.LateTrader}, nil},
}

// genuineRanking is the listed ranking: account and score, best first
// (ties by smart entries, then dodge rate, then address).
var genuineRanking = []struct {
	account int
	score   float64
}{{devnet.SmartTrader, 8}, {devnet.LuckyTrader, 3}, {devnet.HolderTrader, 2}}

// genuineTail are the accounts listed after them, each with score 1, in
// an order the rules leave to the addresses among equal entries.
var genuineTail = []int{10, 11, 13, 14, 15}

// venueDriver scripts one venue's launches through its own contracts.
type venueDriver interface {
	// factory is what --dex-factories names.
	factory() whales.Factory
	// quote is what the launches trade against: WETH, or native ETH (the
	// zero address).
	quote() common.Address
	// launch creates token's pool against the quote at 5,000,000 tokens
	// per quote and seeds it; pool is how collapses name it.
	launch(token common.Address) (pool string)
	// swap sells amount of in for out, paid by and paid to who.
	swap(who devnet.Account, in, out common.Address, amount *big.Int)
	// remove takes fraction (0..1] of the deployer's liquidity of token.
	remove(token common.Address, fraction float64)
}

// chainRun is one venue's subtest on the shared devnet, with the calls a
// driver needs.
type chainRun struct {
	t        *testing.T
	ctx      context.Context
	c        *devnet.Chain
	client   *ethclient.Client
	deployer devnet.Account
	weth     common.Address
	erc20    abi.ABI
	approved map[[3]common.Address]bool
}

func newChainRun(t *testing.T) *chainRun {
	c, client := devnettest.Start(t)
	_, erc20, err := devnet.LoadArtifact("LaunchToken")
	if err != nil {
		t.Fatal(err)
	}
	return &chainRun{t: t, ctx: context.Background(), c: c, client: client, deployer: c.Account(devnet.ScenarioAccount), weth: c.Dex.WETH, erc20: erc20,
		approved: map[[3]common.Address]bool{}}
}

// on is r's devnet for subtest t, with approvals of its own.
func (r *chainRun) on(t *testing.T) *chainRun {
	sub := *r
	sub.t, sub.approved = t, map[[3]common.Address]bool{}
	return &sub
}

func (r *chainRun) deploy(name string, args ...any) (common.Address, abi.ABI) {
	r.t.Helper()
	addr, parsed, err := r.c.Deploy(r.ctx, r.deployer, name, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	return addr, parsed
}

// send calls method on to from `from` and fails the test if it reverts.
func (r *chainRun) send(from devnet.Account, to common.Address, parsed abi.ABI, method string, args ...any) *types.Receipt {
	r.t.Helper()
	return r.sendValue(from, to, nil, parsed, method, args...)
}

// sendValue is send with value wei of native ETH (nil: none).
func (r *chainRun) sendValue(from devnet.Account, to common.Address, value *big.Int, parsed abi.ABI, method string, args ...any) *types.Receipt {
	r.t.Helper()
	data, err := parsed.Pack(method, args...)
	if err != nil {
		r.t.Fatalf("%s: %v", method, err)
	}
	rcpt, err := r.c.TransactValue(r.ctx, from, to, value, data)
	if err != nil || rcpt.Status != types.ReceiptStatusSuccessful {
		r.t.Fatalf("%s: %v (receipt %+v)", method, err, rcpt)
	}
	return rcpt
}

// view reads method on to.
func (r *chainRun) view(to common.Address, parsed abi.ABI, method string, args ...any) []any {
	r.t.Helper()
	data, err := parsed.Pack(method, args...)
	if err != nil {
		r.t.Fatalf("%s: %v", method, err)
	}
	out, err := r.client.CallContract(r.ctx, ethereum.CallMsg{To: &to, Data: data}, nil)
	if err != nil {
		r.t.Fatalf("%s: %v", method, err)
	}
	vals, err := parsed.Unpack(method, out)
	if err != nil {
		r.t.Fatalf("%s: %v", method, err)
	}
	return vals
}

// approve lets spender take who's token, once for all amounts (a
// transaction less per trade: the devnet seals a block a second).
func (r *chainRun) approve(who devnet.Account, token, spender common.Address) {
	key := [3]common.Address{who.Address, token, spender}
	if r.approved[key] {
		return
	}
	r.send(who, token, r.erc20, "approve", spender, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)))
	r.approved[key] = true
}

func (r *chainRun) balance(token, who common.Address) *big.Int {
	return r.view(token, r.erc20, "balanceOf", who)[0].(*big.Int)
}

func ether(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), big.NewInt(1e18)) }

// share is fraction of x, rounded down.
func share(x *big.Int, fraction float64) *big.Int {
	out, _ := new(big.Float).Mul(new(big.Float).SetInt(x), big.NewFloat(fraction)).Int(nil)
	return out
}

// seedLiquidity is the full-range liquidity of 100,000,000 tokens
// against 20 WETH: sqrt(tokens · weth).
func seedLiquidity() *big.Int {
	return new(big.Int).Sqrt(new(big.Int).Mul(ether(100_000_000), ether(20)))
}

var maxUint128 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))

// farDeadline is a deadline no devnet block reaches.
var farDeadline = new(big.Int).Lsh(big.NewInt(1), 40)

// sqrtPriceX96 is the Q64.96 square root of token1-per-token0 for a pool
// of token and quote at 5,000,000 tokens per quote.
func sqrtPriceX96(token, quote common.Address) *big.Int {
	price := new(big.Float).SetPrec(256).SetInt64(5_000_000) // token1 (token) per token0 (quote)
	if token.Cmp(quote) < 0 {
		price.Quo(big.NewFloat(1).SetPrec(256), price) // token0 is the token: quote per token
	}
	sqrt := new(big.Float).SetPrec(256).Sqrt(price)
	out, _ := sqrt.Mul(sqrt, new(big.Float).SetInt(new(big.Int).Lsh(big.NewInt(1), 96))).Int(nil)
	return out
}

// order returns a and b as (token0, token1).
func order(a, b common.Address) (common.Address, common.Address) {
	if a.Cmp(b) < 0 {
		return a, b
	}
	return b, a
}

// runGenuine scripts the launches through d and checks the scan of them.
func runGenuine(t *testing.T, r *chainRun, d venueDriver) {
	pools := map[common.Address]string{}
	fates := map[common.Address]string{}
	quote := d.quote()
	crossed := map[common.Address]int{} // launches each trader bought in
	for _, l := range genuineLaunches {
		token, _ := r.deploy("LaunchToken", "Genuine "+l.symbol, l.symbol, ether(1_000_000_000))
		pools[token], fates[token] = d.launch(token), l.fate
		for _, who := range l.buyers {
			d.swap(r.c.Account(who), quote, token, ether(1))
			crossed[r.c.Account(who).Address]++
		}
		for _, who := range l.sellers {
			a := r.c.Account(who)
			d.swap(a, token, quote, r.balance(token, a.Address))
		}
		switch l.fate {
		case "rug":
			d.remove(token, 1)
		case "trim":
			d.remove(token, 0.1)
		case "dump":
			d.swap(r.deployer, token, quote, ether(800_000_000))
		}
	}

	rpcc, err := rpc.Dial(r.c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rpcc.Close()
	cfg := whales.DefaultConfig()
	cfg.Factories = []whales.Factory{d.factory()}
	cfg.Quotes = []common.Address{r.weth}
	cfg.Confirmations = 0
	s, err := whales.New(rpcc, cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Scan(r.ctx); err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot()
	if snap == nil || snap.TokensScanned != len(genuineLaunches) {
		t.Fatalf("snapshot %+v", snap)
	}
	want := map[string]string{"rug": "liquidity", "dump": "drawdown"}
	for token, fate := range fates {
		col, found := snap.Collapses[token]
		if found != (want[fate] != "") || col.Kind != want[fate] || (found && (col.Pool != pools[token] || col.Venue != d.factory().Kind || col.Block == 0)) {
			t.Errorf("%s launch: collapse %+v (found %v), want %q in pool %s", fate, col, found, want[fate], pools[token])
		}
	}
	var got []string
	for _, w := range snap.Wallets {
		got = append(got, fmt.Sprintf("%s:%g", w.Address.Hex(), w.Score))
	}
	var head []string
	for _, w := range genuineRanking {
		head = append(head, fmt.Sprintf("%s:%g", r.c.Account(w.account).Address.Hex(), w.score))
	}
	var tail []string
	for _, i := range genuineTail {
		tail = append(tail, fmt.Sprintf("%s:1", r.c.Account(i).Address.Hex()))
	}
	if len(got) != len(head)+len(tail) || !slices.Equal(got[:len(head)], head) || !sameSet(got[len(head):], tail) {
		t.Errorf("ranking\n%v\nwant\n%v then %v in any order", got, head, tail)
	}
	// The whole ranking, unlisted wallets included: the traders, each
	// with the launches it bought in, and nobody else (a router, the
	// PoolManager or a hook taking its fee would be a phantom buyer).
	all := s.Ranking()
	for _, w := range all {
		if w.TokensCrossed != crossed[w.Address] {
			t.Errorf("%s crossed %d tokens, bought in %d launches", w.Address, w.TokensCrossed, crossed[w.Address])
		}
	}
	if len(all) != len(crossed) {
		t.Errorf("%d wallets ranked, %d traders bought", len(all), len(crossed))
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestGenuineVenues runs the scripted launches on each venue's genuine
// contracts, every venue a subtest with contracts of its own on one
// devnet. The subtests run at once, started from goroutines rather than
// by t.Parallel (which -parallel caps at GOMAXPROCS): their transactions
// share the devnet's blocks, a block a second, so the whole takes about
// as long as the longest venue.
func TestGenuineVenues(t *testing.T) {
	t.Parallel()
	shared := newChainRun(t)
	var wg sync.WaitGroup
	for _, v := range []struct {
		name string
		new  func(r *chainRun) venueDriver
	}{
		{"uniswap v3", newUniswapV3},
		{"uniswap v4", newUniswapV4},
		{"uniswap v4 native eth", newUniswapV4Native},
		{"uniswap v4 fee-taking hook", newUniswapV4FeeHook},
		{"pancakeswap v3", newPancakeV3},
	} {
		wg.Go(func() {
			t.Run(v.name, func(t *testing.T) {
				r := shared.on(t)
				runGenuine(t, r, v.new(r))
			})
		})
	}
	wg.Wait()
}

// uniswapV3 drives Uniswap V3: the v3-core factory, the v3-periphery
// SwapRouter and NonfungiblePositionManager, a full-range position of the
// deployer per pool.
type uniswapV3 struct {
	r                    *chainRun
	factoryAddr          common.Address
	factoryABI           abi.ABI
	router, positions    common.Address
	routerABI, positsABI abi.ABI
	tokenIDs             map[common.Address]*big.Int
}

const v3Fee = 3000

func newUniswapV3(r *chainRun) venueDriver {
	u := &uniswapV3{r: r, tokenIDs: map[common.Address]*big.Int{}}
	u.factoryAddr, u.factoryABI = r.deploy("UniswapV3Factory")
	u.router, u.routerABI = r.deploy("SwapRouter", u.factoryAddr, r.weth)
	// The position manager's token descriptor only renders NFT metadata.
	u.positions, u.positsABI = r.deploy("NonfungiblePositionManager", u.factoryAddr, r.weth, common.Address{})
	return u
}

func (u *uniswapV3) factory() whales.Factory {
	return whales.Factory{Address: u.factoryAddr, Kind: whales.UniswapV3}
}

func (u *uniswapV3) quote() common.Address { return u.r.weth }

func (u *uniswapV3) launch(token common.Address) string {
	r := u.r
	t0, t1 := order(token, r.weth)
	r.send(r.deployer, u.positions, u.positsABI, "createAndInitializePoolIfNecessary", t0, t1, big.NewInt(v3Fee), sqrtPriceX96(token, r.weth))
	pool := r.view(u.factoryAddr, u.factoryABI, "getPool", t0, t1, big.NewInt(v3Fee))[0].(common.Address)
	seedToken, seedWETH := ether(100_000_000), ether(20)
	r.approve(r.deployer, token, u.positions)
	r.approve(r.deployer, r.weth, u.positions)
	a0, a1 := seedWETH, seedToken
	if t0 == token {
		a0, a1 = seedToken, seedWETH
	}
	type mintParams struct {
		Token0, Token1                 common.Address
		Fee, TickLower, TickUpper      *big.Int
		Amount0Desired, Amount1Desired *big.Int
		Amount0Min, Amount1Min         *big.Int
		Recipient                      common.Address
		Deadline                       *big.Int
	}
	r.send(r.deployer, u.positions, u.positsABI, "mint", mintParams{t0, t1, big.NewInt(v3Fee), big.NewInt(-887220), big.NewInt(887220),
		a0, a1, new(big.Int), new(big.Int), r.deployer.Address, farDeadline})
	u.tokenIDs[token] = big.NewInt(int64(len(u.tokenIDs) + 1)) // the position manager numbers positions from 1
	return pool.Hex()
}

func (u *uniswapV3) swap(who devnet.Account, in, out common.Address, amount *big.Int) {
	r := u.r
	r.approve(who, in, u.router)
	type exactInputSingle struct {
		TokenIn, TokenOut common.Address
		Fee               *big.Int
		Recipient         common.Address
		Deadline          *big.Int
		AmountIn          *big.Int
		AmountOutMinimum  *big.Int
		SqrtPriceLimitX96 *big.Int
	}
	r.send(who, u.router, u.routerABI, "exactInputSingle", exactInputSingle{in, out, big.NewInt(v3Fee), who.Address, farDeadline, amount, new(big.Int), new(big.Int)})
}

func (u *uniswapV3) remove(token common.Address, fraction float64) {
	r := u.r
	id := u.tokenIDs[token]
	liquidity := r.view(u.positions, u.positsABI, "positions", id)[7].(*big.Int)
	take := share(liquidity, fraction)
	type decrease struct {
		TokenId, Liquidity, Amount0Min, Amount1Min, Deadline *big.Int
	}
	r.send(r.deployer, u.positions, u.positsABI, "decreaseLiquidity", decrease{id, take, new(big.Int), new(big.Int), farDeadline})
	type collect struct {
		TokenId    *big.Int
		Recipient  common.Address
		Amount0Max *big.Int
		Amount1Max *big.Int
	}
	r.send(r.deployer, u.positions, u.positsABI, "collect", collect{id, r.deployer.Address, maxUint128, maxUint128})
}

// uniswapV4 drives Uniswap V4: the v4-core PoolManager and its test
// routers (PoolSwapTest, PoolModifyLiquidityTest), which pay and are paid
// by their caller through the PoolManager (an ERC-20 from the caller's
// allowance, native ETH from the call's value); the deployer's liquidity
// one full-range position per pool. The pools' quote is WETH or native
// ETH, their hook none or v4-core's FeeTakingHook.
type uniswapV4 struct {
	r                     *chainRun
	manager               common.Address
	managerABI            abi.ABI
	swapper, liquidity    common.Address
	swapperABI, liquidABI abi.ABI
	modify                string         // the name go-ethereum gives modifyLiquidity(key, params, hookData), an overload
	currency              common.Address // the quote: WETH, or native ETH (zero)
	hook                  common.Address // zero: none
	keys                  map[common.Address]devnet.V4PoolKey
	seeded                map[common.Address]*big.Int // liquidity of the deployer's position
}

var (
	v4MinSqrtPrice    = big.NewInt(4295128739)
	v4MaxSqrtPrice, _ = new(big.Int).SetString("1461446703485210103287273052203988822378723970342", 10)
)

// newUniswapV4 quotes its pools in WETH, without a hook.
func newUniswapV4(r *chainRun) venueDriver { return newV4(r, r.weth, false) }

// newUniswapV4Native quotes its pools in native ETH (currency0 = 0x0),
// without a hook.
func newUniswapV4Native(r *chainRun) venueDriver { return newV4(r, common.Address{}, false) }

// newUniswapV4FeeHook quotes its pools in WETH, with v4-core's
// FeeTakingHook: 1.23 % of every swap's output taken by the hook out of
// the PoolManager (the token on a buy, WETH on a sale), 5.43 % of what a
// liquidity change moves taken on top of an addition and out of a
// removal. The pool's curve never sees the fee: Swap carries the pool's
// amounts and price, ModifyLiquidity its liquidity, as in the hookless
// pools. A buyer's bag is 1.23 % smaller than its Swap says, so selling
// it all counts as 98.77 % sold, a dodge all the same (at least 50 %);
// the hook's transfers of the token out of the PoolManager name no
// buyer. The ranking is the same.
func newUniswapV4FeeHook(r *chainRun) venueDriver { return newV4(r, r.weth, true) }

func newV4(r *chainRun, currency common.Address, feeHook bool) venueDriver {
	u := &uniswapV4{r: r, currency: currency, keys: map[common.Address]devnet.V4PoolKey{}, seeded: map[common.Address]*big.Int{}}
	u.manager, u.managerABI = r.deploy("PoolManager", r.deployer.Address)
	u.swapper, u.swapperABI = r.deploy("PoolSwapTest", u.manager)
	u.liquidity, u.liquidABI = r.deploy("PoolModifyLiquidityTest", u.manager)
	for name, m := range u.liquidABI.Methods {
		if m.RawName == "modifyLiquidity" && len(m.Inputs) == 3 {
			u.modify = name
		}
	}
	if feeHook {
		u.hook = u.deployFeeHook()
	}
	return u
}

// feeHookFlags are the hook points FeeTakingHook implements, where its
// own tests place it (v4-core test/CustomAccounting.t.sol): afterSwap
// (bit 6), afterSwapReturnDelta (2), afterAddLiquidity (10),
// afterAddLiquidityReturnDelta (1), afterRemoveLiquidity (8),
// afterRemoveLiquidityReturnDelta (0) of src/libraries/Hooks.sol. Any
// other bit would make the PoolManager call a point the hook does not
// implement, which reverts.
const feeHookFlags = 1<<6 | 1<<2 | 1<<10 | 1<<1 | 1<<8 | 1<<0

// deployFeeHook deploys FeeTakingHook's shipped creation code for the
// PoolManager at an address whose low 14 bits are exactly feeHookFlags:
// CREATE2 through the devnet's HookDeployer with a mined salt.
func (u *uniswapV4) deployFeeHook() common.Address {
	r := u.r
	art, hookABI, err := devnet.LoadArtifact("FeeTakingHook")
	if err != nil {
		r.t.Fatal(err)
	}
	ctor, err := hookABI.Pack("", u.manager)
	if err != nil {
		r.t.Fatal(err)
	}
	code := append(common.FromHex(art.Bytecode), ctor...)
	deployer, deployerABI := r.deploy("HookDeployer")
	salt, hook := hookSalt(deployer, crypto.Keccak256(code), feeHookFlags)
	r.send(r.deployer, deployer, deployerABI, "deploy", salt, code)
	if onChain, err := r.client.CodeAt(r.ctx, hook, nil); err != nil || len(onChain) == 0 {
		r.t.Fatalf("no hook at %s (%v)", hook, err)
	}
	return hook
}

// hookSalt finds the first salt whose CREATE2 address from deployer for
// code of hash codeHash has exactly flags in its low 14 bits (one salt in
// 16,384 on average).
func hookSalt(deployer common.Address, codeHash []byte, flags uint16) ([32]byte, common.Address) {
	for i := uint64(0); ; i++ {
		var salt [32]byte
		binary.BigEndian.PutUint64(salt[24:], i)
		addr := crypto.CreateAddress2(deployer, salt, codeHash)
		if binary.BigEndian.Uint16(addr[18:])&(1<<14-1) == flags {
			return salt, addr
		}
	}
}

func (u *uniswapV4) factory() whales.Factory {
	return whales.Factory{Address: u.manager, Kind: whales.UniswapV4}
}

func (u *uniswapV4) quote() common.Address { return u.currency }

// nativeValue is what a router call paying amount of currency sends
// along: amount if it is native ETH, else nothing.
func nativeValue(currency common.Address, amount *big.Int) *big.Int {
	if currency != (common.Address{}) {
		return nil
	}
	return amount
}

func (u *uniswapV4) launch(token common.Address) string {
	r := u.r
	t0, t1 := order(token, u.currency)
	key := devnet.V4PoolKey{Currency0: t0, Currency1: t1, Fee: big.NewInt(3000), TickSpacing: big.NewInt(60), Hooks: u.hook}
	u.keys[token] = key
	r.send(r.deployer, u.manager, u.managerABI, "initialize", key, sqrtPriceX96(token, u.currency))
	// Full range, liquidity sqrt(tokens · quote): 100,000,000 tokens
	// against 20 of the quote at the pool's price. Native ETH goes along
	// with the call, 21 for the 20; the router refunds the rest.
	L := seedLiquidity()
	r.approve(r.deployer, token, u.liquidity)
	if u.currency != (common.Address{}) {
		r.approve(r.deployer, u.currency, u.liquidity)
	}
	if u.hook != (common.Address{}) {
		u.fundHookFee(token)
	}
	r.sendValue(r.deployer, u.liquidity, nativeValue(u.currency, ether(21)), u.liquidABI, u.modify, key,
		devnet.V4ModifyParams{TickLower: big.NewInt(-887220), TickUpper: big.NewInt(887220), LiquidityDelta: L}, []byte{})
	u.seeded[token] = L
	return key.ID().Hex()
}

// fundHookFee makes the PoolManager hold the fee-taking hook's share of
// the seed (5.43 %: 5,430,000 tokens, 1.086 WETH) before it is added.
// The hook takes its fee out of the PoolManager inside modifyLiquidity,
// before the router pays the seed in (flash accounting: take, then
// settle), so the PoolManager must already hold that much of each
// currency: of WETH it does once any pool holds some, of a new token
// never (v4-core's own tests add liquidity to other pools of the same
// currencies first). The deployer transfers it in beforehand, outside
// any pool's accounting; it stays in the PoolManager and moves no price.
func (u *uniswapV4) fundHookFee(token common.Address) {
	r := u.r
	for _, c := range []struct {
		currency common.Address
		amount   *big.Int
	}{{token, ether(6_000_000)}, {u.currency, ether(2)}} {
		if r.balance(c.currency, u.manager).Cmp(c.amount) < 0 {
			r.send(r.deployer, c.currency, r.erc20, "transfer", u.manager, c.amount)
		}
	}
}

func (u *uniswapV4) swap(who devnet.Account, in, out common.Address, amount *big.Int) {
	r := u.r
	token := in
	if in == u.currency {
		token = out
	}
	key := u.keys[token]
	if in != (common.Address{}) {
		r.approve(who, in, u.swapper)
	}
	zeroForOne := in == key.Currency0
	limit := new(big.Int).Add(v4MinSqrtPrice, big.NewInt(1))
	if !zeroForOne {
		limit = new(big.Int).Sub(v4MaxSqrtPrice, big.NewInt(1))
	}
	type swapParams struct {
		ZeroForOne        bool
		AmountSpecified   *big.Int
		SqrtPriceLimitX96 *big.Int
	}
	type testSettings struct{ TakeClaims, SettleUsingBurn bool }
	rcpt := r.sendValue(who, u.swapper, nativeValue(in, amount), u.swapperABI, "swap", key, swapParams{zeroForOne, new(big.Int).Neg(amount), limit}, testSettings{}, []byte{})
	if u.hook != (common.Address{}) && !u.hookTook(rcpt, out) {
		r.t.Errorf("swap %s: the hook took no fee in %s out of the PoolManager", rcpt.TxHash, out)
	}
}

// hookTook reports whether the receipt has a transfer of token from the
// PoolManager to the hook: the fee the phantom-buyer rule must not take
// for a buyer.
func (u *uniswapV4) hookTook(rcpt *types.Receipt, token common.Address) bool {
	transfer := crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))
	for _, l := range rcpt.Logs {
		if l.Address == token && len(l.Topics) == 3 && l.Topics[0] == transfer &&
			common.BytesToAddress(l.Topics[1][:]) == u.manager && common.BytesToAddress(l.Topics[2][:]) == u.hook {
			return true
		}
	}
	return false
}

func (u *uniswapV4) remove(token common.Address, fraction float64) {
	r := u.r
	take := share(u.seeded[token], fraction)
	r.send(r.deployer, u.liquidity, u.liquidABI, u.modify, u.keys[token],
		devnet.V4ModifyParams{TickLower: big.NewInt(-887220), TickUpper: big.NewInt(887220), LiquidityDelta: new(big.Int).Neg(take)}, []byte{})
}

// pancakeV3 drives PancakeSwap V3: its v3-core factory and pool from the
// npm build; the PoolDeployer and a router, which the build does not
// ship, are the devnet's stand-ins (devnet/contracts/CLHarness.sol) that
// deploy the shipped pool code and pay it from the caller, as
// PancakeSwap's own do.
type pancakeV3 struct {
	r                     *chainRun
	factoryAddr, router   common.Address
	factoryABI, routerABI abi.ABI
	poolABI               abi.ABI
	pools                 map[common.Address]common.Address
	seeded                map[common.Address]*big.Int
}

// pancakeFee is the 0.25 % tier, tick spacing 50.
const pancakeFee, pancakeRange = 2500, 887250

func newPancakeV3(r *chainRun) venueDriver {
	u := &pancakeV3{r: r, pools: map[common.Address]common.Address{}, seeded: map[common.Address]*big.Int{}}
	poolArt, poolABI, err := devnet.LoadArtifact("PancakeV3Pool")
	if err != nil {
		r.t.Fatal(err)
	}
	u.poolABI = poolABI
	code, _ := r.deploy("CodeHolder", common.FromHex(poolArt.Bytecode))
	deployer, deployerABI := r.deploy("PancakeDeployer", code)
	u.factoryAddr, u.factoryABI = r.deploy("PancakeV3Factory", deployer)
	r.send(r.deployer, deployer, deployerABI, "setFactoryAddress", u.factoryAddr)
	u.router, u.routerABI = r.deploy("CLRouter")
	return u
}

func (u *pancakeV3) factory() whales.Factory {
	return whales.Factory{Address: u.factoryAddr, Kind: whales.PancakeV3}
}

func (u *pancakeV3) quote() common.Address { return u.r.weth }

func (u *pancakeV3) launch(token common.Address) string {
	r := u.r
	r.send(r.deployer, u.factoryAddr, u.factoryABI, "createPool", token, r.weth, big.NewInt(pancakeFee))
	t0, t1 := order(token, r.weth)
	pool := r.view(u.factoryAddr, u.factoryABI, "getPool", t0, t1, big.NewInt(pancakeFee))[0].(common.Address)
	r.send(r.deployer, pool, u.poolABI, "initialize", sqrtPriceX96(token, r.weth))
	L := seedLiquidity()
	r.approve(r.deployer, token, u.router)
	r.approve(r.deployer, r.weth, u.router)
	r.send(r.deployer, u.router, u.routerABI, "mint", pool, big.NewInt(-pancakeRange), big.NewInt(pancakeRange), L)
	u.pools[token], u.seeded[token] = pool, L
	return pool.Hex()
}

func (u *pancakeV3) swap(who devnet.Account, in, out common.Address, amount *big.Int) {
	r := u.r
	token := in
	if in == r.weth {
		token = out
	}
	r.approve(who, in, u.router)
	zeroForOne := in.Cmp(out) < 0
	limit := new(big.Int).Add(v4MinSqrtPrice, big.NewInt(1)) // V3's bounds are V4's
	if !zeroForOne {
		limit = new(big.Int).Sub(v4MaxSqrtPrice, big.NewInt(1))
	}
	r.send(who, u.router, u.routerABI, "swap", u.pools[token], zeroForOne, amount, limit)
}

func (u *pancakeV3) remove(token common.Address, fraction float64) {
	r := u.r
	take := share(u.seeded[token], fraction)
	pool := u.pools[token]
	r.send(r.deployer, pool, u.poolABI, "burn", big.NewInt(-pancakeRange), big.NewInt(pancakeRange), take)
	r.send(r.deployer, pool, u.poolABI, "collect", r.deployer.Address, big.NewInt(-pancakeRange), big.NewInt(pancakeRange), maxUint128, maxUint128)
}
