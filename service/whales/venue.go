package whales

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// Kind is a venue: a DEX whose pools the scan follows, named in
// --dex-factories as kind:address.
type Kind string

// The venues (docs/rules.md, "Venues"). Each is one venue value
// registered in venues; the scan and the rules know none of them.
const (
	// UniswapV2 is Uniswap V2 and the forks that keep its events
	// (PairCreated, Swap, Sync, Burn).
	UniswapV2 Kind = "v2"
	// Aerodrome is Aerodrome's classic pools (V2 economics, own
	// signatures).
	Aerodrome Kind = "aerodrome"
	// UniswapV3 is Uniswap V3 (concentrated liquidity).
	UniswapV3 Kind = "v3"
	// PancakeV3 is PancakeSwap V3: Uniswap V3's factory events, a Swap
	// with two more fields.
	PancakeV3 Kind = "pancakev3"
	// Slipstream is Aerodrome Slipstream: concentrated liquidity, its
	// factories keyed by tick spacing.
	Slipstream Kind = "slipstream"
	// UniswapV4 is Uniswap V4: every pool lives in one PoolManager,
	// named by its pool id.
	UniswapV4 Kind = "v4"
)

// venue is one venue kind: how its pools are found and how its logs
// decode into the scan's events. Adding a venue is one file with one
// venue value and its line in venues.
type venue interface {
	// creationTopic is the topic0 of the log announcing a pool, emitted
	// by the venue's factory (or singleton).
	creationTopic() common.Hash
	// created decodes a creation log from factory.
	created(factory common.Address, l types.Log) (creation, error)
	// eventTopics are the topic0s of the pool logs decode reads.
	eventTopics() []common.Hash
	// singleton: the venue's pools live in one contract (the factory
	// address), which emits their logs with the pool id as topic1 and
	// holds their tokens; otherwise each pool is its own contract.
	singleton() bool
	// decode reduces one pool log to events. tx is the token's transfers
	// into (and, for a singleton, out of) the pool's holder in the log's
	// transaction, which name buyers and sellers.
	decode(l types.Log, p *pool, tx []types.Log) ([]event, error)
}

// venues registers every venue by kind.
var venues = map[Kind]venue{
	UniswapV2:  v2Venue{v2Dialect},
	Aerodrome:  v2Venue{aeroDialect},
	UniswapV3:  clVenue{uniswapV3Dialect},
	PancakeV3:  clVenue{pancakeV3Dialect},
	Slipstream: clVenue{slipstreamDialect},
	UniswapV4:  v4Venue{},
}

// Kinds lists the venue kinds, for flags and errors.
func Kinds() []Kind {
	return []Kind{UniswapV2, UniswapV3, UniswapV4, Aerodrome, Slipstream, PancakeV3}
}

// ParseFactory reads one kind:address of --dex-factories: a known kind
// and a 0x-prefixed 20-byte hex address.
func ParseFactory(s string) (Factory, error) {
	kind, addr, ok := strings.Cut(s, ":")
	switch {
	case !ok:
		return Factory{}, fmt.Errorf("%q: want kind:address", s)
	case venues[Kind(kind)] == nil:
		return Factory{}, fmt.Errorf("%q: unknown kind %q (one of %v)", s, kind, Kinds())
	case len(addr) != 42 || !strings.HasPrefix(addr, "0x") || !common.IsHexAddress(addr):
		return Factory{}, fmt.Errorf("%q: %q is not a 0x-prefixed 20-byte hex address", s, addr)
	}
	return Factory{Address: common.HexToAddress(addr), Kind: Kind(kind)}, nil
}

// poolRef names a followed pool: the contract that emits its logs and,
// for a pool inside a singleton (Uniswap V4), its id there.
type poolRef struct {
	emitter common.Address
	id      common.Hash // zero: the pool is the emitter
}

// String is the pool as reported: its address, or its V4 pool id.
func (r poolRef) String() string {
	if r.id != (common.Hash{}) {
		return r.id.Hex()
	}
	return r.emitter.Hex()
}

// holder is where the pool's tokens sit: the pool, or the singleton.
func (r poolRef) holder() common.Address { return r.emitter }

// creation is a pool as its creation log announces it.
type creation struct {
	ref                  poolRef
	currency0, currency1 common.Address
	// hooks is a V4 pool's hook contract (zero: none, or not V4).
	hooks common.Address
	// sqrtPrice is the pool's square-root price at creation (token1 per
	// token0) when the log carries it (V4's Initialize); 0: not carried.
	sqrtPrice float64
}

// event is a pool log reduced to what the rules read; one log may give
// several (a concentrated-liquidity removal moves the reserve and is
// judged as a removal).
type event struct {
	kind eventKind
	// swaps: token and quote amounts into (positive) or out of
	// (negative) the pool, raw units; the wallet that bought (tokens
	// out) or sold (tokens in), zero when no wallet can be named.
	tokenDelta, quoteDelta *big.Int
	buyer, seller          common.Address
	// price is quote per token after the event (raw units), 0 if unknown.
	price float64
	// quote: evReserve sets the quote reserve to it; evReserveDelta adds
	// it; evRemove is a liquidity removal of that much quote, judged
	// against the reserve left after it.
	quote *big.Int
}

type eventKind int

const (
	evSwap         eventKind = iota + 1
	evPrice                  // a price with no trade (a pool's creation)
	evReserve                // the quote reserve as the pool reports it
	evReserveDelta           // quote added to (or taken from) the reserve
	evRemove                 // a liquidity removal
)

func topic(sig string) common.Hash { return crypto.Keccak256Hash([]byte(sig)) }

var topicTransfer = topic("Transfer(address,address,uint256)")

// dataWords reads a log's data as 32-byte words, checking there are n and
// that the log has at least topics topics.
func dataWords(l types.Log, n, topics int) (func(i int) *big.Int, error) {
	if len(l.Data) < 32*n || len(l.Topics) < topics {
		return nil, fmt.Errorf("log %s: %d data bytes, %d topics", l.Topics[0], len(l.Data), len(l.Topics))
	}
	return func(i int) *big.Int { return new(big.Int).SetBytes(l.Data[32*i : 32*i+32]) }, nil
}

// signed reads a 256-bit two's-complement word.
func signed(x *big.Int) *big.Int {
	if x.Bit(255) == 1 {
		return x.Sub(x, new(big.Int).Lsh(big.NewInt(1), 256))
	}
	return x
}

// topicAddress is an address in an indexed topic.
func topicAddress(h common.Hash) common.Address { return common.BytesToAddress(h[:]) }
