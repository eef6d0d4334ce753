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
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/eth/filters"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/event"
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
	node   *node.Node
	eth    *eth.Ethereum
	client *ethclient.Client // in process, for setup and Transact
	rpc    *rpc.Server
	srv    *http.Server
	url    string
	wake   chan struct{} // a transaction became pending; see clock
	// blockTime, when set, seals on a fixed interval instead (interval).
	blockTime time.Duration
	txs       event.Subscription
	sendMu    sync.Mutex // Transact: one nonce at a time
	sealErr   atomic.Pointer[error]
	stop      chan struct{}
	wg        sync.WaitGroup // clock and forward
	Token     common.Address
	Accounts  []Account
	gas       []Account     // GasAccounts, handed out by claimGas
	claims    atomic.Uint32 // gas accounts handed out so far
	// Scenario holds the rug-check scenario contracts, in deployment order.
	Scenario []ScenarioContract
	// Dex is the V2-style exchange with its scripted trading history.
	Dex *Dex
}

// Options tune a devnet.
type Options struct {
	// BlockTime, when set (whole seconds), seals a block every BlockTime,
	// empty or not, as Base does every 2 s, so that latency figures mean
	// something; a transaction waits for the next one. Zero: a block as
	// soon as a transaction is pending, at most one a second.
	BlockTime time.Duration
}

// Start runs a devnet whose JSON-RPC endpoint serves on lis, and returns
// once the token is deployed, every account funded and the scripted
// history laid down, with a head no later than the wall clock.
func Start(ctx context.Context, lis net.Listener) (*Chain, error) {
	return StartWith(ctx, lis, Options{})
}

// StartWith is Start with options.
func StartWith(ctx context.Context, lis net.Listener, opts Options) (*Chain, error) {
	if opts.BlockTime < 0 || opts.BlockTime%time.Second != 0 {
		return nil, fmt.Errorf("devnet: block time %s: want a whole number of seconds", opts.BlockTime)
	}
	c := &Chain{stop: make(chan struct{}), wake: make(chan struct{}, 1), blockTime: opts.BlockTime}
	alloc := types.GenesisAlloc{}
	ethFunds := new(big.Int).Mul(big.NewInt(10_000), big.NewInt(params.Ether))
	keys, err := deriveKeys(Mnemonic, 0, FirstGasAccount+GasAccounts)
	if err != nil {
		return nil, err
	}
	for i, key := range keys {
		a := Account{Address: crypto.PubkeyToAddress(key.PublicKey), Key: key}
		if i < FirstGasAccount {
			c.Accounts = append(c.Accounts, a)
		} else {
			c.gas = append(c.gas, a)
		}
		alloc[a.Address] = types.Account{Balance: ethFunds}
	}
	batch, err := BatchSettlementAlloc()
	if err != nil {
		return nil, fmt.Errorf("devnet: %w", err)
	}
	for a, acct := range batch {
		alloc[a] = acct
	}
	if err := c.startNode(alloc, uint64(time.Now().Add(-historyLead).Unix())); err != nil {
		return nil, fmt.Errorf("devnet: %w", err)
	}
	if err := c.setup(ctx); err != nil {
		c.closeNode()
		return nil, fmt.Errorf("devnet: %w", err)
	}
	events := make(chan core.NewTxsEvent)
	c.txs = c.eth.TxPool().SubscribeTransactions(events, false)
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.forward(events, c.txs.Err()) }()
	if c.blockTime > 0 {
		go func() { defer c.wg.Done(); c.interval() }()
	} else {
		go func() { defer c.wg.Done(); c.clock() }()
	}
	c.url = "http://" + lis.Addr().String()
	c.srv = &http.Server{Handler: c, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = c.srv.Serve(lis) }()
	return c, nil
}

// setup deploys and funds the token, the scenario and the DEX history
// (the V2-style launches, then the Uniswap V4 one) in blocks a second
// apart after the hour-old genesis, then seals an empty block at the wall
// clock so that the head is current.
func (c *Chain) setup(ctx context.Context) error {
	if err := c.deployToken(ctx); err != nil {
		return fmt.Errorf("deploy token: %w", err)
	}
	if err := c.deployScenario(ctx); err != nil {
		return fmt.Errorf("deploy scenario: %w", err)
	}
	if err := c.dexHistory(ctx); err != nil {
		return fmt.Errorf("trading history: %w", err)
	}
	if err := c.v4History(ctx); err != nil {
		return fmt.Errorf("uniswap v4 trading history: %w", err)
	}
	now := uint64(time.Now().Unix())
	if now <= c.eth.BlockChain().CurrentBlock().Time {
		return nil // a history longer than historyLead reached the present
	}
	_, err := c.seal(now, true)
	return err
}

// startNode assembles what go-ethereum's ethclient/simulated backend
// assembles (an in-memory node, the eth service with every fork active and
// the filter API), keeping the node so its JSON-RPC handler can be served,
// with chain id 8453 (the shared dev chain config is copied, never
// mutated) and a genesis block stamped genesisTime. Blocks are sealed by
// seal, not by a simulated beacon.
func (c *Chain) startNode(alloc types.GenesisAlloc, genesisTime uint64) error {
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
	ethConf.Genesis = &core.Genesis{Config: &chainCfg, GasLimit: ethconfig.Defaults.Miner.GasCeil, Alloc: genesisAlloc, Timestamp: genesisTime}
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
	h, err := stack.RPCHandler()
	if err != nil {
		stack.Close()
		return err
	}
	c.node, c.eth, c.rpc, c.client = stack, backend, h, ethclient.NewClient(stack.Attach())
	return nil
}

func (c *Chain) closeNode() error {
	c.client.Close()
	return c.node.Close()
}

// URL returns the JSON-RPC endpoint.
func (c *Chain) URL() string { return c.url }

// Account returns test account i.
func (c *Chain) Account(i int) Account { return c.Accounts[i] }

// Close stops the RPC endpoint and the chain. It reports the first block
// the devnet failed to seal, if any.
func (c *Chain) Close() error {
	close(c.stop)
	c.txs.Unsubscribe()
	c.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// A connection that never sent a request (a client's dial left
		// over from a canceled call) holds Shutdown for its idle timeout:
		// close what is left rather than fail the close.
		err = c.srv.Close()
	}
	if sealErr := c.sealErr.Load(); sealErr != nil {
		err = errors.Join(err, fmt.Errorf("devnet: seal: %w", *sealErr))
	}
	return errors.Join(err, c.closeNode())
}

// ServeHTTP serves JSON-RPC as the node does: eth_sendRawTransaction
// answers once the pool has accepted the transaction, and the block that
// holds it comes from clock.
func (c *Chain) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if c.serveDevnet(w, r) {
		return
	}
	if m := disallowedMethod(body); m != "" {
		http.Error(w, fmt.Sprintf("method %q is not served by the devnet (eth_, net_ and web3_ only)", m), http.StatusForbidden)
		return
	}
	c.rpc.ServeHTTP(w, r)
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

// send signs and sends one transaction of Start's setup from a with
// estimated gas, seals it and returns its successful receipt.
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

// Transact signs a transaction from `from` calling `to` with data, with
// the estimated gas plus a fifth, sends it through the node like any
// client, waits for its block and returns its receipt, whether the call
// succeeded or reverted. An estimate that reverts is an error (with the
// revert reason, as the node words it), as is ctx ending, or a minute
// passing, before the receipt exists. Transact is for tests that need the
// chain to change under them, e.g. a payer canceling an authorization.
func (c *Chain) Transact(ctx context.Context, from Account, to common.Address, data []byte) (*types.Receipt, error) {
	return c.TransactValue(ctx, from, to, nil, data)
}

// TransactValue is Transact with value wei of native ETH sent along (nil:
// none), for calls that are paid in ETH, e.g. a Uniswap V4 router
// settling a pool whose currency0 is native ETH.
func (c *Chain) TransactValue(ctx context.Context, from Account, to common.Address, value *big.Int, data []byte) (*types.Receipt, error) {
	gas, err := c.client.EstimateGas(ctx, ethereum.CallMsg{From: from.Address, To: &to, Value: value, Data: data})
	if err != nil {
		return nil, err
	}
	h, err := c.submit(ctx, from, &to, value, data, gas*12/10)
	if err != nil {
		return nil, err
	}
	return c.receipt(ctx, h)
}

// Deploy deploys the committed artifact name (devnet/artifacts) with
// constructor args from `from`, as Transact sends a call, and returns its
// address and ABI: for tests that deploy contracts the devnet's history
// does not, e.g. a venue's genuine factory and routers.
func (c *Chain) Deploy(ctx context.Context, from Account, name string, args ...any) (common.Address, abi.ABI, error) {
	data, parsed, err := creation(name, args...)
	if err != nil {
		return common.Address{}, parsed, err
	}
	addr, err := c.DeployCode(ctx, from, data)
	if err != nil {
		return common.Address{}, parsed, fmt.Errorf("%s: %w", name, err)
	}
	return addr, parsed, nil
}

// DeployCode deploys creation code (its constructor arguments appended)
// from an account and waits for the contract, for tests that bring
// contracts the devnet does not ship.
func (c *Chain) DeployCode(ctx context.Context, from Account, data []byte) (common.Address, error) {
	gas, err := c.client.EstimateGas(ctx, ethereum.CallMsg{From: from.Address, Data: data})
	if err != nil {
		return common.Address{}, err
	}
	h, err := c.submit(ctx, from, nil, nil, data, gas*12/10)
	if err != nil {
		return common.Address{}, err
	}
	rcpt, err := c.receipt(ctx, h)
	if err != nil {
		return common.Address{}, err
	}
	if rcpt.Status != types.ReceiptStatusSuccessful {
		return common.Address{}, errors.New("deployment reverted")
	}
	return rcpt.ContractAddress, nil
}

// submit signs and sends one transaction with the sender's next nonce and
// waits until the pool counts it as pending, which it does asynchronously,
// so that the next submit from the same sender takes the next nonce.
func (c *Chain) submit(ctx context.Context, from Account, to *common.Address, value *big.Int, data []byte, gas uint64) (common.Hash, error) {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	nonce, err := c.client.PendingNonceAt(ctx, from.Address)
	if err != nil {
		return common.Hash{}, err
	}
	feeCap, err := c.feeCap(ctx)
	if err != nil {
		return common.Hash{}, err
	}
	tx, err := sign(from, nonce, to, value, data, gas, feeCap)
	if err != nil {
		return common.Hash{}, err
	}
	if err := c.client.SendTransaction(ctx, tx); err != nil {
		return common.Hash{}, err
	}
	return tx.Hash(), c.awaitPending(ctx, map[common.Address]uint64{from.Address: nonce + 1})
}

// awaitPending waits until the pool counts every sender's transactions up
// to the given next nonce as pending. The pool promotes them on a
// background loop, and a block sealed meanwhile may leave a sender's
// later nonces out: the reset that Sync forces re-reads nonces from the
// state and so promotes a queued transaction only together with its
// predecessor, not after a pending one.
func (c *Chain) awaitPending(ctx context.Context, next map[common.Address]uint64) error {
	deadline := time.Now().Add(5 * time.Second)
	for addr, want := range next {
		for {
			n, err := c.client.PendingNonceAt(ctx, addr)
			if err != nil {
				return err
			}
			if n >= want {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: the pool holds nonces below %d, want %d", addr, n, want)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}
	return nil
}

// receipt polls the node for a transaction's receipt until its block is
// sealed and indexed.
func (c *Chain) receipt(ctx context.Context, h common.Hash) (*types.Receipt, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		rcpt, err := c.client.TransactionReceipt(ctx, h)
		if !errors.Is(err, ethereum.NotFound) {
			return rcpt, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("transaction %s: no receipt: %w", h, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// tip is the priority fee of every devnet transaction, in wei.
const tip = params.GWei

// feeCap returns a fee cap that covers twice the head's base fee.
func (c *Chain) feeCap(ctx context.Context) (*big.Int, error) {
	head, err := c.client.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, err
	}
	return new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), big.NewInt(tip)), nil
}

// sign signs a dynamic-fee transaction of the devnet's chain carrying
// value wei (nil: none).
func sign(from Account, nonce uint64, to *common.Address, value *big.Int, data []byte, gas uint64, feeCap *big.Int) (*types.Transaction, error) {
	return types.SignNewTx(from.Key, types.LatestSignerForChainID(big.NewInt(ChainID)), &types.DynamicFeeTx{
		ChainID: big.NewInt(ChainID), Nonce: nonce, GasTipCap: big.NewInt(tip), GasFeeCap: feeCap, Gas: gas, To: to, Value: value, Data: data,
	})
}

// Banner describes the devnet for the operator's console.
func (c *Chain) Banner(publicURL string) string {
	d := c.Description()
	fac, _ := d.Account(RoleFacilitator)
	return d.Banner("DEVNET — an in-process test chain, not Base. Nothing here is real money.", c.url, fac,
		"go run ./cmd/tollgate pay "+strings.TrimSuffix(publicURL, "/")+"/regime")
}

// deploy deploys the artifact name with constructor args from a.
func (c *Chain) deploy(ctx context.Context, a Account, name string, args ...any) (common.Address, abi.ABI, error) {
	data, parsed, err := creation(name, args...)
	if err != nil {
		return common.Address{}, parsed, err
	}
	rcpt, err := c.send(ctx, a, nil, data)
	if err != nil {
		return common.Address{}, parsed, fmt.Errorf("%s: %w", name, err)
	}
	return rcpt.ContractAddress, parsed, nil
}

// creation is the deployment data of artifact name with constructor args.
func creation(name string, args ...any) ([]byte, abi.ABI, error) {
	art, parsed, err := LoadArtifact(name)
	if err != nil {
		return nil, parsed, err
	}
	ctor, err := parsed.Pack("", args...)
	if err != nil {
		return nil, parsed, fmt.Errorf("%s: %w", name, err)
	}
	return append(common.FromHex(art.Bytecode), ctor...), parsed, nil
}

// pendingTx is one transaction of a block sent with sendBlock.
type pendingTx struct {
	from  Account
	to    *common.Address // nil deploys
	value *big.Int        // native ETH sent along; nil: none
	data  []byte
	gas   uint64 // 0: defaultGas
	err   error  // from packing the call; sendTxs reports it
}

// sendBlock signs the transactions in order (nonces counted per sender),
// seals them into one block and checks every receipt. Scripted history uses
// it so that a step of several transactions is one block, as a trader's
// approve and swap would be on Base.
func (c *Chain) sendBlock(ctx context.Context, txs ...pendingTx) error {
	_, err := c.sendTxs(ctx, txs...)
	return err
}

// sendTxs signs txs in order (nonces counted per sender), sends them,
// seals them into the next block of Start's history and returns their
// receipts, each of which must be a success.
func (c *Chain) sendTxs(ctx context.Context, txs ...pendingTx) ([]*types.Receipt, error) {
	for _, p := range txs {
		if p.err != nil {
			return nil, p.err
		}
	}
	feeCap, err := c.feeCap(ctx)
	if err != nil {
		return nil, err
	}
	nonces := map[common.Address]uint64{}
	var hashes []common.Hash
	for _, p := range txs {
		n, ok := nonces[p.from.Address]
		if !ok {
			if n, err = c.client.PendingNonceAt(ctx, p.from.Address); err != nil {
				return nil, err
			}
		}
		nonces[p.from.Address] = n + 1
		gas := p.gas
		if gas == 0 {
			gas = defaultGas
		}
		tx, err := sign(p.from, n, p.to, p.value, p.data, gas, feeCap)
		if err != nil {
			return nil, err
		}
		if err := c.client.SendTransaction(ctx, tx); err != nil {
			return nil, err
		}
		hashes = append(hashes, tx.Hash())
	}
	if err := c.awaitPending(ctx, nonces); err != nil {
		return nil, err
	}
	block, err := c.sealSetup()
	if err != nil {
		return nil, err
	}
	byHash := map[common.Hash]*types.Receipt{}
	for _, r := range c.eth.BlockChain().GetReceiptsByHash(block.Hash()) {
		byHash[r.TxHash] = r
	}
	var rcpts []*types.Receipt
	for _, h := range hashes {
		switch rcpt := byHash[h]; {
		case rcpt == nil:
			return nil, fmt.Errorf("transaction %s: not in block %d", h, block.NumberU64())
		case rcpt.Status != types.ReceiptStatusSuccessful:
			return nil, fmt.Errorf("transaction %s reverted", h)
		default:
			rcpts = append(rcpts, rcpt)
		}
	}
	return rcpts, nil
}

// defaultGas is the gas of a scripted call whose pendingTx names none.
const defaultGas = 400_000

// callMsg is a read-only call to a contract.
func callMsg(to common.Address, data []byte) ethereum.CallMsg {
	return ethereum.CallMsg{To: &to, Data: data}
}
