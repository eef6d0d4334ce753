package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/tollgate/tollgate/devnet"
)

// devnetCmd runs `tollgate devnet`: the devnet chain as a process of its
// own, so that several servers (`tollgate serve --devnet-url`) share one
// chain. It serves JSON-RPC, the description and the gas accounts
// (devnet.DescriptionPath, devnet.GasAccountPath) on one port until ctx
// ends.
func devnetCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("devnet", flag.ContinueOnError)
	def := getenv("TOLLGATE_DEVNET_RPC")
	if def == "" {
		def = defaultDevnetRPC
	}
	addr := fs.String("rpc", def, "listen address of the chain's JSON-RPC, "+devnet.DescriptionPath+" and "+devnet.GasAccountPath+" (or TOLLGATE_DEVNET_RPC)")
	blockTime := fs.Duration("block-time", 0, "seal a block every this many whole seconds, empty or not (2s: Base's rhythm); 0: a block as soon as a transaction is pending")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: tollgate devnet [--rpc 127.0.0.1:8545] [--block-time 2s]\n\nRuns the devnet chain alone, for servers started with tollgate serve --devnet-url.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, "devnet", args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("devnet: unexpected arguments %q", fs.Args())
	}
	lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", *addr)
	if err != nil {
		return fmt.Errorf("devnet: --rpc: %w", err)
	}
	chain, err := devnet.StartWith(ctx, lis, devnet.Options{BlockTime: *blockTime})
	if err != nil {
		lis.Close()
		return err
	}
	rpcURL := "http://" + dialTarget(lis.Addr())
	d := chain.Description()
	fmt.Fprint(stderr, d.Banner("DEVNET — a test chain for Tollgate servers, not Base. Nothing here is real money.", rpcURL, devnet.AccountRole{},
		fmt.Sprintf("go run ./cmd/tollgate serve --devnet-url %s (each server claims its own gas account of #%d-#%d)",
			rpcURL, devnet.FirstGasAccount, devnet.FirstGasAccount+devnet.GasAccounts-1)))
	<-ctx.Done()
	fmt.Fprintln(stderr, "devnet: stopping")
	return chain.Close()
}

// devnetChain is a devnet as serve uses it: its description, the token's
// EIP-712 domain as the token reports it, and the gas key of this server's
// facilitator.
type devnetChain struct {
	rpcURL string
	desc   *devnet.Description
	token  devnet.Token
	gas    devnet.Account
	banner string
	close  func()
}

// startDevnet starts the in-process devnet of one-command devnet mode.
func startDevnet(ctx context.Context, lis net.Listener, publicURL string, blockTime time.Duration) (*devnetChain, error) {
	chain, err := devnet.StartWith(ctx, lis, devnet.Options{BlockTime: blockTime})
	if err != nil {
		return nil, err
	}
	d := chain.Description()
	return &devnetChain{rpcURL: chain.URL(), desc: d, token: d.Token, gas: chain.Account(devnet.FacilitatorAccount),
		banner: chain.Banner(publicURL), close: func() { chain.Close() }}, nil
}

// dialDevnet connects to a devnet that runs as its own process (`tollgate
// devnet`) at rawURL, its JSON-RPC endpoint: it reads the description,
// checks it against the chain, and claims a gas account for this server's
// facilitator. Anything else than a Tollgate devnet is refused.
func dialDevnet(ctx context.Context, rawURL, publicURL string) (_ *devnetChain, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("--devnet-url %s: %w", redactURL(rawURL), err)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	httpc := &http.Client{Timeout: 10 * time.Second}
	d, err := devnet.Fetch(ctx, httpc, rawURL)
	if err != nil {
		return nil, err
	}
	client, err := ethclient.DialContext(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	tok, err := d.Check(ctx, client, func(ctx context.Context) (common.Hash, error) {
		h, err := client.HeaderByNumber(ctx, big.NewInt(0))
		if err != nil {
			return common.Hash{}, err
		}
		return h.Hash(), nil
	})
	if err != nil {
		return nil, err
	}
	gas, index, err := devnet.ClaimGas(ctx, httpc, rawURL)
	if err != nil {
		return nil, err
	}
	banner := d.Banner(fmt.Sprintf("DEVNET — a shared test chain (tollgate devnet at %s), not Base. Nothing here is real money.", redactURL(rawURL)),
		redactURL(rawURL), devnet.AccountRole{Index: index, Address: gas.Address, Role: devnet.RoleGas},
		"go run ./cmd/tollgate pay "+strings.TrimSuffix(publicURL, "/")+"/regime")
	return &devnetChain{rpcURL: rawURL, desc: d, token: tok, gas: gas, banner: banner, close: func() {}}, nil
}

// validDevnetURL checks --devnet-url: an http(s) URL of a devnet's
// JSON-RPC endpoint, never together with --chain-rpc (a production chain
// is never switched into devnet mode, and devnet mode is only ever asked
// for by name).
func validDevnetURL(raw, chainRPC string) error {
	if raw == "" {
		return nil
	}
	if chainRPC != "" {
		return errors.New("--devnet-url and --chain-rpc exclude each other: --chain-rpc is a production chain, --devnet-url a shared devnet (tollgate devnet)")
	}
	if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--devnet-url %q: want the http(s) URL of a tollgate devnet's JSON-RPC, such as http://127.0.0.1:8545", raw)
	}
	return nil
}
