package rugcheck

import (
	"bytes"
	"slices"

	"github.com/tollgate/tollgate/service/bytecode"
)

// knownSelector is a privileged function the rules recognise.
type knownSelector struct {
	class     Class
	signature string
}

// knownSelectors maps dispatcher selectors to capability classes. The
// selectors are keccak-256 of the signatures (checked in the tests); view
// functions (paused(), isBlacklisted(...)) are left out: a setter is what
// gives power. Burning one's own tokens is not a privilege either.
var knownSelectors = map[bytecode.Selector]knownSelector{
	{0x40, 0xc1, 0x0f, 0x19}: {Mint, "mint(address,uint256)"},
	{0xa0, 0x71, 0x2d, 0x68}: {Mint, "mint(uint256)"},
	{0x6a, 0x62, 0x78, 0x42}: {Mint, "mint(address)"},
	{0x44, 0x9a, 0x52, 0xf8}: {Mint, "mintTo(address,uint256)"},
	{0x4e, 0x6e, 0xc2, 0x47}: {Mint, "_mint(address,uint256)"},
	{0x94, 0xbf, 0x80, 0x4d}: {Mint, "mint(uint256,address)"},
	{0xcc, 0x87, 0x2b, 0x66}: {Mint, "issue(uint256)"},
	{0xda, 0x19, 0x19, 0xb3}: {Mint, "mintFor(address,uint256)"},
	{0x4e, 0x44, 0xd9, 0x56}: {Mint, "configureMinter(address,uint256)"}, // Circle FiatToken
	{0xf9, 0xf9, 0x2b, 0xe4}: {Blacklist, "blacklist(address)"},
	{0x75, 0xe3, 0x66, 0x1e}: {Blacklist, "unblacklist(address)"},
	{0x1a, 0x89, 0x52, 0x66}: {Blacklist, "unBlacklist(address)"}, // Circle FiatToken
	{0x44, 0x33, 0x7e, 0xa1}: {Blacklist, "addToBlacklist(address)"},
	{0x53, 0x7d, 0xf3, 0xb6}: {Blacklist, "removeFromBlacklist(address)"},
	{0x15, 0x3b, 0x0d, 0x1e}: {Blacklist, "setBlacklist(address,bool)"},
	{0x45, 0x5a, 0x43, 0x96}: {Blacklist, "blacklistAddress(address,bool)"},
	{0x0e, 0xcb, 0x93, 0xc0}: {Blacklist, "addBlackList(address)"},
	{0xe4, 0x99, 0x7d, 0xc5}: {Blacklist, "removeBlackList(address)"},
	{0xff, 0xec, 0xf5, 0x16}: {Blacklist, "addBot(address)"},
	{0xd3, 0x46, 0x28, 0xcc}: {Blacklist, "addBots(address[])"},
	{0x27, 0x31, 0x23, 0xb7}: {Blacklist, "delBot(address)"},
	{0x31, 0xc2, 0xd8, 0x47}: {Blacklist, "delBots(address[])"},
	{0x5f, 0xec, 0xd9, 0x26}: {Blacklist, "removeBot(address)"},
	{0xb5, 0x15, 0x56, 0x6a}: {Blacklist, "setBots(address[])"},
	{0x00, 0xb8, 0xcf, 0x2a}: {Blacklist, "blockBots(address[])"},
	{0x6b, 0x99, 0x90, 0x53}: {Blacklist, "unblockBot(address)"},
	{0x34, 0x2a, 0xa8, 0xb5}: {Blacklist, "setBot(address,bool)"},
	{0xd0, 0x1d, 0xd6, 0xd2}: {Blacklist, "setBlacklisted(address,bool)"},
	{0x48, 0x38, 0xd1, 0x65}: {Blacklist, "blackList(address)"},
	{0xfb, 0x2f, 0x34, 0x92}: {Blacklist, "manageBlacklist(address[],bool)"},
	{0x84, 0x56, 0xcb, 0x59}: {Pause, "pause()"},
	{0x3f, 0x4b, 0xa8, 0x3a}: {Pause, "unpause()"},
	{0x69, 0xfe, 0x0e, 0x2d}: {Fee, "setFee(uint256)"},
	{0xc4, 0x08, 0x1a, 0x4c}: {Fee, "setTaxFee(uint256)"},
	{0x06, 0x1c, 0x82, 0xd0}: {Fee, "setTaxFeePercent(uint256)"},
	{0x8e, 0xe8, 0x8c, 0x53}: {Fee, "setLiquidityFeePercent(uint256)"},
	{0x0c, 0xc8, 0x35, 0xa3}: {Fee, "setBuyFee(uint256)"},
	{0x8b, 0x4c, 0xee, 0x08}: {Fee, "setSellFee(uint256)"},
	{0xfb, 0x0e, 0xcf, 0xa4}: {Fee, "setBuyFee(uint256,uint256)"},
	{0x6a, 0xc9, 0xa8, 0x70}: {Fee, "setSellFee(uint256,uint256)"},
	{0xb2, 0xd8, 0xf2, 0x08}: {Fee, "setBuyFees(uint256,uint256)"},
	{0x9f, 0xd8, 0x23, 0x4e}: {Fee, "setSellFees(uint256,uint256)"},
	{0x0b, 0x78, 0xf9, 0xc0}: {Fee, "setFees(uint256,uint256)"},
	{0xce, 0xc1, 0x0c, 0x11}: {Fee, "setFees(uint256,uint256,uint256)"},
	{0x3d, 0x18, 0x67, 0x8e}: {Fee, "setFees(uint256)"},
	{0x6d, 0xb7, 0x94, 0x37}: {Fee, "updateFees(uint256,uint256)"},
	{0x22, 0x42, 0x90, 0x85}: {Fee, "updateFees(uint256,uint256,uint256)"},
	{0x80, 0x95, 0xd5, 0x64}: {Fee, "updateBuyFees(uint256,uint256,uint256)"},
	{0xc1, 0x7b, 0x5b, 0x8c}: {Fee, "updateSellFees(uint256,uint256,uint256)"},
	{0xc6, 0x47, 0xb2, 0x0e}: {Fee, "setTaxes(uint256,uint256)"},
	{0x2e, 0x5b, 0xb6, 0xff}: {Fee, "setTax(uint256)"},
	{0xdc, 0x10, 0x52, 0xe2}: {Fee, "setBuyTax(uint256)"},
	{0x8c, 0xd0, 0x9d, 0x50}: {Fee, "setSellTax(uint256)"},
	{0xe9, 0xda, 0xe5, 0xed}: {Fee, "setTaxes(uint256,uint256,uint256)"},
	{0xc4, 0x9b, 0x9a, 0x80}: {Fee, "setSwapAndLiquifyEnabled(bool)"},
	{0xec, 0x28, 0x43, 0x8a}: {Limit, "setMaxTxAmount(uint256)"},
	{0xd5, 0x43, 0xdb, 0xeb}: {Limit, "setMaxTxPercent(uint256)"},
	{0xea, 0x16, 0x44, 0xd5}: {Limit, "setMaxWalletSize(uint256)"},
	{0x5d, 0x00, 0x44, 0xca}: {Limit, "setMaxWallet(uint256)"},
	{0x20, 0x3e, 0x72, 0x7e}: {Limit, "updateMaxTxnAmount(uint256)"},
	{0xc1, 0x8b, 0xc1, 0x95}: {Limit, "updateMaxWalletAmount(uint256)"},
	{0x27, 0xa1, 0x4f, 0xc2}: {Limit, "setMaxWalletAmount(uint256)"},
	{0x75, 0x71, 0x33, 0x6a}: {Limit, "excludeFromMaxTransaction(address,bool)"},
	{0x43, 0x78, 0x23, 0xec}: {Fee, "excludeFromFee(address)"},
	{0xea, 0x2f, 0x0b, 0x37}: {Fee, "includeInFee(address)"},
	{0xc0, 0x24, 0x66, 0x68}: {Fee, "excludeFromFees(address,bool)"},
	{0xc2, 0xe5, 0xec, 0x04}: {Trading, "setTradingEnabled(bool)"},
	{0x8a, 0x8c, 0x52, 0x3c}: {Trading, "enableTrading()"},
	{0xc9, 0x56, 0x7b, 0xf9}: {Trading, "openTrading()"},
	{0x8f, 0x70, 0xcc, 0xf7}: {Trading, "setTrading(bool)"},
	{0x29, 0x32, 0x30, 0xb8}: {Trading, "startTrading()"},
	{0x59, 0x32, 0xea, 0xd1}: {Trading, "setCooldownEnabled(bool)"},
	{0x36, 0x59, 0xcf, 0xe6}: {Upgrade, "upgradeTo(address)"},
	{0x4f, 0x1e, 0xf2, 0x86}: {Upgrade, "upgradeToAndCall(address,bytes)"},
	{0x8f, 0x28, 0x39, 0x70}: {Upgrade, "changeAdmin(address)"},
	{0x96, 0x23, 0x60, 0x9d}: {Upgrade, "upgradeAndCall(address,address,bytes)"},
	{0x20, 0x4e, 0x1c, 0x7a}: {Upgrade, "getProxyImplementation(address)"},
	{0xf3, 0xb7, 0xde, 0xad}: {Upgrade, "getProxyAdmin(address)"},
}

// limitSetters are the Limit selectors that set a limit from a number:
// with 0 they can freeze every holder unless the code keeps a floor.
// excludeFromMaxTransaction only loosens limits; removeLimits() is no
// capability at all (it lifts them for good).
var limitSetters = map[bytecode.Selector]bool{
	{0xec, 0x28, 0x43, 0x8a}: true, // setMaxTxAmount(uint256)
	{0xd5, 0x43, 0xdb, 0xeb}: true, // setMaxTxPercent(uint256)
	{0xea, 0x16, 0x44, 0xd5}: true, // setMaxWalletSize(uint256)
	{0x5d, 0x00, 0x44, 0xca}: true, // setMaxWallet(uint256)
	{0x20, 0x3e, 0x72, 0x7e}: true, // updateMaxTxnAmount(uint256)
	{0xc1, 0x8b, 0xc1, 0x95}: true, // updateMaxWalletAmount(uint256)
	{0x27, 0xa1, 0x4f, 0xc2}: true, // setMaxWalletAmount(uint256)
}

// LimitSetters returns the selectors of the limit setters the rules probe
// with 0 (see Facts.LimitFloor).
func LimitSetters() []bytecode.Selector {
	out := make([]bytecode.Selector, 0, len(limitSetters))
	for s := range limitSetters {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b bytecode.Selector) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// A Uniswap V2-style pair (LP token): its mint(address) mints liquidity
// to whoever added reserves, which anyone may do.
var (
	selMintTo      = bytecode.Selector{0x6a, 0x62, 0x78, 0x42} // mint(address)
	selGetReserves = bytecode.Selector{0x09, 0x02, 0xf1, 0xac} // getReserves()
	selToken0      = bytecode.Selector{0x0d, 0xfe, 0x16, 0x81} // token0()
	selToken1      = bytecode.Selector{0xd2, 0x12, 0x20, 0xa7} // token1()
	selBurnTo      = bytecode.Selector{0x89, 0xaf, 0xcb, 0x44} // burn(address)
)

// AccessControl, which gives power to role holders without an owner().
var (
	selHasRole   = bytecode.Selector{0x91, 0xd1, 0x48, 0x54} // hasRole(bytes32,address)
	selGrantRole = bytecode.Selector{0x2f, 0x2f, 0xf1, 0x5d} // grantRole(bytes32,address)
)
