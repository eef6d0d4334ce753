// Package liquidity reads what a token's buyer checks about its pools'
// liquidity (GoPlus's lp_holders, honeypot.is's and Token Sniffer's
// "liquidity locked/burned"): for each pool the whale scan follows, the
// quote reserve now and at creation, the quote that liquidity removals
// took out since, and who holds the liquidity: burned, locked (with the
// release time), the deployer, the owner, the rest. It owns the venues'
// liquidity events and the lockers' interfaces; finding the pools is
// service/whales', judging what is read is service/rugcheck's.
//
// # What is read
//
// [Read] makes, at one block: one eth_getLogs per kind of venue; for
// concentrated-liquidity pools whose Mints came from a contract, one
// batch of block-scoped eth_getLogs and one eth_getLogs more (the NFTs);
// and one batch of calls confirming everything at the block.
//
//   - V2-style pairs (v2, aerodrome): the pair is its LP token. Its first
//     Mint is the liquidity at creation, its Burns the removals, its
//     Transfer logs the holders; balanceOf at the block confirms the
//     known addresses (0x0, 0x…dEaD, the deployer, the owner, a
//     recognised locker that received some) and the largest other
//     holders, totalSupply the supply and getReserves the reserve. The
//     minimum liquidity the pair mints at its first Mint (1000 wei, to
//     0x0 on Uniswap V2, to 0x…01 on Aerodrome) is nobody's: it is taken
//     out of the supply the shares divide, so that a pair emptied by its
//     deployer reads as empty, not as burned.
//   - Concentrated liquidity (v3, pancakev3, slipstream): the pool's Mint
//     and Burn logs give each position (owner, tickLower, tickUpper) and
//     its liquidity, the first Mint the liquidity at creation, the Burns
//     the removals (their principal, at the price of the moment). A Mint
//     whose owner emitted IncreaseLiquidity with the same amounts in the
//     same transaction is an NFT position manager's: the log names the
//     NFT, the manager's Transfer logs of that id its holder, ownerOf and
//     positions(id) at the block its owner, range and liquidity. The
//     reserve is the pool's balance of the quote (fees owed and removed
//     liquidity not yet collected included).
//   - Uniswap V4: the PoolManager's Initialize and ModifyLiquidity logs
//     for the pool id give each position (sender, tickLower, tickUpper,
//     salt) and its liquidity. A salted position whose sender answers
//     ownerOf(salt) is an NFT (V4's PositionManager salts with the token
//     id), held by its owner; else the sender holds it. The price is the
//     pool's Slot0, read with the PoolManager's extsload.
//
// Concentrated-liquidity and V4 shares are of the value of the positions
// at the pool's price now (their amounts by the standard liquidity math,
// the tokens valued in quote at that price), not of raw liquidity, which
// is not comparable across ranges.
//
// # Locks
//
// Liquidity is locked when a recognised locker holds it, or a contract
// that answers releaseTime() (OpenZeppelin's TokenTimelock) with a time
// not yet reached. A contract answering releaseTime() is taken at its
// word ([Lock].Recognised is false): its code is not read. Locks whose
// time has passed are listed, Expired, and counted as other. The lockers
// recognised on Base ([Lockers]):
//
//	| Locker                 | Address                                    | Holds                  | Release time read                                  |
//	|------------------------|--------------------------------------------|------------------------|----------------------------------------------------|
//	| UNCX Uniswap V2 locker | 0xc4E637D37113192F4F1F060DaEbD7758De7F4131 | Uniswap V2 LP tokens   | getUserLockForTokenAtIndex(owner, pair, i)         |
//	| UNCX Uniswap V3 locker | 0x231278eDd38B00B07fBd52120CEf685B9BaEBCC1 | V3 NFT positions       | getUserLockAtIndex(owner, i), matched by NFT id    |
//	| PinkLock V2            | 0xdD6E31A046b828CbBAfb939C2a394629aff8BBdC | any ERC-20 (LP tokens) | getLocksForToken(pair, 0, 7): tgeDate              |
//
// How each was recognised:
//
//   - UNCX Uniswap V2: UNCX's own repository (uncx-network/
//     liquidity-locker-univ2-contracts, README, "Latest deployments",
//     Base: lockerV2 beside UniV2Factory 0x8909Dc15…, the Uniswap V2
//     factory the whale scan follows). Its TokenLock is (lpToken,
//     lockDate, amount, initialAmount, unlockDate, lockID, owner,
//     countryCode); the first version's six words are read too.
//   - UNCX Uniswap V3: UNCX's own repository (uncx-network/
//     liquidity-locker-univ3-contracts, README, "Deployment addresses
//     UniV3 V3 Lockers (LATEST)", Base; the same address is UNCX's
//     retired V1 locker on Ethereum). It holds the NFT (ownerOf is the
//     locker); its Lock is (lock_id, nftPositionManager, pool, nft_id,
//     owner, pendingOwner, additionalCollector, collectAddress,
//     unlockDate, countryCode, ucf).
//   - PinkLock V2: not in PinkSale's own documentation as stored here,
//     but named PinkLock V2 on Base, alike, by independent public code:
//     a vesting tracker's address map (checked, it says, by calls on each
//     chain), a Base token's contract that locks into it beside Base's
//     Uniswap V2 router, bots' locker lists, and Base projects' lock
//     records. Its Lock is (id, token, owner, amount, lockDate, tgeDate,
//     tgeBps, cycle, cycleBps, unlockedAmount, description): a plain
//     lock releases at tgeDate; a vesting lock starts releasing then
//     (its later cycles are not read).
//
// Left out, unconfirmed: Team Finance on Base (third parties name two
// different addresses, 0x4F0Fd563BE89ec8C3e7D595bf3639128C0a7C33A and
// 0xC77aab3c6D7dAb46248F3CC3033C856171878BD5, and Team Finance's own
// list was not found); UNCX's V4 locker (one third party's address
// only); lockers of Aerodrome's pools and launchpads' own lockers
// (Clanker's and the like) were not researched. UNCX's SushiSwap V2
// locker on Base (0xBeddF48499788607B4c2e704e9099561ab38Aae8, in UNCX's
// README) holds no followed venue's LP tokens.
//
// The lockers tell their locks by lock owner (UNCX) or by token
// (PinkLock): UNCX's are asked for the deployer's, the owner's and the
// pool creator's locks. What a recognised locker holds beyond the locks
// found is locked until an unknown time (Until 0).
//
// # Bounds
//
//   - Logs are read from the pool's creation, at most maxLogBlocks (seven
//     days of blocks, the whale scan's window) back: an older pool's
//     liquidity at creation is not read, its removals are those of the
//     window, and holders who got their share before it and never moved
//     it are found only among the known addresses (said in Unread).
//   - A V2-style pair's holders besides the known addresses: the
//     maxHolders largest by their transfers are confirmed; the rest are
//     other (exact as a sum: other is what the rest leave).
//   - NFT positions: the Mints of the maxMintBlocks blocks carrying the
//     most of their pool's liquidity are matched to NFTs; positions of a
//     manager left unnamed count as other. The maxPositions largest
//     positions of a pool have their holder read; the rest are other.
//   - Lockers: maxLocksPerOwner locks per lock owner, maxTokenLocks per
//     LP token.
//
// Past a bound the answer is an estimate, and Unread says so. The batch
// of calls is thereby bounded: per V2-style pair two calls, a balanceOf
// per known address, two per other holder, and a locker's one to nine;
// per concentrated-liquidity pool two, two per NFT, one per holder; per
// V4 pool one, two per position; nine for UNCX's V3 locker.
//
// # Approximations
//
//   - V4's ModifyLiquidity carries no amounts: the liquidity at creation
//     is valued at the Initialize price, each removal at the pool's price
//     now (a price moved since the removal moves it), the reserve as the
//     positions' amounts now. In float64, as are all shares.
//   - Concentrated-liquidity shares value positions at the price now, fees
//     owed left out.
//   - A position's holder is the NFT's holder when ownerOf answers;
//     releaseTime() is asked of the holder the Transfer logs name, so a
//     holder that changed outside the logs read is not asked.
package liquidity
