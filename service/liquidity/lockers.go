package liquidity

import (
	"math/big"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
)

// lockerKind is how a recognised locker holds liquidity and tells its
// release times.
type lockerKind int

const (
	// uncxV2Kind holds LP tokens; getUserLockForTokenAtIndex(owner,
	// lpToken, i) tells each lock of an owner.
	uncxV2Kind lockerKind = iota + 1
	// uncxV3Kind holds NFT positions; getUserLockAtIndex(owner, i) tells
	// each lock of an owner, with its position's id.
	uncxV3Kind
	// pinkV2Kind holds any ERC-20; getLocksForToken(token, start, end)
	// tells the locks of a token.
	pinkV2Kind
)

type locker struct {
	name string
	kind lockerKind
}

// recognised are the lockers on Base the package reads (the package
// documentation gives each one's source).
func recognised() map[common.Address]locker {
	return map[common.Address]locker{
		common.HexToAddress("0xc4E637D37113192F4F1F060DaEbD7758De7F4131"): {"UNCX Uniswap V2 locker", uncxV2Kind},
		common.HexToAddress("0x231278eDd38B00B07fBd52120CEf685B9BaEBCC1"): {"UNCX Uniswap V3 locker", uncxV3Kind},
		common.HexToAddress("0xdD6E31A046b828CbBAfb939C2a394629aff8BBdC"): {"PinkLock V2", pinkV2Kind},
	}
}

// Lockers returns the liquidity lockers on Base the package recognises,
// by address, with their names: holders that are no trader's wallet.
func Lockers() map[common.Address]string {
	out := map[common.Address]string{}
	for a, l := range recognised() {
		out[a] = l.name
	}
	return out
}

// lockOwners are the accounts the lockers are asked for the locks of: the
// deployer, the owner and the creators of pools, each once.
func (r *reader) lockOwners(pools ...Pool) []common.Address {
	var out []common.Address
	add := func(a common.Address) {
		if a != (common.Address{}) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if r.in.Deployer != nil {
		add(*r.in.Deployer)
	}
	if r.in.Owner != nil {
		add(*r.in.Owner)
	}
	for _, p := range pools {
		add(p.Creator)
	}
	return out
}

// foundLock is one lock a locker told of: amount still locked (LP tokens)
// until a time.
type foundLock struct {
	amount *big.Int
	until  uint64
}

// uncxV2Lock decodes getUserLockForTokenAtIndex: the TokenLock struct of
// UNCX's current V2 locker (lpToken, lockDate, amount, initialAmount,
// unlockDate, lockID, owner, countryCode), or the six words of its first
// version (lockDate, amount, initialAmount, unlockDate, lockID, owner).
func uncxV2Lock(ret []byte, lpToken common.Address) (foundLock, bool) {
	w, ok := dataWords(ret, 6)
	if !ok {
		return foundLock{}, false
	}
	if len(ret) >= 8*32 && common.BigToAddress(w(0)) == lpToken {
		return foundLock{w(2), untilOf(w(4))}, true
	}
	if len(ret) == 6*32 {
		return foundLock{w(1), untilOf(w(3))}, true
	}
	return foundLock{}, false
}

// pinkLockABI is PinkLock V2's getLocksForToken.
const pinkLockABI = `[{"type":"function","name":"getLocksForToken","stateMutability":"view",
"inputs":[{"name":"token","type":"address"},{"name":"start","type":"uint256"},{"name":"end","type":"uint256"}],
"outputs":[{"name":"","type":"tuple[]","components":[
{"name":"id","type":"uint256"},{"name":"token","type":"address"},{"name":"owner","type":"address"},
{"name":"amount","type":"uint256"},{"name":"lockDate","type":"uint256"},{"name":"tgeDate","type":"uint256"},
{"name":"tgeBps","type":"uint256"},{"name":"cycle","type":"uint256"},{"name":"cycleBps","type":"uint256"},
{"name":"unlockedAmount","type":"uint256"},{"name":"description","type":"string"}]}]}]`

// pinkLock is PinkLock V2's Lock.
type pinkLock struct {
	Id             *big.Int //nolint:revive // the ABI's field name
	Token          common.Address
	Owner          common.Address
	Amount         *big.Int
	LockDate       *big.Int
	TgeDate        *big.Int
	TgeBps         *big.Int
	Cycle          *big.Int
	CycleBps       *big.Int
	UnlockedAmount *big.Int
	Description    string
}

// pinkLocks decodes getLocksForToken: each lock of lpToken, the amount
// not yet withdrawn, until its tgeDate (a plain lock's unlock date; a
// vesting lock's first release, its later cycles left unread).
func pinkLocks(ret []byte, lpToken common.Address) ([]foundLock, bool) {
	parsed, err := abi.JSON(strings.NewReader(pinkLockABI))
	if err != nil {
		return nil, false
	}
	var locks []pinkLock
	if err := parsed.UnpackIntoInterface(&locks, "getLocksForToken", ret); err != nil {
		return nil, false
	}
	var out []foundLock
	for _, l := range locks {
		if l.Token != lpToken || l.Amount == nil || l.UnlockedAmount == nil {
			continue
		}
		left := new(big.Int).Sub(l.Amount, l.UnlockedAmount)
		if left.Sign() > 0 {
			out = append(out, foundLock{left, untilOf(l.TgeDate)})
		}
	}
	return out, true
}

// uncxV3Lock decodes getUserLockAtIndex: UNCX's V3 Lock struct (lock_id,
// nftPositionManager, pool, nft_id, owner, pendingOwner,
// additionalCollector, collectAddress, unlockDate, countryCode, ucf).
func uncxV3Lock(ret []byte) (key nftKey, until uint64, ok bool) {
	w, ok := dataWords(ret, 11)
	if !ok {
		return nftKey{}, 0, false
	}
	return nftKey{common.BigToAddress(w(1)), w(3).String()}, untilOf(w(8)), true
}

func untilOf(x *big.Int) uint64 {
	if x == nil || !x.IsUint64() || x.Uint64() > maxUnixTime {
		return 0
	}
	return x.Uint64()
}

// splitLocks spreads a locker's confirmed balance over the locks found,
// in the order the locker told them; what no lock found accounts for is
// locked until an unknown time.
func splitLocks(balance *big.Int, found []foundLock) []foundLock {
	left := new(big.Int).Set(balance)
	var out []foundLock
	for _, l := range found {
		if left.Sign() <= 0 {
			break
		}
		a := l.amount
		if a.Cmp(left) > 0 {
			a = new(big.Int).Set(left)
		}
		out = append(out, foundLock{a, l.until})
		left.Sub(left, a)
	}
	if left.Sign() > 0 {
		out = append(out, foundLock{left, 0})
	}
	return out
}
