package liquidity_test

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/service/liquidity"
	"github.com/tollgate/tollgate/service/whales"
)

const v3Fee = 3000

// The full tick range of fee tier 3000 (tick spacing 60).
var fullLower, fullUpper = big.NewInt(-887220), big.NewInt(887220)

var maxUint128 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))

// sqrtPriceX96 is the Q64.96 square root of token1-per-token0 for a pool
// of token and quote at 5,000,000 tokens per quote.
func sqrtPriceX96(token, quote common.Address) *big.Int {
	price := new(big.Float).SetPrec(256).SetInt64(5_000_000)
	if token.Cmp(quote) < 0 {
		price.Quo(big.NewFloat(1).SetPrec(256), price)
	}
	sqrt := new(big.Float).SetPrec(256).Sqrt(price)
	out, _ := sqrt.Mul(sqrt, new(big.Float).SetInt(new(big.Int).Lsh(big.NewInt(1), 96))).Int(nil)
	return out
}

// v3 is a genuine Uniswap V3 (v3-core's factory, v3-periphery's
// NonfungiblePositionManager) and one token's pool against WETH.
type v3 struct {
	*run
	deployer            devnet.Account
	factory, positions  common.Address
	factoryABI, posABI  abi.ABI
	weth, token, pool   common.Address
	wethABI             abi.ABI
	mintTopic, transfer common.Hash
}

type mintParams struct {
	Token0, Token1                 common.Address
	Fee, TickLower, TickUpper      *big.Int
	Amount0Desired, Amount1Desired *big.Int
	Amount0Min, Amount1Min         *big.Int
	Recipient                      common.Address
	Deadline                       *big.Int
}

// mint adds a full-range position of tokens against weth (the pool takes
// what fits the price) for the deployer and returns its NFT's id and
// the block it was minted in.
func (u *v3) mint(tokens, weth *big.Int) (*big.Int, *big.Int) {
	u.t.Helper()
	t0, t1, a0, a1 := u.weth, u.token, weth, tokens
	if u.token.Cmp(u.weth) < 0 {
		t0, t1, a0, a1 = u.token, u.weth, tokens, weth
	}
	rcpt := u.send(u.deployer, u.positions, nil, u.posABI, "mint", mintParams{t0, t1, big.NewInt(v3Fee), fullLower, fullUpper,
		a0, a1, new(big.Int), new(big.Int), u.deployer.Address, farDeadline})
	return u.minted(rcpt), rcpt.BlockNumber
}

// minted is the id of the NFT a receipt's mint made.
func (u *v3) minted(rcpt *types.Receipt) *big.Int {
	u.t.Helper()
	for _, l := range rcpt.Logs {
		if l.Address == u.positions && len(l.Topics) == 4 && l.Topics[0] == u.transfer && l.Topics[1] == (common.Hash{}) {
			return new(big.Int).SetBytes(l.Topics[3][:])
		}
	}
	u.t.Fatalf("no NFT minted in %s", rcpt.TxHash)
	return nil
}

// liquidity is an NFT's position's liquidity at block.
func (u *v3) liquidity(id, block *big.Int) *big.Int {
	return u.view(u.positions, u.posABI, "positions", block, id)[7].(*big.Int)
}

// TestUniswapV3 seeds a genuine Uniswap V3 pool with three NFT positions
// of the deployer, sends one to 0x…dEaD and one to the token's owner,
// removes half of the one kept and collects it, and checks Read against
// the chain: each holder's share of the positions (all full range, so
// shares of liquidity), the WETH of the first mint, the WETH the
// deployer collected, the pool's WETH.
func TestUniswapV3(t *testing.T) {
	t.Parallel()
	r := newRun(t)
	d := r.c.Account(devnet.ScenarioAccount)
	owner := r.c.Account(1)
	u := &v3{run: r, deployer: d, transfer: crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))}
	u.weth, u.wethABI = r.deploy(d, "WETH9")
	u.factory, u.factoryABI = r.deploy(d, "UniswapV3Factory")
	// The position manager's token descriptor only renders NFT metadata.
	u.positions, u.posABI = r.deploy(d, "NonfungiblePositionManager", u.factory, u.weth, common.Address{})
	u.token, _ = r.deploy(d, "LaunchToken", "Concentrated", "CONC", ether(1_000_000_000))
	created := r.head()
	t0, t1 := u.weth, u.token
	if u.token.Cmp(u.weth) < 0 {
		t0, t1 = u.token, u.weth
	}
	r.send(d, u.positions, nil, u.posABI, "createAndInitializePoolIfNecessary", t0, t1, big.NewInt(v3Fee), sqrtPriceX96(u.token, u.weth))
	u.pool = r.view(u.factory, u.factoryABI, "getPool", nil, t0, t1, big.NewInt(v3Fee))[0].(common.Address)
	r.send(d, u.weth, ether(40), u.wethABI, "deposit")
	unlimited := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	r.send(d, u.token, nil, r.erc20, "approve", u.positions, unlimited)
	r.send(d, u.weth, nil, u.wethABI, "approve", u.positions, unlimited)

	kept, firstBlock := u.mint(ether(100_000_000), ether(20))
	seeded := r.balance(u.weth, u.pool, firstBlock)
	burned, _ := u.mint(ether(50_000_000), ether(10))
	given, _ := u.mint(ether(25_000_000), ether(5))
	r.send(d, u.positions, nil, u.posABI, "transferFrom", d.Address, dead, burned)
	r.send(d, u.positions, nil, u.posABI, "transferFrom", d.Address, owner.Address, given)
	type decrease struct{ TokenId, Liquidity, Amount0Min, Amount1Min, Deadline *big.Int }
	half := new(big.Int).Div(u.liquidity(kept, nil), big.NewInt(2))
	r.send(d, u.positions, nil, u.posABI, "decreaseLiquidity", decrease{kept, half, new(big.Int), new(big.Int), farDeadline})
	type collect struct {
		TokenId                *big.Int
		Recipient              common.Address
		Amount0Max, Amount1Max *big.Int
	}
	rcpt := r.send(d, u.positions, nil, u.posABI, "collect", collect{kept, d.Address, maxUint128, maxUint128})
	before := new(big.Int).Sub(rcpt.BlockNumber, big.NewInt(1))
	collected := new(big.Int).Sub(r.balance(u.weth, d.Address, rcpt.BlockNumber), r.balance(u.weth, d.Address, before))

	block := r.head()
	at := new(big.Int).SetUint64(block)
	got := r.read(liquidity.Input{Token: u.token, Block: block, Deployer: &d.Address, Owner: &owner.Address,
		Pools: []liquidity.Pool{{ID: u.pool.Hex(), Venue: whales.UniswapV3, Holder: u.pool, Quote: u.weth, Created: created}}})[0]

	if got.QuoteAtCreation == nil || got.QuoteAtCreation.Cmp(seeded) != 0 {
		t.Errorf("quote at creation %v, the pool's WETH after the first mint %v", got.QuoteAtCreation, seeded)
	}
	if got.QuoteRemoved == nil || got.QuoteRemoved.Cmp(collected) != 0 {
		t.Errorf("quote removed %v, the deployer collected %v", got.QuoteRemoved, collected)
	}
	if want := r.balance(u.weth, u.pool, at); got.QuoteReserve == nil || got.QuoteReserve.Cmp(want) != 0 {
		t.Errorf("quote reserve %v, the pool's WETH %v", got.QuoteReserve, want)
	}
	lk, lb, lg := u.liquidity(kept, at), u.liquidity(burned, at), u.liquidity(given, at)
	total := new(big.Int).Add(lk, new(big.Int).Add(lb, lg))
	want := shares{Deployer: ratio(lk, total), Burned: ratio(lb, total), Owner: ratio(lg, total)}
	if !sharesOf(got).near(want, 1e-9) {
		t.Errorf("shares %+v, measured %+v (unread %q)", sharesOf(got), want, got.Unread)
	}
	if len(got.Locks) != 0 || len(got.Unread) != 0 {
		t.Errorf("locks %+v, unread %q", got.Locks, got.Unread)
	}
}
