package devnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// A devnet serves, beside JSON-RPC on the same port, what a Tollgate
// server needs to use it as a shared, non-production chain:
//
//   - GET DescriptionPath: its Description (JSON).
//   - POST GasAccountPath: claims a gas account for one server's
//     self-hosted facilitator (JSON AccountRole). Each server needs its
//     own: a facilitator manages its key's nonces in process, so two
//     servers sending from one key would replace each other's
//     settlements.
const (
	DescriptionPath = "/devnet.json"
	GasAccountPath  = "/devnet/gas-account"
)

// Kind marks a Description: a JSON document at DescriptionPath without it
// is not a Tollgate devnet's.
const Kind = "tollgate-devnet"

// GasAccounts is the number of accounts (FirstGasAccount onwards, ETH
// only) a devnet hands out at GasAccountPath, round robin: a server
// restarted more often than that while an earlier one still runs would
// share its key.
const (
	FirstGasAccount = accounts + traderAccounts
	GasAccounts     = 16
)

// Description is what a devnet says about itself at DescriptionPath. A
// server checks it against the chain (Check) before trusting it.
type Description struct {
	Kind     string             `json:"kind"` // always Kind
	ChainID  uint64             `json:"chainId"`
	Genesis  common.Hash        `json:"genesis"`
	Token    Token              `json:"token"`
	Mnemonic string             `json:"mnemonic"` // of every account below
	Accounts []AccountRole      `json:"accounts"`
	Scenario []ScenarioContract `json:"scenario"`
	Dex      *Dex               `json:"dex"`
	// BatchSettlement locates the x402 batch-settlement escrow, its
	// ERC-3009 deposit collector and Multicall3 (absent from devnets that
	// predate them).
	BatchSettlement *BatchSettlement `json:"batchSettlement,omitempty"`
}

// Token is the devnet's EIP-3009 USD token and its EIP-712 domain.
type Token struct {
	Address  common.Address `json:"address"`
	Name     string         `json:"name"`
	Symbol   string         `json:"symbol"`
	Version  string         `json:"version"`
	Decimals uint8          `json:"decimals"`
}

// AccountRole is a test account of Mnemonic (m/44'/60'/0'/0/Index) and
// what the devnet uses it for.
type AccountRole struct {
	Index   uint32         `json:"index"`
	Address common.Address `json:"address"`
	Role    string         `json:"role"`
}

// Account roles of a Description.
const (
	RolePayer       = "payer"       // default key of `tollgate pay`
	RolePayTo       = "payTo"       // receives payments
	RoleFacilitator = "facilitator" // the in-process facilitator's gas key
	RoleScenario    = "scenario"    // deploys and owns the scenario contracts
	RoleGas         = "gas"         // a claimed gas account
)

// Description returns what the devnet serves at DescriptionPath.
func (c *Chain) Description() *Description {
	d := &Description{
		Kind: Kind, ChainID: ChainID, Genesis: c.eth.BlockChain().Genesis().Hash(),
		Token:    Token{Address: c.Token, Name: TokenName, Symbol: TokenSymbol, Version: TokenVersion, Decimals: TokenDecimals},
		Mnemonic: Mnemonic, Scenario: c.Scenario, Dex: c.Dex, BatchSettlement: batchSettlement(),
	}
	for _, r := range []struct {
		i    int
		role string
	}{{PayerAccount, RolePayer}, {PayToAccount, RolePayTo}, {FacilitatorAccount, RoleFacilitator}, {ScenarioAccount, RoleScenario}} {
		d.Accounts = append(d.Accounts, AccountRole{Index: uint32(r.i), Address: c.Accounts[r.i].Address, Role: r.role})
	}
	return d
}

// Account returns the account of role, or false.
func (d *Description) Account(role string) (AccountRole, bool) {
	for _, a := range d.Accounts {
		if a.Role == role {
			return a, true
		}
	}
	return AccountRole{}, false
}

// serveDevnet answers DescriptionPath and GasAccountPath; it reports
// false for every other request (JSON-RPC).
func (c *Chain) serveDevnet(w http.ResponseWriter, r *http.Request) bool {
	var v any
	switch {
	case r.URL.Path == DescriptionPath && r.Method == http.MethodGet:
		v = c.Description()
	case r.URL.Path == GasAccountPath && r.Method == http.MethodPost:
		n := c.claims.Add(1) - 1
		a := c.gas[n%GasAccounts]
		v = AccountRole{Index: FirstGasAccount + n%GasAccounts, Address: a.Address, Role: RoleGas}
	case r.URL.Path == DescriptionPath || r.URL.Path == GasAccountPath:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return true
	default:
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
	return true
}

// Fetch reads the Description the devnet at url (its JSON-RPC endpoint)
// serves. Anything that does not answer one, a plain Ethereum node among
// them, is an error that says so.
func Fetch(ctx context.Context, httpc *http.Client, url string) (*Description, error) {
	var d Description
	if err := devnetCall(ctx, httpc, http.MethodGet, url, DescriptionPath, &d); err != nil {
		return nil, err
	}
	if d.Kind != Kind {
		return nil, fmt.Errorf("%s%s does not describe a Tollgate devnet (kind %q, want %q)", strings.TrimSuffix(url, "/"), DescriptionPath, d.Kind, Kind)
	}
	return &d, nil
}

// ClaimGas claims a gas account of the devnet at url for one server's
// facilitator and returns it with its key, derived from Mnemonic.
func ClaimGas(ctx context.Context, httpc *http.Client, url string) (Account, uint32, error) {
	var a AccountRole
	if err := devnetCall(ctx, httpc, http.MethodPost, url, GasAccountPath, &a); err != nil {
		return Account{}, 0, err
	}
	key, err := DeriveKey(Mnemonic, a.Index)
	if err != nil {
		return Account{}, 0, err
	}
	if got := crypto.PubkeyToAddress(key.PublicKey); got != a.Address {
		return Account{}, 0, fmt.Errorf("gas account #%d: the devnet says %s, the mnemonic gives %s", a.Index, a.Address, got)
	}
	return Account{Address: a.Address, Key: key}, a.Index, nil
}

func devnetCall(ctx context.Context, httpc *http.Client, method, url, path string, v any) error {
	where := strings.TrimSuffix(url, "/") + path
	req, err := http.NewRequestWithContext(ctx, method, where, nil)
	if err != nil {
		return err
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, where, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: HTTP %d %q: not a Tollgate devnet", method, where, resp.StatusCode, trim(body))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s %s: not a Tollgate devnet's answer: %w", method, where, err)
	}
	return nil
}

func trim(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// ChainReader is what Check reads from the chain; an *ethclient.Client
// has it.
type ChainReader interface {
	ChainID(ctx context.Context) (*big.Int, error)
	CodeAt(ctx context.Context, account common.Address, blockNumber *big.Int) ([]byte, error)
	CallContract(ctx context.Context, call ethereum.CallMsg, blockNumber *big.Int) ([]byte, error)
}

// Genesis reads the hash of a chain's genesis block.
type Genesis func(ctx context.Context) (common.Hash, error)

// Base mainnet's genesis block and USDC: a description naming either
// describes Base, never a devnet.
const (
	baseGenesis = "0xf712aa9241cc24369b143cf6dce85f0902a9731e70d66818a3a5845b296c73dd"
	baseUSDC    = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
)

// Check checks d against the chain it describes and returns the token's
// EIP-712 domain as the token itself reports it: the chain id and the
// genesis block are d's; the token has code, and its name(), version()
// (when it has one), decimals() and DOMAIN_SEPARATOR() (when it has one)
// agree with d; the payTo, facilitator and payer accounts are those of
// Mnemonic; every scenario, exchange and batch-settlement contract has
// code. A description
// of Base (its genesis or its USDC) is refused: devnet mode must never
// take real payments to the well-known test keys.
func (d *Description) Check(ctx context.Context, chain ChainReader, genesis Genesis) (Token, error) {
	var errs []error
	if d.ChainID != ChainID {
		errs = append(errs, fmt.Errorf("chain id %d, want %d", d.ChainID, ChainID))
	}
	if id, err := chain.ChainID(ctx); err != nil {
		return Token{}, fmt.Errorf("chain id: %w", err)
	} else if id.Uint64() != d.ChainID {
		errs = append(errs, fmt.Errorf("the chain's id is %s, the description says %d", id, d.ChainID))
	}
	g, err := genesis(ctx)
	if err != nil {
		return Token{}, fmt.Errorf("genesis block: %w", err)
	}
	if g != d.Genesis {
		errs = append(errs, fmt.Errorf("the chain's genesis is %s, the description says %s", g, d.Genesis))
	}
	if g == common.HexToHash(baseGenesis) || d.Token.Address == common.HexToAddress(baseUSDC) {
		return Token{}, errors.New("this is Base mainnet, not a devnet: use --chain-rpc for production")
	}
	if d.Mnemonic != Mnemonic {
		errs = append(errs, fmt.Errorf("accounts of mnemonic %q, want the well-known test mnemonic", d.Mnemonic))
	}
	for _, role := range []string{RolePayer, RolePayTo, RoleFacilitator} {
		a, ok := d.Account(role)
		if !ok {
			errs = append(errs, fmt.Errorf("no %s account", role))
			continue
		}
		key, err := DeriveKey(Mnemonic, a.Index)
		if err != nil {
			return Token{}, err
		}
		if got := crypto.PubkeyToAddress(key.PublicKey); got != a.Address {
			errs = append(errs, fmt.Errorf("%s account #%d is %s, the mnemonic gives %s", role, a.Index, a.Address, got))
		}
	}
	tok, err := readToken(ctx, chain, d.Token.Address)
	if err != nil {
		return Token{}, fmt.Errorf("token %s: %w", d.Token.Address, err)
	}
	if tok.Version == "" {
		tok.Version = d.Token.Version // no version(): the description's
	}
	if tok.Name != d.Token.Name || tok.Version != d.Token.Version || tok.Decimals != d.Token.Decimals {
		errs = append(errs, fmt.Errorf("token %s says %q version %q, %d decimals; the description says %q version %q, %d decimals",
			tok.Address, tok.Name, tok.Version, tok.Decimals, d.Token.Name, d.Token.Version, d.Token.Decimals))
	}
	if sep, err := chain.CallContract(ctx, ethereum.CallMsg{To: &tok.Address, Data: selector("DOMAIN_SEPARATOR()")}, nil); err == nil && len(sep) == 32 {
		if want := domainSeparator(tok); common.BytesToHash(sep) != want {
			errs = append(errs, fmt.Errorf("token %s: DOMAIN_SEPARATOR() %x is not that of %q version %q on chain %d", tok.Address, sep, tok.Name, tok.Version, ChainID))
		}
	}
	var contracts []ScenarioContract
	contracts = append(contracts, d.Scenario...)
	if d.Dex != nil {
		contracts = append(contracts, ScenarioContract{Name: "dex factory", Address: d.Dex.Factory}, ScenarioContract{Name: "weth", Address: d.Dex.WETH})
		if v4 := d.Dex.V4; v4 != nil {
			contracts = append(contracts, ScenarioContract{Name: "v4 pool manager", Address: v4.PoolManager},
				ScenarioContract{Name: "v4 swap router", Address: v4.SwapRouter}, ScenarioContract{Name: "v4 liquidity router", Address: v4.LiquidityRouter})
		}
		for _, t := range d.Dex.Tokens {
			contracts = append(contracts, ScenarioContract{Name: t.Name, Address: t.Token})
			if t.Venue != VenueV4 { // a V4 pool lives in the PoolManager
				contracts = append(contracts, ScenarioContract{Name: t.Name + " pair", Address: t.Pair})
			}
		}
	}
	if b := d.BatchSettlement; b != nil {
		contracts = append(contracts, ScenarioContract{Name: "batch-settlement escrow", Address: b.Escrow},
			ScenarioContract{Name: "ERC-3009 deposit collector", Address: b.ERC3009DepositCollector}, ScenarioContract{Name: "multicall3", Address: b.Multicall3})
	}
	for _, sc := range contracts {
		if code, err := chain.CodeAt(ctx, sc.Address, nil); err != nil {
			return Token{}, fmt.Errorf("%s: %w", sc.Name, err)
		} else if len(code) == 0 {
			errs = append(errs, fmt.Errorf("%s %s has no code", sc.Name, sc.Address))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Token{}, fmt.Errorf("the devnet's description does not match its chain: %w", err)
	}
	return tok, nil
}

// readToken reads a token's name(), symbol(), version() (empty when it has
// none) and decimals().
func readToken(ctx context.Context, chain ChainReader, addr common.Address) (Token, error) {
	tok := Token{Address: addr}
	code, err := chain.CodeAt(ctx, addr, nil)
	if err != nil {
		return tok, err
	}
	if len(code) == 0 {
		return tok, errors.New("no code")
	}
	str := func(sig string) (string, error) {
		out, err := chain.CallContract(ctx, ethereum.CallMsg{To: &addr, Data: selector(sig)}, nil)
		if err != nil {
			return "", err
		}
		return decodeString(out)
	}
	if tok.Name, err = str("name()"); err != nil {
		return tok, fmt.Errorf("name(): %w", err)
	}
	if tok.Symbol, err = str("symbol()"); err != nil {
		return tok, fmt.Errorf("symbol(): %w", err)
	}
	tok.Version, _ = str("version()") // optional: EIP-712 domains need not expose it
	out, err := chain.CallContract(ctx, ethereum.CallMsg{To: &addr, Data: selector("decimals()")}, nil)
	if err != nil || len(out) != 32 || new(big.Int).SetBytes(out).Cmp(big.NewInt(255)) > 0 {
		return tok, fmt.Errorf("decimals(): %x (%v)", out, err)
	}
	tok.Decimals = out[31]
	return tok, nil
}

func selector(sig string) []byte { return crypto.Keccak256([]byte(sig))[:4] }

// decodeString decodes an ABI-encoded string return value.
func decodeString(out []byte) (string, error) {
	if len(out) < 64 {
		return "", fmt.Errorf("%d bytes: not an ABI string", len(out))
	}
	off := new(big.Int).SetBytes(out[:32])
	if !off.IsUint64() || off.Uint64()+32 > uint64(len(out)) {
		return "", errors.New("not an ABI string")
	}
	o := off.Uint64()
	n := new(big.Int).SetBytes(out[o : o+32])
	if !n.IsUint64() || o+32+n.Uint64() > uint64(len(out)) {
		return "", errors.New("not an ABI string")
	}
	return string(out[o+32 : o+32+n.Uint64()]), nil
}

// domainSeparator is the EIP-712 domain separator of an EIP-3009 token
// (name, version, chain id, verifying contract) on the devnet.
func domainSeparator(t Token) common.Hash {
	typeHash := crypto.Keccak256([]byte("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"))
	return crypto.Keccak256Hash(typeHash, crypto.Keccak256([]byte(t.Name)), crypto.Keccak256([]byte(t.Version)),
		common.LeftPadBytes(big.NewInt(ChainID).Bytes(), 32), common.LeftPadBytes(t.Address.Bytes(), 32))
}

// Banner describes the devnet for an operator's console: headline, the
// chain and its contents, the facilitator's gas account and try, a hint
// of what to run next.
func (d *Description) Banner(headline, rpcURL string, facilitator AccountRole, try string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", headline)
	fmt.Fprintf(&b, "  chain id     %d (JSON-RPC %s)\n", d.ChainID, rpcURL)
	fmt.Fprintf(&b, "  USD token    %s (%q version %q, %d decimals)\n", d.Token.Address.Hex(), d.Token.Name, d.Token.Version, d.Token.Decimals)
	if a, ok := d.Account(RolePayTo); ok {
		fmt.Fprintf(&b, "  payTo        %s (test account #%d)\n", a.Address.Hex(), a.Index)
	}
	if facilitator.Address != (common.Address{}) {
		fmt.Fprintf(&b, "  facilitator  %s (test account #%d pays settlement gas)\n", facilitator.Address.Hex(), facilitator.Index)
	}
	fmt.Fprintf(&b, "  accounts     #0-#9 of %q, 10,000 ETH and 1,000 USD each\n", d.Mnemonic)
	for _, sc := range d.Scenario {
		fmt.Fprintf(&b, "  %-12s %s (expect %s)\n", sc.Name, sc.Address.Hex(), sc.Expect)
	}
	if d.Dex != nil {
		fmt.Fprintf(&b, "  dex factory  %s (V2-style; WETH %s)\n", d.Dex.Factory.Hex(), d.Dex.WETH.Hex())
		if v4 := d.Dex.V4; v4 != nil {
			fmt.Fprintf(&b, "  v4 manager   %s (Uniswap V4 PoolManager; routers PoolSwapTest %s, PoolModifyLiquidityTest %s)\n",
				v4.PoolManager.Hex(), v4.SwapRouter.Hex(), v4.LiquidityRouter.Hex())
		}
		for _, t := range d.Dex.Tokens {
			pool := "pair " + t.Pool()
			if t.Venue == VenueV4 {
				pool = "v4 pool " + t.Pool()
			}
			fmt.Fprintf(&b, "  %-12s %s (%s, %s)\n", t.Name, t.Token.Hex(), pool, t.Fate)
		}
		fmt.Fprintf(&b, "  traders      #%d smart, #%d holder, #%d lucky, #%d late; crowd #%d-#%d\n",
			SmartTrader, HolderTrader, LuckyTrader, LateTrader, crowdFirst, crowdFirst+crowdSize-1)
	}
	fmt.Fprintf(&b, "  try          %s\n", try)
	return b.String()
}
