package main

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/payment/exact"
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
	scheme := fs.String("scheme", "exact", "x402 scheme to pay with: exact (one transfer per call) or batch-settlement (a deposit into a channel once, then a signed voucher per call; x402 v2 only)")
	channels := fs.String("channel-dir", "", "batch-settlement: directory keeping each channel's charged total and deposit between runs; empty: tollgate/channels in the user's configuration directory (os.UserConfigDir)")
	maxDeposit := fs.String("max-deposit", "10000000", "batch-settlement: most one deposit may be, in atomic units (10000000 = 10.00 USDC)")
	refund := fs.Bool("refund", false, "batch-settlement: ask the server for a cooperative refund of the channel's unspent deposit instead of paying")
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
	var key *ecdsa.PrivateKey
	if *keyHex == "" {
		k, err := devnet.DeriveKey(devnet.Mnemonic, devnet.PayerAccount)
		if err != nil {
			return err
		}
		key = k
		fmt.Fprintf(stderr, "paying from devnet test account #%d %s\n", devnet.PayerAccount, crypto.PubkeyToAddress(key.PublicKey).Hex())
	} else {
		k, err := crypto.HexToECDSA(strings.TrimPrefix(strings.TrimSpace(*keyHex), "0x"))
		if err != nil {
			return errors.New("pay: the key is not a hex secp256k1 private key")
		}
		key = k
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
	var res *payment.PaidResult
	var err error
	switch {
	case *scheme == exact.Scheme && !*refund:
		p.Schemes = []payment.SchemeClient{exact.Payer{Key: key}}
		res, err = p.Get(ctx, fs.Arg(0))
	case *scheme == batch.Scheme:
		if *version != 2 {
			return errors.New("pay: batch-settlement is x402 v2 only")
		}
		depositCap, ok := new(big.Int).SetString(*maxDeposit, 10)
		if !ok || depositCap.Sign() <= 0 {
			return fmt.Errorf("pay: --max-deposit %q is not a positive integer", *maxDeposit)
		}
		res, err = payBatch(ctx, &p, key, fs.Arg(0), *channels, depositCap, *refund)
	case *refund:
		return errors.New("pay: --refund is for --scheme batch-settlement")
	default:
		return fmt.Errorf("pay: --scheme %q: want %s or %s", *scheme, exact.Scheme, batch.Scheme)
	}
	if err != nil {
		return fmt.Errorf("pay: %w", err)
	}
	if s := res.Settlement; s != nil {
		fmt.Fprintf(stderr, "settlement: success=%v transaction=%s network=%s payer=%s", s.Success, s.Transaction, s.Network, s.Payer)
		if s.Amount != "" {
			fmt.Fprintf(stderr, " amount=%s", s.Amount)
		}
		if s.Extra != nil {
			extra, _ := json.Marshal(s.Extra)
			fmt.Fprintf(stderr, " extra=%s", extra)
		}
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

// payBatch pays url with batch-settlement from the payer's channel to
// the server, or asks for its refund. The channel's state (what the
// server charged, what was deposited) is kept in dir between runs, one
// file per channel, as the official client's file storage does; a lost
// file is recovered from the server's corrective 402.
func payBatch(ctx context.Context, p *payment.Payer, key *ecdsa.PrivateKey, url, dir string, maxDeposit *big.Int, refund bool) (*payment.PaidResult, error) {
	if dir == "" {
		base, err := os.UserConfigDir()
		if err != nil {
			return nil, fmt.Errorf("no --channel-dir and no user directory: %w", err)
		}
		dir = filepath.Join(base, "tollgate", "channels")
	}
	offer, err := p.Offer(ctx, url, batch.Scheme)
	if err != nil {
		return nil, err
	}
	entry, resource := offer.Entry, offer.Resource
	chainID, ok := new(big.Int).SetString(strings.TrimPrefix(entry.Network, "eip155:"), 10)
	if !ok {
		return nil, fmt.Errorf("network %q is not an EVM chain", entry.Network)
	}
	terms, err := batch.TermsOf(entry, chainID)
	if err != nil {
		return nil, err
	}
	sess := &batch.Session{Payer: batch.Payer{Key: key, Escrow: terms.Escrow}, MaxDeposit: maxDeposit}
	_, id := sess.Payer.Channel(terms)
	file := filepath.Join(dir, strings.ToLower(id.Hex())+".json")
	if b, err := os.ReadFile(file); err == nil {
		var st batch.SessionState
		if err := json.Unmarshal(b, &st); err != nil || sess.Restore(st) != nil {
			return nil, fmt.Errorf("channel file %s is damaged; move it aside (the server's state is recovered on the next call)", file)
		}
	}
	var res *payment.PaidResult
	if refund {
		value, err := sess.RefundEnvelope(entry, resource, chainID, nil)
		if err != nil {
			return nil, err
		}
		if res, err = p.Send(ctx, url, payment.SignedPayment{Header: payment.HeaderPaymentV2, Value: value}); err != nil {
			return nil, err
		}
		if res.Status == http.StatusOK {
			sess.Balance = new(big.Int).Set(sess.Charged) // nothing left to refund
		}
	} else {
		p.Schemes = []payment.SchemeClient{sess}
		if res, err = p.Get(ctx, url); err != nil {
			return nil, err
		}
	}
	b, _ := json.MarshalIndent(sess.State(id), "", "  ")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, err
	}
	return res, os.WriteFile(file, b, 0o600)
}
