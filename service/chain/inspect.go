package chain

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/service/bytecode"
)

// Storage slots of the proxy standards (EIP-1967, EIP-1822).
var (
	SlotImplementation = common.HexToHash("0x360894a13ba1a3210667c828492db98dca3e2076cc3735a920a3ca505d382bbc")
	SlotAdmin          = common.HexToHash("0xb53127684a568b3173ae13b9f8a6016e243e63b6e8ee1178d6a717850b5d6103")
	SlotBeacon         = common.HexToHash("0xa3f0ad74e5423aebfd80d3ef4346578335a9a72aeaee59ff6cb3582b35133d50")
	SlotProxiable      = common.HexToHash("0xc5f16f0fcc639fa48a6947836d9850f504798523bf8c9a3a87d5876cf622bcf7")
	TopicTransfer      = common.HexToHash("0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef")
)

// ErrNoCode means the address holds no contract (an EOA, or nothing).
var ErrNoCode = errors.New("chain: no contract code at the address")

// Contract is what an address holds, read in at most three round trips.
type Contract struct {
	Address  common.Address
	Head     uint64
	Code     []byte
	CodeHash common.Hash
	// Delegate is set for an EIP-7702 delegated account (code 0xef0100||addr).
	Delegate *common.Address
	// Proxy facts: Kind is "eip1967", "eip1967-beacon", "eip1822", "eip1167"
	// or "erc7511"; empty when not a proxy.
	ProxyKind          string
	Implementation     common.Address
	ImplementationCode []byte
	Beacon, Admin      *common.Address
	// Metadata; nil where the call reverted or returned nothing usable.
	Name, Symbol *string
	Decimals     *uint8
	TotalSupply  *big.Int
	// Owner from owner() or getOwner() (OwnerSource), nil when neither answers.
	Owner       *common.Address
	OwnerSource string
	// Transfers are the Transfer logs of the last WindowBlocks blocks.
	WindowBlocks uint64
	Transfers    []Transfer
}

// Transfer is an ERC-20 Transfer event.
type Transfer struct {
	From, To common.Address
	Block    uint64
}

var selectors = map[string][]byte{
	"owner":          crypto.Keccak256([]byte("owner()"))[:4],
	"getOwner":       crypto.Keccak256([]byte("getOwner()"))[:4],
	"name":           crypto.Keccak256([]byte("name()"))[:4],
	"symbol":         crypto.Keccak256([]byte("symbol()"))[:4],
	"decimals":       crypto.Keccak256([]byte("decimals()"))[:4],
	"totalSupply":    crypto.Keccak256([]byte("totalSupply()"))[:4],
	"implementation": crypto.Keccak256([]byte("implementation()"))[:4],
}

func callArg(to common.Address, data []byte) map[string]any {
	return map[string]any{"to": to, "data": hexutil.Bytes(data)}
}

// Inspect reads addr: head, code, proxy slots, owner and metadata in one
// batch; the implementation's code and the recent Transfer logs in a
// second; a beacon's implementation code, if any, in a third.
//
// When the client has seen the chain's head before, the logs are asked in
// parallel with the first batch, from a little before that head's window
// to "latest", and trimmed to the exact window once the head is known:
// a plain token then costs one round trip of latency.
func (c *Client) Inspect(ctx context.Context, addr common.Address, window uint64) (*Contract, error) {
	k := &Contract{Address: addr, WindowBlocks: window}
	type specResult struct {
		from uint64
		logs []types.Log
		err  error
	}
	var spec chan specResult
	if hint := c.headHint.Load(); hint > 0 {
		spec = make(chan specResult, 1)
		from := uint64(0)
		if hint > window {
			from = hint - window + 1
		}
		go func() {
			var logs []types.Log
			arg := filterArg(from, 0, LogQuery{Addresses: []common.Address{addr}, Topics: [][]common.Hash{{TopicTransfer}}})
			arg["toBlock"] = "latest"
			err := c.Call(ctx, &logs, "eth_getLogs", arg)
			spec <- specResult{from, logs, err}
		}()
	}
	var head hexutil.Uint64
	var code hexutil.Bytes
	slots := make([]common.Hash, 4)
	names := []string{"owner", "getOwner", "name", "symbol", "decimals", "totalSupply"}
	rets := make([]hexutil.Bytes, len(names))
	b := []rpc.BatchElem{
		{Method: "eth_blockNumber", Result: &head},
		{Method: "eth_getCode", Args: []any{addr, "latest"}, Result: &code},
	}
	for i, slot := range []common.Hash{SlotImplementation, SlotAdmin, SlotBeacon, SlotProxiable} {
		b = append(b, rpc.BatchElem{Method: "eth_getStorageAt", Args: []any{addr, slot, "latest"}, Result: &slots[i]})
	}
	for i, n := range names {
		b = append(b, rpc.BatchElem{Method: "eth_call", Args: []any{callArg(addr, selectors[n]), "latest"}, Result: &rets[i]})
	}
	if err := c.Batch(ctx, b); err != nil {
		return nil, err
	}
	for _, e := range b[:2] {
		if e.Error != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, e.Method, e.Error)
		}
	}
	k.Head, k.Code = uint64(head), code
	c.headHint.Store(k.Head)
	if len(k.Code) == 0 {
		return nil, ErrNoCode
	}
	k.CodeHash = crypto.Keccak256Hash(k.Code)
	if d, ok := bytecode.Delegation(k.Code); ok {
		da := common.Address(d)
		k.Delegate = &da
		return k, nil
	}
	for i, n := range names {
		if b[6+i].Error != nil || len(rets[i]) == 0 {
			continue
		}
		decodeReturn(k, n, rets[i])
	}
	// Proxy: a clone's code names its implementation; EIP-1967/1822 slots hold it.
	var beacon common.Address
	switch impl, kind, ok := bytecode.MinimalProxy(k.Code); {
	case ok:
		k.ProxyKind, k.Implementation = kind, common.Address(impl)
	case b[2].Error == nil && slotAddress(slots[0]) != (common.Address{}):
		k.ProxyKind, k.Implementation = "eip1967", slotAddress(slots[0])
	case b[4].Error == nil && slotAddress(slots[2]) != (common.Address{}):
		k.ProxyKind, beacon = "eip1967-beacon", slotAddress(slots[2])
		k.Beacon = &beacon
	case b[5].Error == nil && slotAddress(slots[3]) != (common.Address{}):
		k.ProxyKind, k.Implementation = "eip1822", slotAddress(slots[3])
	}
	if a := slotAddress(slots[1]); b[3].Error == nil && a != (common.Address{}) {
		k.Admin = &a
	}

	// Round trip 2: the implementation (or the beacon's answer) and the logs.
	var implCode hexutil.Bytes
	var beaconImpl hexutil.Bytes
	var logs []types.Log
	from := uint64(0)
	if k.Head > window {
		from = k.Head - window + 1
	}
	logQuery := LogQuery{From: from, To: k.Head, Addresses: []common.Address{addr}, Topics: [][]common.Hash{{TopicTransfer}}}
	haveLogs := false
	if spec != nil {
		if r := <-spec; r.err == nil && r.from <= from {
			for _, l := range r.logs {
				if l.BlockNumber >= from && l.BlockNumber <= k.Head {
					logs = append(logs, l)
				}
			}
			haveLogs = true
		}
	}
	var b2 []rpc.BatchElem
	if !haveLogs {
		b2 = append(b2, rpc.BatchElem{Method: "eth_getLogs", Args: []any{filterArg(from, k.Head, logQuery)}, Result: &logs})
	}
	switch {
	case k.ProxyKind == "eip1967-beacon":
		b2 = append(b2, rpc.BatchElem{Method: "eth_call", Args: []any{callArg(beacon, selectors["implementation"]), "latest"}, Result: &beaconImpl})
	case k.ProxyKind != "":
		b2 = append(b2, rpc.BatchElem{Method: "eth_getCode", Args: []any{k.Implementation, "latest"}, Result: &implCode})
	}
	if err := c.Batch(ctx, b2); err != nil {
		return nil, err
	}
	if !haveLogs && b2[0].Error != nil {
		if !rangeRefused(b2[0].Error) {
			return nil, fmt.Errorf("%w: eth_getLogs: %v", ErrUnavailable, b2[0].Error)
		}
		var err error
		if logs, err = c.Logs(ctx, logQuery); err != nil {
			return nil, err
		}
	}
	var extra *rpc.BatchElem // the implementation's (or beacon's) call, if any
	if len(b2) > 0 && b2[len(b2)-1].Method != "eth_getLogs" {
		extra = &b2[len(b2)-1]
	}
	for _, l := range logs {
		if len(l.Topics) == 3 {
			k.Transfers = append(k.Transfers, Transfer{From: common.BytesToAddress(l.Topics[1][:]), To: common.BytesToAddress(l.Topics[2][:]), Block: l.BlockNumber})
		}
	}
	if extra != nil && extra.Error == nil {
		if k.ProxyKind != "eip1967-beacon" {
			k.ImplementationCode = implCode
		} else if len(beaconImpl) >= 32 {
			// Round trip 3: the beacon's implementation code.
			k.Implementation = common.BytesToAddress(beaconImpl[12:32])
			if err := c.Call(ctx, &implCode, "eth_getCode", k.Implementation, "latest"); err != nil {
				return nil, err
			}
			k.ImplementationCode = implCode
		}
	}
	return k, nil
}

func slotAddress(h common.Hash) common.Address { return common.BytesToAddress(h[12:]) }

var (
	stringType, _  = abi.NewType("string", "", nil)
	uint256Type, _ = abi.NewType("uint256", "", nil)
)

// decodeReturn stores the value of a metadata or owner call. Tokens that
// return bytes32 names (early MKR-style) are decoded too; values that are
// not valid UTF-8 are left out.
func decodeReturn(k *Contract, name string, ret []byte) {
	switch name {
	case "owner", "getOwner":
		if k.Owner == nil && len(ret) >= 32 {
			a := common.BytesToAddress(ret[12:32])
			k.Owner, k.OwnerSource = &a, name+"()"
		}
	case "name", "symbol":
		s, ok := decodeString(ret)
		if !ok {
			return
		}
		if name == "name" {
			k.Name = &s
		} else {
			k.Symbol = &s
		}
	case "decimals":
		if len(ret) >= 32 {
			v := new(big.Int).SetBytes(ret[:32])
			if v.IsUint64() && v.Uint64() <= 255 {
				d := uint8(v.Uint64())
				k.Decimals = &d
			}
		}
	case "totalSupply":
		if vals, err := (abi.Arguments{{Type: uint256Type}}).Unpack(ret); err == nil {
			k.TotalSupply = vals[0].(*big.Int)
		}
	}
}

func decodeString(ret []byte) (string, bool) {
	if vals, err := (abi.Arguments{{Type: stringType}}).Unpack(ret); err == nil {
		if s := vals[0].(string); utf8.ValidString(s) {
			return s, true
		}
	}
	if len(ret) == 32 { // bytes32
		s := strings.TrimRight(string(ret), "\x00")
		if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
			return s, true
		}
	}
	return "", false
}
