package holders

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/service/chain"
)

// Chain reads the token's logs and its balances; *chain.Client provides
// it. Batch is one round trip; Logs splits a range the provider refuses.
type Chain interface {
	Batch(ctx context.Context, elems []rpc.BatchElem) error
	Logs(ctx context.Context, q chain.LogQuery) ([]types.Log, error)
}

// dead is the burn address by convention; the zero address is the other.
var dead = common.HexToAddress("0x000000000000000000000000000000000000dEaD")

// Token is the token read, and what the caller knows of it.
type Token struct {
	Address common.Address
	// Block is the block every read is at.
	Block uint64
	// From is the first block of its history: its creation when known
	// (e.g. its first pool's creation block less a margin); 0 when not
	// known, and then the history is read back from Block only.
	From uint64
	// Supply is its total supply at Block; nil: read with the balances.
	Supply *big.Int
	// Owner and Deployer are nil when not known. An owner that is a burn
	// address has renounced and holds nothing of note.
	Owner, Deployer *common.Address
	// Exclude sets holders apart from the top holders, with the reason:
	// the token's pools, known lockers.
	Exclude map[common.Address]string
}

// Holder is one address's holding.
type Holder struct {
	Address common.Address
	Balance *big.Int
	// Share is of Holders.Circulating, a burn address's of Holders.Supply.
	Share float64
	// Why says what it is, when known: the reason of an exclusion, "burn
	// address", "the token contract itself", "the owner", "the deployer".
	Why string
}

// Holders is who holds a token at one block.
type Holders struct {
	Block uint64
	// Supply is the total supply; Burned what the burn addresses hold;
	// Circulating the rest, of which shares are.
	Supply, Burned, Circulating *big.Int
	// Top are the largest holders, largest first, exclusions and burn
	// addresses left out; Top10Share is their shares' sum.
	Top        []Holder
	Top10Share float64
	// Owner and Deployer are nil when not given (an owner that is a burn
	// address: renounced, none).
	Owner, Deployer *Holder
	// Count is the number of non-zero balances, burn addresses left out;
	// CountExact says it is exact, not a lower bound or an estimate.
	Count      uint64
	CountExact bool
	// Excluded are the caller's exclusions, Burns the burn addresses,
	// each largest first.
	Excluded, Burns []Holder
	// Spans are the blocks whose Transfer logs were read: one when the
	// whole history was, else its first blocks (when From is known) and
	// its last.
	Spans []Span
	// Logs counts the Transfer logs read; Candidates the addresses they
	// credited; Confirmed the balances read with balanceOf.
	Logs, Candidates, Confirmed int
	// Estimated: a bound cut the history read or the balances confirmed;
	// Note says what was read and what is estimated.
	Estimated bool
	Note      string
}

// Read reads who holds t at t.Block: its Transfer logs since t.From
// within the bounds, then the balances of the addresses they credited,
// with t's burn addresses, owner, deployer and exclusions, in one batch.
func Read(ctx context.Context, c Chain, t Token) (Holders, error) {
	if err := t.validate(); err != nil {
		return Holders{}, err
	}
	fixed := t.fixed()
	slots := MaxBatch - len(fixed)
	if t.Supply == nil {
		slots--
	}
	if slots < 0 {
		return Holders{}, fmt.Errorf("holders: %d exclusions, more than a batch of %d calls holds", len(t.Exclude), MaxBatch)
	}
	h, err := readHistory(ctx, c, t.Address, Span{t.From, t.Block})
	if err != nil {
		return Holders{}, err
	}
	flows := tally(h, t.Address)
	ranked := flows.ranked(fixed)
	confirm := append(slices.Clone(fixed), ranked[:min(slots, len(ranked))]...)
	supply, balances, err := balances(ctx, c, t, confirm)
	if err != nil {
		return Holders{}, err
	}
	out := compose(t, supply, balances, confirm)
	out.Spans, out.Logs, out.Candidates, out.Confirmed = h.spans(), len(h.logs), len(ranked)+flows.creditedFixed(fixed), len(confirm)
	out.Count, out.CountExact = count(balances, ranked[len(confirm)-len(fixed):], flows, h.complete())
	out.Estimated = !out.CountExact
	out.Note = note(t, h, out, len(ranked) > slots)
	return out, nil
}

func (t Token) validate() error {
	var errs []error
	if t.Address == (common.Address{}) {
		errs = append(errs, errors.New("no token address"))
	}
	if t.From > t.Block {
		errs = append(errs, fmt.Errorf("first block %d after the block read %d", t.From, t.Block))
	}
	if t.Supply != nil && t.Supply.Sign() < 0 {
		errs = append(errs, fmt.Errorf("negative supply %s", t.Supply))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("holders: %w", err)
	}
	return nil
}

// burn tells the burn addresses.
func burn(a common.Address) bool { return a == common.Address{} || a == dead }

// fixed are the addresses whose balances are read whatever the logs say:
// the burn addresses, the token, its owner and deployer, its exclusions.
func (t Token) fixed() []common.Address {
	all := []common.Address{{}, dead, t.Address}
	for _, a := range []*common.Address{t.Owner, t.Deployer} {
		if a != nil {
			all = append(all, *a)
		}
	}
	excluded := slices.SortedFunc(maps.Keys(t.Exclude), func(a, b common.Address) int { return bytes.Compare(a[:], b[:]) })
	var out []common.Address
	for _, a := range append(all, excluded...) {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// flows are what the logs read moved, by address: net is credits less
// debits over every log read; recent the same over the logs since the
// earliest block from which all were read up to the inspected block (the
// tail, or the whole history), a lower bound of the balance of a token
// whose balances move only by Transfer.
type flows struct {
	net, recent map[common.Address]*big.Int
	credited    map[common.Address]bool
}

func tally(h history, token common.Address) flows {
	f := flows{net: map[common.Address]*big.Int{}, recent: map[common.Address]*big.Int{}, credited: map[common.Address]bool{}}
	since := h.whole.From
	if !h.complete() {
		since = h.whole.To + 1
		if h.tail != nil {
			since = h.tail.From
		}
	}
	add := func(m map[common.Address]*big.Int, a common.Address, v *big.Int, sign int) {
		x, ok := m[a]
		if !ok {
			x = new(big.Int)
			m[a] = x
		}
		if sign > 0 {
			x.Add(x, v)
		} else {
			x.Sub(x, v)
		}
	}
	for _, l := range h.logs {
		tr, ok := decode(l, token)
		if !ok {
			continue
		}
		f.credited[tr.to] = true
		add(f.net, tr.to, tr.value, 1)
		add(f.net, tr.from, tr.value, -1)
		if tr.block >= since {
			add(f.recent, tr.to, tr.value, 1)
			add(f.recent, tr.from, tr.value, -1)
		}
	}
	return f
}

// ranked are the credited addresses not in fixed, largest net flow
// first: their balances when the whole history was read.
func (f flows) ranked(fixed []common.Address) []common.Address {
	skip := make(map[common.Address]bool, len(fixed))
	for _, a := range fixed {
		skip[a] = true
	}
	out := make([]common.Address, 0, len(f.credited))
	for a := range f.credited {
		if !skip[a] {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b common.Address) int {
		if c := f.net[b].Cmp(f.net[a]); c != 0 {
			return c
		}
		return bytes.Compare(a[:], b[:])
	})
	return out
}

// creditedFixed counts the fixed addresses the logs credited.
func (f flows) creditedFixed(fixed []common.Address) int {
	n := 0
	for _, a := range fixed {
		if f.credited[a] {
			n++
		}
	}
	return n
}

// Selectors of balanceOf(address) and totalSupply().
const (
	selBalanceOf   = "\x70\xa0\x82\x31"
	selTotalSupply = "\x18\x16\x0d\xdd"
)

// balances reads the supply (when t has none) and the balances of addrs
// at t.Block, in one batch.
func balances(ctx context.Context, c Chain, t Token, addrs []common.Address) (*big.Int, map[common.Address]*big.Int, error) {
	at := hexutil.EncodeUint64(t.Block)
	call := func(data []byte, out *hexutil.Bytes) rpc.BatchElem {
		return rpc.BatchElem{Method: "eth_call", Args: []any{map[string]any{"to": t.Address, "data": hexutil.Bytes(data)}, at}, Result: out}
	}
	outs := make([]hexutil.Bytes, len(addrs)+1)
	elems := make([]rpc.BatchElem, 0, len(addrs)+1)
	for i, a := range addrs {
		elems = append(elems, call(append([]byte(selBalanceOf), common.LeftPadBytes(a[:], 32)...), &outs[i]))
	}
	if t.Supply == nil {
		elems = append(elems, call([]byte(selTotalSupply), &outs[len(addrs)]))
	}
	if err := c.Batch(ctx, elems); err != nil {
		return nil, nil, fmt.Errorf("holders: balances of %s at %d: %w", t.Address, t.Block, err)
	}
	word := func(i int, what string) (*big.Int, error) {
		if err := elems[i].Error; err != nil {
			return nil, fmt.Errorf("holders: %s of %s at %d: %w", what, t.Address, t.Block, err)
		}
		if len(outs[i]) < 32 {
			return nil, fmt.Errorf("holders: %s of %s at %d: %d bytes, want a word", what, t.Address, t.Block, len(outs[i]))
		}
		return new(big.Int).SetBytes(outs[i][:32]), nil
	}
	bals := make(map[common.Address]*big.Int, len(addrs))
	for i, a := range addrs {
		b, err := word(i, "balanceOf("+a.Hex()+")")
		if err != nil {
			return nil, nil, err
		}
		bals[a] = b
	}
	supply := t.Supply
	if supply == nil {
		s, err := word(len(addrs), "totalSupply")
		if err != nil {
			return nil, nil, err
		}
		supply = s
	}
	return supply, bals, nil
}

// compose ranks the balances read.
func compose(t Token, supply *big.Int, bals map[common.Address]*big.Int, addrs []common.Address) Holders {
	out := Holders{Block: t.Block, Supply: supply, Burned: new(big.Int)}
	for _, a := range addrs {
		if burn(a) {
			out.Burned.Add(out.Burned, bals[a])
		}
	}
	out.Circulating = new(big.Int).Sub(supply, out.Burned)
	if out.Circulating.Sign() < 0 {
		out.Circulating.SetInt64(0) // a token whose balances add up to more than its supply
	}
	share := func(b, of *big.Int) float64 {
		if of.Sign() == 0 {
			return 0
		}
		f, _ := new(big.Rat).SetFrac(b, of).Float64()
		return f
	}
	holder := func(a common.Address) Holder {
		h := Holder{Address: a, Balance: bals[a], Share: share(bals[a], out.Circulating), Why: t.Exclude[a]}
		if burn(a) {
			h.Share, h.Why = share(bals[a], supply), "burn address"
		}
		return h
	}
	var top []Holder
	for _, a := range addrs {
		switch _, excluded := t.Exclude[a]; {
		case burn(a):
			out.Burns = append(out.Burns, holder(a))
		case excluded:
			out.Excluded = append(out.Excluded, holder(a))
		case bals[a].Sign() > 0:
			h := holder(a)
			h.Why = t.role(a)
			top = append(top, h)
		}
	}
	for _, hs := range [][]Holder{top, out.Excluded, out.Burns} {
		slices.SortFunc(hs, func(a, b Holder) int {
			if c := b.Balance.Cmp(a.Balance); c != 0 {
				return c
			}
			return bytes.Compare(a.Address[:], b.Address[:])
		})
	}
	out.Top = top[:min(TopN, len(top))]
	for _, h := range out.Top {
		out.Top10Share += h.Share
	}
	if t.Owner != nil && !burn(*t.Owner) {
		h := holder(*t.Owner)
		out.Owner = &h
	}
	if t.Deployer != nil {
		h := holder(*t.Deployer)
		out.Deployer = &h
	}
	return out
}

// role names what a top holder is, when the token says.
func (t Token) role(a common.Address) string {
	var roles []string
	if a == t.Address {
		roles = append(roles, "the token contract itself")
	}
	if t.Owner != nil && a == *t.Owner {
		roles = append(roles, "the owner")
	}
	if t.Deployer != nil && a == *t.Deployer {
		roles = append(roles, "the deployer")
	}
	return strings.Join(roles, " and ")
}

// count counts the non-zero balances, burn addresses left out: those
// confirmed, and of the candidates not confirmed those whose recent net
// flow is positive (a lower bound of their balances). It is exact when
// the whole history was read and every candidate confirmed.
func count(bals map[common.Address]*big.Int, unconfirmed []common.Address, f flows, complete bool) (uint64, bool) {
	var n uint64
	for a, b := range bals {
		if !burn(a) && b.Sign() > 0 {
			n++
		}
	}
	for _, a := range unconfirmed {
		if r := f.recent[a]; r != nil && r.Sign() > 0 {
			n++
		}
	}
	return n, complete && len(unconfirmed) == 0
}

// note says what was read and, when estimated, what is.
func note(t Token, h history, out Holders, cut bool) string {
	var b strings.Builder
	if h.complete() {
		fmt.Fprintf(&b, "Read every Transfer log of the token from block %d to %d (%d logs)", t.From, t.Block, out.Logs)
		if t.From == 0 {
			b.WriteString(", back to the chain's first block")
		}
		fmt.Fprintf(&b, ", which credited %d addresses; ", out.Candidates)
	} else {
		b.WriteString("Estimated: ")
		if t.From == 0 {
			fmt.Fprintf(&b, "the token's creation block is not known, and its history back from block %d is longer than a read's bounds (%d blocks, about %d Transfer logs, %d queries). ", t.Block, MaxBlocks, MaxLogs, MaxQueries)
		} else {
			fmt.Fprintf(&b, "the token's history, blocks %d to %d, is longer than a read's bounds (%d blocks, about %d Transfer logs, %d queries). ", t.From, t.Block, MaxBlocks, MaxLogs, MaxQueries)
		}
		var spans []string
		for _, s := range out.Spans {
			spans = append(spans, fmt.Sprintf("%d to %d", s.From, s.To))
		}
		fmt.Fprintf(&b, "Read the Transfer logs of blocks %s (%d logs), not the %d blocks ", strings.Join(spans, " and "), out.Logs, h.whole.Blocks()-blocksRead(out.Spans))
		if h.head != nil {
			b.WriteString("between them")
		} else {
			b.WriteString("before them")
		}
		fmt.Fprintf(&b, "; they credited %d addresses. ", out.Candidates)
		b.WriteString("The top holders are the largest balances among those addresses (an address credited only in the blocks not read is missed); ")
	}
	if cut {
		fmt.Fprintf(&b, "%d balances were confirmed at block %d (the batch bound, %d calls): those of the burn addresses, the token, its owner, deployer and exclusions, and of the candidates with the largest net transfers in the logs read. ", out.Confirmed, t.Block, MaxBatch)
	} else {
		fmt.Fprintf(&b, "each of their balances was confirmed at block %d, with those of the burn addresses, the token, its owner, deployer and exclusions. ", t.Block)
	}
	switch {
	case out.CountExact:
		fmt.Fprintf(&b, "The holder count, %d, is exact.", out.Count)
	case h.complete():
		fmt.Fprintf(&b, "The holder count, %d, counts the confirmed non-zero balances and the other candidates whose transfers add up to more than zero: exact for a token whose balances move only by Transfer.", out.Count)
	default:
		since := t.Block + 1
		if h.tail != nil {
			since = h.tail.From
		}
		fmt.Fprintf(&b, "The holder count, %d, is a lower bound: the confirmed non-zero balances, and the other candidates whose transfers since block %d add up to more than zero.", out.Count, since)
	}
	return b.String()
}

func blocksRead(spans []Span) uint64 {
	var n uint64
	for _, s := range spans {
		n += s.Blocks()
	}
	return n
}
