package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
)

// pay runs `tollgate pay URL`: GET the URL, pay the 402 with x402, print
// the body to stdout and the settlement to stderr.
func pay(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.Int("x402-version", 2, "x402 protocol version to pay with: 2 (PAYMENT-SIGNATURE) or 1 (X-PAYMENT)")
	keyHex := fs.String("key", getenv("TOLLGATE_PAYER_KEY"), "payer's hex private key (or TOLLGATE_PAYER_KEY); default: devnet test account #0")
	timeout := fs.Duration("timeout", 2*time.Minute, "overall deadline")
	maxAmount := fs.String("max-amount", "1000000", "most one call may cost, in the asset's atomic units (1000000 = 1.00 USDC)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: tollgate pay [flags] URL\n\nPays one x402-priced GET and prints the response body; the settlement goes to stderr.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("pay: one URL expected")
	}
	if *version != 1 && *version != 2 {
		return fmt.Errorf("pay: --x402-version %d: want 1 or 2", *version)
	}
	var p payment.Payer
	if *keyHex == "" {
		key, err := devnet.DeriveKey(devnet.Mnemonic, devnet.PayerAccount)
		if err != nil {
			return err
		}
		p.Key = key
		fmt.Fprintf(stderr, "paying from devnet test account #%d %s\n", devnet.PayerAccount, crypto.PubkeyToAddress(key.PublicKey).Hex())
	} else {
		key, err := crypto.HexToECDSA(strings.TrimPrefix(strings.TrimSpace(*keyHex), "0x"))
		if err != nil {
			return errors.New("pay: the key is not a hex secp256k1 private key")
		}
		p.Key = key
	}
	p.Version = *version
	limit, ok := new(big.Int).SetString(*maxAmount, 10)
	if !ok || limit.Sign() < 0 {
		return fmt.Errorf("pay: --max-amount %q is not a non-negative integer", *maxAmount)
	}
	p.MaxAmount = limit
	p.HTTP = &http.Client{Timeout: *timeout}
	p.Networks = map[string]int64{"base": 8453, "base-sepolia": 84532}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := p.Get(ctx, fs.Arg(0))
	if err != nil {
		return fmt.Errorf("pay: %w", err)
	}
	if s := res.Settlement; s != nil {
		fmt.Fprintf(stderr, "settlement: success=%v transaction=%s network=%s payer=%s", s.Success, s.Transaction, s.Network, s.Payer)
		if s.ErrorReason != "" {
			fmt.Fprintf(stderr, " reason=%s", s.ErrorReason)
		}
		fmt.Fprintln(stderr)
	}
	fmt.Fprintf(stdout, "%s\n", res.Body)
	if res.Status != http.StatusOK {
		return fmt.Errorf("pay: HTTP %d", res.Status)
	}
	return nil
}
