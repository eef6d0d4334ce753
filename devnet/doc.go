// Package devnet runs Tollgate's embedded development chain: go-ethereum's
// in-memory node with chain id 8453 (Base's), a standard Ethereum JSON-RPC
// endpoint, the devnet USD token (FiatToken-compatible EIP-3009, "USD
// Coin" version "2", 6 decimals) deployed, the ten well-known test
// accounts funded with ETH and 1,000 USD each, the rug-check scenario
// contracts, a scripted DEX trading history (a V2-style exchange, and
// Uniswap V4 from v4-core's npm build), and the x402
// batch-settlement escrow, its ERC-3009 deposit collector and Multicall3
// at the addresses the official x402 client hard-codes (BatchSettlementAlloc).
//
// # Block time
//
// Block timestamps follow the wall clock and never run ahead of it: no
// block is sealed with a timestamp later than the moment it is sealed, so
// EIP-3009 time windows (validBefore = now + a few minutes) hold on chain
// as they do on Base. The devnet seals its blocks itself, as a consensus
// client would drive the engine API (build a payload from the pool, import
// it, make it the head), without go-ethereum's simulated beacon, whose
// blocks take max(now, parent+1) and so drift ahead when many come at once.
//
//   - Start lays its setup (token deployment and mints, scenario contracts,
//     the DEX history) in the past: the genesis block is an hour old and
//     every setup block comes one second after its parent, block for block
//     as the script sends them. Start then seals one empty block at the
//     wall clock, so it returns with a current head.
//   - Afterwards, eth_sendRawTransaction answers as soon as the pool has
//     accepted the transaction, as any node does; the sender polls for the
//     receipt. A transaction that becomes pending in a second that has no
//     block yet is sealed at once, with that second as timestamp. Otherwise
//     it waits for the next second together with everything else that
//     arrives meanwhile: at most one block per second, and a block holds
//     as many transactions as came.
//   - An empty block is sealed whenever the head is 2 s behind the wall
//     clock, as Base's 2 s blocks would be, so eth_call sees a current
//     block.timestamp.
//
// # A shared devnet
//
// Beside JSON-RPC, on the same port, a devnet serves its Description at
// DescriptionPath (chain id, genesis, the token and its EIP-712 domain,
// the accounts' roles, the scenario contracts and the exchanges) and hands
// out gas accounts at GasAccountPath, one per server's facilitator. Run
// alone (`tollgate devnet`), it is the one chain of several servers
// (`tollgate serve --devnet-url`), which read the description, check it
// against the chain (Description.Check) and claim a gas account
// (ClaimGas) instead of assuming Base's USDC.
//
// Production code never imports devnet: the facilitator and the chain
// readers reach it through its JSON-RPC endpoint like any node. Only cmd
// (devnet mode) and tests start it.
package devnet
