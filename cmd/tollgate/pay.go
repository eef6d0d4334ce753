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
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/payment/exact"
)

// pay runs `tollgate pay URL`: GET the URL, pay the 402 with x402, print
// the body to stdout and the settlement to stderr.
func pay(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pay", flag.ContinueOnError)
	version := fs.Int("x402-version", 2, "x402 protocol version to pay with: 2 (PAYMENT-SIGNATURE) or 1 (X-PAYMENT)")
	keyHex := fs.String("key", getenv("TOLLGATE_PAYER_KEY"), "payer's hex private key (or TOLLGATE_PAYER_KEY); default: devnet test account #0")
	timeout := fs.Duration("timeout", 2*time.Minute, "overall deadline")
	maxAmount := fs.String("max-amount", "1000000", "most one call may cost, in the asset's atomic units (1000000 = 1.00 USDC)")
	scheme := fs.String("scheme", "exact", "x402 scheme to pay with: exact (one transfer per call) or batch-settlement (a deposit into a channel once, then a signed voucher per call; x402 v2 only)")
	channels := fs.String("channel-dir", "", "batch-settlement: directory keeping each channel's charged total and deposit between runs; empty: tollgate/channels in the user's configuration directory (os.UserConfigDir)")
	maxDeposit := fs.String("max-deposit", "10000000", "batch-settlement: most one deposit may be, in atomic units (10000000 = 10.00 USDC)")
	refund := fs.Bool("refund", false, "batch-settlement: ask the server for a cooperative refund of the channel's unspent deposit instead of paying")
	tool := fs.String("tool", "", "call this MCP tool at URL, the server's MCP endpoint (e.g. http://127.0.0.1:8402/mcp), instead of GETting URL; x402 v2 only")
	toolArgs := fs.String("args", "{}", "with --tool: the tool's arguments as a JSON object, e.g. '{\"addr\":\"0x…\"}'")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: tollgate pay [flags] URL\n       tollgate pay --tool NAME [--args JSON] [flags] MCP_URL\n\nPays one x402-priced GET (or MCP tool call) and prints the response body (the tool's structured result); the settlement goes to stderr.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, "pay", args, stdout); err != nil {
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
	reached := false // the server answered the paid request
	if *keyHex == "" {
		k, err := devnet.DeriveKey(devnet.Mnemonic, devnet.PayerAccount)
		if err != nil {
			return err
		}
		key = k
		// Said once the server answered: a call that cannot connect
		// paid from nobody.
		defer func() {
			if reached {
				fmt.Fprintf(stderr, "paid from devnet test account #%d %s\n", devnet.PayerAccount, crypto.PubkeyToAddress(key.PublicKey).Hex())
			}
		}()
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
	if *tool != "" {
		err := payTool(ctx, &p, key, fs.Arg(0), *tool, *toolArgs, *scheme, *channels, *maxDeposit, *refund, stdout, stderr)
		reached = err == nil
		return err
	}
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
	reached = true
	printSettlement(stderr, res.Settlement)
	if res.Status == http.StatusPaymentRequired {
		// The body is x402 v1's requirement, which offers exact alone:
		// the reason is what the payer needs.
		return fmt.Errorf("pay: HTTP 402: the payment was refused: %s", orDash(res.Refusal()))
	}
	fmt.Fprintf(stdout, "%s\n", res.Body)
	if res.Status != http.StatusOK {
		return fmt.Errorf("pay: HTTP %d", res.Status)
	}
	return nil
}

// printSettlement writes a settlement, if any, on one line.
func printSettlement(w io.Writer, s *payment.SettleResponse) {
	if s == nil {
		return
	}
	tx := s.Transaction
	if tx == "" {
		tx = "none" // a voucher call: its money moves with the channel's claim, later
	}
	fmt.Fprintf(w, "settlement: success=%v transaction=%s network=%s payer=%s", s.Success, tx, s.Network, s.Payer)
	if s.Amount != "" {
		fmt.Fprintf(w, " amount=%s", s.Amount)
	}
	if s.Extra != nil {
		extra, _ := json.Marshal(s.Extra)
		fmt.Fprintf(w, " extra=%s", extra)
	}
	if s.ErrorReason != "" {
		fmt.Fprintf(w, " reason=%s", s.ErrorReason)
	}
	fmt.Fprintln(w)
}

// payTool calls the MCP tool name at endpoint with argsJSON, paying
// with scheme (x402's MCP transport): the tool's structured result goes
// to stdout, the settlement to stderr.
func payTool(ctx context.Context, p *payment.Payer, key *ecdsa.PrivateKey, endpoint, name, argsJSON, scheme, dir, maxDeposit string, refund bool, stdout, stderr io.Writer) error {
	if p.Version != 2 {
		return errors.New("pay: MCP tools are paid with x402 v2 only")
	}
	if refund {
		return errors.New("pay: --refund is asked of a REST URL of the server (the channel is the same)")
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
		return fmt.Errorf("pay: --args %q is not a JSON object: %w", argsJSON, err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "tollgate-pay", Version: buildVersion()}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: p.HTTP}, nil)
	if err != nil {
		return fmt.Errorf("pay: MCP session with %s: %w", endpoint, err)
	}
	defer session.Close()
	var res *payment.ToolResult
	switch scheme {
	case exact.Scheme:
		p.Schemes = []payment.SchemeClient{exact.Payer{Key: key}}
		res, err = p.CallTool(ctx, session, name, args)
	case batch.Scheme:
		depositCap, ok := new(big.Int).SetString(maxDeposit, 10)
		if !ok || depositCap.Sign() <= 0 {
			return fmt.Errorf("pay: --max-deposit %q is not a positive integer", maxDeposit)
		}
		offer, oerr := p.ToolOffer(ctx, session, name, args, batch.Scheme)
		if oerr != nil {
			return oerr
		}
		sess, save, serr := batchSession(key, offer, dir, depositCap)
		if serr != nil {
			return fmt.Errorf("pay: %w", serr)
		}
		p.Schemes = []payment.SchemeClient{sess}
		res, err = p.PayTool(ctx, session, name, args, offer) // the offer's call was the unpaid one
		if serr := save(); err == nil && serr != nil {
			err = serr
		}
	default:
		return fmt.Errorf("pay: --scheme %q: want %s or %s", scheme, exact.Scheme, batch.Scheme)
	}
	if err != nil {
		return fmt.Errorf("pay: %w", err)
	}
	printSettlement(stderr, res.Settlement)
	text := ""
	if len(res.Result.Content) > 0 {
		if t, ok := res.Result.Content[0].(*mcp.TextContent); ok {
			text = t.Text
		}
	}
	fmt.Fprintf(stdout, "%s\n", text)
	if res.Result.IsError {
		return fmt.Errorf("pay: tool %s answered with an error", name)
	}
	return nil
}

// payBatch pays url with batch-settlement from the payer's channel to
// the server, or asks for its refund. The channel's state (what the
// server charged, what was deposited) is kept in dir between runs, one
// file per channel, as the official client's file storage does; a lost
// file is recovered from the server's corrective 402.
func payBatch(ctx context.Context, p *payment.Payer, key *ecdsa.PrivateKey, url, dir string, maxDeposit *big.Int, refund bool) (*payment.PaidResult, error) {
	offer, err := p.Offer(ctx, url, batch.Scheme)
	if err != nil {
		return nil, err
	}
	sess, save, err := batchSession(key, offer, dir, maxDeposit)
	if err != nil {
		return nil, err
	}
	entry, resource := offer.Entry, offer.Resource
	chainID := big.NewInt(offer.ChainID)
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
	return res, save()
}

// batchSession opens the payer's channel for offer, its state read from
// dir (the user's configuration directory when empty), and returns the
// function that saves the state back.
func batchSession(key *ecdsa.PrivateKey, offer payment.Offer, dir string, maxDeposit *big.Int) (*batch.Session, func() error, error) {
	if dir == "" {
		base, err := os.UserConfigDir()
		if err != nil {
			return nil, nil, fmt.Errorf("no --channel-dir and no user directory: %w", err)
		}
		dir = filepath.Join(base, "tollgate", "channels")
	}
	terms, err := batch.TermsOf(offer.Entry, big.NewInt(offer.ChainID))
	if err != nil {
		return nil, nil, err
	}
	sess := &batch.Session{Payer: batch.Payer{Key: key, Escrow: terms.Escrow}, MaxDeposit: maxDeposit}
	_, id := sess.Payer.Channel(terms)
	file := filepath.Join(dir, strings.ToLower(id.Hex())+".json")
	if b, err := os.ReadFile(file); err == nil {
		var st batch.SessionState
		if err := json.Unmarshal(b, &st); err != nil || sess.Restore(st) != nil {
			return nil, nil, fmt.Errorf("channel file %s is damaged; move it aside (the server's state is recovered on the next call)", file)
		}
	}
	save := func() error {
		b, _ := json.MarshalIndent(sess.State(id), "", "  ")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		return os.WriteFile(file, b, 0o600)
	}
	return sess, save, nil
}
