package chain_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
	"github.com/tollgate/tollgate/service/chain"
)

// proxy sits between the client and the devnet: it counts round trips
// (HTTP requests), can refuse eth_getLogs over a block-range cap the way
// providers do, and can fail requests with 503.
type proxy struct {
	upstream string
	trips    atomic.Int64
	rangeCap uint64 // 0: none
	fail503  atomic.Int64
}

type rpcReq struct {
	JSONRPC string            `json:"jsonrpc"`
	ID      json.RawMessage   `json:"id"`
	Method  string            `json:"method"`
	Params  []json.RawMessage `json:"params"`
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.trips.Add(1)
	if p.fail503.Load() > 0 {
		p.fail503.Add(-1)
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var batch []rpcReq
	single := false
	if err := json.Unmarshal(body, &batch); err != nil {
		var one rpcReq
		_ = json.Unmarshal(body, &one)
		batch, single = []rpcReq{one}, true
	}
	var out []json.RawMessage
	for _, q := range batch {
		if q.Method == "eth_getLogs" && p.rangeCap > 0 {
			var f struct{ FromBlock, ToBlock string }
			_ = json.Unmarshal(q.Params[0], &f)
			from, _ := strconv.ParseUint(strings.TrimPrefix(f.FromBlock, "0x"), 16, 64)
			to, _ := strconv.ParseUint(strings.TrimPrefix(f.ToBlock, "0x"), 16, 64)
			if to-from+1 > p.rangeCap {
				out = append(out, json.RawMessage(`{"jsonrpc":"2.0","id":`+string(q.ID)+`,"error":{"code":-32005,"message":"block range too large: max `+strconv.FormatUint(p.rangeCap, 10)+`"}}`))
				continue
			}
		}
		one, _ := json.Marshal(q)
		resp, err := http.Post(p.upstream, "application/json", bytes.NewReader(one))
		if err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out = append(out, b)
	}
	w.Header().Set("Content-Type", "application/json")
	if single {
		w.Write(out[0])
		return
	}
	json.NewEncoder(w).Encode(out)
}

func setup(t *testing.T, rangeCap uint64) (*devnet.Chain, *proxy, *chain.Client) {
	t.Helper()
	d := devnettest.StartChain(t)
	p := &proxy{upstream: d.URL(), rangeCap: rangeCap}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	rc, err := rpc.Dial(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	cfg := chain.DefaultConfig()
	cfg.LogRange = 1_000_000
	c, err := chain.New(rc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d, p, c
}

func scenario(d *devnet.Chain, name string) common.Address {
	for _, s := range d.Scenario {
		if s.Name == name {
			return s.Address
		}
	}
	return common.Address{}
}

// TestInspectRoundTrips: a cold inspection is at most three round trips
// (two unless a beacon must be asked), however many reads it makes.
func TestInspectRoundTrips(t *testing.T) {
	t.Parallel()
	d, p, c := setup(t, 0)
	for _, name := range []string{"clean", "proxy", "clone", "bytes32-name"} {
		before := p.trips.Load()
		k, err := c.Inspect(context.Background(), scenario(d, name), 43_200)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if trips := p.trips.Load() - before; trips > 3 {
			t.Errorf("%s: %d round trips", name, trips)
		}
		if len(k.Transfers) == 0 || len(k.Code) == 0 {
			t.Errorf("%s: %d transfers, %d code bytes", name, len(k.Transfers), len(k.Code))
		}
	}
	if _, err := c.Inspect(context.Background(), d.Account(0).Address, 100); err != chain.ErrNoCode {
		t.Errorf("EOA: %v", err)
	}
}

// TestLogsSplitOnProviderCaps: a provider that refuses ranges over 3
// blocks still yields every log, in block order.
func TestLogsSplitOnProviderCaps(t *testing.T) {
	t.Parallel()
	d, p, c := setup(t, 0)
	var head hexutil.Uint64
	if err := c.Call(context.Background(), &head, "eth_blockNumber"); err != nil {
		t.Fatal(err)
	}
	q := chain.LogQuery{From: 0, To: uint64(head), Topics: [][]common.Hash{{chain.TopicTransfer}}}
	all, err := c.Logs(context.Background(), q)
	if err != nil || len(all) < 20 {
		t.Fatalf("uncapped: %d logs, %v", len(all), err)
	}
	p.rangeCap = 3
	capped, err := c.Logs(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if len(capped) != len(all) {
		t.Fatalf("capped: %d logs, want %d", len(capped), len(all))
	}
	for i := range all {
		if capped[i].TxHash != all[i].TxHash || capped[i].Index != all[i].Index {
			t.Fatalf("log %d differs", i)
		}
	}
	// Inside Inspect too: the batched getLogs is refused, then split.
	k, err := c.Inspect(context.Background(), scenario(d, "mintable"), 43_200)
	if err != nil || len(k.Transfers) == 0 {
		t.Errorf("capped inspect: %d transfers, %v", len(k.Transfers), err)
	}
}

func TestRetriesTransientFailures(t *testing.T) {
	t.Parallel()
	d, p, c := setup(t, 0)
	p.fail503.Store(2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Inspect(ctx, scenario(d, "clean"), 100); err != nil {
		t.Fatalf("after two 503s: %v", err)
	}
	p.fail503.Store(100)
	if _, err := c.Inspect(ctx, scenario(d, "clean"), 100); err == nil || !strings.Contains(err.Error(), "unavailable") {
		t.Errorf("a node down: %v", err)
	}
}
