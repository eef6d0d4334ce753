package main

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/payment/exact"
)

// facilitator runs `tollgate facilitator`: the self-hosted facilitator as
// a standard x402 facilitator HTTP API (POST /verify, POST /settle, GET
// /supported) for other x402 servers, for exact and batch-settlement (the
// escrow at its canonical address). With a receiver authorizer key it
// signs the claims and refunds a server leaves unsigned and advertises
// the key's address in /supported.
func facilitator(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("facilitator", flag.ContinueOnError)
	addr := fs.String("http", "127.0.0.1:8403", "listen address of the facilitator API")
	rpcURL := fs.String("chain-rpc", getenv("TOLLGATE_CHAIN_RPC"), "Ethereum JSON-RPC URL of a Base node (chain id 8453), or the devnet's")
	asset := fs.String("asset", baseUSDC, "EIP-3009 token accepted (default USDC on Base)")
	payTo := fs.String("pay-to", getenv("TOLLGATE_PAY_TO"), "comma-separated recipients this facilitator settles for (required)")
	keyFile := fs.String("facilitator-key-file", getenv("TOLLGATE_FACILITATOR_KEY_FILE"), "file holding the hex gas key (or set TOLLGATE_FACILITATOR_KEY)")
	batchKeyFile := fs.String("batch-authorizer-key-file", getenv("TOLLGATE_BATCH_AUTHORIZER_KEY_FILE"),
		"batch-settlement: file holding the hex key of the receiver authorizer this facilitator signs claims and refunds with and advertises "+
			"(or set TOLLGATE_BATCH_AUTHORIZER_KEY); optional: without it, servers sign their own. Anyone reaching the API can then have "+
			"refunds signed: keep it on a private network")
	if err := parseFlags(fs, "facilitator", args, stdout); err != nil {
		return err
	}
	if *rpcURL == "" || !common.IsHexAddress(*asset) {
		return errors.New("facilitator: --chain-rpc and a valid --asset are required")
	}
	var recipients []common.Address
	for _, a := range strings.Split(*payTo, ",") {
		if a = strings.TrimSpace(a); a != "" {
			if !common.IsHexAddress(a) {
				return fmt.Errorf("facilitator: --pay-to %q is not an address", a)
			}
			recipients = append(recipients, common.HexToAddress(a))
		}
	}
	if len(recipients) == 0 {
		return errors.New("facilitator: --pay-to is required: the gas key is spent only on payments to these addresses")
	}
	keyHex, err := facilitatorKey(&config{FacilitatorKey: getenv("TOLLGATE_FACILITATOR_KEY"), KeyFile: *keyFile})
	if err != nil || keyHex == "" {
		return errors.New("facilitator: a gas key is required: TOLLGATE_FACILITATOR_KEY or --facilitator-key-file")
	}
	key, err := crypto.HexToECDSA(strings.TrimPrefix(strings.TrimSpace(keyHex), "0x"))
	if err != nil {
		return errors.New("facilitator: the gas key is not a hex secp256k1 key")
	}
	var authorizer *ecdsa.PrivateKey
	authHex, err := batchKey(&config{BatchAuthorizerKey: getenv("TOLLGATE_BATCH_AUTHORIZER_KEY"), BatchKeyFile: *batchKeyFile}, false)
	if err != nil {
		return fmt.Errorf("facilitator: %w", err)
	}
	if authHex = strings.TrimPrefix(strings.TrimSpace(authHex), "0x"); authHex != "" {
		if authorizer, err = crypto.HexToECDSA(authHex); err != nil {
			return errors.New("facilitator: the batch receiver authorizer key is not a hex secp256k1 key")
		}
	}
	client, err := ethclient.DialContext(ctx, *rpcURL)
	if err != nil {
		return err
	}
	defer client.Close()
	if id, err := client.ChainID(ctx); err != nil || id.Int64() != baseChainID {
		return fmt.Errorf("facilitator: chain id %v (%v); want %d", id, err, baseChainID)
	}
	// One gas key, one sender: every scheme's transactions share its nonces.
	local, err := payment.NewLocal(payment.LocalConfig{ChainID: big.NewInt(baseChainID), Key: key, ReceiptTimeout: 60 * time.Second}, client)
	if err != nil {
		return err
	}
	exactLocal, err := exact.NewLocal(exact.LocalConfig{ChainID: big.NewInt(baseChainID), Grace: 6 * time.Second,
		Assets: []payment.Asset{{Address: common.HexToAddress(*asset), Name: usdcName, Version: usdcVersion}}}, client, local)
	if err != nil {
		return err
	}
	batchSide, batchNote, err := batchFacilitator(ctx, client, local, authorizer, common.HexToAddress(*asset), recipients)
	if err != nil {
		return err
	}
	schemes := map[string]payment.SchemeFacilitator{
		exact.Scheme: exact.NewAdapter(exact.AdapterConfig{Network: baseNetwork, NetworkV1: baseNetworkV1, ChainID: big.NewInt(baseChainID), PayTo: recipients}, exactLocal),
		batch.Scheme: batchSide,
	}
	api := payment.NewServer(payment.ServerConfig{Network: baseNetwork, NetworkV1: baseNetworkV1, Schemes: schemes}, local.Signer())
	lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 120 * time.Second}
	fmt.Fprintf(stderr, "facilitator on http://%s (signer %s, asset %s; %s)\n", lis.Addr(), local.Signer().Hex(), *asset, batchNote)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// batchFacilitator is the batch-settlement side of `tollgate facilitator`:
// the scheme's facilitator over the chain, sending through the exact
// facilitator's gas key (one nonce manager), served for recipients. note
// says what the startup line reports of it (addresses only, never a key).
func batchFacilitator(ctx context.Context, client *ethclient.Client, tx *payment.Local, authorizer *ecdsa.PrivateKey, asset common.Address,
	recipients []common.Address) (payment.SchemeFacilitator, string, error) {
	escrow := batch.Escrow{ChainID: big.NewInt(baseChainID), Address: batch.EscrowAddress}
	local, err := batch.NewLocal(batch.LocalConfig{Escrow: escrow, Authorizer: authorizer,
		Tokens: []payment.Asset{{Address: asset, Name: usdcName, Version: usdcVersion}}}, client, tx)
	if err != nil {
		return nil, "", err
	}
	addr, _ := local.Authorizer()
	adapter, err := batch.NewAdapter(local, batch.AdapterConfig{Network: baseNetwork, PayTo: recipients, ReceiverAuthorizer: addr})
	if err != nil {
		return nil, "", err
	}
	note := "batch-settlement escrow " + escrow.Address.Hex()
	if authorizer != nil {
		note += ", receiver authorizer " + addr.Hex()
	} else {
		note += ", no receiver authorizer (servers sign their claims and refunds)"
	}
	if code, err := client.CodeAt(ctx, escrow.Address, nil); err == nil && len(code) == 0 {
		note += "; WARNING: no escrow code on this chain, batch-settlement requests will fail"
	}
	return adapter, note, nil
}
