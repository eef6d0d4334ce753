package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/store"
)

// TestLanesImport: a good file imports, a re-import adds nothing, and a
// file with a bad line or a conflicting id imports nothing at all.
func TestLanesImport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	importFile := func(path string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, []string{"lanes", "import", "--data-dir", filepath.Join(dir, "data"), path}, envOf(nil), &out, &errOut)
		return out.String(), err
	}
	good := write("tape.csv", "id,lane,closed_at\nx1,eth-trend,2026-11-01T10:00:00Z\nx2,eth-trend,2026-11-01T11:00:00Z\nx3,btc-range,2026-11-02T00:00:00Z\n")
	if out, err := importFile(good); err != nil || !strings.Contains(out, "3 closes read, 3 new, 0 already stored") {
		t.Fatalf("import: %q %v", out, err)
	}
	if out, err := importFile(good); err != nil || !strings.Contains(out, "3 closes read, 0 new, 3 already stored") {
		t.Fatalf("re-import: %q %v", out, err)
	}
	bad := write("bad.jsonl", `{"id":"x4","lane":"eth-trend","closedAt":"2026-11-03T00:00:00Z"}`+"\n"+`{"id":"x5","lane":"eth-trend","closedAt":"soon"}`+"\n")
	if _, err := importFile(bad); err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "nothing was imported") {
		t.Errorf("bad line: %v", err)
	}
	conflict := write("conflict.jsonl", `{"id":"x6","lane":"eth-trend","closedAt":"2026-11-03T00:00:00Z"}`+"\n"+`{"id":"x1","lane":"btc-range","closedAt":"2026-11-01T10:00:00Z"}`+"\n")
	if _, err := importFile(conflict); err == nil || !strings.Contains(err.Error(), "different lane or time") {
		t.Errorf("conflict: %v", err)
	}
	if _, err := importFile(write("tape.txt", "")); err == nil || !strings.Contains(err.Error(), "jsonl or csv") {
		t.Errorf("unknown format: %v", err)
	}
	db, err := store.OpenSQLite(ctx, filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ls, err := db.Lanes(ctx)
	total := 0
	for _, l := range ls {
		total += l.Closes
	}
	if err != nil || total != 3 {
		t.Errorf("tape holds %d closes (%v), want the first file's 3 only", total, err)
	}
}

// TestLaneServiceIsPrivate: closes come in over gRPC and show in /lanes
// (after devnet's sample tape); bad and conflicting closes are refused;
// REST has no route to the ingestion method.
func TestLaneServiceIsPrivate(t *testing.T) {
	t.Parallel()
	r := startServe(t, nil, nil)
	ctx := context.Background()
	lc := tollgatev1.NewLaneServiceClient(r.conn)
	req := &tollgatev1.ImportClosesRequest{Closes: []*tollgatev1.LaneClose{{Id: "grpc-1", Lane: "test-lane", ClosedAt: "2026-11-20T08:00:00Z"}}}
	resp, err := lc.ImportCloses(ctx, req)
	if err != nil || resp.GetInserted() != 1 || resp.GetReceived() != 1 {
		t.Fatalf("import: %v %v", resp, err)
	}
	if resp, err := lc.ImportCloses(ctx, req); err != nil || resp.GetDuplicates() != 1 {
		t.Errorf("re-import: %v %v", resp, err)
	}
	for name, tc := range map[string]struct {
		c    *tollgatev1.LaneClose
		code codes.Code
	}{
		"bad lane": {&tollgatev1.LaneClose{Id: "grpc-2", Lane: "Bad Lane", ClosedAt: "2026-11-20T08:00:00Z"}, codes.InvalidArgument},
		"bad time": {&tollgatev1.LaneClose{Id: "grpc-2", Lane: "x", ClosedAt: "noon"}, codes.InvalidArgument},
		"conflict": {&tollgatev1.LaneClose{Id: "grpc-1", Lane: "other", ClosedAt: "2026-11-20T08:00:00Z"}, codes.AlreadyExists},
	} {
		if _, err := lc.ImportCloses(ctx, &tollgatev1.ImportClosesRequest{Closes: []*tollgatev1.LaneClose{tc.c}}); status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %v", name, err, tc.code)
		}
	}
	lanes, err := tollgatev1.NewAnalyticsServiceClient(r.conn).GetLanes(ctx, &tollgatev1.GetLanesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := lanes.GetLanes()["test-lane"]; got.GetCloses() != 1 || got.GetLastClose().GetValue() != "2026-11-20T08:00:00Z" ||
		lanes.GetTotalCloses() != 61 || lanes.GetChain() != "eip155:8453" || lanes.GetDisclaimer() == "" {
		t.Errorf("lanes %v", lanes)
	}
	for _, method := range []string{"GET", "POST"} {
		req, _ := http.NewRequest(method, r.base+"/tollgate.v1.LaneService/ImportCloses", strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("REST %s ImportCloses: %d", method, resp.StatusCode)
		}
	}
}

// TestBacktestCommand: the backtest prints its table on the devnet feed,
// refuses products it cannot score, and with --as-of gives the same
// figures on every run.
func TestBacktestCommand(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"backtest", "--product", "ETH-USD", "--closes", "800", "--window", "200", "--step", "48"}, envOf(nil), &out, &errOut)
	if err != nil {
		t.Fatalf("backtest: %v %s", err, errOut.String())
	}
	for _, want := range []string{"embedded-damped-holt on ETH-USD (devnet-synthetic)", "MAE (price)", "MASE (vs random walk)", "directional accuracy", "13 origins"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if err := run(context.Background(), []string{"backtest", "--product", "TCS.NS"}, envOf(nil), &out, &errOut); err == nil {
		t.Error("backtest of an equity accepted")
	}
	// An as-of time makes the synthetic feed's score the same on every
	// run: the figures the README quotes.
	asOf := func() string {
		var o bytes.Buffer
		args := []string{"backtest", "--product", "ETH-USD", "--closes", "800", "--window", "200", "--step", "48", "--as-of", "2026-11-01T00:00:00Z"}
		if err := run(context.Background(), args, envOf(nil), &o, &errOut); err != nil {
			t.Fatalf("backtest --as-of: %v %s", err, errOut.String())
		}
		return o.String()
	}
	first := asOf()
	if !strings.Contains(first, "800 hourly closes to 2026-10-31T23:00:00Z") || asOf() != first {
		t.Errorf("backtest --as-of is not reproducible:\n%s", first)
	}
	if err := run(context.Background(), []string{"backtest", "--as-of", "yesterday"}, envOf(nil), &out, &errOut); err == nil || !strings.Contains(err.Error(), "RFC 3339") {
		t.Errorf("a malformed --as-of: %v", err)
	}
}
