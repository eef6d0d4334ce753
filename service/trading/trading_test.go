package trading_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/big"
	"os"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/service/bytecode"
	"github.com/tollgate/tollgate/service/trading"
)

// chainStorage is a contract's storage as a node answers it: the words
// set, zero elsewhere; it counts the batches asked.
type chainStorage struct {
	words   map[common.Hash]common.Hash
	batches int
}

func (c *chainStorage) Storage(_ context.Context, _ common.Address, _ uint64, slots []common.Hash) ([]common.Hash, error) {
	c.batches++
	out := make([]common.Hash, len(slots))
	for i, s := range slots {
		out[i] = c.words[s]
	}
	return out, nil
}

func slot(n int64) common.Hash { return common.BigToHash(big.NewInt(n)) }

func element(key common.Address, base int64) common.Hash {
	return crypto.Keccak256Hash(common.LeftPadBytes(key[:], 32), slot(base).Bytes())
}

func num(s string) *big.Int {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic(s)
	}
	return v
}

// catalogueEffects analyses a contract of the renamed-power catalogue
// (service/bytecode/testdata/effects), as solc 0.8 builds it.
func catalogueEffects(t *testing.T, name string) bytecode.Effects {
	t.Helper()
	raw, err := os.ReadFile("../bytecode/testdata/effects/0.8-optimized.json")
	if err != nil {
		t.Fatal(err)
	}
	var build struct {
		Contracts map[string]struct{ DeployedBytecode string }
	}
	if err := json.Unmarshal(raw, &build); err != nil {
		t.Fatal(err)
	}
	code, err := hex.DecodeString(strings.TrimPrefix(build.Contracts[name].DeployedBytecode, "0x"))
	if err != nil || len(code) == 0 {
		t.Fatalf("%s: %v", name, err)
	}
	return bytecode.AnalyzeEffects(code, bytecode.Analyze(code))
}

// TestReadCatalogue: the probes on the catalogue's shapes (Base's layout:
// balances at slot 0, the supply at 2, the owner at 3, each contract's
// own variables from 4), with the storage a node would answer.
func TestReadCatalogue(t *testing.T) {
	t.Parallel()
	owner, pool := common.HexToAddress("0xa0"), common.HexToAddress("0xb0")
	supply := num("1000000000000000000000000000") // 1e27
	layout := func(extra map[common.Hash]common.Hash) map[common.Hash]common.Hash {
		w := map[common.Hash]common.Hash{
			slot(2):           common.BigToHash(supply),
			slot(3):           common.BytesToHash(owner[:]),
			element(pool, 0):  common.BigToHash(new(big.Int).Div(supply, big.NewInt(10))),
			element(owner, 0): common.BigToHash(new(big.Int).Div(supply, big.NewInt(2))),
		}
		for k, v := range extra {
			w[k] = v
		}
		return w
	}
	word := func(s string) common.Hash { return common.BigToHash(num(s)) }
	near := func(p *float64, want float64) bool { return p != nil && math.Abs(*p-want) < 1e-9 }
	cases := []struct {
		name, contract string
		words          map[common.Hash]common.Hash
		check          func(s trading.State) bool
	}{
		{"constant 3 % fee", "FixedTax", layout(nil), func(s trading.State) bool {
			return near(s.BuyTax, 3) && near(s.SellTax, 3) && near(s.TransferTax, 3) && *s.TradingOpen && !*s.TransfersPaused
		}},
		{"stored 99 % fee", "Tax", layout(map[common.Hash]common.Hash{slot(4): word("50"), slot(5): word("49")}), func(s trading.State) bool {
			return near(s.BuyTax, 99) && near(s.SellTax, 99)
		}},
		{"switch closed", "Launch", layout(nil), func(s trading.State) bool {
			return s.TradingOpen != nil && !*s.TradingOpen && s.Sale.Status == bytecode.Reverts && *s.TransfersPaused
		}},
		{"max transaction 1e20", "MaxTx", layout(map[common.Hash]common.Hash{slot(4): word("100000000000000000000")}), func(s trading.State) bool {
			return s.MaxBuy.Bound && s.MaxBuy.Amount.Cmp(num("100000000000000000000")) == 0 && s.MaxSale.Bound &&
				s.MaxSale.Amount.Cmp(num("100000000000000000000")) == 0 && s.MaxBuy.Share < 1e-6
		}},
		{"max transaction over the pool", "MaxTx", layout(map[common.Hash]common.Hash{slot(4): word("1000000000000000000000000000000")}), func(s trading.State) bool {
			return s.MaxBuy.Known && !s.MaxBuy.Bound && s.MaxBuy.Probed > 0.05 && near(s.SellTax, 0)
		}},
		{"max wallet 1 %", "MaxWallet", layout(map[common.Hash]common.Hash{slot(4): word("10000000000000000000000000")}), func(s trading.State) bool {
			return s.MaxWallet.Bound && math.Abs(s.MaxWallet.Share-0.01) < 1e-4
		}},
		{"an hour's cooldown", "Cooldown", layout(map[common.Hash]common.Hash{slot(5): word("3600")}), func(s trading.State) bool {
			return s.Cooldown != nil && *s.Cooldown == 3600 && !s.Locked
		}},
		{"a lock for ever", "Cooldown", layout(map[common.Hash]common.Hash{slot(5): word("1000000000000")}), func(s trading.State) bool {
			return s.Locked && s.Cooldown == nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st := &chainStorage{words: c.words}
			e := catalogueEffects(t, c.contract)
			s, err := trading.Read(context.Background(), st, e, trading.Token{Address: common.HexToAddress("0xcc"), Block: 100, Time: 1_000_000,
				Supply: supply, Pool: &trading.Pool{ID: pool.Hex(), Venue: "v2", Holder: pool}})
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(s) || len(s.Unread) > 0 || st.batches > 3 {
				t.Errorf("%+v\nbuy %+v\nsale %+v\ntransfer %+v\nmax buy %+v sale %+v wallet %+v\nbatches %d", s, s.Buy, s.Sale, s.Transfer, s.MaxBuy, s.MaxSale, s.MaxWallet, st.batches)
			}
		})
	}
}
