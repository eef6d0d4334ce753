package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/payment/batch"
)

// TestPayBatchSettlement: `tollgate pay --scheme batch-settlement` pays
// from one channel across runs (its state in --channel-dir), recovers a
// lost state file from the server's corrective 402, and asks for the
// cooperative refund.
func TestPayBatchSettlement(t *testing.T) {
	t.Parallel()
	s, err := serveFor(t, []string{"--data-dir", t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pay := func(extra ...string) (string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		args := append([]string{"pay", "--scheme", batch.Scheme, "--channel-dir", dir}, extra...)
		if err := run(context.Background(), append(args, s.base+"/regime"), envOf(nil), &out, &errOut); err != nil {
			t.Fatalf("pay %v: %v\n%s", extra, err, errOut.String())
		}
		return out.String(), errOut.String()
	}
	state := func() batch.SessionState {
		t.Helper()
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		if len(files) != 1 {
			t.Fatalf("channel files: %v", files)
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		var st batch.SessionState
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	for i := 0; i < 3; i++ {
		body, log := pay()
		if !json.Valid([]byte(body)) || !strings.Contains(log, "chargedAmount") {
			t.Fatalf("call %d: body %q, log %q", i, body, log)
		}
	}
	if st := state(); st.Charged != "150000" || st.Balance != "1000000" {
		t.Fatalf("after 3 calls: %+v, want 150000 charged of a 1000000 deposit", st)
	}
	// A lost channel file: the corrective 402 restores the state.
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	os.Remove(files[0])
	if _, log := pay(); strings.Contains(log, "amount=") {
		t.Errorf("a recovered channel deposited again: %s", log)
	}
	if st := state(); st.Charged != "200000" {
		t.Fatalf("after recovery: %+v, want 200000 charged", st)
	}
	if _, log := pay("--refund"); !strings.Contains(log, "amount=800000") {
		t.Errorf("refund: %s", log)
	}
	var out, errOut bytes.Buffer
	err = run(context.Background(), []string{"pay", "--refund", s.base + "/regime"}, envOf(nil), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "batch-settlement") {
		t.Errorf("--refund without the scheme: %v", err)
	}
}

// TestPayBatchAfterDevnetRestart: a channel file kept from a devnet that
// restarted (a new chain, an empty escrow) does not leave the payer
// stuck: the server finds no deposit, pay forgets the kept state and
// opens the channel again with a deposit, and the call is answered.
func TestPayBatchAfterDevnetRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pay := func(s *served) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), []string{"pay", "--scheme", batch.Scheme, "--channel-dir", dir, s.base + "/regime"}, envOf(nil), &out, &errOut)
		return errOut.String(), err
	}
	first, err := serveFor(t, []string{"--data-dir", t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if log, err := pay(first); err != nil {
		t.Fatalf("the first run: %v\n%s", err, log)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	restarted, err := serveFor(t, []string{"--data-dir", t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	log, err := pay(restarted)
	if err != nil || !strings.Contains(log, "amount=") || !strings.Contains(log, `"chargedCumulativeAmount":"50000"`) {
		t.Fatalf("after the restart: %v; want a new deposit and the first price charged\n%s", err, log)
	}
}
