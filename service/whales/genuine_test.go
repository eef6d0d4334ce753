package whales_test

import (
	"context"
	"fmt"
	"math/big"
	"slices"
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
//   - Every launch is seeded with 100,000,000 tokens against 20 WETH over
//     the full tick range; every buy is 1 WETH; a sale sells the whole bag.
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
	// launch creates token's pool against WETH at 5,000,000 tokens per
	// WETH and seeds it; pool is how collapses name it.
	launch(token common.Address) (pool string)
	// swap sells amount of in for out, paid by and paid to who.
	swap(who devnet.Account, in, out common.Address, amount *big.Int)
	// remove takes fraction (0..1] of the deployer's liquidity of token.
	remove(token common.Address, fraction float64)
}

// chainRun is a devnet with the calls a driver needs.
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
	data, err := parsed.Pack(method, args...)
	if err != nil {
		r.t.Fatalf("%s: %v", method, err)
	}
	rcpt, err := r.c.Transact(r.ctx, from, to, data)
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
// of token and weth at 5,000,000 tokens per WETH.
func sqrtPriceX96(token, weth common.Address) *big.Int {
	price := new(big.Float).SetPrec(256).SetInt64(5_000_000) // token1 (token) per token0 (weth)
	if token.Cmp(weth) < 0 {
		price.Quo(big.NewFloat(1).SetPrec(256), price) // token0 is the token: weth per token
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
	for _, l := range genuineLaunches {
		token, _ := r.deploy("LaunchToken", "Genuine "+l.symbol, l.symbol, ether(1_000_000_000))
		pools[token], fates[token] = d.launch(token), l.fate
		for _, who := range l.buyers {
			d.swap(r.c.Account(who), r.weth, token, ether(1))
		}
		for _, who := range l.sellers {
			a := r.c.Account(who)
			d.swap(a, token, r.weth, r.balance(token, a.Address))
		}
		switch l.fate {
		case "rug":
			d.remove(token, 1)
		case "trim":
			d.remove(token, 0.1)
		case "dump":
			d.swap(r.deployer, token, r.weth, ether(800_000_000))
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
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestGenuineVenues runs the scripted launches on each venue's genuine
// contracts.
func TestGenuineVenues(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name string
		new  func(r *chainRun) venueDriver
	}{
		{"uniswap v3", newUniswapV3},
		{"uniswap v4", newUniswapV4},
		{"pancakeswap v3", newPancakeV3},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			r := newChainRun(t)
			runGenuine(t, r, v.new(r))
		})
	}
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
// by their caller through the PoolManager; pools without a hook, the
// deployer's liquidity one full-range position per pool.
type uniswapV4 struct {
	r                     *chainRun
	manager               common.Address
	managerABI            abi.ABI
	swapper, liquidity    common.Address
	swapperABI, liquidABI abi.ABI
	modify                string // the name go-ethereum gives modifyLiquidity(key, params, hookData), an overload
	keys                  map[common.Address]poolKey
	seeded                map[common.Address]*big.Int // liquidity of the deployer's position
}

// poolKey is V4's PoolKey.
type poolKey struct {
	Currency0, Currency1 common.Address
	Fee, TickSpacing     *big.Int
	Hooks                common.Address
}

// id is the pool's id: keccak256(abi.encode(key)).
func (k poolKey) id() common.Hash {
	word := func(b []byte) []byte { return common.LeftPadBytes(b, 32) }
	return crypto.Keccak256Hash(word(k.Currency0[:]), word(k.Currency1[:]), word(k.Fee.Bytes()), word(k.TickSpacing.Bytes()), word(k.Hooks[:]))
}

type modifyParams struct {
	TickLower, TickUpper, LiquidityDelta *big.Int
	Salt                                 [32]byte
}

var (
	v4MinSqrtPrice    = big.NewInt(4295128739)
	v4MaxSqrtPrice, _ = new(big.Int).SetString("1461446703485210103287273052203988822378723970342", 10)
)

func newUniswapV4(r *chainRun) venueDriver {
	u := &uniswapV4{r: r, keys: map[common.Address]poolKey{}, seeded: map[common.Address]*big.Int{}}
	u.manager, u.managerABI = r.deploy("PoolManager", r.deployer.Address)
	u.swapper, u.swapperABI = r.deploy("PoolSwapTest", u.manager)
	u.liquidity, u.liquidABI = r.deploy("PoolModifyLiquidityTest", u.manager)
	for name, m := range u.liquidABI.Methods {
		if m.RawName == "modifyLiquidity" && len(m.Inputs) == 3 {
			u.modify = name
		}
	}
	return u
}

func (u *uniswapV4) factory() whales.Factory {
	return whales.Factory{Address: u.manager, Kind: whales.UniswapV4}
}

func (u *uniswapV4) launch(token common.Address) string {
	r := u.r
	t0, t1 := order(token, r.weth)
	key := poolKey{Currency0: t0, Currency1: t1, Fee: big.NewInt(3000), TickSpacing: big.NewInt(60)}
	u.keys[token] = key
	r.send(r.deployer, u.manager, u.managerABI, "initialize", key, sqrtPriceX96(token, r.weth))
	// Full range, liquidity sqrt(tokens · weth): 100,000,000 tokens
	// against 20 WETH at the pool's price.
	L := seedLiquidity()
	r.approve(r.deployer, token, u.liquidity)
	r.approve(r.deployer, r.weth, u.liquidity)
	r.send(r.deployer, u.liquidity, u.liquidABI, u.modify, key, modifyParams{big.NewInt(-887220), big.NewInt(887220), L, [32]byte{}}, []byte{})
	u.seeded[token] = L
	return key.id().Hex()
}

func (u *uniswapV4) swap(who devnet.Account, in, out common.Address, amount *big.Int) {
	r := u.r
	token := in
	if in == r.weth {
		token = out
	}
	key := u.keys[token]
	r.approve(who, in, u.swapper)
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
	r.send(who, u.swapper, u.swapperABI, "swap", key, swapParams{zeroForOne, new(big.Int).Neg(amount), limit}, testSettings{}, []byte{})
}

func (u *uniswapV4) remove(token common.Address, fraction float64) {
	r := u.r
	take := share(u.seeded[token], fraction)
	r.send(r.deployer, u.liquidity, u.liquidABI, u.modify, u.keys[token],
		modifyParams{big.NewInt(-887220), big.NewInt(887220), new(big.Int).Neg(take), [32]byte{}}, []byte{})
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
