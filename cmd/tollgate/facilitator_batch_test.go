package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/payment/exact"
)

// lockedBuffer is a bytes.Buffer written by a command's goroutine and
// read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestFacilitatorServesBatch: `tollgate facilitator` with a receiver
// authorizer key serves batch-settlement beside exact: /supported lists
// the scheme with the key's address, a batch /verify is answered by the
// scheme (here: a channel without deposit), and the key is never printed.
func TestFacilitatorServesBatch(t *testing.T) {
	t.Parallel()
	chain := devnettest.StartChain(t)
	authKey, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	authHex := fmt.Sprintf("%x", crypto.FromECDSA(authKey))
	env := envOf(map[string]string{
		"TOLLGATE_FACILITATOR_KEY":      fmt.Sprintf("%x", crypto.FromECDSA(chain.Account(devnet.FacilitatorAccount).Key)),
		"TOLLGATE_BATCH_AUTHORIZER_KEY": "0x" + authHex,
	})
	payTo := chain.Account(devnet.PayToAccount).Address
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"facilitator", "--http", "127.0.0.1:0", "--chain-rpc", chain.URL(), "--asset", chain.Token.Hex(), "--pay-to", payTo.Hex()},
			env, io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("facilitator: %v", err)
		}
	})
	addrRE := regexp.MustCompile(`facilitator on (http://\S+)`)
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := addrRE.FindStringSubmatch(stderr.String()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatalf("the facilitator did not start: %s", stderr.String())
	}
	authorizer := crypto.PubkeyToAddress(authKey.PublicKey)
	if line := stderr.String(); strings.Contains(strings.ToLower(line), authHex) || !strings.Contains(line, authorizer.Hex()) {
		t.Errorf("startup line %q: want the authorizer's address and never its key", line)
	}

	resp, err := http.Get(base + "/supported")
	if err != nil {
		t.Fatal(err)
	}
	var sup struct {
		Kinds []struct {
			Scheme string            `json:"scheme"`
			Extra  map[string]string `json:"extra"`
		} `json:"kinds"`
	}
	err = json.NewDecoder(resp.Body).Decode(&sup)
	resp.Body.Close()
	// v2 kinds by scheme name, then exact's v1 kind.
	if err != nil || len(sup.Kinds) != 3 || sup.Kinds[0].Scheme != batch.Scheme || sup.Kinds[0].Extra["receiverAuthorizer"] != authorizer.Hex() ||
		sup.Kinds[1].Scheme != exact.Scheme || sup.Kinds[2].Scheme != exact.Scheme {
		t.Fatalf("/supported kinds %+v (%v)", sup.Kinds, err)
	}

	escrow := batch.Escrow{ChainID: big.NewInt(devnet.ChainID), Address: batch.EscrowAddress}
	payer := batch.Payer{Key: chain.Account(devnet.PayerAccount).Key, Escrow: escrow}
	terms := batch.Terms{Escrow: escrow, Receiver: payTo, ReceiverAuthorizer: authorizer, Token: chain.Token, WithdrawDelay: 900}
	payload, err := payer.Payload(terms, batch.TypeVoucher, big.NewInt(10), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := map[string]any{"scheme": batch.Scheme, "network": "eip155:8453", "amount": "10", "asset": chain.Token.Hex(), "payTo": payTo.Hex(),
		"maxTimeoutSeconds": 60, "extra": map[string]any{"name": devnet.TokenName, "version": devnet.TokenVersion,
			"receiverAuthorizer": authorizer.Hex(), "withdrawDelay": 900}}
	body, _ := json.Marshal(map[string]any{"x402Version": 2, "paymentRequirements": req,
		"paymentPayload": map[string]any{"x402Version": 2, "accepted": req, "payload": json.RawMessage(payload)}})
	resp, err = http.Post(base+"/verify", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		IsValid       *bool  `json:"isValid"`
		InvalidReason string `json:"invalidReason"`
	}
	err = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || v.IsValid == nil || *v.IsValid || v.InvalidReason != batch.ReasonChannelNotFound {
		t.Errorf("batch /verify: %d %+v (%v), want %s", resp.StatusCode, v, err, batch.ReasonChannelNotFound)
	}
}

// TestFacilitatorBatchFlags: --help documents the authorizer key's flag
// and variable without printing the key; a key that is not one is refused
// before anything starts.
func TestFacilitatorBatchFlags(t *testing.T) {
	t.Parallel()
	const secret = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
	var help bytes.Buffer
	err := run(context.Background(), []string{"facilitator", "--help"}, envOf(map[string]string{"TOLLGATE_BATCH_AUTHORIZER_KEY": secret}), &help, io.Discard)
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "-batch-authorizer-key-file") ||
		!strings.Contains(help.String(), "TOLLGATE_BATCH_AUTHORIZER_KEY") || strings.Contains(help.String(), secret) {
		t.Errorf("facilitator --help = %v:\n%s", err, help.String())
	}
	err = run(context.Background(), []string{"facilitator", "--chain-rpc", "http://127.0.0.1:1", "--pay-to", "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"},
		envOf(map[string]string{"TOLLGATE_FACILITATOR_KEY": secret, "TOLLGATE_BATCH_AUTHORIZER_KEY": "0xnot-a-key"}), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "receiver authorizer key") || strings.Contains(err.Error(), secret) {
		t.Errorf("a bad authorizer key: %v", err)
	}
}
