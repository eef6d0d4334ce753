package liquidity

import (
	"github.com/ethereum/go-ethereum/common"
)

// role is what a known address is to the rug check.
type role int

const (
	roleNone role = iota
	roleBurn
	roleLocker
	roleDeployer
	roleOwner
)

// The burn addresses: nobody holds their keys.
var (
	zeroAddress = common.Address{}
	deadAddress = common.HexToAddress("0x000000000000000000000000000000000000dEaD")
)

// knownAddresses gives each address the role it plays; one address plays
// the first of burn, recognised locker, deployer, owner.
func knownAddresses(in Input, lockers map[common.Address]locker) map[common.Address]role {
	known := map[common.Address]role{}
	set := func(a common.Address, r role) {
		if _, ok := known[a]; !ok {
			known[a] = r
		}
	}
	set(zeroAddress, roleBurn)
	set(deadAddress, roleBurn)
	for a := range lockers {
		set(a, roleLocker)
	}
	if in.Deployer != nil {
		set(*in.Deployer, roleDeployer)
	}
	if in.Owner != nil {
		set(*in.Owner, roleOwner)
	}
	return known
}

// tally sums how a pool's liquidity is held, in the pool's own unit (LP
// tokens, or quote value).
type tally struct {
	total                             float64
	burned, locked, deployer, ownerOf float64
	locks                             []Lock // Share in the pool's unit until finish
}

// add counts amount held by holder, a known address or not; timelock is
// the release time holder answered releaseTime() with (0: none).
func (t *tally) add(r *reader, holder common.Address, amount float64, timelock uint64) {
	if amount <= 0 {
		return
	}
	switch r.known[holder] {
	case roleBurn:
		t.burned += amount
	case roleDeployer:
		t.deployer += amount
	case roleOwner:
		t.ownerOf += amount
	case roleLocker:
		t.lock(r, holder, amount, 0)
	default:
		if timelock > 0 {
			t.lock(r, holder, amount, timelock)
		}
	}
}

// lock counts amount locked in locker until `until` (0: unknown).
func (t *tally) lock(r *reader, locker common.Address, amount float64, until uint64) {
	if amount <= 0 {
		return
	}
	l := Lock{Locker: locker, Name: "releaseTime()", Share: amount, Until: until}
	if k, ok := r.lockers[locker]; ok {
		l.Name, l.Recognised = k.name, true
	}
	l.Expired = until != 0 && until <= r.time
	if !l.Expired {
		t.locked += amount
	}
	t.locks = append(t.locks, l)
}

// finish writes the shares into out; everything not burned, locked or
// held by the deployer or the owner is Other.
func (t *tally) finish(out *PoolLiquidity) {
	if t.total <= 0 {
		return
	}
	f := func(x float64) float64 { return min(max(x/t.total, 0), 1) }
	out.Burned, out.Locked, out.Deployer, out.Owner = f(t.burned), f(t.locked), f(t.deployer), f(t.ownerOf)
	out.Other = max(0, 1-out.Burned-out.Locked-out.Deployer-out.Owner)
	for _, l := range t.locks {
		l.Share = f(l.Share)
		out.Locks = append(out.Locks, l)
	}
}

// releaseTime reads a contract's answer to releaseTime() (OpenZeppelin's
// TokenTimelock): a plausible unix time, or 0.
func releaseTime(b *batch, i int) uint64 {
	w := b.word(i, 0)
	if w == nil || !w.IsUint64() || w.Uint64() == 0 || w.Uint64() > maxUnixTime {
		return 0
	}
	return w.Uint64()
}

// maxUnixTime is the latest release time taken as one: later is no time
// (the year 2286), e.g. a word that is not a timestamp.
const maxUnixTime = 9_999_999_999
