package whales

import (
	"math/big"
	"sort"

	"github.com/ethereum/go-ethereum/common"
)

// Rules are the thresholds of the whale rules (docs/rules.md).
type Rules struct {
	// EarlyBuyers: the first this many distinct buyers of a pool are early.
	EarlyBuyers int
	// Drawdown: a pool collapses when its price falls this fraction below
	// its peak.
	Drawdown float64
	// LiquidityPull: a pool collapses when one removal takes at least this
	// fraction of its quote reserve.
	LiquidityPull float64
	// Dodge: a wallet dodged a collapse when it had sold at least this
	// fraction of the tokens it bought before the collapse.
	Dodge float64
}

// DefaultRules are the published thresholds.
func DefaultRules() Rules {
	return Rules{EarlyBuyers: 5, Drawdown: 0.70, LiquidityPull: 0.50, Dodge: 0.50}
}

// Outcome of a position at its pool's collapse.
const (
	outcomeNone = iota
	outcomeDodged
	outcomeCaught
)

// position is one wallet's trading in one pool.
type position struct {
	bought, sold *big.Int // sold counts sales before the collapse only
	early        bool
	outcome      int
}

// pool is one followed pool and what its events showed so far.
type pool struct {
	ref      poolRef
	token    common.Address
	venue    Kind
	tokenIs0 bool
	created  uint64
	// createdTx is the transaction that created the pool, creator its
	// sender.
	createdTx common.Hash
	creator   common.Address
	// quote is the pool's quote asset.
	quote common.Address
	// hooks is a V4 pool's hook contract; sqrtP its last square-root
	// price, which its liquidity changes are valued at (venue_v4.go).
	hooks common.Address
	sqrtP float64

	buyers    int
	positions map[common.Address]*position
	price     float64 // quote per token after the last event
	peak      float64
	reserve   *big.Int // quote reserve after the last event
	lastTx    common.Hash
	block     uint64 // of the event being applied (set by the scanner)
	txBlock   uint64 // of lastTx
	pending   string // collapse seen in the current transaction
	collapsed string // "", "drawdown" or "liquidity"
	// collapsedAt is the block of the collapsing transaction.
	collapsedAt uint64
}

func newPool(c creation, token common.Address, venue Kind, tokenIs0 bool, created uint64) *pool {
	return &pool{ref: c.ref, token: token, venue: venue, tokenIs0: tokenIs0, created: created, hooks: c.hooks, sqrtP: c.sqrtPrice,
		positions: map[common.Address]*position{}, reserve: new(big.Int)}
}

// side orders a pair of amounts given as (token0, token1) into (token,
// quote).
func (p *pool) side(a0, a1 *big.Int) (token, quote *big.Int) {
	if p.tokenIs0 {
		return a0, a1
	}
	return a1, a0
}

// apply folds one event of transaction tx into the pool. A collapse is
// judged at the end of its transaction, so a sale in the collapsing
// transaction itself counts as before it.
func (p *pool) apply(tx common.Hash, e event, r Rules) {
	if tx != p.lastTx {
		p.settle(r)
		p.lastTx, p.txBlock = tx, p.block
	}
	switch e.kind {
	case evReserve:
		p.reserve = new(big.Int).Set(e.quote)
	case evReserveDelta:
		p.reserve = new(big.Int).Add(p.reserve, e.quote)
		if p.reserve.Sign() < 0 {
			p.reserve.SetInt64(0) // a reserve from before the pool was followed
		}
	case evRemove:
		// The removal is judged against the reserve just before it: what
		// is left after it, plus what it took.
		before := new(big.Int).Add(e.quote, p.reserve)
		if before.Sign() > 0 && ratio(e.quote, before) >= r.LiquidityPull && p.pending == "" {
			p.pending = "liquidity"
		}
	case evSwap:
		switch {
		case e.tokenDelta.Sign() < 0 && e.quoteDelta.Sign() > 0 && e.buyer != (common.Address{}): // a buy
			p.buy(e.buyer, new(big.Int).Neg(e.tokenDelta), r)
		case e.tokenDelta.Sign() > 0 && e.seller != (common.Address{}): // a sale
			if pos := p.positions[e.seller]; pos != nil && p.collapsed == "" {
				pos.sold.Add(pos.sold, e.tokenDelta)
			}
		}
	}
	p.observe(e.price, r)
}

func (p *pool) observe(price float64, r Rules) {
	if price <= 0 {
		return
	}
	p.price = price
	p.peak = max(p.peak, price)
	if price <= p.peak*(1-r.Drawdown) && p.pending == "" {
		p.pending = "drawdown"
	}
}

func (p *pool) buy(who common.Address, amount *big.Int, r Rules) {
	if who == p.ref.holder() || who == (common.Address{}) {
		return
	}
	pos := p.positions[who]
	if pos == nil {
		pos = &position{bought: new(big.Int), sold: new(big.Int)}
		p.positions[who] = pos
		if p.collapsed == "" {
			p.buyers++
			pos.early = p.buyers <= r.EarlyBuyers
		}
	}
	pos.bought.Add(pos.bought, amount)
}

// settle closes the current transaction: a collapse seen in it judges
// every position held, once.
func (p *pool) settle(r Rules) {
	if p.pending == "" || p.collapsed != "" {
		p.pending = ""
		return
	}
	p.collapsed, p.pending, p.collapsedAt = p.pending, "", p.txBlock
	for _, pos := range p.positions {
		if pos.bought.Sign() == 0 {
			continue
		}
		if ratio(pos.sold, pos.bought) >= r.Dodge {
			pos.outcome = outcomeDodged
		} else {
			pos.outcome = outcomeCaught
		}
	}
}

// Wallet is one ranked wallet.
type Wallet struct {
	Address        common.Address
	Score          float64
	SmartEntries   int
	TokensCrossed  int
	EarlyRate      float64
	DodgeRate      float64
	Dodges, Caught int
	EvidenceTokens []common.Address
}

// rank scores every wallet that bought in pools and orders them best
// first: score = smartEntries + 2·dodges − caught; ties by smart entries,
// then dodge rate, then address.
func rank(pools []*pool) []Wallet {
	byAddr := map[common.Address]*Wallet{}
	for _, p := range pools {
		for addr, pos := range p.positions {
			w := byAddr[addr]
			if w == nil {
				w = &Wallet{Address: addr}
				byAddr[addr] = w
			}
			w.TokensCrossed++
			evidence := false
			if pos.early {
				w.SmartEntries++
				evidence = true
			}
			switch pos.outcome {
			case outcomeDodged:
				w.Dodges++
				evidence = true
			case outcomeCaught:
				w.Caught++
			}
			if evidence {
				w.EvidenceTokens = append(w.EvidenceTokens, p.token)
			}
		}
	}
	out := make([]Wallet, 0, len(byAddr))
	for _, w := range byAddr {
		w.Score = float64(w.SmartEntries + 2*w.Dodges - w.Caught)
		w.EarlyRate = float64(w.SmartEntries) / float64(w.TokensCrossed)
		if n := w.Dodges + w.Caught; n > 0 {
			w.DodgeRate = float64(w.Dodges) / float64(n)
		}
		sort.Slice(w.EvidenceTokens, func(i, j int) bool { return w.EvidenceTokens[i].Cmp(w.EvidenceTokens[j]) < 0 })
		out = append(out, *w)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Score != b.Score {
			return a.Score > b.Score
		}
		if a.SmartEntries != b.SmartEntries {
			return a.SmartEntries > b.SmartEntries
		}
		if a.DodgeRate != b.DodgeRate {
			return a.DodgeRate > b.DodgeRate
		}
		return a.Address.Cmp(b.Address) < 0
	})
	return out
}
