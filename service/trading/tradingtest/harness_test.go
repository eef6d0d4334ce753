package tradingtest_test

import (
	"math"
	"math/big"
	"testing"

	"github.com/tollgate/tollgate/devnet/devnettest"
	"github.com/tollgate/tollgate/service/trading/tradingtest"
)

// ether is n tokens of 18 decimals, or n ETH in wei.
func ether(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), big.NewInt(1e18)) }

// tax is 1 - got/of.
func tax(got, of *big.Int) float64 {
	r, _ := new(big.Rat).SetFrac(got, of).Float64()
	return 1 - r
}

// TestHarness: catalogue tokens deployed from traps.json, pooled against
// WETH through the genuine router and traded through it by a buyer who is
// not their deployer: the constant 99 % sell fee and its 3 % control
// measure as such (and no buy tax), and the one-token maximum sale
// refuses a sale of two tokens but not of one.
func TestHarness(t *testing.T) {
	t.Parallel()
	c := devnettest.StartChain(t)
	v := tradingtest.UniswapV2(t, c, c.Account(6))
	// Each subtest trades its own token with its own accounts, so that
	// every balance change measured is its own.
	fees := []struct {
		contract          string
		deployer, buyer   int
		sellTax, tolerate float64
	}{
		{"ConstantSellFee99", 7, 2, 0.99, 0.005},
		{"ConstantSellFee3", 8, 3, 0.03, 0.005},
	}
	for _, f := range fees {
		t.Run(f.contract, func(t *testing.T) {
			t.Parallel()
			deployer, buyer := c.Account(f.deployer), c.Account(f.buyer)
			token, _ := v.DeployTrap(t, deployer, f.contract, v.Router)
			v.AddLiquidity(t, deployer, token, ether(100_000_000), ether(10))
			got, poolSent, err := v.Buy(t, buyer, token, ether(1))
			if err != nil {
				t.Fatal(err)
			}
			if got.Sign() <= 0 || got.Cmp(poolSent) != 0 {
				t.Fatalf("bought %s of the %s the pool sent: want all of it, no buy tax", got, poolSent)
			}
			ethOut, poolGot, err := v.Sell(t, buyer, token, got)
			if err != nil {
				t.Fatal(err)
			}
			if sellTax := tax(poolGot, got); math.Abs(sellTax-f.sellTax) > f.tolerate {
				t.Errorf("sell tax %.4f (the pool got %s of %s), want %.2f", sellTax, poolGot, got, f.sellTax)
			}
			if ethOut.Sign() <= 0 {
				t.Errorf("the sale paid %s wei", ethOut)
			}
		})
	}
	t.Run("MaxSellOneToken", func(t *testing.T) {
		t.Parallel()
		deployer, buyer := c.Account(5), c.Account(4)
		token, _ := v.DeployTrap(t, deployer, "MaxSellOneToken", v.Router)
		v.AddLiquidity(t, deployer, token, ether(100_000_000), ether(10))
		if _, _, err := v.Buy(t, buyer, token, big.NewInt(1e16)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := v.Sell(t, buyer, token, ether(2)); err == nil {
			t.Error("a sale of 2 tokens went through")
		}
		if _, poolGot, err := v.Sell(t, buyer, token, ether(1)); err != nil || poolGot.Cmp(ether(1)) != 0 {
			t.Errorf("a sale of 1 token: the pool got %v, %v; want 1e18, nil", poolGot, err)
		}
	})
}
