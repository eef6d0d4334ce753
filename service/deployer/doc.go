// Package deployer reads a token's deployer record: who deployed the token
// on Base, whether a known launchpad factory created it, and the other
// tokens that deployer launched among those the whale scan follows, with
// whether one of their pools collapsed recently ("a deployer who pulled a
// pool"). It owns finding the creation without traces and the list of
// launchpad factories; the pools, their creators and their collapses are
// the whale scan's (service/whales), and judging the record is the rug
// check's (service/rugcheck).
//
// # Finding the creation without traces
//
// A token's constructor mints its supply: its first Transfer from 0x0 is
// in the transaction that created it. Read looks for it in one eth_getLogs
// query (the token's address, topic0 Transfer, topic1 zero) over
// CreationWindow blocks (43,200: one day of Base blocks) ending at the
// block of the token's first followed pool, or at the read block when it
// has none: a launchpad creates the token and its pool in one
// transaction, and a direct launch pools its token soon after. The
// chain client may split that range into several requests when the
// provider caps it. Then one batch reads the mint's transaction and its
// receipt. Its sender is the deployer (Source "creation"):
//
//   - a contract creation (`to` empty) whose contractAddress is the token
//     is a direct deployment, with no factory;
//   - a call of a known launchpad (the transaction's `to`), or a
//     transaction whose receipt holds a log of one (a launchpad called
//     through a router or a wallet), is a launch there: Factory and
//     Launchpad name it;
//   - a call of another contract is a creation by an unknown factory,
//     which Factory names;
//   - a call through an ERC-4337 entry point (its receipt holds
//     UserOperationEvents emitted by the `to`) was sent by a bundler: the
//     deployer is the account of the user operation whose event first
//     follows the mint, and only that operation's logs name a launchpad.
//
// A first mint that called the token itself is no creation: the token
// existed before the window. Its sender, who may mint the token, is the
// deployer with Source "mint".
//
// # Fallbacks
//
// With no mint in the window (a token minted before it, or one that sets
// its supply without a Transfer event) or no transaction behind the mint,
// the deployer is the sender of the first pool's creation (Source
// "pool-creator"): read from its transaction and receipt in the batch
// when the batch is still free, which also names a launchpad the pool's
// creation called, or else the pool's Creator from the snapshot. For a
// pool created by one ERC-4337 user operation, its account; by a bundle
// of several, none. Without a pool either, the deployer is not known.
// Note says which fallback was taken, and why.
//
// # The deployer's other tokens
//
// A snapshot token is the deployer's when one of its pools was created by
// the deployer (whales.Pool.Creator) or Input.Known names the deployer as
// its own. Each is listed with its first pool, that pool's creation block
// and its collapse; PulledRecently is set when any collapsed (liquidity
// pulled, or a drawdown) within RecentWindow blocks (302,400: seven days)
// of the read block. The snapshot follows pools created in its own window
// (seven days on Base), so older launches of the deployer are not seen.
// A launchpad's tokens are often sent by the launchpad's operator for its
// users (Clanker's bot, an interface partner), and then all share one
// deployer.
//
// # Launchpads on Base
//
// BaseLaunchpads lists the factories whose Base addresses their makers
// publish; each was confirmed as follows, and what could not be confirmed
// is left out:
//
//   - Clanker v0 (SocialDexDeployer) 0x250c9FB2b411B48273f69879007803790A6AeA47,
//     v1 0x9B84fcE5Dcd9a38d2D01d5D72373F6b6b067c3e1,
//     v2 0x732560fa1d1A76350b1A500155BA978031B53833,
//     v3.0 0x375C15db32D28cEcdcAB5C03Ab889bf15cbD2c5E,
//     v3.1 0x2A787b2362021cC3eEa3C24C4748a6cD5B687382 and
//     v4 0xE85A59c628F7d27878ACeB4bf3b35733630083a9: Clanker's own
//     documentation repository, clanker-devco/DOCS
//     references/deployed-contracts.md, "Base: 8453" (v4.0 also in
//     clanker-devco/v4-contracts README, "v4.0.0 (Base Mainnet)"). Its
//     v4.1 deployed hooks and extensions only, so v4.1 tokens come from
//     the v4 factory.
//   - Clanker v5 0x572e88D3cD7f23E4241EB6ceDD96667271bF09A0: the same
//     repository's references/core-contracts/v5.md, "Factory", for Base.
//   - Zora's coin factory 0x777777751622c0d3258f214F9DF38E35BF45baF3:
//     docs.zora.co/coins/contracts/factory (Base, 8453) and
//     ourzora/zora-protocol packages/coins-deployments/addresses/8453.json
//     (ZORA_FACTORY).
//   - Flaunch's position managers V1 0x51Bba15255406Cfe7099a42183302640ba7dAFDC,
//     V2 0xf785bb58059fab6fb19bdda2cb9078d9e546efdc,
//     V3 0xb903b0ab7bcee8f5e4d8c9b10a71aac7135d6fdc and
//     V4 0x23321f11a6d44fd1ab790044fdfde5758c902fdc, which flaunch a coin
//     and create its pool: docs.flaunch.gg/readme/for-aggregators
//     ("Base"); the FlaunchZap 0xe52dE1801C10cF709cc8e62d43D783AFe984b510
//     that calls them: flayerlabs/flaunchgg-contracts
//     skills/token-launching/references/contract-addresses.md and its
//     v1.1.5-base release. The AnyPositionManager, which imports tokens
//     created elsewhere, is left out.
//   - Virtuals' Bonding proxy 0xF66DeA7b3e897cD44A5a231c61B6B4423d613259,
//     whose launch creates a prototype agent token (FERC20) and its
//     bonding pair in one call: Virtual-Protocol/vp-trade-sdk
//     src/constant/common.ts (BONDING_CURVE_ADDR) and
//     Virtual-Protocol/protocol-contracts contracts/fun/Bonding.sol
//     (launch). Its AgentFactory, which creates the agent token at
//     graduation in a buyer's transaction, is left out: only third
//     parties name its Base address.
//
// The list is Config.Launchpads, so tests and operators may name others.
package deployer
