package main

import (
	"context"
	"io"
	"math/big"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
)

// stoppedClaimed is the series counting channels stopped on a claim this
// store did not make.
const stoppedClaimed = `tollgate_batch_channels_stopped_total{evidence="claimed_elsewhere"}`

// TestBatchForeignClaim (issue 20, item 8): on a devnet with the real
// escrow, a payer pays two calls on a channel; a stranger holding the
// receiver authorizer's key (another server with its own store, here the
// devnet's payTo key) claims three prices on it with a voucher this server
// never saw. The escrow watcher sees the escrow's Claimed event beyond what
// what the store claimed: it stops the channel (counted once, by
// evidence), the claimer claims nothing more on it, and the next voucher
// is refused with the evidence. The watcher's health is exposed from the
// start: its last success is recent and it has no error.
func TestBatchForeignClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// No threshold and a long interval: the server's claimer claims nothing
	// by itself during the test.
	s, err := serveFor(t, []string{"--data-dir", t.TempDir(), "--batch-claim-interval", "20m", "--batch-claim-threshold", "0",
		"--batch-min-deposit", "1.00"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ethclient.Dial(s.devnetRPC)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if got := batchSeries(t, s); got[stoppedClaimed] != 0 || got["tollgate_batch_escrow_watch_errors_total"] != 0 ||
		time.Since(time.Unix(int64(got["tollgate_batch_escrow_watch_last_success_timestamp_seconds"]), 0)) > time.Minute {
		t.Fatalf("a fresh server's batch series: %v", got)
	}

	c := newBatchCaller(t, s.base, devnet.PayerAccount)
	entry, resource := c.entry("/regime")
	for i := 1; i <= 2; i++ {
		if a := c.pay("/regime", entry, resource); a.status != http.StatusOK {
			t.Fatalf("call %d: %d %s %+v", i, a.status, a.body, a.required)
		}
	}
	price, _ := new(big.Int).SetString(entry.Amount, 10)
	terms, err := batch.TermsOf(entry, big.NewInt(devnet.ChainID))
	if err != nil {
		t.Fatal(err)
	}
	cfg, id := c.sess.Payer.Channel(terms)

	// The stranger claims three prices, with its own gas.
	beyond := new(big.Int).Mul(price, big.NewInt(3))
	voucher, err := c.sess.Payer.Voucher(id, beyond)
	if err != nil {
		t.Fatal(err)
	}
	out, err := foreignClaimer(t, client, common.HexToAddress(entry.Asset)).Claim(ctx,
		[]batch.Claim{{Config: cfg, MaxClaimable: beyond, Signature: voucher, TotalClaimed: beyond}}, nil)
	if err != nil || !out.Success {
		t.Fatalf("the stranger's claim: %+v %v", out, err)
	}
	w := &escrowWatch{t: t, ctx: ctx, c: client}
	if _, claimed := w.channel(id); claimed.Cmp(beyond) != 0 {
		t.Fatalf("the escrow shows %s claimed, want %s", claimed, beyond)
	}

	// The watcher polls every 2 s.
	var got map[string]float64
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got = batchSeries(t, s)
		if got[stoppedClaimed] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no foreign claim counted after 20 s: %v", got)
		}
	}
	if got["tollgate_batch_unclaimed_channels"] != 0 || got["tollgate_batch_escrow_watch_errors_total"] != 0 ||
		time.Since(time.Unix(int64(got["tollgate_batch_escrow_watch_last_success_timestamp_seconds"]), 0)) > 10*time.Second {
		t.Errorf("batch series after the foreign claim: %v", got)
	}
	if n := got[`tollgate_batch_transactions_total{kind="claim",result="ok"}`]; n != 0 {
		t.Errorf("the server's claimer claimed %v times on a channel claimed beyond its charges", n)
	}
	if a := c.pay("/regime", entry, resource); a.status != http.StatusPaymentRequired || a.required == nil || a.required.Error != batch.ReasonChannelClaimedElsewhere {
		t.Errorf("a voucher after the foreign claim: %d %+v, want refused as claimed elsewhere", a.status, a.required)
	}
}

// foreignClaimer is a batch-settlement facilitator holding the devnet's
// receiver authorizer key (payTo's), paying gas from the last of the
// devnet's gas accounts, which the server under test does not use.
func foreignClaimer(t *testing.T, client *ethclient.Client, token common.Address) *batch.Local {
	t.Helper()
	authorizer, err := devnet.DeriveKey(devnet.Mnemonic, devnet.PayToAccount)
	if err != nil {
		t.Fatal(err)
	}
	gas, err := devnet.DeriveKey(devnet.Mnemonic, devnet.FirstGasAccount+devnet.GasAccounts-1)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := payment.NewLocal(payment.LocalConfig{ChainID: big.NewInt(devnet.ChainID), Key: gas, ReceiptTimeout: 30 * time.Second}, client)
	if err != nil {
		t.Fatal(err)
	}
	l, err := batch.NewLocal(batch.LocalConfig{Escrow: batch.Escrow{ChainID: big.NewInt(devnet.ChainID), Address: batch.EscrowAddress},
		Tokens: []payment.Asset{{Address: token, Name: devnet.TokenName, Version: devnet.TokenVersion}}, Authorizer: authorizer}, client, tx)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// batchSeries is the tollgate_batch_* samples of s's exposition, by
// series (name and labels as exposed).
func batchSeries(t testing.TB, s *served) map[string]float64 {
	t.Helper()
	resp, err := http.Get(s.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sample := regexp.MustCompile(`^(tollgate_batch_\S+) (\S+)$`)
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if m := sample.FindStringSubmatch(line); m != nil {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatalf("exposition line %q", line)
			}
			out[m[1]] = v
		}
	}
	return out
}
