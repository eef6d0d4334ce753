package chain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
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

// Storage slots of the proxy standards (EIP-1967, EIP-1822) and of the
// legacy layouts still in use: ZeppelinOS / OpenZeppelin SDK 2.x
// (keccak256("org.zeppelinos.proxy.implementation") and ".admin", without
// EIP-1967's -1; Circle's FiatTokenProxy, i.e. USDC) and Gnosis Safe's
// singleton in slot 0.
var (
	SlotImplementation = common.HexToHash("0x360894a13ba1a3210667c828492db98dca3e2076cc3735a920a3ca505d382bbc")
	SlotAdmin          = common.HexToHash("0xb53127684a568b3173ae13b9f8a6016e243e63b6e8ee1178d6a717850b5d6103")
	SlotBeacon         = common.HexToHash("0xa3f0ad74e5423aebfd80d3ef4346578335a9a72aeaee59ff6cb3582b35133d50")
	SlotProxiable      = common.HexToHash("0xc5f16f0fcc639fa48a6947836d9850f504798523bf8c9a3a87d5876cf622bcf7")
	SlotZosImpl        = common.HexToHash("0x7050c9e0f4ca769c69bd3a8ef740bc37934f8e2c036e5a723fd8ee048ed3f8c3")
	SlotZosAdmin       = common.HexToHash("0x10d6a54a4754c8869d6886b5f5d7fbfa5b4522237ea5c60d11bc4e7a1ff9390b")
	SlotSafeSingleton  = common.Hash{}
	TopicTransfer      = common.HexToHash("0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef")
	// AccessControl's RoleGranted(bytes32,address,address) and RoleRevoked.
	TopicRoleGranted = common.HexToHash("0x2f8788117e7eff1d82e926ec794901d17c78024a50270940304540a733656f0d")
	TopicRoleRevoked = common.HexToHash("0xf6391f5c32d9c69d2a47ea670b442974b53935d1edc7fd64eb21e047a839171b")
)

// Roles are the AccessControl roles whose members Inspect counts, by name:
// the admin role (which grants every other) and the roles of the
// capabilities the rules know.
var Roles = []struct {
	Name string
	ID   common.Hash
}{
	{"DEFAULT_ADMIN_ROLE", common.Hash{}},
	{"MINTER_ROLE", crypto.Keccak256Hash([]byte("MINTER_ROLE"))},
	{"PAUSER_ROLE", crypto.Keccak256Hash([]byte("PAUSER_ROLE"))},
	{"UPGRADER_ROLE", crypto.Keccak256Hash([]byte("UPGRADER_ROLE"))},
	{"BLACKLISTER_ROLE", crypto.Keccak256Hash([]byte("BLACKLISTER_ROLE"))},
}

// ErrNoCode means the address holds no contract (an EOA, or nothing).
var ErrNoCode = errors.New("chain: no contract code at the address")

// Contract is what an address holds, read in at most three round trips,
// every read at block Head.
type Contract struct {
	Address common.Address
	Head    uint64
	// HeadTime is the timestamp of block Head.
	HeadTime uint64
	Code     []byte
	CodeHash common.Hash
	// Delegate is set for an EIP-7702 delegated account (code 0xef0100||addr).
	Delegate *common.Address
	// Proxy facts: Kind is "eip1967", "eip1967-beacon", "eip1822",
	// "eip1167", "erc7511", "zeppelinos" or "gnosis-safe"; empty when no
	// proxy standard names an implementation.
	ProxyKind          string
	Implementation     common.Address
	ImplementationCode []byte
	Beacon, Admin      *common.Address
	// Upgrade power behind a proxy: the admin's code (empty for an
	// account), and the owner() of the admin contract or of the beacon
	// (AdminOwner, BeaconOwner), nil where it does not answer.
	AdminCode   []byte
	AdminOwner  *common.Address
	BeaconOwner *common.Address
	// Slot0 is storage slot 0, where a Gnosis Safe proxy keeps its
	// singleton; read for forwarders that no standard slot resolves.
	Slot0 common.Hash
	// Metadata; nil where the call reverted or returned nothing usable.
	Name, Symbol *string
	Decimals     *uint8
	TotalSupply  *big.Int
	// BalanceOf reports that balanceOf(address(0)) answered a 32-byte
	// word: with TotalSupply, what makes an ERC-20.
	BalanceOf bool
	// Owner from owner() or getOwner() (OwnerSource), nil when neither answers.
	Owner       *common.Address
	OwnerSource string
	// OwnerProbes tells, for each of Inspect's ownerProbes, whether the
	// owner's eth_call succeeded; nil when none was made.
	OwnerProbes []bool
	// RoleMembers counts the members of each of Roles (same order) by
	// getRoleMemberCount (AccessControlEnumerable); nil when it reverts.
	RoleMembers []*uint64
	// Transfers are the Transfer logs of the last WindowBlocks blocks;
	// RoleEvents the RoleGranted/RoleRevoked logs of the same window.
	WindowBlocks uint64
	Transfers    []Transfer
	RoleEvents   []RoleEvent
}

// Transfer is an ERC-20 Transfer event.
type Transfer struct {
	From, To common.Address
	Block    uint64
}

// RoleEvent is an AccessControl RoleGranted (Granted) or RoleRevoked event.
type RoleEvent struct {
	Role    common.Hash
	Account common.Address
	Granted bool
	Block   uint64
}

var selectors = map[string][]byte{
	"owner":              crypto.Keccak256([]byte("owner()"))[:4],
	"getOwner":           crypto.Keccak256([]byte("getOwner()"))[:4],
	"name":               crypto.Keccak256([]byte("name()"))[:4],
	"symbol":             crypto.Keccak256([]byte("symbol()"))[:4],
	"decimals":           crypto.Keccak256([]byte("decimals()"))[:4],
	"totalSupply":        crypto.Keccak256([]byte("totalSupply()"))[:4],
	"balanceOf":          crypto.Keccak256([]byte("balanceOf(address)"))[:4],
	"implementation":     crypto.Keccak256([]byte("implementation()"))[:4],
	"getRoleMemberCount": crypto.Keccak256([]byte("getRoleMemberCount(bytes32)"))[:4],
}

// safeMasterCopy is masterCopy() (0xa619486e), which a Gnosis Safe proxy
// answers from slot 0 without delegating.
var safeMasterCopy = []byte{0xa6, 0x19, 0x48, 0x6e}

func callArg(to common.Address, data []byte) map[string]any {
	return map[string]any{"to": to, "data": hexutil.Bytes(data)}
}

// Inspect reads addr in at most three round trips, each a batch, every
// read at one block (Contract.Head):
//
//  1. head, code, the proxy slots (EIP-1967 implementation, admin and
//     beacon, EIP-1822, ZeppelinOS implementation and admin, slot 0),
//     owner(), getOwner(), the metadata, totalSupply(), balanceOf(0),
//     getRoleMemberCount of each of Roles;
//  2. at that head: the Transfer, RoleGranted and RoleRevoked logs of the
//     window, the implementation's code, the admin's code and owner(), the
//     beacon's implementation() and owner();
//  3. a beacon's implementation code, if any.
//
// ownerProbes are calls (4-byte selector and arguments) made in the second
// round trip from the owner, when owner() or getOwner() names an account
// that is not the zero or dead address nor the proxy's admin, and, unless
// addr is a proxy, only those whose selector appears in the code: whether
// the owner could make them (Contract.OwnerProbes). No transaction is sent.
//
// When the client has seen the chain's head before, the logs are asked in
// parallel with the first batch, from a little before that head's window
// to "latest", and trimmed to the exact window once the head is known:
// a plain token then costs one round trip of latency.
func (c *Client) Inspect(ctx context.Context, addr common.Address, window uint64, ownerProbes ...[]byte) (*Contract, error) {
	k := &Contract{Address: addr, WindowBlocks: window}
	logTopics := [][]common.Hash{{TopicTransfer, TopicRoleGranted, TopicRoleRevoked}}
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
			arg := filterArg(from, 0, LogQuery{Addresses: []common.Address{addr}, Topics: logTopics})
			arg["toBlock"] = "latest"
			err := c.Call(ctx, &logs, "eth_getLogs", arg)
			spec <- specResult{from, logs, err}
		}()
	}
	var header struct {
		Number    hexutil.Uint64 `json:"number"`
		Timestamp hexutil.Uint64 `json:"timestamp"`
	}
	var code hexutil.Bytes
	slotNames := []common.Hash{SlotImplementation, SlotAdmin, SlotBeacon, SlotProxiable, SlotZosImpl, SlotZosAdmin, SlotSafeSingleton}
	slots := make([]common.Hash, len(slotNames))
	names := []string{"owner", "getOwner", "name", "symbol", "decimals", "totalSupply", "balanceOf"}
	rets := make([]hexutil.Bytes, len(names)+len(Roles))
	b := []rpc.BatchElem{
		{Method: "eth_getBlockByNumber", Args: []any{"latest", false}, Result: &header},
		{Method: "eth_getCode", Args: []any{addr, "latest"}, Result: &code},
	}
	for i, slot := range slotNames {
		b = append(b, rpc.BatchElem{Method: "eth_getStorageAt", Args: []any{addr, slot, "latest"}, Result: &slots[i]})
	}
	firstCall := len(b)
	for i, n := range names {
		data := selectors[n]
		if n == "balanceOf" {
			data = append(slices.Clone(data), make([]byte, 32)...)
		}
		b = append(b, rpc.BatchElem{Method: "eth_call", Args: []any{callArg(addr, data), "latest"}, Result: &rets[i]})
	}
	// Role counts: skipped when this address's code, seen before, has no
	// getRoleMemberCount and is no proxy (code cannot change under an
	// address since EIP-6780; only its proxy slots can).
	askRoles := !c.noRoles(addr)
	for i, r := range Roles {
		if !askRoles {
			break
		}
		data := append(slices.Clone(selectors["getRoleMemberCount"]), r.ID[:]...)
		b = append(b, rpc.BatchElem{Method: "eth_call", Args: []any{callArg(addr, data), "latest"}, Result: &rets[len(names)+i]})
	}
	// The head is asked first and last: equal, every read between was made
	// at it (a node runs a batch in order). A block that landed meanwhile
	// makes the batch be asked again at the later head, by number: one
	// round trip more, rare with 2 s blocks.
	var lastHead hexutil.Uint64
	b = append(b, rpc.BatchElem{Method: "eth_blockNumber", Result: &lastHead})
	if err := c.Batch(ctx, b); err != nil {
		return nil, err
	}
	for _, e := range []rpc.BatchElem{b[0], b[1], b[len(b)-1]} {
		if e.Error != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, e.Method, e.Error)
		}
	}
	head := header.Number
	k.HeadTime = uint64(header.Timestamp)
	if lastHead != head {
		head = lastHead
		k.HeadTime += 2 * uint64(lastHead-header.Number) // Base's 2 s blocks; a cooldown's reading is off by at most that
		again := b[1 : len(b)-1]
		for i := range again {
			again[i].Args[len(again[i].Args)-1] = hexutil.EncodeUint64(uint64(head))
		}
		if err := c.Batch(ctx, again); err != nil {
			return nil, err
		}
		if again[0].Error != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, again[0].Method, again[0].Error)
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
		if b[firstCall+i].Error != nil || len(rets[i]) == 0 {
			continue
		}
		decodeReturn(k, n, rets[i])
	}
	k.RoleMembers = make([]*uint64, len(Roles))
	for i := range Roles {
		if !askRoles {
			break
		}
		if ret := rets[len(names)+i]; b[firstCall+len(names)+i].Error == nil && len(ret) == 32 {
			if v := new(big.Int).SetBytes(ret); v.IsUint64() {
				n := v.Uint64()
				k.RoleMembers[i] = &n
			}
		}
	}
	// slot returns storage slot i as an address, zero when it failed or is
	// not an address (a non-zero upper part).
	slot := func(i int) common.Address {
		if b[2+i].Error != nil || [12]byte(slots[i][:12]) != [12]byte{} {
			return common.Address{}
		}
		return slotAddress(slots[i])
	}
	if b[2+6].Error == nil {
		k.Slot0 = slots[6]
	}
	// Proxy: a clone's code names its implementation; the slots hold it.
	var beacon common.Address
	switch impl, kind, ok := bytecode.MinimalProxy(k.Code); {
	case ok:
		k.ProxyKind, k.Implementation = kind, common.Address(impl)
	case slot(0) != (common.Address{}):
		k.ProxyKind, k.Implementation = "eip1967", slot(0)
	case slot(2) != (common.Address{}):
		k.ProxyKind, beacon = "eip1967-beacon", slot(2)
		k.Beacon = &beacon
	case slot(3) != (common.Address{}):
		k.ProxyKind, k.Implementation = "eip1822", slot(3)
	case slot(4) != (common.Address{}):
		k.ProxyKind, k.Implementation = "zeppelinos", slot(4)
	case slot(6) != (common.Address{}) && bytes.Contains(k.Code, safeMasterCopy) && len(k.Code) < 1024:
		k.ProxyKind, k.Implementation = "gnosis-safe", slot(6)
	}
	c.rememberRoles(addr, k.ProxyKind == "" && !bytes.Contains(k.Code, selectors["getRoleMemberCount"]))
	switch {
	case slot(1) != (common.Address{}) && k.ProxyKind != "zeppelinos":
		a := slot(1)
		k.Admin = &a
	case slot(5) != (common.Address{}) && k.ProxyKind == "zeppelinos":
		a := slot(5)
		k.Admin = &a
	}

	// Round trip 2, at the head: the logs, the implementation (or the
	// beacon's answers) and the admin.
	at := hexutil.EncodeUint64(k.Head)
	var implCode, adminCode hexutil.Bytes
	var beaconImpl, beaconOwner, adminOwner hexutil.Bytes
	var logs []types.Log
	from := uint64(0)
	if k.Head > window {
		from = k.Head - window + 1
	}
	logQuery := LogQuery{From: from, To: k.Head, Addresses: []common.Address{addr}, Topics: logTopics}
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
	add := func(method string, result any, args ...any) int {
		b2 = append(b2, rpc.BatchElem{Method: method, Args: append(args, at), Result: result})
		return len(b2) - 1
	}
	iImpl, iBeaconImpl, iBeaconOwner, iAdminCode, iAdminOwner := -1, -1, -1, -1, -1
	switch {
	case k.ProxyKind == "eip1967-beacon":
		iBeaconImpl = add("eth_call", &beaconImpl, callArg(beacon, selectors["implementation"]))
		iBeaconOwner = add("eth_call", &beaconOwner, callArg(beacon, selectors["owner"]))
	case k.ProxyKind != "":
		iImpl = add("eth_getCode", &implCode, k.Implementation)
	}
	if k.Admin != nil {
		iAdminCode = add("eth_getCode", &adminCode, *k.Admin)
		iAdminOwner = add("eth_call", &adminOwner, callArg(*k.Admin, selectors["owner"]))
	}
	probeAt := make([]int, len(ownerProbes)) // index in b2, -1: not made
	// Not as the proxy's own admin: a transparent proxy does not forward
	// its admin's calls, so they would revert whatever the code says.
	probed := k.Owner != nil && *k.Owner != (common.Address{}) && *k.Owner != deadAddress && len(ownerProbes) > 0 &&
		(k.Admin == nil || *k.Admin != *k.Owner)
	for i, p := range ownerProbes {
		probeAt[i] = -1
		if probed && len(p) >= 4 && (k.ProxyKind != "" || bytes.Contains(k.Code, p[:4])) {
			probeAt[i] = add("eth_call", new(hexutil.Bytes), map[string]any{"from": *k.Owner, "to": addr, "data": hexutil.Bytes(p)})
		}
	}
	if err := c.Batch(ctx, b2); err != nil {
		return nil, err
	}
	if probed {
		k.OwnerProbes = make([]bool, len(ownerProbes))
		for i, j := range probeAt {
			k.OwnerProbes[i] = j >= 0 && b2[j].Error == nil
		}
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
	ok := func(i int) bool { return i >= 0 && b2[i].Error == nil }
	for _, l := range logs {
		switch {
		case len(l.Topics) == 3 && l.Topics[0] == TopicTransfer:
			k.Transfers = append(k.Transfers, Transfer{From: common.BytesToAddress(l.Topics[1][:]), To: common.BytesToAddress(l.Topics[2][:]), Block: l.BlockNumber})
		case len(l.Topics) == 4 && (l.Topics[0] == TopicRoleGranted || l.Topics[0] == TopicRoleRevoked):
			k.RoleEvents = append(k.RoleEvents, RoleEvent{Role: l.Topics[1], Account: common.BytesToAddress(l.Topics[2][:]),
				Granted: l.Topics[0] == TopicRoleGranted, Block: l.BlockNumber})
		}
	}
	if ok(iAdminCode) {
		k.AdminCode = adminCode
	}
	if ok(iAdminOwner) && len(k.AdminCode) > 0 && len(adminOwner) == 32 {
		a := common.BytesToAddress(adminOwner[12:])
		k.AdminOwner = &a
	}
	if ok(iBeaconOwner) && len(beaconOwner) == 32 {
		a := common.BytesToAddress(beaconOwner[12:])
		k.BeaconOwner = &a
	}
	if ok(iImpl) {
		k.ImplementationCode = implCode
	}
	if ok(iBeaconImpl) && len(beaconImpl) >= 32 {
		// Round trip 3: the beacon's implementation code.
		k.Implementation = common.BytesToAddress(beaconImpl[12:32])
		if err := c.Call(ctx, &implCode, "eth_getCode", k.Implementation, at); err != nil {
			return nil, err
		}
		k.ImplementationCode = implCode
	}
	return k, nil
}

// noRoles reports an address whose code, read before, has no
// getRoleMemberCount and is no proxy.
func (c *Client) noRoles(addr common.Address) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.roleless[addr]
}

func (c *Client) rememberRoles(addr common.Address, roleless bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.roleless == nil || len(c.roleless) > 10_000 {
		c.roleless = map[common.Address]bool{} // bounded: a sweep is cheaper than an LRU here
	}
	c.roleless[addr] = roleless
}

// deadAddress is where tokens and ownerships are sent to be renounced.
var deadAddress = common.HexToAddress("0x000000000000000000000000000000000000dEaD")

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
		if len(ret) != 32 {
			return // an ERC-20 answers exactly one word
		}
		if vals, err := (abi.Arguments{{Type: uint256Type}}).Unpack(ret); err == nil {
			k.TotalSupply = vals[0].(*big.Int)
		}
	case "balanceOf":
		k.BalanceOf = len(ret) == 32
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

// Storage reads slots of addr at block in one batch: the guard fields
// the rug check's powers by effect name (one round trip more, only when
// the code has such powers).
func (c *Client) Storage(ctx context.Context, addr common.Address, block uint64, slots []common.Hash) ([]common.Hash, error) {
	out := make([]common.Hash, len(slots))
	b := make([]rpc.BatchElem, len(slots))
	at := hexutil.EncodeUint64(block)
	for i, s := range slots {
		b[i] = rpc.BatchElem{Method: "eth_getStorageAt", Args: []any{addr, s, at}, Result: &out[i]}
	}
	if err := c.Batch(ctx, b); err != nil {
		return nil, err
	}
	for _, e := range b {
		if e.Error != nil {
			return nil, fmt.Errorf("eth_getStorageAt: %w", e.Error)
		}
	}
	return out, nil
}
