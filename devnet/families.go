package devnet

import (
	"bytes"
	"context"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// Verdicts of the scenario contracts that are not tokens: the rug check
// refuses them before any charge, as it refuses an EOA.
const ExpectRefused = "REFUSED"

// LegacyAdminAccount is the admin of the legacy (ZeppelinOS-layout) proxy:
// an admin cannot call through its own proxy, so it is not the scenario
// account that moves the tokens.
const LegacyAdminAccount = 6

// familyGas is the gas of each deployment of deployFamilies; their sum
// stays under the block gas limit (60 M) so that every family is one block.
var familyGas = map[string]uint64{
	"OZUpgradeableBeacon": 1_000_000, "OZBeaconProxy": 1_000_000, "OZTransparentProxy": 2_000_000, "CustomSlotProxy": 1_000_000,
	"RoleToken": 3_000_000, "PlainRoleToken": 2_500_000, "LegacyFiatToken": 3_000_000, "LegacyAdminProxy": 1_500_000,
	"LimitToken": 1_500_000, "FloorLimitToken": 1_500_000, "UniswapV2Factory": 5_000_000,
}

// deployFamilies deploys the contract families of the rug-check scenario
// that come from libraries (docs/rules.md, "Rug check"), in one block:
// every address is precomputed from the sender's nonce (CREATE) or the
// factory's salt (CREATE2), so deployments, configuration and a transfer
// of each token go together. impl is the initializable token behind the
// beacon and transparent proxies; tokenA and tokenB are two scenario
// tokens the deployer holds, which seed the Uniswap V2 pair.
func (c *Chain) deployFamilies(ctx context.Context, impl common.Address, implABI abi.ABI, tokenA, tokenB common.Address) error {
	d := c.Accounts[ScenarioAccount]
	nonce, err := c.client.PendingNonceAt(ctx, d.Address)
	if err != nil {
		return err
	}
	unit := new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil)
	some := new(big.Int).Mul(big.NewInt(1_000), unit)
	holder := c.Accounts[2].Address
	supply := new(big.Int).Mul(big.NewInt(1_000_000), unit)

	var txs []pendingTx
	abis := map[string]abi.ABI{}
	deploy := func(name string, args ...any) common.Address {
		addr := crypto.CreateAddress(d.Address, nonce+uint64(len(txs)))
		art, parsed, err := LoadArtifact(name)
		if err == nil {
			abis[name] = parsed
			var ctor []byte
			if ctor, err = parsed.Pack("", args...); err == nil {
				txs = append(txs, pendingTx{from: d, data: append(common.FromHex(art.Bytecode), ctor...), gas: familyGas[name]})
				return addr
			}
		}
		txs = append(txs, pendingTx{err: fmt.Errorf("%s: %w", name, err)})
		return addr
	}
	call := func(to common.Address, parsed abi.ABI, method string, args ...any) {
		data, err := parsed.Pack(method, args...)
		if err != nil {
			err = fmt.Errorf("%s: %w", method, err)
		}
		txs = append(txs, pendingTx{from: d, to: &to, data: data, err: err})
	}
	scenario := func(name, expect string, addr common.Address) {
		c.Scenario = append(c.Scenario, ScenarioContract{Name: name, Address: addr, Expect: expect})
	}
	initData := func(name, symbol string) []byte {
		data, err := implABI.Pack("initialize", name, symbol, supply, d.Address, d.Address)
		if err != nil {
			txs = append(txs, pendingTx{err: err})
		}
		return data
	}

	// Beacon proxy, its beacon owned by an EOA: upgradeable at will.
	beacon := deploy("OZUpgradeableBeacon", impl, d.Address)
	beaconProxy := deploy("OZBeaconProxy", beacon, initData("Beacon Token", "BCN"))
	call(beaconProxy, implABI, "transfer", holder, some)
	scenario("beacon", "FAIL", beaconProxy)
	scenario("beacon-contract", ExpectRefused, beacon)

	// Transparent proxies; each deploys its ProxyAdmin as its first
	// creation (contract nonces start at 1, EIP-161).
	ownable := abis["OZUpgradeableBeacon"] // renounceOwnership(), as ProxyAdmin's
	transparent := deploy("OZTransparentProxy", impl, d.Address, initData("Transparent Token", "TUP"))
	call(transparent, implABI, "transfer", holder, some)
	scenario("transparent", "FAIL", transparent)
	scenario("proxy-admin", ExpectRefused, crypto.CreateAddress(transparent, 1))
	renounced := deploy("OZTransparentProxy", impl, d.Address, initData("Renounced Admin Token", "RUP"))
	call(crypto.CreateAddress(renounced, 1), ownable, "renounceOwnership")
	call(renounced, implABI, "transfer", holder, some)
	scenario("transparent-renounced", "PASS", renounced)

	// A forwarder with an implementation slot of its own: unresolved.
	custom := deploy("CustomSlotProxy", impl, initData("Custom Slot Token", "CSLOT"))
	call(custom, implABI, "transfer", holder, some)
	scenario("custom-slot-proxy", "WARN", custom)

	// AccessControl tokens: roles held (enumerable), every role renounced
	// (enumerable), roles held as only events tell (plain).
	roles := deploy("RoleToken", d.Address)
	call(roles, abis["RoleToken"], "transfer", holder, some)
	scenario("roles", "FAIL", roles)
	rolesGone := deploy("RoleToken", d.Address)
	call(rolesGone, abis["RoleToken"], "transfer", holder, some)
	for _, role := range []string{"MINTER_ROLE", "PAUSER_ROLE", "DEFAULT_ADMIN_ROLE"} {
		var r [32]byte
		if role != "DEFAULT_ADMIN_ROLE" {
			r = crypto.Keccak256Hash([]byte(role))
		}
		call(rolesGone, abis["RoleToken"], "renounceRole", r, d.Address)
	}
	scenario("roles-renounced", "WARN", rolesGone)
	plainRoles := deploy("PlainRoleToken", d.Address)
	call(plainRoles, abis["PlainRoleToken"], "transfer", holder, some)
	scenario("roles-plain", "FAIL", plainRoles)

	// USDC's layout: ZeppelinOS proxy slots, FiatToken powers.
	fiat := deploy("LegacyFiatToken")
	fiatABI := abis["LegacyFiatToken"]
	fiatInit, err := fiatABI.Pack("initialize", "Legacy USD", "LUSD", uint8(6), d.Address, d.Address, d.Address, d.Address)
	if err != nil {
		return err
	}
	legacy := deploy("LegacyAdminProxy", fiat, c.Accounts[LegacyAdminAccount].Address, fiatInit)
	call(legacy, fiatABI, "configureMinter", d.Address, supply)
	call(legacy, fiatABI, "mint", d.Address, supply)
	call(legacy, fiatABI, "transfer", holder, big.NewInt(1_000_000))
	scenario("legacy-proxy", "FAIL", legacy)

	// Transfer limits, without and with a floor.
	limit := deploy("LimitToken")
	call(limit, abis["LimitToken"], "transfer", holder, some)
	scenario("limit", "FAIL", limit)
	floor := deploy("FloorLimitToken")
	call(floor, abis["FloorLimitToken"], "transfer", holder, some)
	scenario("limit-floor", "WARN", floor)

	// Uniswap V2 (its own build): the pair's mint(address) is liquidity.
	factory := deploy("UniswapV2Factory", d.Address)
	pair, err := uniswapPair(factory, tokenA, tokenB)
	if err != nil {
		return err
	}
	call(factory, abis["UniswapV2Factory"], "createPair", tokenA, tokenB)
	txs[len(txs)-1].gas = 4_000_000
	_, pairABI, err := LoadArtifact("UniswapV2Pair")
	if err != nil {
		return err
	}
	_, baseABI, err := LoadArtifact("BaseToken")
	if err != nil {
		return err
	}
	call(tokenA, baseABI, "transfer", pair, some)
	call(tokenB, baseABI, "transfer", pair, some)
	call(pair, pairABI, "mint", d.Address)
	txs[len(txs)-1].gas = 1_000_000
	call(pair, pairABI, "transfer", holder, unit)
	scenario("uniswap-v2-pair", "PASS", pair)
	scenario("uniswap-v2-factory", ExpectRefused, factory)

	if err := c.sendBlock(ctx, txs...); err != nil {
		return fmt.Errorf("contract families: %w", err)
	}
	return nil
}

// uniswapPair is the CREATE2 address UniswapV2Factory.createPair gives the
// pair of two tokens: salt keccak256(token0, token1), init code the pair's.
func uniswapPair(factory, a, b common.Address) (common.Address, error) {
	art, _, err := LoadArtifact("UniswapV2Pair")
	if err != nil {
		return common.Address{}, err
	}
	if bytes.Compare(a[:], b[:]) > 0 {
		a, b = b, a
	}
	salt := crypto.Keccak256Hash(a[:], b[:])
	return crypto.CreateAddress2(factory, salt, crypto.Keccak256(common.FromHex(art.Bytecode))), nil
}
