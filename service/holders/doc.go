// Package holders reads who holds an ERC-20 token's supply at one block,
// what a buyer looks at first in GoPlus or Token Sniffer: the ten largest
// holders and their share, the owner's and the deployer's share, how many
// addresses hold it, and the holders set apart (the token's pools, known
// lockers, the burn addresses).
//
// The candidates are the addresses the token's Transfer logs credited
// since its creation; their balances are confirmed with balanceOf at the
// inspected block, in one JSON-RPC batch. Every read is at that block.
// A token with a long history costs a bounded amount ([MaxBlocks],
// [MaxLogs], [MaxQueries], [MaxBatch]): past the bounds, the logs of the
// first and the last blocks of its history are read (of the last only,
// when its creation is not known), not those between, and the answer
// says it is an estimate and what was estimated ([Holders.Estimated],
// [Holders.Note]). Past the batch bound, the candidates confirmed are
// those with the largest net transfers in the logs read.
//
// Choices, each one a buyer's reading of the supply:
//
//   - Burn addresses (0x0 and 0x…dEaD) hold nothing anyone can sell: what
//     they hold is taken out of the supply, and every share but a burn
//     address's own is of the rest ([Holders.Circulating]).
//   - The token contract itself is a holder like any other, not a burn:
//     what it holds (fees awaiting a swap, a reserve) its code can move,
//     often at its owner's word. It ranks among the top holders, named as
//     such, unless the caller excludes it.
//   - The caller's exclusions (pools, lockers) are listed with their
//     reasons and left out of the top holders, but their tokens stay in
//     the circulating supply: a pool's tokens are bought by anyone.
//   - The holder count is of the non-zero balances, burn addresses left
//     out.
//
// What the answer means is the caller's to judge (service/rugcheck); this
// package only reads. Balances that move without a Transfer log (a mint
// that emits none, a rebase, reflections to an address never credited)
// are not seen: such an address is no candidate.
package holders
