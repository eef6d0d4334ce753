package service

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service/bytecode"
	"github.com/tollgate/tollgate/service/chain"
	"github.com/tollgate/tollgate/service/rugcheck"
)

// Chain analytics choices (docs/rules.md).
const (
	// rugWindowBlocks is the activity window of /rugcheck: 24 h of Base blocks.
	rugWindowBlocks = 43_200
	// tokenWindowBlocks is the transfers window of /token: 1 h of Base blocks.
	tokenWindowBlocks = 1_800
)

// knownIssuers are issuer tokens on Base that are mintable, pausable or
// blacklisting by design: their verdict is at most WARN, with a note.
var knownIssuers = map[common.Address]struct{ name, reason string }{
	common.HexToAddress("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"): {"Circle USDC", "a regulated stablecoin: mint, pause and blacklist belong to its issuer by design"},
	common.HexToAddress("0x60a3E35Cc302bFA44Cb288Bc5a4F316Fdb1adb42"): {"Circle EURC", "a regulated stablecoin: mint, pause and blacklist belong to its issuer by design"},
	common.HexToAddress("0x4200000000000000000000000000000000000006"): {"WETH (OP Stack predeploy)", "wrapped ether: minting is deposit of ETH"},
}

var deadAddress = common.HexToAddress("0x000000000000000000000000000000000000dEaD")

// Chain is what the chain analytics need; *chain.Client provides it.
type Chain interface {
	Inspect(ctx context.Context, addr common.Address, windowBlocks uint64) (*chain.Contract, error)
}

// errNotToken marks an address that holds no token contract.
type errNotToken struct{ addr, why string }

func (e *errNotToken) Error() string {
	return fmt.Sprintf("%s is not a token contract: %s", e.addr, e.why)
}

// scans caches bytecode analyses by code hash: code never changes under
// its hash, so a hot rug check skips the scan.
type scans struct {
	mu sync.Mutex
	m  map[common.Hash]bytecode.Scan
}

func (s *scans) get(hash common.Hash, code []byte) bytecode.Scan {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc, ok := s.m[hash]; ok {
		return sc
	}
	if len(s.m) > 10_000 {
		clear(s.m) // bounded: a sweep is cheaper than an LRU here
	}
	sc := bytecode.Analyze(code)
	s.m[hash] = sc
	return sc
}

func (a *Analytics) inspect(ctx context.Context, addrHex string, window uint64) (*chain.Contract, error) {
	if a.chain == nil {
		return nil, errNoChain
	}
	addr := common.HexToAddress(addrHex)
	k, err := a.chain.Inspect(ctx, addr, window)
	switch {
	case errors.Is(err, chain.ErrNoCode):
		return nil, &errNotToken{addr.Hex(), "no contract code at this address (an externally owned account, or nothing)"}
	case err != nil:
		return nil, err
	case k.Delegate != nil:
		return nil, &errNotToken{addr.Hex(), "an EIP-7702 delegated account, delegating to " + k.Delegate.Hex()}
	}
	return k, nil
}

var errNoChain = errors.New("service: no chain configured")

// GetRugCheck implements tollgatev1.AnalyticsServiceServer.
func (a *Analytics) GetRugCheck(ctx context.Context, req *tollgatev1.GetRugCheckRequest) (*tollgatev1.GetRugCheckResponse, error) {
	k, err := a.inspect(ctx, req.GetAddr(), rugWindowBlocks)
	if err != nil {
		return nil, err
	}
	scan := a.scans.get(k.CodeHash, k.Code)
	caps := rugcheck.Capabilities(scan, "token")
	roles, selfDestruct := rugcheck.RoleBased(scan), scan.SelfDestruct
	var implHash common.Hash
	if len(k.ImplementationCode) > 0 {
		implHash = crypto.Keccak256Hash(k.ImplementationCode)
		is := a.scans.get(implHash, k.ImplementationCode)
		caps = append(caps, rugcheck.Capabilities(is, "implementation")...)
		roles, selfDestruct = roles || rugcheck.RoleBased(is), selfDestruct || is.SelfDestruct
	}
	renounced := k.Owner != nil && (*k.Owner == (common.Address{}) || *k.Owner == deadAddress)
	known, isKnown := knownIssuers[k.Address]
	report := rugcheck.Evaluate(rugcheck.Facts{
		Capabilities: caps,
		Proxy:        k.ProxyKind != "",
		Upgradeable:  k.ProxyKind == "eip1967" || k.ProxyKind == "eip1967-beacon" || k.ProxyKind == "eip1822",
		AdminSet:     k.Admin != nil,
		OwnerKnown:   k.Owner != nil,
		Renounced:    renounced,
		RoleBased:    roles,
		SelfDestruct: selfDestruct,
		Transfers:    len(k.Transfers),
		KnownIssuer:  isKnown,
	})
	checks := &tollgatev1.RugChecks{
		CodeHash: k.CodeHash.Hex(),
		CodeSize: uint32(len(k.Code)),
		Owner:    &tollgatev1.OwnerInfo{Source: "none", Renounced: renounced},
		Activity: activity(k),
	}
	for _, c := range caps {
		pc := &tollgatev1.Capability{Class: capabilityClass(c.Class), Signatures: c.Signatures, Source: c.Source}
		for _, s := range c.Selectors {
			pc.Selectors = append(pc.Selectors, "0x"+hex.EncodeToString(s[:]))
		}
		checks.Capabilities = append(checks.Capabilities, pc)
	}
	if k.Owner != nil {
		checks.Owner.Address, checks.Owner.Source = wrapperspb.String(k.Owner.Hex()), k.OwnerSource
	}
	if k.ProxyKind != "" {
		p := &tollgatev1.ProxyInfo{Kind: proxyKind(k.ProxyKind), Implementation: k.Implementation.Hex()}
		if k.Beacon != nil {
			p.Beacon = wrapperspb.String(k.Beacon.Hex())
		}
		if k.Admin != nil {
			p.Admin = wrapperspb.String(k.Admin.Hex())
		}
		if implHash != (common.Hash{}) {
			p.ImplementationCodeHash = implHash.Hex()
		}
		checks.Proxy = p
	}
	if isKnown {
		checks.KnownToken = &tollgatev1.KnownToken{Name: known.name, Reason: known.reason}
	}
	resp := &tollgatev1.GetRugCheckResponse{
		Token:   k.Address.Hex(),
		Name:    k.Name,
		Symbol:  k.Symbol,
		Verdict: verdict(report.Verdict),
		Flags:   report.Flags,
		Checks:  checks,
		AsOf:    asOf(time.Now()),
	}
	if resp.Flags == nil {
		resp.Flags = []string{}
	}
	return resp, nil
}

// GetToken implements tollgatev1.AnalyticsServiceServer. Each fact the
// token does not answer is left out, not the whole snapshot.
func (a *Analytics) GetToken(ctx context.Context, req *tollgatev1.GetTokenRequest) (*tollgatev1.GetTokenResponse, error) {
	k, err := a.inspect(ctx, req.GetAddr(), tokenWindowBlocks)
	if err != nil {
		return nil, err
	}
	info := &tollgatev1.TokenInfo{Address: k.Address.Hex(), Name: k.Name, Symbol: k.Symbol}
	if k.Decimals != nil {
		d := int32(*k.Decimals)
		info.Decimals = &d
	}
	if k.TotalSupply != nil {
		s := k.TotalSupply.String()
		info.TotalSupply = &s
	}
	act := activity(k)
	return &tollgatev1.GetTokenResponse{
		Token: info,
		Transfers: &tollgatev1.TokenTransfers{
			WindowBlocks: act.WindowBlocks, Count: act.Transfers, UniqueSenders: act.UniqueSenders, UniqueReceivers: act.UniqueReceivers,
		},
		AsOf: asOf(time.Now()),
	}, nil
}

func activity(k *chain.Contract) *tollgatev1.TransferActivity {
	senders, receivers := map[common.Address]bool{}, map[common.Address]bool{}
	for _, t := range k.Transfers {
		senders[t.From], receivers[t.To] = true, true
	}
	from := uint64(0)
	if k.Head >= k.WindowBlocks {
		from = k.Head - k.WindowBlocks + 1
	}
	return &tollgatev1.TransferActivity{
		WindowBlocks: uint32(k.WindowBlocks), FromBlock: uint32(from), ToBlock: uint32(k.Head),
		Transfers: uint32(len(k.Transfers)), UniqueSenders: uint32(len(senders)), UniqueReceivers: uint32(len(receivers)),
	}
}

func verdict(v rugcheck.Verdict) tollgatev1.Verdict {
	switch v {
	case rugcheck.Pass:
		return tollgatev1.Verdict_VERDICT_PASS
	case rugcheck.Warn:
		return tollgatev1.Verdict_VERDICT_WARN
	}
	return tollgatev1.Verdict_VERDICT_FAIL
}

func capabilityClass(c rugcheck.Class) tollgatev1.CapabilityClass {
	return map[rugcheck.Class]tollgatev1.CapabilityClass{
		rugcheck.Mint: tollgatev1.CapabilityClass_CAPABILITY_CLASS_MINT, rugcheck.Blacklist: tollgatev1.CapabilityClass_CAPABILITY_CLASS_BLACKLIST,
		rugcheck.Pause: tollgatev1.CapabilityClass_CAPABILITY_CLASS_PAUSE, rugcheck.Fee: tollgatev1.CapabilityClass_CAPABILITY_CLASS_FEE,
		rugcheck.Limit: tollgatev1.CapabilityClass_CAPABILITY_CLASS_LIMIT, rugcheck.Trading: tollgatev1.CapabilityClass_CAPABILITY_CLASS_TRADING,
		rugcheck.Upgrade: tollgatev1.CapabilityClass_CAPABILITY_CLASS_UPGRADE,
	}[c]
}

func proxyKind(k string) tollgatev1.ProxyKind {
	switch strings.ToLower(k) {
	case "eip1967":
		return tollgatev1.ProxyKind_PROXY_KIND_EIP1967
	case "eip1967-beacon":
		return tollgatev1.ProxyKind_PROXY_KIND_EIP1967_BEACON
	case "eip1822":
		return tollgatev1.ProxyKind_PROXY_KIND_EIP1822
	case "eip1167":
		return tollgatev1.ProxyKind_PROXY_KIND_EIP1167
	}
	return tollgatev1.ProxyKind_PROXY_KIND_ERC7511
}
