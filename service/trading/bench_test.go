package trading_test

import (
	"context"
	"encoding/json"
	"math/big"
	"os"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/service/bytecode"
	"github.com/tollgate/tollgate/service/trading"
)

// BenchmarkRead: the trading probes of a SafeMoon-style token (its
// transfer runs a loop over the excluded accounts, a swap of its fees,
// fees removed and restored) and of a plain taxed token, storage served
// from memory: the CPU of the probes alone.
func BenchmarkRead(b *testing.B) {
	raw, err := os.ReadFile("../bytecode/testdata/genuine/genuine.json")
	if err != nil {
		b.Fatal(err)
	}
	var build struct {
		Contracts map[string]struct {
			DeployedBytecode    string
			ImmutableReferences map[string][]struct{ Start, Length int }
		}
	}
	if err := json.Unmarshal(raw, &build); err != nil {
		b.Fatal(err)
	}
	pool := common.HexToAddress("0xb0")
	code := common.FromHex(build.Contracts["SafeMoonStyle"].DeployedBytecode)
	for _, refs := range build.Contracts["SafeMoonStyle"].ImmutableReferences {
		for _, r := range refs {
			copy(code[r.Start+r.Length-20:r.Start+r.Length], pool[:]) // the pair and the router: the pool
		}
	}
	supply := new(big.Int).Mul(big.NewInt(1_000_000_000), big.NewInt(1e18))
	rTotal := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	rTotal.Sub(rTotal, new(big.Int).Mod(rTotal, supply))
	words := map[common.Hash]common.Hash{
		slot(6): common.BigToHash(supply), slot(7): common.BigToHash(rTotal), slot(9): common.BigToHash(big.NewInt(5)), slot(11): common.BigToHash(big.NewInt(5)),
		slot(14): common.BigToHash(new(big.Int).Div(supply, big.NewInt(200))), slot(15): common.BigToHash(new(big.Int).Div(supply, big.NewInt(2000))),
		element(pool, 0): common.BigToHash(new(big.Int).Div(rTotal, big.NewInt(10))),
	}
	for name, e := range map[string]bytecode.Effects{
		"safemoon-style": bytecode.AnalyzeEffects(code, bytecode.Analyze(code)),
		"tax":            catalogueEffects(&testing.T{}, "Tax"),
	} {
		b.Run(name, func(b *testing.B) {
			var s trading.State
			for b.Loop() {
				s, err = trading.Read(context.Background(), &chainStorage{words: words}, e, trading.Token{Address: common.HexToAddress("0xcc"), Block: 100, Time: 1_000_000,
					Supply: supply, Pool: &trading.Pool{ID: pool.Hex(), Venue: "v2", Holder: pool}})
				if err != nil {
					b.Fatal(err)
				}
			}
			if s.SellTax == nil {
				b.Errorf("no sell tax read: %v", s.Unread)
			}
		})
	}
}
