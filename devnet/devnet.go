// Package devnet runs Tollgate's embedded development chain: go-ethereum's
// simulated backend with chain id 8453 (Base's), a block for every
// transaction as it arrives, a standard Ethereum JSON-RPC endpoint, the
// devnet USD token (FiatToken-compatible EIP-3009, "USD Coin" version "2",
// 6 decimals) deployed, and the ten well-known test accounts funded with
// ETH and 1,000 USD each.
//
// Production code never imports devnet: the facilitator and the chain
// readers reach it through its JSON-RPC endpoint like any node. Only cmd
// (devnet mode) and tests start it.
package devnet

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth"
	"github.com/ethereum/go-ethereum/eth/catalyst"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/eth/filters"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/p2p"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"
)

// ChainID is the devnet's chain id: Base mainnet's, so signatures and
// CAIP-2 names are those of production.
const ChainID = 8453

// Roles of the test accounts.
const (
	PayerAccount       = 0  // default key of `tollgate pay`
	PayToAccount       = 1  // receives payments
	FacilitatorAccount = 9  // deploys the token and pays settlement gas
	accounts           = 10 // funded with ETH and the USD token
	traderAccounts     = 6  // #10-#15: the crowd of the DEX history, ETH only
)

// Token facts, as Base's USDC.
const (
	TokenName     = "USD Coin"
	TokenSymbol   = "USDC"
	TokenVersion  = "2"
	TokenDecimals = 6
)

//go:embed artifacts/*.json
var artifacts embed.FS

// Artifact is a compiled contract (devnet/contracts/compile.js output).
type Artifact struct {
	Compiler         string          `json:"compiler"`
	ABI              json.RawMessage `json:"abi"`
	Bytecode         string          `json:"bytecode"`
	DeployedBytecode string          `json:"deployedBytecode"`
}

// TokenArtifact returns the compiled devnet USD token.
func TokenArtifact() (Artifact, abi.ABI, error) { return LoadArtifact("USDToken") }

// LoadArtifact returns a compiled devnet contract and its parsed ABI.
func LoadArtifact(name string) (Artifact, abi.ABI, error) {
	var a Artifact
	raw, err := artifacts.ReadFile("artifacts/" + name + ".json")
	if err != nil {
		return a, abi.ABI{}, err
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, abi.ABI{}, err
	}
	parsed, err := abi.JSON(bytes.NewReader(a.ABI))
	return a, parsed, err
}

// Account is a funded test account.
type Account struct {
	Address common.Address
	Key     *ecdsa.PrivateKey
}

// Chain is a running devnet.
type Chain struct {
	node     *node.Node
	beacon   *catalyst.SimulatedBeacon
	client   *ethclient.Client
	rpc      *rpc.Server
	mu       sync.Mutex // serializes block production
	srv      *http.Server
	url      string
	stop     chan struct{}
	done     chan struct{}
	Token    common.Address
	Accounts []Account
	// Scenario holds the rug-check scenario contracts, in deployment order.
	Scenario []ScenarioContract
	// Dex is the V2-style exchange with its scripted trading history.
	Dex *Dex
}

// Start runs a devnet whose JSON-RPC endpoint serves on lis, and returns
// once the token is deployed and every account funded.
func Start(ctx context.Context, lis net.Listener) (*Chain, error) {
	c := &Chain{stop: make(chan struct{}), done: make(chan struct{})}
	alloc := types.GenesisAlloc{}
	ethFunds := new(big.Int).Mul(big.NewInt(10_000), big.NewInt(params.Ether))
	for i := range uint32(accounts + traderAccounts) {
		key, err := DeriveKey(Mnemonic, i)
		if err != nil {
			return nil, err
		}
		a := Account{Address: crypto.PubkeyToAddress(key.PublicKey), Key: key}
		c.Accounts = append(c.Accounts, a)
		alloc[a.Address] = types.Account{Balance: ethFunds}
	}
	if err := c.startNode(alloc); err != nil {
		return nil, fmt.Errorf("devnet: %w", err)
	}
	if err := c.deployToken(ctx); err != nil {
		c.closeNode()
		return nil, fmt.Errorf("devnet: deploy token: %w", err)
	}
	if err := c.deployScenario(ctx); err != nil {
		c.closeNode()
		return nil, fmt.Errorf("devnet: deploy scenario: %w", err)
	}
	if err := c.dexHistory(ctx); err != nil {
		c.closeNode()
		return nil, fmt.Errorf("devnet: trading history: %w", err)
	}
	c.url = "http://" + lis.Addr().String()
	c.srv = &http.Server{Handler: c, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = c.srv.Serve(lis) }()
	go c.heartbeat()
	return c, nil
}

// startNode assembles what go-ethereum's ethclient/simulated backend
// assembles (an in-memory node, the eth service with every fork active,
// the filter API and the simulated beacon that seals blocks on demand),
// keeping the node so its JSON-RPC handler can be served, and with chain
// id 8453 (the shared dev chain config is copied, never mutated).
func (c *Chain) startNode(alloc types.GenesisAlloc) error {
	nodeConf := node.DefaultConfig
	nodeConf.DataDir = ""
	nodeConf.P2P = p2p.Config{NoDiscovery: true}
	genesisAlloc := core.SystemContractAllocs()
	for a, acct := range alloc {
		genesisAlloc[a] = acct
	}
	chainCfg := *params.AllDevChainProtocolChanges
	chainCfg.ChainID = big.NewInt(ChainID)
	ethConf := ethconfig.Defaults
	ethConf.Genesis = &core.Genesis{Config: &chainCfg, GasLimit: ethconfig.Defaults.Miner.GasCeil, Alloc: genesisAlloc}
	ethConf.NetworkId = ChainID
	ethConf.SyncMode = ethconfig.FullSync
	ethConf.TxPool.NoLocals = true
	stack, err := node.New(&nodeConf)
	if err != nil {
		return err
	}
	backend, err := eth.New(stack, &ethConf)
	if err != nil {
		stack.Close()
		return err
	}
	fs := filters.NewFilterSystem(backend.APIBackend, filters.Config{})
	stack.RegisterAPIs([]rpc.API{{Namespace: "eth", Service: filters.NewFilterAPI(fs)}})
	if err := stack.Start(); err != nil {
		stack.Close()
		return err
	}
	beacon, err := catalyst.NewSimulatedBeacon(0, common.Address{}, backend)
	if err == nil {
		err = beacon.Fork(backend.BlockChain().GetCanonicalHash(0))
	}
	if err != nil {
		stack.Close()
		return err
	}
	h, err := stack.RPCHandler()
	if err != nil {
		stack.Close()
		return err
	}
	c.node, c.beacon, c.rpc, c.client = stack, beacon, h, ethclient.NewClient(stack.Attach())
	return nil
}

func (c *Chain) closeNode() error {
	c.client.Close()
	return errors.Join(c.beacon.Stop(), c.node.Close())
}

// URL returns the JSON-RPC endpoint.
func (c *Chain) URL() string { return c.url }

// Account returns test account i.
func (c *Chain) Account(i int) Account { return c.Accounts[i] }

// Close stops the RPC endpoint and the chain.
func (c *Chain) Close() error {
	close(c.stop)
	<-c.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.srv.Shutdown(ctx)
	return errors.Join(err, c.closeNode())
}

// ServeHTTP serves JSON-RPC; a request that sends a transaction is
// answered after the block holding it is sealed, so its receipt exists by
// the time the sender has the hash.
func (c *Chain) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if m := disallowedMethod(body); m != "" {
		http.Error(w, fmt.Sprintf("method %q is not served by the devnet (eth_, net_ and web3_ only)", m), http.StatusForbidden)
		return
	}
	if !bytes.Contains(body, []byte("eth_sendRawTransaction")) {
		c.rpc.ServeHTTP(w, r)
		return
	}
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	c.rpc.ServeHTTP(rec, r)
	c.mine()
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.status)
	_, _ = w.Write(rec.body.Bytes())
}

// disallowedMethod returns the first method of a JSON-RPC request (single
// or batch) outside the eth, net and web3 namespaces: the node's admin and
// debug APIs are not the devnet's to offer.
func disallowedMethod(body []byte) string {
	var calls []struct{ Method string }
	if err := json.Unmarshal(body, &calls); err != nil {
		var one struct{ Method string }
		if json.Unmarshal(body, &one) != nil {
			return "" // not JSON: the RPC server answers the parse error
		}
		calls = append(calls, one)
	}
	for _, c := range calls {
		if !strings.HasPrefix(c.Method, "eth_") && !strings.HasPrefix(c.Method, "net_") && !strings.HasPrefix(c.Method, "web3_") {
			return c.Method
		}
	}
	return ""
}

// mine seals the pending transactions into a block.
func (c *Chain) mine() {
	c.mu.Lock()
	c.beacon.Commit()
	c.mu.Unlock()
}

// heartbeat seals an empty block whenever the head is 2 s behind the wall
// clock, as Base does, so eth_call sees a current block.timestamp (EIP-3009
// time windows are checked against it).
func (c *Chain) heartbeat() {
	defer close(c.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case now := <-t.C:
			head, err := c.client.HeaderByNumber(context.Background(), nil)
			if err == nil && now.Unix()-int64(head.Time) >= 2 {
				c.mine()
			}
		}
	}
}

func (c *Chain) deployToken(ctx context.Context) error {
	art, parsed, err := TokenArtifact()
	if err != nil {
		return err
	}
	ctor, err := parsed.Pack("", TokenName, TokenSymbol)
	if err != nil {
		return err
	}
	deployer := c.Accounts[FacilitatorAccount]
	code := append(common.FromHex(art.Bytecode), ctor...)
	rcpt, err := c.send(ctx, deployer, nil, code)
	if err != nil {
		return err
	}
	c.Token = rcpt.ContractAddress
	unit := new(big.Int).Exp(big.NewInt(10), big.NewInt(TokenDecimals), nil)
	amount := new(big.Int).Mul(big.NewInt(1_000), unit)
	for _, a := range c.Accounts[:accounts] {
		data, err := parsed.Pack("mint", a.Address, amount)
		if err != nil {
			return err
		}
		if _, err := c.send(ctx, deployer, &c.Token, data); err != nil {
			return fmt.Errorf("mint to %s: %w", a.Address, err)
		}
	}
	return nil
}

// send signs and sends one transaction from a with estimated gas, seals
// it and returns its successful receipt.
func (c *Chain) send(ctx context.Context, a Account, to *common.Address, data []byte) (*types.Receipt, error) {
	gas, err := c.client.EstimateGas(ctx, ethereum.CallMsg{From: a.Address, To: to, Data: data})
	if err != nil {
		return nil, err
	}
	rcpts, err := c.sendTxs(ctx, pendingTx{from: a, to: to, data: data, gas: gas * 12 / 10})
	if err != nil {
		return nil, err
	}
	return rcpts[0], nil
}

// Banner describes the devnet for the operator's console.
func (c *Chain) Banner(publicURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "DEVNET — an in-process test chain, not Base. Nothing here is real money.\n")
	fmt.Fprintf(&b, "  chain id     %d (JSON-RPC %s)\n", ChainID, c.url)
	fmt.Fprintf(&b, "  USD token    %s (%q version %q, %d decimals)\n", c.Token.Hex(), TokenName, TokenVersion, TokenDecimals)
	fmt.Fprintf(&b, "  payTo        %s (test account #%d)\n", c.Accounts[PayToAccount].Address.Hex(), PayToAccount)
	fmt.Fprintf(&b, "  facilitator  %s (test account #%d pays settlement gas)\n", c.Accounts[FacilitatorAccount].Address.Hex(), FacilitatorAccount)
	fmt.Fprintf(&b, "  accounts     #0-#9 of %q, 10,000 ETH and 1,000 USD each\n", Mnemonic)
	for _, sc := range c.Scenario {
		fmt.Fprintf(&b, "  %-12s %s (expect %s)\n", sc.Name, sc.Address.Hex(), sc.Expect)
	}
	if c.Dex != nil {
		fmt.Fprintf(&b, "  dex factory  %s (V2-style; WETH %s)\n", c.Dex.Factory.Hex(), c.Dex.WETH.Hex())
		for _, t := range c.Dex.Tokens {
			fmt.Fprintf(&b, "  %-12s %s (pair %s, %s)\n", t.Name, t.Token.Hex(), t.Pair.Hex(), t.Fate)
		}
		fmt.Fprintf(&b, "  traders      #%d smart, #%d holder, #%d lucky, #%d late; crowd #%d-#%d\n",
			SmartTrader, HolderTrader, LuckyTrader, LateTrader, crowdFirst, crowdFirst+crowdSize-1)
	}
	fmt.Fprintf(&b, "  try          go run ./cmd/tollgate pay %s/regime\n", strings.TrimSuffix(publicURL, "/"))
	return b.String()
}

// recorder buffers a response.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(s int)           { r.status = s }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }

// deploy deploys the artifact name with constructor args from a.
func (c *Chain) deploy(ctx context.Context, a Account, name string, args ...any) (common.Address, abi.ABI, error) {
	art, parsed, err := LoadArtifact(name)
	if err != nil {
		return common.Address{}, parsed, err
	}
	ctor, err := parsed.Pack("", args...)
	if err != nil {
		return common.Address{}, parsed, err
	}
	rcpt, err := c.send(ctx, a, nil, append(common.FromHex(art.Bytecode), ctor...))
	if err != nil {
		return common.Address{}, parsed, fmt.Errorf("%s: %w", name, err)
	}
	return rcpt.ContractAddress, parsed, nil
}

// pendingTx is one transaction of a block sent with sendBlock.
type pendingTx struct {
	from Account
	to   *common.Address // nil deploys
	data []byte
	gas  uint64 // 0: defaultGas
	err  error  // from packing the call; sendTxs reports it
}

// sendBlock signs the transactions in order (nonces counted per sender),
// seals them into one block and checks every receipt. Scripted history uses
// it so that a step of several transactions costs one block, which keeps
// the chain's clock close to the wall clock (each block is at least one
// second after its parent).
func (c *Chain) sendBlock(ctx context.Context, txs ...pendingTx) error {
	_, err := c.sendTxs(ctx, txs...)
	return err
}

// sendTxs signs txs in order (nonces counted per sender), sends them and
// seals them into one block.
func (c *Chain) sendTxs(ctx context.Context, txs ...pendingTx) ([]*types.Receipt, error) {
	for _, p := range txs {
		if p.err != nil {
			return nil, p.err
		}
	}
	cl := c.client
	head, err := cl.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, err
	}
	tip := big.NewInt(params.GWei)
	feeCap := new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), tip)
	nonces := map[common.Address]uint64{}
	var hashes []common.Hash
	for _, p := range txs {
		n, ok := nonces[p.from.Address]
		if !ok {
			if n, err = cl.PendingNonceAt(ctx, p.from.Address); err != nil {
				return nil, err
			}
		}
		nonces[p.from.Address] = n + 1
		gas := p.gas
		if gas == 0 {
			gas = defaultGas
		}
		tx, err := types.SignNewTx(p.from.Key, types.LatestSignerForChainID(big.NewInt(ChainID)), &types.DynamicFeeTx{
			ChainID: big.NewInt(ChainID), Nonce: n, GasTipCap: tip, GasFeeCap: feeCap, Gas: gas, To: p.to, Data: p.data,
		})
		if err != nil {
			return nil, err
		}
		if err := cl.SendTransaction(ctx, tx); err != nil {
			return nil, err
		}
		hashes = append(hashes, tx.Hash())
	}
	return c.seal(ctx, nonces, hashes...)
}

// defaultGas is the gas of a scripted call whose pendingTx names none.
const defaultGas = 400_000

// seal waits until the pool holds every sent transaction as pending (it
// promotes a sender's later nonces asynchronously) so that they share one
// block, seals it, and returns the receipts, each of which must be a
// success.
func (c *Chain) seal(ctx context.Context, nonces map[common.Address]uint64, hashes ...common.Hash) ([]*types.Receipt, error) {
	cl := c.client
	wait := time.Now().Add(2 * time.Second) // then seal anyway: receipt seals again for stragglers
	for addr, want := range nonces {
		for time.Now().Before(wait) {
			n, err := cl.PendingNonceAt(ctx, addr)
			if err != nil {
				return nil, err
			}
			if n >= want {
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}
	c.mine()
	var rcpts []*types.Receipt
	for _, h := range hashes {
		rcpt, err := c.receipt(ctx, h)
		if err != nil {
			return nil, fmt.Errorf("transaction %s: %w", h, err)
		}
		if rcpt.Status != types.ReceiptStatusSuccessful {
			return nil, fmt.Errorf("transaction %s reverted", h)
		}
		rcpts = append(rcpts, rcpt)
	}
	return rcpts, nil
}

// receipt waits for a sealed transaction's receipt: the node indexes
// transactions in the background, so a fresh block's may lag a little. A
// transaction still missing is sealed into one more block every 100 ms.
func (c *Chain) receipt(ctx context.Context, h common.Hash) (*types.Receipt, error) {
	deadline := time.Now().Add(10 * time.Second)
	for attempt := 0; ; attempt++ {
		rcpt, err := c.client.TransactionReceipt(ctx, h)
		if !errors.Is(err, ethereum.NotFound) {
			return rcpt, err
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		if attempt%50 == 49 {
			c.mine()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// callMsg is a read-only call to a contract.
func callMsg(to common.Address, data []byte) ethereum.CallMsg {
	return ethereum.CallMsg{To: &to, Data: data}
}
