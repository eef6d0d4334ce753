package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestInteropBatchFacilitator: the official batch-settlement facilitator
// of @x402/evm 2.27.0 (pinned in .ci/interop/package-lock.json),
// unmodified, deposits, claims, settles and refunds a channel against the
// escrow, collector and Multicall3 of a `tollgate devnet`; the script
// checks the channel and the token balances after each step
// (docs/batch-settlement.md §9).
func TestInteropBatchFacilitator(t *testing.T) {
	t.Parallel()
	dir := interopDir(t, "@x402/evm")
	rpcURL := startDevnetCmd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "batch-facilitator.mjs"), rpcURL)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("node batch-facilitator.mjs: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	if out.Len() != 0 {
		t.Errorf("batch-facilitator.mjs wrote to stdout: %s", out.String())
	}
	t.Log(errOut.String())
}
