package whales_test

import (
	"cmp"
	"math"
	"math/big"
	"math/rand"
	"slices"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/service/whales"
)

// A synthetic Base-like history for the scan's cost: token launches on
// every venue of the Base defaults (their real factory and PoolManager
// addresses and quote assets), each encoded from the events' published
// signatures, with the traffic the scan must never read around them.
//
//   - Launches: the deployer seeds 1,000,000,000 tokens against 5 quote
//     units; the smart wallet buys first, then a crowd trades at
//     constant-product prices (buys 0.2–2 % of the quote reserve, sales
//     10–50 % of a bag; a live pool's sale that would take the price under
//     half its peak is not made, so only a fate collapses a pool).
//   - Fates: "rug" (all liquidity removed), "dump" (the deployer sells 20
//     times the token reserve), "trim" (10 % removed, no collapse),
//     "live". Before a rug or a dump the smart wallet sells its bag.
//   - Noise (never asked for): quote/quote pools and token/token pools
//     created in the window (skipped), launches created before the window
//     trading inside it, and transfers between wallets.

// synthConfig sizes a synthetic history.
type synthConfig struct {
	seed int64
	// pre blocks of history before the window, window blocks in it,
	// extra blocks after it (the caught-up cycles' new blocks).
	pre, window, extra uint64
	launches           int // created in the window and after it
	meanSwaps          float64
	wallets            int
	skipped            int // quote/quote and token/token pools in the window
	noiseSwaps         int
}

// synthLaunch is one launch as generated: what the scan should find.
type synthLaunch struct {
	token    common.Address
	venue    whales.Kind
	fate     string
	created  uint64
	collapse uint64 // the collapsing transaction's block; 0: none
	pool     string // its address, or its V4 pool id
}

type synth struct {
	cfg      synthConfig
	rng      *rand.Rand
	logs     []types.Log
	noise    map[common.Hash]bool
	txs      uint64
	swaps    int
	launches []synthLaunch
	skipped  []uint64 // creation blocks of the pools the scan skips
	smart    common.Address
	crowd    []common.Address
	deployer common.Address
	router   common.Address
	factory  map[whales.Kind]common.Address
}

// Event signatures, from the venues' published ABIs.
var (
	sigTransfer     = sig("Transfer(address,address,uint256)")
	sigV2Created    = sig("PairCreated(address,address,address,uint256)")
	sigV2Swap       = sig("Swap(address,uint256,uint256,uint256,uint256,address)")
	sigV2Sync       = sig("Sync(uint112,uint112)")
	sigV2Mint       = sig("Mint(address,uint256,uint256)")
	sigV2Burn       = sig("Burn(address,uint256,uint256,address)")
	sigAeroCreated  = sig("PoolCreated(address,address,bool,address,uint256)")
	sigAeroSwap     = sig("Swap(address,address,uint256,uint256,uint256,uint256)")
	sigAeroSync     = sig("Sync(uint256,uint256)")
	sigAeroBurn     = sig("Burn(address,address,uint256,uint256)")
	sigV3Created    = sig("PoolCreated(address,address,uint24,int24,address)")
	sigSlipCreated  = sig("PoolCreated(address,address,int24,address)")
	sigCLInitialize = sig("Initialize(uint160,int24)")
	sigCLSwap       = sig("Swap(address,address,int256,int256,uint160,uint128,int24)")
	sigPancakeSwap  = sig("Swap(address,address,int256,int256,uint160,uint128,int24,uint128,uint128)")
	sigCLMint       = sig("Mint(address,address,int24,int24,uint128,uint256,uint256)")
	sigCLBurn       = sig("Burn(address,int24,int24,uint128,uint256,uint256)")
	sigV4Initialize = sig("Initialize(bytes32,address,address,uint24,int24,address,uint160,int24)")
	sigV4Swap       = sig("Swap(bytes32,address,int128,int128,uint160,uint128,int24,uint24)")
	sigV4Modify     = sig("ModifyLiquidity(bytes32,address,int24,int24,int256,bytes32)")
)

func sig(s string) common.Hash { return crypto.Keccak256Hash([]byte(s)) }

// Base's quote assets by role (whales.BaseQuotes order).
var (
	synthWETH, synthUSDC, synthVirtual = whales.BaseQuotes[0], whales.BaseQuotes[1], whales.BaseQuotes[2]
	synthZora, synthFlETH              = whales.BaseQuotes[3], whales.BaseQuotes[4]
	nativeETH                          = common.Address{}
)

// synthVenues weights the launches by venue, roughly Base's mix of new
// pools today: most on V4.
var synthVenues = []struct {
	kind   whales.Kind
	weight int
}{{whales.UniswapV4, 50}, {whales.UniswapV3, 12}, {whales.UniswapV2, 10}, {whales.Aerodrome, 10}, {whales.Slipstream, 10}, {whales.PancakeV3, 8}}

func newSynth(cfg synthConfig) *synth {
	s := &synth{cfg: cfg, rng: rand.New(rand.NewSource(cfg.seed)), noise: map[common.Hash]bool{}, factory: map[whales.Kind]common.Address{}}
	for _, f := range whales.BaseFactories {
		if _, seen := s.factory[f.Kind]; !seen {
			s.factory[f.Kind] = f.Address
		}
	}
	s.smart, s.deployer, s.router = s.address(), s.address(), s.address()
	for range cfg.wallets {
		s.crowd = append(s.crowd, s.address())
	}
	return s
}

// build generates the history: launches spread over the window and the
// blocks after it, then the noise.
func (s *synth) build() *synth {
	start, end := s.cfg.pre, s.cfg.pre+s.cfg.window+s.cfg.extra
	for i := range s.cfg.launches {
		created := start + uint64(i)*(end-start)/uint64(s.cfg.launches) + uint64(s.rng.Intn(20))
		s.launch(created, s.pickVenue(), false)
	}
	// Launches created before the window, trading inside it.
	for range s.cfg.launches / 20 {
		s.launch(start-1-uint64(s.rng.Int63n(3_000)), s.pickVenue(), true)
	}
	s.skippedPools(start)
	s.index()
	return s
}

func (s *synth) address() common.Address {
	var a common.Address
	s.rng.Read(a[:])
	return a
}

func (s *synth) pickVenue() whales.Kind {
	n := s.rng.Intn(100)
	for _, v := range synthVenues {
		if n < v.weight {
			return v.kind
		}
		n -= v.weight
	}
	return whales.UniswapV4
}

// quoteFor picks a launch's quote asset as launchpads on its venue do.
func (s *synth) quoteFor(kind whales.Kind) common.Address {
	n := s.rng.Intn(10)
	if kind == whales.UniswapV4 {
		return []common.Address{nativeETH, nativeETH, nativeETH, nativeETH, synthWETH, synthWETH, synthZora, synthZora, synthFlETH, synthUSDC}[n]
	}
	return []common.Address{synthWETH, synthWETH, synthWETH, synthWETH, synthWETH, synthWETH, synthWETH, synthUSDC, synthVirtual, synthVirtual}[n]
}

// tx appends a transaction's logs at block; noise marks it as traffic the
// scan must never be given.
func (s *synth) tx(block uint64, noise bool, logs ...types.Log) {
	logs = slices.DeleteFunc(logs, func(l types.Log) bool { return l.Address == nativeETH }) // native ETH moves log nothing
	s.txs++
	h := crypto.Keccak256Hash(new(big.Int).SetUint64(s.txs).Bytes())
	for i := range logs {
		logs[i].BlockNumber, logs[i].TxHash = block, h
		logs[i].TxIndex, logs[i].Index = uint(s.txs), uint(i) // renumbered by index
	}
	if noise {
		s.noise[h] = true
	}
	s.logs = append(s.logs, logs...)
}

// index numbers the transactions and logs of each block in the order they
// were made.
func (s *synth) index() {
	slices.SortStableFunc(s.logs, func(a, b types.Log) int {
		if c := cmp.Compare(a.BlockNumber, b.BlockNumber); c != 0 {
			return c
		}
		if c := cmp.Compare(a.TxIndex, b.TxIndex); c != 0 {
			return c
		}
		return cmp.Compare(a.Index, b.Index)
	})
	var block uint64
	var idx, txi, lastTx uint
	for i := range s.logs {
		l := &s.logs[i]
		if i == 0 || l.BlockNumber != block {
			block, idx, txi, lastTx = l.BlockNumber, 0, 0, l.TxIndex
		} else if l.TxIndex != lastTx {
			txi, lastTx = txi+1, l.TxIndex
		}
		l.Index, l.TxIndex = idx, txi
		idx++
	}
}

// synthPool is a pool being traded: its venue, sides and reserves.
type synthPool struct {
	kind           whales.Kind
	emitter        common.Address // the pool, or the PoolManager
	id             common.Hash    // a V4 pool's id
	token, quote   common.Address
	tokenIs0       bool
	tokens, quotes float64 // reserves, raw units
	peak           float64 // the highest price (quote per token) so far
	noise          bool
}

func (p *synthPool) price() float64 { return p.quotes / p.tokens }

// order puts (token, quote) amounts in currency order.
func (p *synthPool) order(t, q *big.Int) (a0, a1 *big.Int) {
	if p.tokenIs0 {
		return t, q
	}
	return q, t
}

// launch generates one launch: creation, seed, the smart wallet's entry,
// the crowd, and its fate.
func (s *synth) launch(created uint64, kind whales.Kind, noise bool) {
	quote := s.quoteFor(kind)
	p := &synthPool{kind: kind, token: s.address(), quote: quote, tokens: 1e27, quotes: 5e18, noise: noise}
	p.tokenIs0 = p.token.Cmp(quote) < 0
	p.create(s, created)
	p.addLiquidity(s, created, 1)
	fate := []string{"rug", "rug", "rug", "dump", "dump", "trim", "live", "live", "live", "live"}[s.rng.Intn(10)]
	swaps := 2 + int(s.rng.ExpFloat64()*s.cfg.meanSwaps)
	fateAt := swaps * (3 + s.rng.Intn(5)) / 10
	l := synthLaunch{token: p.token, venue: kind, fate: fate, created: created, pool: p.emitter.Hex()}
	if kind == whales.UniswapV4 {
		l.pool = p.id.Hex()
	}
	block := created + 1
	held := map[common.Address]float64{s.smart: p.buy(s, block, s.smart, p.quotes*0.01)}
	for i := range swaps {
		block += uint64(s.rng.ExpFloat64() * 20)
		if i == fateAt && fate != "live" {
			if fate != "trim" {
				p.sell(s, block, s.smart, held[s.smart], false)
				block += 1 + uint64(s.rng.Intn(3))
			}
			p.fate(s, block, fate)
			if fate == "rug" || fate == "dump" {
				l.collapse = block
				break
			}
			continue
		}
		who := s.crowd[s.rng.Intn(len(s.crowd))]
		if held[who] == 0 || s.rng.Intn(100) < 65 {
			held[who] += p.buy(s, block, who, p.quotes*(0.002+0.018*s.rng.Float64()))
		} else if bag := held[who] * (0.1 + 0.4*s.rng.Float64()); p.sell(s, block, who, bag, true) {
			held[who] -= bag
		}
		if s.rng.Intn(20) == 0 { // a wallet hands some tokens to another
			s.tx(block, true, s.transferLog(p.token, who, s.crowd[s.rng.Intn(len(s.crowd))], big.NewInt(1e18)))
		}
	}
	if !noise {
		s.launches = append(s.launches, l)
	}
}

// skippedPools creates pools the scan must skip in the window: both sides
// quote assets (with heavy traffic) or neither.
func (s *synth) skippedPools(start uint64) {
	kinds := []whales.Kind{whales.UniswapV4, whales.UniswapV3, whales.Aerodrome, whales.UniswapV2, whales.Slipstream, whales.PancakeV3}
	swapsEach := s.cfg.noiseSwaps / max(1, s.cfg.skipped)
	for i := range s.cfg.skipped {
		created := start + uint64(s.rng.Int63n(int64(s.cfg.window)))
		kind := kinds[i%len(kinds)]
		p := &synthPool{kind: kind, token: s.address(), quote: synthUSDC, tokens: 1e21, quotes: 5e21, noise: true}
		if i%2 == 0 { // quote/quote: WETH against USDC, or native ETH on V4
			p.token = synthWETH
			if kind == whales.UniswapV4 {
				p.token, p.quote = nativeETH, synthUSDC
			}
		} else {
			p.quote = s.address() // token/token
		}
		p.tokenIs0 = p.token.Cmp(p.quote) < 0
		p.create(s, created)
		p.addLiquidity(s, created, 1)
		s.skipped = append(s.skipped, created)
		block := created + 1
		for range swapsEach {
			block += uint64(s.rng.ExpFloat64() * float64(s.cfg.window) / float64(swapsEach+1) / 2)
			who := s.crowd[s.rng.Intn(len(s.crowd))]
			if s.rng.Intn(2) == 0 {
				p.buy(s, block, who, p.quotes*0.001)
			} else {
				p.sell(s, block, who, p.tokens*0.001, false)
			}
		}
	}
}

// create emits the pool's creation (and, for a concentrated-liquidity
// pool, its Initialize at the seed price). Creations are never noise: the
// scan reads every venue's to find the pools it follows and skips.
func (p *synthPool) create(s *synth, block uint64) {
	c0, c1 := p.quote, p.token
	if p.tokenIs0 {
		c0, c1 = p.token, p.quote
	}
	factory := s.factory[p.kind]
	switch p.kind {
	case whales.UniswapV2:
		p.emitter = s.address()
		s.tx(block, false, types.Log{Address: factory, Topics: []common.Hash{sigV2Created, hashOf(c0), hashOf(c1)}, Data: words(addrInt(p.emitter), big.NewInt(1))})
	case whales.Aerodrome:
		p.emitter = s.address()
		s.tx(block, false, types.Log{Address: factory, Topics: []common.Hash{sigAeroCreated, hashOf(c0), hashOf(c1), {}}, Data: words(addrInt(p.emitter), big.NewInt(1))})
	case whales.UniswapV3, whales.PancakeV3, whales.Slipstream:
		p.emitter = s.address()
		created := types.Log{Address: factory, Topics: []common.Hash{sigV3Created, hashOf(c0), hashOf(c1), common.BigToHash(big.NewInt(10000))},
			Data: words(big.NewInt(200), addrInt(p.emitter))}
		if p.kind == whales.Slipstream {
			created = types.Log{Address: factory, Topics: []common.Hash{sigSlipCreated, hashOf(c0), hashOf(c1), common.BigToHash(big.NewInt(200))},
				Data: words(addrInt(p.emitter))}
		}
		s.tx(block, false, created)
		s.tx(block, p.noise, types.Log{Address: p.emitter, Topics: []common.Hash{sigCLInitialize}, Data: words(p.sqrtX96(), p.tick())})
	case whales.UniswapV4:
		p.emitter = factory
		p.id = crypto.Keccak256Hash(c0[:], c1[:], new(big.Int).SetUint64(block).Bytes())
		s.tx(block, false, types.Log{Address: factory, Topics: []common.Hash{sigV4Initialize, p.id, hashOf(c0), hashOf(c1)},
			Data: words(big.NewInt(10000), big.NewInt(200), new(big.Int), p.sqrtX96(), p.tick())})
	}
}

// Full-range ticks for a tick spacing of 200.
const synthTickLower, synthTickUpper = -887200, 887200

// addLiquidity adds (share > 0) or removes (share < 0) that share of the
// pool's reserves as the deployer.
func (p *synthPool) addLiquidity(s *synth, block uint64, share float64) {
	t, q := floatInt(p.tokens*math.Abs(share)), floatInt(p.quotes*math.Abs(share))
	liquidity := floatInt(math.Sqrt(p.tokens*p.quotes) * math.Abs(share))
	a0, a1 := p.order(t, q)
	var logs []types.Log
	if share > 0 {
		logs = append(logs, s.transferLog(p.token, s.deployer, p.emitter, t))
	} else {
		logs = append(logs, s.transferLog(p.token, p.emitter, s.deployer, t))
		p.tokens, p.quotes = p.tokens*(1+share), p.quotes*(1+share)
	}
	switch p.kind {
	case whales.UniswapV2, whales.Aerodrome:
		r0, r1 := p.order(floatInt(p.tokens), floatInt(p.quotes))
		sync := types.Log{Address: p.emitter, Topics: []common.Hash{sigV2Sync}, Data: words(r0, r1)}
		if p.kind == whales.Aerodrome {
			sync.Topics[0] = sigAeroSync
		}
		logs = append(logs, sync)
		switch {
		case share > 0:
			logs = append(logs, types.Log{Address: p.emitter, Topics: []common.Hash{sigV2Mint, hashOf(s.router)}, Data: words(a0, a1)})
		case p.kind == whales.UniswapV2:
			logs = append(logs, types.Log{Address: p.emitter, Topics: []common.Hash{sigV2Burn, hashOf(s.router), hashOf(s.deployer)}, Data: words(a0, a1)})
		default:
			logs = append(logs, types.Log{Address: p.emitter, Topics: []common.Hash{sigAeroBurn, hashOf(s.router), hashOf(s.deployer)}, Data: words(a0, a1)})
		}
	case whales.UniswapV4:
		delta := liquidity
		if share < 0 {
			delta = new(big.Int).Neg(liquidity)
		}
		logs = append(logs, types.Log{Address: p.emitter, Topics: []common.Hash{sigV4Modify, p.id, hashOf(s.router)},
			Data: words(big.NewInt(synthTickLower), big.NewInt(synthTickUpper), delta, new(big.Int))})
	default:
		ticks := []common.Hash{common.BigToHash(twos(big.NewInt(synthTickLower))), common.BigToHash(big.NewInt(synthTickUpper))}
		if share > 0 {
			logs = append(logs, types.Log{Address: p.emitter, Topics: append([]common.Hash{sigCLMint, hashOf(s.deployer)}, ticks...),
				Data: words(addrInt(s.router), liquidity, a0, a1)})
		} else {
			logs = append(logs, types.Log{Address: p.emitter, Topics: append([]common.Hash{sigCLBurn, hashOf(s.deployer)}, ticks...),
				Data: words(liquidity, a0, a1)})
		}
	}
	s.tx(block, p.noise, logs...)
}

// buy trades quoteIn for tokens at constant product and returns the
// tokens bought.
func (p *synthPool) buy(s *synth, block uint64, who common.Address, quoteIn float64) float64 {
	out := p.tokens * quoteIn / (p.quotes + quoteIn)
	p.trade(s, block, who, -out, quoteIn)
	return out
}

// sell trades tokens for quote at constant product. A guarded sale that
// would take the price under half its peak is not made (false): only a
// launch's fate collapses it.
func (p *synthPool) sell(s *synth, block uint64, who common.Address, tokens float64, guarded bool) bool {
	out := p.quotes * tokens / (p.tokens + tokens)
	if guarded && (p.quotes-out)/(p.tokens+tokens) < p.peak/2 {
		return false
	}
	p.trade(s, block, who, tokens, -out)
	return true
}

// trade moves dt tokens and dq quote into the pool as who's swap.
func (p *synthPool) trade(s *synth, block uint64, who common.Address, dt, dq float64) {
	p.tokens, p.quotes = p.tokens+dt, p.quotes+dq
	p.peak = max(p.peak, p.price())
	s.swaps++
	s.tx(block, p.noise, p.swapLogs(s, who, floatInt(dt), floatInt(dq))...)
}

// fate plays a launch's end.
func (p *synthPool) fate(s *synth, block uint64, fate string) {
	switch fate {
	case "rug":
		p.addLiquidity(s, block, -1)
	case "trim":
		p.addLiquidity(s, block, -0.1)
	case "dump":
		p.sell(s, block, s.deployer, p.tokens*20, false)
	}
}

// swapLogs are one swap's logs on the pool's venue: the token's transfer
// and the venue's Swap (and Sync); dt and dq flow into the pool.
func (p *synthPool) swapLogs(s *synth, who common.Address, dt, dq *big.Int) []types.Log {
	move := s.transferLog(p.token, who, p.emitter, dt)
	if dt.Sign() < 0 {
		move = s.transferLog(p.token, p.emitter, who, new(big.Int).Neg(dt))
	}
	recipient := s.router
	if dt.Sign() < 0 {
		recipient = who
	}
	d0, d1 := p.order(dt, dq)
	switch p.kind {
	case whales.UniswapV2, whales.Aerodrome:
		in0, in1, out0, out1 := pos(d0), pos(d1), pos(new(big.Int).Neg(d0)), pos(new(big.Int).Neg(d1))
		r0, r1 := p.order(floatInt(p.tokens), floatInt(p.quotes))
		if p.kind == whales.UniswapV2 {
			return []types.Log{move,
				{Address: p.emitter, Topics: []common.Hash{sigV2Sync}, Data: words(r0, r1)},
				{Address: p.emitter, Topics: []common.Hash{sigV2Swap, hashOf(s.router), hashOf(recipient)}, Data: words(in0, in1, out0, out1)}}
		}
		return []types.Log{move,
			{Address: p.emitter, Topics: []common.Hash{sigAeroSync}, Data: words(r0, r1)},
			{Address: p.emitter, Topics: []common.Hash{sigAeroSwap, hashOf(s.router), hashOf(recipient)}, Data: words(in0, in1, out0, out1)}}
	case whales.UniswapV4:
		n0, n1 := new(big.Int).Neg(d0), new(big.Int).Neg(d1) // the swapper's side
		return []types.Log{move, {Address: p.emitter, Topics: []common.Hash{sigV4Swap, p.id, hashOf(s.router)},
			Data: words(n0, n1, p.sqrtX96(), p.liquidity(), p.tick(), big.NewInt(10000))}}
	case whales.PancakeV3:
		return []types.Log{move, {Address: p.emitter, Topics: []common.Hash{sigPancakeSwap, hashOf(s.router), hashOf(recipient)},
			Data: words(d0, d1, p.sqrtX96(), p.liquidity(), p.tick(), new(big.Int), new(big.Int))}}
	default:
		return []types.Log{move, {Address: p.emitter, Topics: []common.Hash{sigCLSwap, hashOf(s.router), hashOf(recipient)},
			Data: words(d0, d1, p.sqrtX96(), p.liquidity(), p.tick())}}
	}
}

// sqrtX96 is the pool's square-root price (currency1 per currency0) in
// Q64.96.
func (p *synthPool) sqrtX96() *big.Int {
	r := p.tokens / p.quotes
	if p.tokenIs0 {
		r = 1 / r
	}
	f := new(big.Float).Mul(big.NewFloat(math.Sqrt(r)), new(big.Float).SetInt(new(big.Int).Lsh(big.NewInt(1), 96)))
	out, _ := f.Int(nil)
	return out
}

func (p *synthPool) tick() *big.Int {
	r := p.tokens / p.quotes
	if p.tokenIs0 {
		r = 1 / r
	}
	return big.NewInt(int64(math.Floor(math.Log(r) / math.Log(1.0001))))
}

func (p *synthPool) liquidity() *big.Int { return floatInt(math.Sqrt(p.tokens * p.quotes)) }

func (s *synth) transferLog(token, from, to common.Address, amount *big.Int) types.Log {
	return types.Log{Address: token, Topics: []common.Hash{sigTransfer, hashOf(from), hashOf(to)}, Data: words(amount)}
}

func hashOf(a common.Address) common.Hash { return common.BytesToHash(a[:]) }

func addrInt(a common.Address) *big.Int { return new(big.Int).SetBytes(a[:]) }

// twos is x as a 256-bit two's-complement word.
func twos(x *big.Int) *big.Int {
	if x.Sign() < 0 {
		return new(big.Int).Add(x, new(big.Int).Lsh(big.NewInt(1), 256))
	}
	return x
}

// words ABI-encodes signed integers as 32-byte words.
func words(vals ...*big.Int) []byte {
	out := make([]byte, 0, 32*len(vals))
	for _, v := range vals {
		var w [32]byte
		twos(v).FillBytes(w[:])
		out = append(out, w[:]...)
	}
	return out
}

func floatInt(f float64) *big.Int {
	out, _ := big.NewFloat(math.Trunc(f)).Int(nil)
	return out
}

func pos(x *big.Int) *big.Int {
	if x.Sign() < 0 {
		return new(big.Int)
	}
	return x
}
