package liquidity_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/service/chain"
	"github.com/tollgate/tollgate/service/liquidity"
	"github.com/tollgate/tollgate/service/whales"
)

// fakeNode answers Read from function fields: logs by query, calls by
// callee and calldata (a nil answer and nil error: empty return data, as
// an account without code gives).
type fakeNode struct {
	time uint64
	logs func(q chain.LogQuery) []types.Log
	call func(to common.Address, data []byte) ([]byte, error)
	// blockLogs answers a batch's eth_getLogs (nil: none).
	blockLogs func(filter map[string]any) []types.Log
}

func (f *fakeNode) Logs(_ context.Context, q chain.LogQuery) ([]types.Log, error) {
	return f.logs(q), nil
}

func (f *fakeNode) Batch(_ context.Context, elems []rpc.BatchElem) error {
	for i := range elems {
		e := &elems[i]
		switch e.Method {
		case "eth_getBlockByNumber":
			raw, _ := json.Marshal(map[string]any{"number": e.Args[0], "timestamp": hexutil.Uint64(f.time)})
			if err := json.Unmarshal(raw, e.Result); err != nil {
				return err
			}
		case "eth_call":
			arg := e.Args[0].(map[string]any)
			ret, err := f.call(arg["to"].(common.Address), arg["data"].(hexutil.Bytes))
			if err != nil {
				e.Error = err
				continue
			}
			*e.Result.(*hexutil.Bytes) = ret
		case "eth_getLogs":
			if f.blockLogs == nil {
				e.Error = errors.New("no block logs faked")
				continue
			}
			*e.Result.(*[]types.Log) = f.blockLogs(e.Args[0].(map[string]any))
		default:
			e.Error = errors.New("not faked: " + e.Method)
		}
	}
	return nil
}

func lockerNamed(t *testing.T, name string) common.Address {
	t.Helper()
	for a, n := range liquidity.Lockers() {
		if n == name {
			return a
		}
	}
	t.Fatalf("no locker %q in %v", name, liquidity.Lockers())
	return common.Address{}
}

func words(xs ...any) []byte {
	var out []byte
	for _, x := range xs {
		var w [32]byte
		switch v := x.(type) {
		case common.Address:
			copy(w[12:], v[:])
		case int64:
			big.NewInt(v).FillBytes(w[:])
		case *big.Int:
			v.FillBytes(w[:])
		}
		out = append(out, w[:]...)
	}
	return out
}

func selector(sig string) []byte { return crypto.Keccak256([]byte(sig))[:4] }

// pinkLocks encodes PinkLock V2's getLocksForToken answer.
func pinkLocks(t *testing.T, locks ...[]any) []byte {
	t.Helper()
	typ, err := abi.NewType("tuple[]", "", []abi.ArgumentMarshaling{
		{Name: "id", Type: "uint256"}, {Name: "token", Type: "address"}, {Name: "owner", Type: "address"},
		{Name: "amount", Type: "uint256"}, {Name: "lockDate", Type: "uint256"}, {Name: "tgeDate", Type: "uint256"},
		{Name: "tgeBps", Type: "uint256"}, {Name: "cycle", Type: "uint256"}, {Name: "cycleBps", Type: "uint256"},
		{Name: "unlockedAmount", Type: "uint256"}, {Name: "description", Type: "string"}})
	if err != nil {
		t.Fatal(err)
	}
	type lock struct {
		Id                                                                 *big.Int //nolint:revive // the ABI's name
		Token, Owner                                                       common.Address
		Amount, LockDate, TgeDate, TgeBps, Cycle, CycleBps, UnlockedAmount *big.Int
		Description                                                        string
	}
	var ls []lock
	for _, l := range locks {
		b := func(i int) *big.Int { return big.NewInt(l[i].(int64)) }
		ls = append(ls, lock{b(0), l[1].(common.Address), l[2].(common.Address), b(3), b(4), b(5), b(6), b(7), b(8), b(9), l[10].(string)})
	}
	out, err := abi.Arguments{{Type: typ}}.Pack(ls)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRecognisedLockers reads a V2 pair whose LP tokens the deployer put
// in UNCX's V2 locker and PinkLock, from a fake node answering as those
// contracts do: each lock's share and release time, the locker's balance
// beyond the locks found locked until an unknown time, a lock past its
// time counted as other.
func TestRecognisedLockers(t *testing.T) {
	t.Parallel()
	uncx, pink := lockerNamed(t, "UNCX Uniswap V2 locker"), lockerNamed(t, "PinkLock V2")
	token := common.HexToAddress("0x1000000000000000000000000000000000000001")
	weth := common.HexToAddress("0x4200000000000000000000000000000000000006")
	pair := common.HexToAddress("0x2000000000000000000000000000000000000002")
	deployer := common.HexToAddress("0x3000000000000000000000000000000000000003")
	const now, later, earlier = 1_800_000_000, 1_900_000_000, 1_700_000_000
	transfer := crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))
	mint := crypto.Keccak256Hash([]byte("Mint(address,uint256,uint256)"))
	lp := func(from, to common.Address, v int64) types.Log {
		return types.Log{Address: pair, BlockNumber: 10, Topics: []common.Hash{transfer, common.BytesToHash(from[:]), common.BytesToHash(to[:])}, Data: words(v)}
	}

	for _, tc := range []struct {
		name string
		// uncxLocks answers getUserLockForTokenAtIndex(deployer, pair, i).
		uncxLocks [][]byte
		pinkTGE   int64
		want      shares
		wantLocks []liquidity.Lock
	}{
		{"every lock found", [][]byte{words(pair, int64(1), int64(400_000), int64(400_000), int64(later), int64(7), deployer, int64(0)),
			words(pair, int64(1), int64(200_000), int64(200_000), int64(later+1), int64(9), deployer, int64(0))}, later,
			shares{Locked: 0.9, Deployer: 0.1},
			[]liquidity.Lock{{Locker: uncx, Share: 0.4, Until: later}, {Locker: uncx, Share: 0.2, Until: later + 1}, {Locker: pink, Share: 0.3, Until: later}}},
		{"a lock not found, a lock expired", [][]byte{words(pair, int64(1), int64(500_000), int64(500_000), int64(later), int64(7), deployer, int64(0))}, earlier,
			shares{Locked: 0.6, Deployer: 0.1, Other: 0.3},
			[]liquidity.Lock{{Locker: uncx, Share: 0.5, Until: later}, {Locker: uncx, Share: 0.1}, {Locker: pink, Share: 0.3, Until: earlier, Expired: true}}},
		{"the first version's locks", [][]byte{words(int64(1), int64(600_000), int64(600_000), int64(later), int64(7), deployer)}, later,
			shares{Locked: 0.9, Deployer: 0.1},
			[]liquidity.Lock{{Locker: uncx, Share: 0.6, Until: later}, {Locker: pink, Share: 0.3, Until: later}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			balances := map[common.Address]int64{{}: 1000, deployer: 100_000, uncx: 600_000, pink: 300_000}
			node := &fakeNode{time: now,
				logs: func(q chain.LogQuery) []types.Log {
					return []types.Log{
						{Address: pair, BlockNumber: 10, Topics: []common.Hash{mint, common.BytesToHash(deployer[:])}, Data: words(int64(5e18), int64(1e9))},
						lp(common.Address{}, common.Address{}, 1000), lp(common.Address{}, deployer, 1_000_000),
						lp(deployer, uncx, 600_000), lp(deployer, pink, 300_000)}
				},
				call: func(to common.Address, data []byte) ([]byte, error) {
					sel, args := data[:4], data[4:]
					switch {
					case to == pair && bytes.Equal(sel, selector("totalSupply()")):
						return words(int64(1_001_000)), nil
					case to == pair && bytes.Equal(sel, selector("getReserves()")):
						return words(int64(5e18), int64(1e9), int64(now)), nil
					case to == pair && bytes.Equal(sel, selector("balanceOf(address)")):
						return words(balances[common.BytesToAddress(args)]), nil
					case to == uncx && bytes.Equal(sel, selector("getUserLockForTokenAtIndex(address,address,uint256)")):
						i := new(big.Int).SetBytes(args[64:96]).Int64()
						if common.BytesToAddress(args[:32]) != deployer || common.BytesToAddress(args[32:64]) != pair || i >= int64(len(tc.uncxLocks)) {
							return nil, errors.New("execution reverted: EnumerableSet: index out of bounds")
						}
						return tc.uncxLocks[i], nil
					case to == pink && bytes.Equal(sel, selector("getLocksForToken(address,uint256,uint256)")):
						return pinkLocks(t, []any{int64(1), weth, deployer, int64(50), int64(1), int64(later), int64(0), int64(0), int64(0), int64(0), "another token"},
							[]any{int64(2), pair, deployer, int64(300_000), int64(1), tc.pinkTGE, int64(0), int64(0), int64(0), int64(0), "team LP"}), nil
					}
					return nil, errors.New("execution reverted")
				}}
			got, err := liquidity.Read(context.Background(), node, liquidity.Input{Token: token, Block: 100, Deployer: &deployer,
				Pools: []liquidity.Pool{{ID: pair.Hex(), Venue: whales.UniswapV2, Holder: pair, Quote: weth, Created: 10}}})
			if err != nil {
				t.Fatal(err)
			}
			p := got[0]
			if !sharesOf(p).near(tc.want, 1e-12) || len(p.Unread) != 0 {
				t.Errorf("shares %+v, want %+v (unread %q)", sharesOf(p), tc.want, p.Unread)
			}
			// The token sorts before WETH: the quote is the pair's token1.
			if p.QuoteReserve.Int64() != 1e9 || p.QuoteAtCreation.Int64() != 1e9 || p.QuoteRemoved.Sign() != 0 || p.Time != now {
				t.Errorf("reserve %v, at creation %v, removed %v, time %d", p.QuoteReserve, p.QuoteAtCreation, p.QuoteRemoved, p.Time)
			}
			names := liquidity.Lockers()
			var wantLocks []string
			for _, l := range tc.wantLocks {
				l.Name, l.Recognised = names[l.Locker], true
				wantLocks = append(wantLocks, lockString(l))
			}
			var gotLocks []string
			for _, l := range p.Locks {
				gotLocks = append(gotLocks, lockString(l))
			}
			if strings.Join(gotLocks, "\n") != strings.Join(wantLocks, "\n") {
				t.Errorf("locks\n%s\nwant\n%s", strings.Join(gotLocks, "\n"), strings.Join(wantLocks, "\n"))
			}
		})
	}
}

func lockString(l liquidity.Lock) string {
	raw, _ := json.Marshal(struct {
		liquidity.Lock
		Share string
	}{l, big.NewFloat(l.Share).Text('g', 9)})
	return string(raw)
}

// TestRecognisedV3Locker reads a Uniswap V3 pool whose one position is
// an NFT the deployer locked in UNCX's V3 locker, from a fake node: the
// Mint names the position manager, its IncreaseLiquidity in the Mint's
// block the NFT, the NFT's Transfer logs the locker, and the locker's
// lock of the deployer its unlock date.
func TestRecognisedV3Locker(t *testing.T) {
	t.Parallel()
	locker := lockerNamed(t, "UNCX Uniswap V3 locker")
	token := common.HexToAddress("0x1000000000000000000000000000000000000001")
	weth := common.HexToAddress("0x4200000000000000000000000000000000000006")
	pool := common.HexToAddress("0x2000000000000000000000000000000000000002")
	deployer := common.HexToAddress("0x3000000000000000000000000000000000000003")
	npm := common.HexToAddress("0x03a520b32C04BF3bEEf7BEb72E919cf822Ed34f1")
	const now, later = 1_800_000_000, 1_900_000_000
	blockHash, tx := common.HexToHash("0xb10c"), common.HexToHash("0x7e")
	id := big.NewInt(4242)
	L, a0, a1 := big.NewInt(1_000_000), big.NewInt(5_000_000), big.NewInt(7_000)
	tickWord := func(t int64) common.Hash { return common.BigToHash(new(big.Int).And(big.NewInt(t), abi.MaxUint256)) }
	var sqrtP [32]byte
	new(big.Int).Lsh(big.NewInt(1), 96).FillBytes(sqrtP[:]) // price 1
	node := &fakeNode{time: now,
		logs: func(q chain.LogQuery) []types.Log {
			if q.Topics[0][0] == crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)")) {
				return []types.Log{{Address: npm, BlockNumber: 12, Topics: []common.Hash{q.Topics[0][0],
					common.BytesToHash(deployer[:]), common.BytesToHash(locker[:]), common.BigToHash(id)}}}
			}
			return []types.Log{{Address: pool, BlockNumber: 11, BlockHash: blockHash, TxHash: tx,
				Topics: []common.Hash{crypto.Keccak256Hash([]byte("Mint(address,address,int24,int24,uint128,uint256,uint256)")),
					common.BytesToHash(npm[:]), tickWord(-887220), tickWord(887220)},
				Data: words(npm, L, a0, a1)}}
		},
		blockLogs: func(filter map[string]any) []types.Log {
			if filter["blockHash"] != blockHash {
				return nil
			}
			return []types.Log{{Address: npm, BlockHash: blockHash, TxHash: tx,
				Topics: []common.Hash{crypto.Keccak256Hash([]byte("IncreaseLiquidity(uint256,uint128,uint256,uint256)")), common.BigToHash(id)},
				Data:   words(L, a0, a1)}}
		},
		call: func(to common.Address, data []byte) ([]byte, error) {
			sel, args := data[:4], data[4:]
			switch {
			case to == pool && bytes.Equal(sel, selector("slot0()")):
				return append(sqrtP[:], make([]byte, 6*32)...), nil
			case to == weth && bytes.Equal(sel, selector("balanceOf(address)")) && common.BytesToAddress(args) == pool:
				return words(a1), nil
			case to == npm && bytes.Equal(sel, selector("ownerOf(uint256)")) && new(big.Int).SetBytes(args).Cmp(id) == 0:
				return words(locker), nil
			case to == npm && bytes.Equal(sel, selector("positions(uint256)")) && new(big.Int).SetBytes(args).Cmp(id) == 0:
				pos := words(int64(0), common.Address{}, token, weth, int64(3000))
				pos = append(pos, tickWord(-887220).Bytes()...)
				pos = append(pos, tickWord(887220).Bytes()...)
				return append(pos, words(L, int64(0), int64(0), int64(0), int64(0))...), nil
			case to == locker && bytes.Equal(sel, selector("getUserLockAtIndex(address,uint256)")):
				if common.BytesToAddress(args[:32]) != deployer || new(big.Int).SetBytes(args[32:]).Sign() != 0 {
					return nil, errors.New("execution reverted")
				}
				return words(int64(77), npm, pool, id, deployer, common.Address{}, common.Address{}, deployer, int64(later), int64(0), int64(0)), nil
			}
			return nil, errors.New("execution reverted")
		}}
	got, err := liquidity.Read(context.Background(), node, liquidity.Input{Token: token, Block: 100, Deployer: &deployer,
		Pools: []liquidity.Pool{{ID: pool.Hex(), Venue: whales.UniswapV3, Holder: pool, Quote: weth, Created: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	p := got[0]
	if !sharesOf(p).near(shares{Locked: 1}, 1e-12) || len(p.Unread) != 0 {
		t.Errorf("shares %+v, want all locked (unread %q)", sharesOf(p), p.Unread)
	}
	want := liquidity.Lock{Locker: locker, Name: "UNCX Uniswap V3 locker", Recognised: true, Share: 1, Until: later}
	if len(p.Locks) != 1 || lockString(p.Locks[0]) != lockString(want) {
		t.Errorf("locks %+v, want %+v", p.Locks, want)
	}
	if p.QuoteAtCreation.Cmp(a1) != 0 || p.QuoteReserve.Cmp(a1) != 0 || p.QuoteRemoved.Sign() != 0 {
		t.Errorf("at creation %v, reserve %v, removed %v", p.QuoteAtCreation, p.QuoteReserve, p.QuoteRemoved)
	}
}

// TestReadEdges: a node that fails a pool's own call fails the Read
// (chain.ErrUnavailable, not an answer missing its shares); a pool Read
// cannot read is said so.
func TestReadEdges(t *testing.T) {
	t.Parallel()
	token := common.HexToAddress("0x1000000000000000000000000000000000000001")
	weth := common.HexToAddress("0x4200000000000000000000000000000000000006")
	pair := common.HexToAddress("0x2000000000000000000000000000000000000002")
	for _, tc := range []struct {
		name       string
		pool       liquidity.Pool
		call       func(to common.Address, data []byte) ([]byte, error)
		wantErr    error
		wantUnread string
	}{
		{"the node fails the pair's supply", liquidity.Pool{ID: pair.Hex(), Venue: whales.UniswapV2, Holder: pair, Quote: weth, Created: 10},
			func(common.Address, []byte) ([]byte, error) { return nil, errors.New("missing trie node") }, chain.ErrUnavailable, ""},
		{"a venue not read", liquidity.Pool{ID: pair.Hex(), Venue: "curve", Holder: pair, Quote: weth, Created: 10},
			nil, nil, `venue "curve" is not read`},
		{"a pool created after the block", liquidity.Pool{ID: pair.Hex(), Venue: whales.UniswapV2, Holder: pair, Quote: weth, Created: 101},
			nil, nil, "created after the block read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			node := &fakeNode{time: 1, logs: func(chain.LogQuery) []types.Log { return nil }, call: tc.call}
			got, err := liquidity.Read(context.Background(), node, liquidity.Input{Token: token, Block: 100, Pools: []liquidity.Pool{tc.pool}})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || len(got[0].Unread) != 1 || !strings.Contains(got[0].Unread[0], tc.wantUnread) || sharesOf(got[0]) != (shares{}) {
				t.Errorf("answer %+v, want unread %q", got, tc.wantUnread)
			}
		})
	}
}
