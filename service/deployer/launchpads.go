package deployer

import "github.com/ethereum/go-ethereum/common"

// BaseLaunchpads returns the launchpad factories of Base mainnet whose
// addresses their makers publish, each named by launchpad and version
// (doc.go says where each was confirmed). A fresh map each call: the
// caller may add to it.
func BaseLaunchpads() map[common.Address]string {
	return map[common.Address]string{
		// Clanker's factories by version (clanker-devco/DOCS,
		// references/deployed-contracts.md and core-contracts/v5.md; v4.0
		// also clanker-devco/v4-contracts README). v4.1 deployed hooks and
		// extensions only: its tokens come from the v4.0 factory.
		common.HexToAddress("0x250c9FB2b411B48273f69879007803790A6AeA47"): "clanker v0", // SocialDexDeployer
		common.HexToAddress("0x9B84fcE5Dcd9a38d2D01d5D72373F6b6b067c3e1"): "clanker v1",
		common.HexToAddress("0x732560fa1d1A76350b1A500155BA978031B53833"): "clanker v2",
		common.HexToAddress("0x375C15db32D28cEcdcAB5C03Ab889bf15cbD2c5E"): "clanker v3.0",
		common.HexToAddress("0x2A787b2362021cC3eEa3C24C4748a6cD5B687382"): "clanker v3.1",
		common.HexToAddress("0xE85A59c628F7d27878ACeB4bf3b35733630083a9"): "clanker v4",
		common.HexToAddress("0x572e88D3cD7f23E4241EB6ceDD96667271bF09A0"): "clanker v5",

		// Zora's coin factory, the same address on every chain
		// (docs.zora.co/coins/contracts/factory; ourzora/zora-protocol
		// packages/coins-deployments/addresses/8453.json, ZORA_FACTORY).
		common.HexToAddress("0x777777751622c0d3258f214F9DF38E35BF45baF3"): "zora",

		// Flaunch: its position managers, which flaunch a coin and create
		// its Uniswap V4 pool and are called directly or through the zap
		// (docs.flaunch.gg/readme/for-aggregators, "Position Manager V1" to
		// "V4"), and the FlaunchZap (flayerlabs/flaunchgg-contracts,
		// skills/token-launching/references/contract-addresses.md, and its
		// v1.1.5-base release). The AnyPositionManager is left out: it
		// imports tokens created elsewhere.
		common.HexToAddress("0x51Bba15255406Cfe7099a42183302640ba7dAFDC"): "flaunch position manager v1",
		common.HexToAddress("0xf785bb58059fab6fb19bdda2cb9078d9e546efdc"): "flaunch position manager v2",
		common.HexToAddress("0xb903b0ab7bcee8f5e4d8c9b10a71aac7135d6fdc"): "flaunch position manager v3",
		common.HexToAddress("0x23321f11a6d44fd1ab790044fdfde5758c902fdc"): "flaunch position manager v4",
		common.HexToAddress("0xe52dE1801C10cF709cc8e62d43D783AFe984b510"): "flaunch zap",

		// Virtuals: the Bonding proxy, whose launch creates a prototype
		// agent token and its bonding pair in one call
		// (Virtual-Protocol/vp-trade-sdk src/constant/common.ts,
		// BONDING_CURVE_ADDR; Virtual-Protocol/protocol-contracts
		// contracts/fun/Bonding.sol, launch). Its AgentFactory, which
		// creates the graduated agent token, is left out: no source of
		// Virtuals' own names its Base address.
		common.HexToAddress("0xF66DeA7b3e897cD44A5a231c61B6B4423d613259"): "virtuals bonding",
	}
}
