package devnet

import (
	"context"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
)

// ScenarioContract is a contract of the rug-check scenario, with the
// verdict the published rules give it.
type ScenarioContract struct {
	Name    string         `json:"name"`
	Address common.Address `json:"address"`
	Expect  string         `json:"expect"`
}

// ScenarioAccount deploys the scenario contracts and owns them.
const ScenarioAccount = 8

// deployScenario deploys one token per verdict docs/rules.md predicts and
// moves some of each so the activity window is not empty.
func (c *Chain) deployScenario(ctx context.Context) error {
	d := c.Accounts[ScenarioAccount]
	deploy := func(name string, args ...any) (common.Address, abi.ABI, error) {
		return c.deploy(ctx, d, name, args...)
	}
	call := func(to common.Address, parsed abi.ABI, method string, args ...any) error {
		data, err := parsed.Pack(method, args...)
		if err != nil {
			return err
		}
		_, err = c.send(ctx, d, &to, data)
		return err
	}
	unit := new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil)
	some := new(big.Int).Mul(big.NewInt(1_000), unit)
	holder := c.Accounts[2].Address

	for _, t := range []struct{ name, contract, expect string }{
		{"clean", "CleanToken", "PASS"},
		{"mintable", "MintableToken", "FAIL"},
		{"blacklist", "BlacklistToken", "FAIL"},
		{"pausable", "PausableToken", "FAIL"},
		{"fee", "FeeToken", "FAIL"},
		{"bytes32-name", "Bytes32Token", "PASS"},
	} {
		addr, parsed, err := deploy(t.contract)
		if err != nil {
			return err
		}
		if t.name == "clean" {
			if err := call(addr, parsed, "renounceOwnership"); err != nil {
				return err
			}
		}
		if err := call(addr, parsed, "transfer", holder, some); err != nil {
			return err
		}
		c.Scenario = append(c.Scenario, ScenarioContract{Name: t.name, Address: addr, Expect: t.expect})
	}

	impl, implABI, err := deploy("InitializableToken")
	if err != nil {
		return err
	}
	supply := new(big.Int).Mul(big.NewInt(1_000_000), unit)
	init := func(name, symbol string) ([]byte, error) {
		return implABI.Pack("initialize", name, symbol, supply, d.Address, d.Address)
	}
	data, err := init("Proxy Token", "PROXY")
	if err != nil {
		return err
	}
	proxy, _, err := deploy("UpgradeableProxy", impl, data)
	if err != nil {
		return err
	}
	if err := call(proxy, implABI, "transfer", holder, some); err != nil {
		return err
	}
	c.Scenario = append(c.Scenario, ScenarioContract{Name: "proxy", Address: proxy, Expect: "FAIL"})

	factory, factoryABI, err := deploy("CloneFactory")
	if err != nil {
		return err
	}
	data, err = init("Clone Token", "CLONE")
	if err != nil {
		return err
	}
	cdata, err := factoryABI.Pack("clone", impl, data)
	if err != nil {
		return err
	}
	rcpt, err := c.send(ctx, d, &factory, cdata)
	if err != nil {
		return fmt.Errorf("clone: %w", err)
	}
	var clone common.Address
	for _, l := range rcpt.Logs {
		if l.Address == factory && len(l.Data) == 32 {
			clone = common.BytesToAddress(l.Data[12:])
		}
	}
	if clone == (common.Address{}) {
		return fmt.Errorf("clone: no Cloned event")
	}
	if err := call(clone, implABI, "transfer", holder, some); err != nil {
		return err
	}
	c.Scenario = append(c.Scenario, ScenarioContract{Name: "clone", Address: clone, Expect: "PASS"})
	return c.deployFamilies(ctx, impl, implABI, c.Scenario[0].Address, c.Scenario[1].Address)
}
