// Package whales owns the whale shortlist: a background scanner that
// finds recent pools from DEX factory events, reads their swaps, reserves
// and liquidity removals incrementally from the last scanned block, and
// the rules (rules.go, docs/rules.md) that turn them into ranked wallets.
// Requests never touch the chain: they read the last completed snapshot.
// Replicas sharing a store run one scan between them ([Shared]).
package whales

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/service/chain"
)

// Factory is a DEX factory whose pool creations the scanner follows.
type Factory struct {
	Address common.Address
	Kind    Kind
}

// Base mainnet defaults: the venues and quote assets of the scan, each
// with its source in docs/rules.md ("Venues", "Quote assets").
var (
	BaseFactories = []Factory{
		{common.HexToAddress("0x8909Dc15e40173Ff4699343b6eB8132c65e18eC6"), UniswapV2},
		{common.HexToAddress("0x33128a8fC17869897dcE68Ed026d694621f6FDfD"), UniswapV3},
		{common.HexToAddress("0x498581fF718922c3f8e6A244956aF099B2652b2b"), UniswapV4},
		{common.HexToAddress("0x420DD381b31aEf6683db6B902084cB0FFECe40Da"), Aerodrome},
		{common.HexToAddress("0x5e7BB104d84c7CB9B682AaC2F3d509f5F406809A"), Slipstream},
		{common.HexToAddress("0xaDe65c38CD4849aDBA595a4323a8C7DdfE89716a"), Slipstream},
		{common.HexToAddress("0x0BFbCF9fa4f9C56B0F40a671Ad40E0805A091865"), PancakeV3},
	}
	BaseQuotes = []common.Address{
		common.HexToAddress("0x4200000000000000000000000000000000000006"), // WETH (native ETH, 0x0, is always a quote)
		common.HexToAddress("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"), // USDC
		common.HexToAddress("0x0b3e328455c4059EEb9e3f84b5543F74E24e7E1b"), // VIRTUAL (Virtuals agent tokens)
		common.HexToAddress("0x1111111111166b7FE7bd91427724B487980aFc69"), // ZORA (Zora creator coins)
		common.HexToAddress("0x000000000D564D5be76f7f0d28fE52605afC7Cf8"), // flETH (Flaunch)
		common.HexToAddress("0xcbB7C0000aB88B473b1f5aFd9ef808440eed33Bf"), // cbBTC (a major: its pools with WETH or USDC are no launch)
	}
)

// Config configures a Scanner.
type Config struct {
	Factories []Factory
	// Quotes are the assets tokens are priced in; a pool needs exactly one.
	Quotes []common.Address
	// WindowBlocks is how far back pools are followed (by creation block).
	WindowBlocks uint64
	// Confirmations keeps the scan this many blocks behind the head.
	Confirmations uint64
	// Interval is the pause between cycles once caught up.
	Interval time.Duration
	// MaxPools caps the pools followed (the newest are kept).
	MaxPools int
	// MaxBlocksPerCycle caps the range one cycle reads; a scan further
	// behind catches up over several cycles.
	MaxBlocksPerCycle uint64
	// Top is how many wallets a snapshot lists.
	Top   int
	Rules Rules
	Chain chain.Config
	// Observe is told of each cycle: its stats, its duration and its
	// error. Nil: nobody.
	Observe func(st Stats, took time.Duration, err error)
}

// DefaultConfig returns the settings for Base: seven days of pools, a
// cycle a minute.
func DefaultConfig() Config {
	return Config{
		Factories: BaseFactories, Quotes: BaseQuotes,
		WindowBlocks: 302_400, Confirmations: 3, Interval: time.Minute,
		MaxPools: 2_000, MaxBlocksPerCycle: 50_000, Top: 50,
		Rules: DefaultRules(), Chain: chain.DefaultConfig(),
	}
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	if len(c.Factories) == 0 || len(c.Quotes) == 0 {
		errs = append(errs, errors.New("whales: at least one factory and one quote asset"))
	}
	for _, f := range c.Factories {
		if venues[f.Kind] == nil {
			errs = append(errs, fmt.Errorf("whales: factory %s: unknown kind %q (one of %v)", f.Address, f.Kind, Kinds()))
		}
	}
	if c.WindowBlocks == 0 || c.Interval <= 0 || c.MaxPools <= 0 || c.MaxBlocksPerCycle == 0 || c.Top <= 0 {
		errs = append(errs, errors.New("whales: window, interval, pool cap, cycle range and top must be positive"))
	}
	if r := c.Rules; r.EarlyBuyers <= 0 || r.Drawdown <= 0 || r.Drawdown >= 1 || r.LiquidityPull <= 0 || r.LiquidityPull > 1 || r.Dodge <= 0 || r.Dodge > 1 {
		errs = append(errs, errors.New("whales: rules out of range"))
	}
	return errors.Join(errs...)
}

// Snapshot is a completed scan.
type Snapshot struct {
	AsOf time.Time
	// Block is the last block the scan covers.
	Block         uint64
	TokensScanned int
	// Wallets with a positive score, best first, at most Config.Top.
	Wallets []Wallet
	// Collapses are the collapses of the followed pools, by token: what
	// the rug check reports as the token's history (docs/rules.md).
	Collapses map[common.Address]Collapse
	// Pools are the followed pools of each token, oldest first: where a
	// buyer trades it (the rug check reads a buy and a sale against the
	// first).
	Pools map[common.Address][]Pool
}

// Pool is a followed pool of a token.
type Pool struct {
	// ID is the pool's address, or a V4 pool's id in its PoolManager.
	ID string
	// Holder is the contract holding the pool's tokens, which sends them
	// to a buyer: the pool, or the V4 PoolManager.
	Holder common.Address
	Venue  Kind
	// Created is the block of the pool's creation, CreatedTx its
	// transaction (its sender created the pool: for a token launched
	// with its pool, the deployer or the launchpad's caller).
	Created   uint64
	CreatedTx common.Hash
	// Creator sent CreatedTx (zero when the node did not say).
	Creator common.Address
	// Quote is the pool's quote asset (zero: native ETH in a V4 pool).
	Quote common.Address
}

// Collapse is the collapse of a followed pool.
type Collapse struct {
	// Pool is the pool's address, or a V4 pool's id in its PoolManager.
	Pool string
	// Venue is the pool's venue kind (v2, v3, v4, aerodrome, slipstream,
	// pancakev3).
	Venue Kind
	// Kind is "liquidity" (one removal took at least Rules.LiquidityPull of
	// the quote reserve) or "drawdown" (the price fell Rules.Drawdown below
	// its peak).
	Kind string
	// Block of the collapsing transaction.
	Block uint64
}

// Stats describes one cycle.
type Stats struct {
	Head     uint64 // the chain head the cycle saw
	From, To uint64
	Pools    int // followed after the cycle
	NewPools int
	// Skipped counts the pools created in the cycle's range that were
	// not followed: both sides quote assets, or neither.
	Skipped   int
	Logs      int
	Calls     int64 // JSON-RPC round trips
	CaughtUp  bool
	Completed bool // a snapshot was published
}

// Scanner runs the scan cycles and holds the last snapshot.
type Scanner struct {
	cfg     Config
	rpc     *countingRPC
	client  *chain.Client
	log     *slog.Logger
	kinds   map[common.Address]Kind
	quotes  map[common.Address]bool
	pools   map[poolRef]*pool
	tokens  map[common.Address]bool
	started bool
	next    uint64
	snap    atomic.Pointer[Snapshot]
}

// New returns a scanner over r; it does no I/O.
func New(r chain.RPC, cfg Config, log *slog.Logger) (*Scanner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	counting := &countingRPC{RPC: r}
	client, err := chain.New(counting, cfg.Chain)
	if err != nil {
		return nil, err
	}
	s := &Scanner{cfg: cfg, rpc: counting, client: client, log: log,
		kinds: map[common.Address]Kind{}, quotes: map[common.Address]bool{},
		pools: map[poolRef]*pool{}, tokens: map[common.Address]bool{}}
	for _, f := range cfg.Factories {
		s.kinds[f.Address] = f.Kind
	}
	for _, q := range cfg.Quotes {
		s.quotes[q] = true
	}
	// Native ETH (a V4 pool's currency 0x0) is a quote as WETH is.
	s.quotes[common.Address{}] = true
	return s, nil
}

// Snapshot returns the last completed scan, nil before the first.
func (s *Scanner) Snapshot() *Snapshot { return s.snap.Load() }

// Run scans until ctx ends: back to back while catching up, then every
// Interval. Failed cycles are logged and retried at the next tick.
func (s *Scanner) Run(ctx context.Context) {
	for {
		st, err := s.Scan(ctx)
		wait := s.cfg.Interval
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.log.Warn("whale scan failed; the last snapshot stays served", "err", err, "rpc_calls", st.Calls)
		case !st.CaughtUp:
			wait = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Scan runs one cycle: the new blocks since the last cycle (at most
// MaxBlocksPerCycle), publishing a snapshot once caught up.
func (s *Scanner) Scan(ctx context.Context) (Stats, error) {
	calls, start := s.rpc.n.Load(), time.Now()
	st, err := s.scan(ctx)
	st.Calls = s.rpc.n.Load() - calls
	if s.cfg.Observe != nil && ctx.Err() == nil {
		s.cfg.Observe(st, time.Since(start), err)
	}
	if err != nil {
		return st, err
	}
	perToken := 0.0
	if st.Pools > 0 {
		perToken = float64(st.Calls) / float64(st.Pools)
	}
	s.log.Info("whale scan", "from", st.From, "to", st.To, "pools", st.Pools, "new_pools", st.NewPools, "skipped_pools", st.Skipped, "logs", st.Logs,
		"rpc_calls", st.Calls, "rpc_calls_per_token", fmt.Sprintf("%.2f", perToken), "caught_up", st.CaughtUp)
	return st, nil
}

func (s *Scanner) scan(ctx context.Context) (Stats, error) {
	var head hexutil.Uint64
	if err := s.client.Call(ctx, &head, "eth_blockNumber"); err != nil {
		return Stats{}, fmt.Errorf("eth_blockNumber: %w", err)
	}
	safe := uint64(head) - min(uint64(head), s.cfg.Confirmations)
	if !s.started {
		s.next = safe - min(safe, s.cfg.WindowBlocks-1)
		s.started = true
	}
	st := Stats{Head: uint64(head), From: s.next, To: min(safe, s.next+s.cfg.MaxBlocksPerCycle-1)}
	if st.From > st.To { // nothing new: the snapshot is current as of now
		st.From, st.To, st.CaughtUp, st.Pools = s.next, s.next-1, true, len(s.pools)
		s.publish(safe)
		st.Completed = true
		return st, nil
	}
	newPools, skipped, err := s.discover(ctx, st.From, st.To)
	if err != nil {
		return st, err
	}
	st.NewPools, st.Skipped = newPools, skipped
	s.prune(st.To)
	n, err := s.readPools(ctx, st.From, st.To)
	if err != nil {
		return st, err
	}
	for _, p := range s.pools {
		p.settle(s.cfg.Rules)
	}
	st.Logs, st.Pools = n, len(s.pools)
	s.next = st.To + 1
	st.CaughtUp = st.To == safe
	if st.CaughtUp {
		s.publish(st.To)
		st.Completed = true
	}
	return st, nil
}

// discover adds the pools created in [from, to] that pair a token with
// exactly one quote asset, the token's first pool only; skipped counts the
// pools that pair two quotes or none.
func (s *Scanner) discover(ctx context.Context, from, to uint64) (added, skipped int, err error) {
	var addrs []common.Address
	var topics []common.Hash
	for _, f := range s.cfg.Factories {
		addrs = append(addrs, f.Address)
		if t := venues[f.Kind].creationTopic(); !slices.Contains(topics, t) {
			topics = append(topics, t)
		}
	}
	logs, err := s.client.Logs(ctx, chain.LogQuery{From: from, To: to, Addresses: addrs, Topics: [][]common.Hash{topics}})
	if err != nil {
		return 0, 0, fmt.Errorf("pool creations: %w", err)
	}
	var fresh []*pool
	for _, l := range logs {
		kind, ok := s.kinds[l.Address]
		v := venues[kind]
		if !ok || l.Removed || len(l.Topics) == 0 || l.Topics[0] != v.creationTopic() {
			continue
		}
		c, err := v.created(l.Address, l)
		if err != nil {
			s.log.Debug("whale scan: undecodable pool creation", "factory", l.Address, "err", err)
			continue
		}
		token, tokenIs0 := c.currency1, false
		switch {
		case s.quotes[c.currency1] && !s.quotes[c.currency0]:
			token, tokenIs0 = c.currency0, true
		case s.quotes[c.currency0] && !s.quotes[c.currency1]:
		default:
			skipped++
			continue
		}
		if s.tokens[token] || s.pools[c.ref] != nil {
			continue
		}
		p := newPool(c, token, kind, tokenIs0, l.BlockNumber)
		p.createdTx, p.quote = l.TxHash, c.currency0
		if tokenIs0 {
			p.quote = c.currency1
		}
		p.observe(p.quotePrice(c.sqrtPrice), s.cfg.Rules) // the price at creation, when the log carries it
		s.tokens[token] = true
		s.pools[c.ref] = p
		fresh = append(fresh, p)
		added++
	}
	if err := s.creators(ctx, fresh); err != nil {
		return 0, 0, err
	}
	return added, skipped, nil
}

// creators reads who sent each new pool's creation transaction, in one
// batch: the deployer of a token launched with its pool, or the caller
// of the launchpad that launched it.
func (s *Scanner) creators(ctx context.Context, ps []*pool) error {
	if len(ps) == 0 {
		return nil
	}
	txs := make([]struct {
		From common.Address `json:"from"`
	}, len(ps))
	b := make([]rpc.BatchElem, len(ps))
	for i, p := range ps {
		b[i] = rpc.BatchElem{Method: "eth_getTransactionByHash", Args: []any{p.createdTx}, Result: &txs[i]}
	}
	if err := s.client.Batch(ctx, b); err != nil {
		return fmt.Errorf("pool creators: %w", err)
	}
	for i, p := range ps {
		if b[i].Error == nil {
			p.creator = txs[i].From
		}
	}
	return nil
}

// prune forgets pools created before the window and, past MaxPools, the
// oldest ones.
func (s *Scanner) prune(to uint64) {
	oldest := to - min(to, s.cfg.WindowBlocks-1)
	ps := s.sortedPools()
	for i, p := range ps {
		if p.created < oldest || i < len(ps)-s.cfg.MaxPools {
			delete(s.pools, p.ref)
			delete(s.tokens, p.token)
		}
	}
}

// sortedPools lists the followed pools by creation block, then pool.
func (s *Scanner) sortedPools() []*pool {
	ps := make([]*pool, 0, len(s.pools))
	for _, p := range s.pools {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].created != ps[j].created {
			return ps[i].created < ps[j].created
		}
		if c := ps[i].ref.emitter.Cmp(ps[j].ref.emitter); c != 0 {
			return c < 0
		}
		return ps[i].ref.id.Cmp(ps[j].ref.id) < 0
	})
	return ps
}

// poolChunk bounds the addresses (and topic alternatives) per eth_getLogs.
const poolChunk = 500

// readPools reads the followed pools' events and the token transfers
// that name their buyers and sellers over [from, to], and folds them in
// chain order. Pools that are their own contracts are asked for by
// address; pools inside a singleton (V4) by their ids in topic1 of the
// singleton's logs, never by reading every log it emits.
func (s *Scanner) readPools(ctx context.Context, from, to uint64) (int, error) {
	var contracts []*pool
	inside := map[common.Address][]*pool{} // singleton -> its followed pools
	for _, p := range s.sortedPools() {
		if venues[p.venue].singleton() {
			inside[p.ref.emitter] = append(inside[p.ref.emitter], p)
		} else {
			contracts = append(contracts, p)
		}
	}
	var events, transfers []types.Log
	add := func(q chain.LogQuery, into *[]types.Log, what string) error {
		q.From, q.To = from, to
		logs, err := s.client.Logs(ctx, q)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		*into = append(*into, logs...)
		return nil
	}
	for i := 0; i < len(contracts); i += poolChunk {
		chunk := contracts[i:min(len(contracts), i+poolChunk)]
		var addrs, tokens []common.Address
		var holders, topics []common.Hash
		for _, p := range chunk {
			addrs, tokens = append(addrs, p.ref.emitter), append(tokens, p.token)
			holders = append(holders, common.BytesToHash(p.ref.emitter[:]))
			for _, t := range venues[p.venue].eventTopics() {
				if !slices.Contains(topics, t) {
					topics = append(topics, t)
				}
			}
		}
		if err := add(chain.LogQuery{Addresses: addrs, Topics: [][]common.Hash{topics}}, &events, "pool events"); err != nil {
			return 0, err
		}
		if err := add(chain.LogQuery{Addresses: tokens, Topics: [][]common.Hash{{topicTransfer}, nil, holders}}, &transfers, "transfers into pools"); err != nil {
			return 0, err
		}
	}
	singletons := slices.SortedFunc(maps.Keys(inside), func(a, b common.Address) int { return a.Cmp(b) })
	for _, singleton := range singletons {
		ps := inside[singleton]
		topics := venues[ps[0].venue].eventTopics()
		holder := []common.Hash{common.BytesToHash(singleton[:])}
		for i := 0; i < len(ps); i += poolChunk {
			chunk := ps[i:min(len(ps), i+poolChunk)]
			var ids []common.Hash
			var tokens []common.Address
			for _, p := range chunk {
				ids, tokens = append(ids, p.ref.id), append(tokens, p.token)
			}
			if err := add(chain.LogQuery{Addresses: []common.Address{singleton}, Topics: [][]common.Hash{topics, ids}}, &events, "singleton pool events"); err != nil {
				return 0, err
			}
			if err := add(chain.LogQuery{Addresses: tokens, Topics: [][]common.Hash{{topicTransfer}, nil, holder}}, &transfers, "transfers into the singleton"); err != nil {
				return 0, err
			}
			if err := add(chain.LogQuery{Addresses: tokens, Topics: [][]common.Hash{{topicTransfer}, holder}}, &transfers, "transfers out of the singleton"); err != nil {
				return 0, err
			}
		}
	}
	// The token transfers of each transaction name its buyers and sellers
	// (a swap's sender and recipient are often a router).
	byTx := map[common.Hash][]types.Log{}
	for _, t := range transfers {
		if !t.Removed {
			byTx[t.TxHash] = append(byTx[t.TxHash], t)
		}
	}
	sort.Slice(events, func(i, j int) bool {
		a, b := events[i], events[j]
		if a.BlockNumber != b.BlockNumber {
			return a.BlockNumber < b.BlockNumber
		}
		return a.Index < b.Index
	})
	for _, l := range events {
		if l.Removed || len(l.Topics) == 0 {
			continue
		}
		ref := poolRef{emitter: l.Address}
		if v := venues[s.kinds[l.Address]]; v != nil && v.singleton() && len(l.Topics) > 1 {
			ref.id = l.Topics[1]
		}
		p := s.pools[ref]
		if p == nil {
			continue
		}
		evs, err := venues[p.venue].decode(l, p, byTx[l.TxHash])
		if err != nil {
			s.log.Debug("whale scan: undecodable pool event", "pool", ref, "err", err)
			continue
		}
		p.block = l.BlockNumber
		for _, e := range evs {
			p.apply(l.TxHash, e, s.cfg.Rules)
		}
	}
	return len(events) + len(transfers), nil
}

func (s *Scanner) publish(block uint64) {
	ps := s.sortedPools()
	all := rank(ps)
	snap := &Snapshot{AsOf: time.Now().UTC(), Block: block, TokensScanned: len(ps), Collapses: map[common.Address]Collapse{},
		Pools: map[common.Address][]Pool{}}
	for _, p := range ps {
		snap.Pools[p.token] = append(snap.Pools[p.token], Pool{ID: p.ref.String(), Holder: p.ref.holder(), Venue: p.venue, Created: p.created, CreatedTx: p.createdTx, Creator: p.creator, Quote: p.quote})
	}
	for _, pools := range snap.Pools {
		slices.SortStableFunc(pools, func(a, b Pool) int { return cmp.Compare(a.Created, b.Created) })
	}
	for _, p := range ps {
		if p.collapsed == "" {
			continue
		}
		if c, seen := snap.Collapses[p.token]; !seen || p.collapsedAt < c.Block {
			snap.Collapses[p.token] = Collapse{Pool: p.ref.String(), Venue: p.venue, Kind: p.collapsed, Block: p.collapsedAt}
		}
	}
	for _, w := range all {
		if w.Score <= 0 || len(snap.Wallets) == s.cfg.Top {
			break
		}
		snap.Wallets = append(snap.Wallets, w)
	}
	s.snap.Store(snap)
}

// Ranking scores every wallet of the followed pools, best first, with no
// cut: what a snapshot's list is taken from. For tests and operators; it
// must not run concurrently with Scan.
func (s *Scanner) Ranking() []Wallet { return rank(s.sortedPools()) }

// countingRPC counts round trips, for the per-cycle cost log.
type countingRPC struct {
	chain.RPC
	n atomic.Int64
}

func (c *countingRPC) CallContext(ctx context.Context, result any, method string, args ...any) error {
	c.n.Add(1)
	return c.RPC.CallContext(ctx, result, method, args...)
}

func (c *countingRPC) BatchCallContext(ctx context.Context, b []rpc.BatchElem) error {
	c.n.Add(1)
	return c.RPC.BatchCallContext(ctx, b)
}
