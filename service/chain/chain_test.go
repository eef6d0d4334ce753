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
	url      string // the proxy's own endpoint
	upstream string
	trips    atomic.Int64
	rangeCap uint64 // 0: none
	fail503  atomic.Int64
	// staleHead makes the next batch's first header (Inspect's
	// eth_getBlockByNumber) one block less, as if a block landed during
	// the batch.
	staleHead atomic.Bool
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
		if q.Method == "eth_getBlockByNumber" && !single && len(out) == 0 && p.staleHead.CompareAndSwap(true, false) {
			var r struct{ Result map[string]any }
			_ = json.Unmarshal(b, &r)
			n, _ := hexutil.DecodeUint64(r.Result["number"].(string))
			r.Result["number"] = hexutil.EncodeUint64(n - 1)
			res, _ := json.Marshal(r.Result)
			b = []byte(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":` + string(res) + `}`)
		}
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
	p.url = srv.URL
	return d, p, client(t, p)
}

// client returns a new client through p: cold, it has seen no head.
func client(t *testing.T, p *proxy) *chain.Client {
	t.Helper()
	rc, err := rpc.Dial(p.url)
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
	return c
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
// (two unless a beacon must be asked), however many reads it makes: the
// proxy slots (standard and legacy), the admin's or beacon's owner, the
// role counts and the owner's probes ride in the same batches.
func TestInspectRoundTrips(t *testing.T) {
	t.Parallel()
	d, p, warm := setup(t, 0)
	probe := append(common.FromHex("0xec28438a"), make([]byte, 32)...) // setMaxTxAmount(0)
	for _, name := range []string{"clean", "proxy", "clone", "bytes32-name", "beacon", "transparent", "transparent-renounced",
		"roles", "roles-plain", "legacy-proxy", "limit", "limit-floor", "uniswap-v2-pair"} {
		want := int64(2)
		if name == "beacon" {
			want = 3
		}
		// Cold: a new client, sequential batches only.
		before := p.trips.Load()
		k, err := client(t, p).Inspect(context.Background(), scenario(d, name), 43_200, probe)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if trips := p.trips.Load() - before; trips > want {
			t.Errorf("%s: %d round trips cold, want at most %d", name, trips, want)
		}
		// Warm: the logs are asked in parallel with the first batch, one
		// request more but no round trip more.
		before = p.trips.Load()
		if _, err := warm.Inspect(context.Background(), scenario(d, name), 43_200, probe); err != nil {
			t.Fatal(err)
		}
		if trips := p.trips.Load() - before; trips > want+1 {
			t.Errorf("%s: %d requests warm, want at most %d", name, trips, want+1)
		}
		if len(k.Transfers) == 0 || len(k.Code) == 0 || k.TotalSupply == nil || !k.BalanceOf || k.Head == 0 {
			t.Errorf("%s: %d transfers, %d code bytes, supply %v, balanceOf %v", name, len(k.Transfers), len(k.Code), k.TotalSupply, k.BalanceOf)
		}
		switch name {
		case "beacon":
			if k.ProxyKind != "eip1967-beacon" || k.BeaconOwner == nil || *k.BeaconOwner != d.Account(devnet.ScenarioAccount).Address || len(k.ImplementationCode) == 0 {
				t.Errorf("beacon: %s owner %v, %d implementation bytes", k.ProxyKind, k.BeaconOwner, len(k.ImplementationCode))
			}
		case "transparent", "transparent-renounced":
			if k.ProxyKind != "eip1967" || k.Admin == nil || len(k.AdminCode) == 0 || k.AdminOwner == nil ||
				(*k.AdminOwner == (common.Address{})) != (name == "transparent-renounced") {
				t.Errorf("%s: %s admin %v (%d code bytes) owner %v", name, k.ProxyKind, k.Admin, len(k.AdminCode), k.AdminOwner)
			}
		case "legacy-proxy":
			if k.ProxyKind != "zeppelinos" || k.Admin == nil || *k.Admin != d.Account(devnet.LegacyAdminAccount).Address || len(k.AdminCode) != 0 || len(k.ImplementationCode) == 0 {
				t.Errorf("legacy: %s admin %v", k.ProxyKind, k.Admin)
			}
		case "roles":
			if k.RoleMembers[0] == nil || *k.RoleMembers[0] != 1 || len(k.RoleEvents) != 3 {
				t.Errorf("roles: members %v, %d events", k.RoleMembers, len(k.RoleEvents))
			}
		case "roles-plain":
			if k.RoleMembers[0] != nil || len(k.RoleEvents) != 3 || !k.RoleEvents[0].Granted {
				t.Errorf("plain roles: members %v, events %v", k.RoleMembers, k.RoleEvents)
			}
		case "limit", "limit-floor":
			if len(k.OwnerProbes) != 1 || k.OwnerProbes[0] != (name == "limit") {
				t.Errorf("%s: probes %v", name, k.OwnerProbes)
			}
		case "clean":
			if k.OwnerProbes != nil { // renounced: nobody to probe as
				t.Errorf("clean: probes %v", k.OwnerProbes)
			}
		}
	}
	// Not tokens: a beacon, a ProxyAdmin, a factory answer no totalSupply.
	for _, name := range []string{"beacon-contract", "proxy-admin", "uniswap-v2-factory"} {
		k, err := warm.Inspect(context.Background(), scenario(d, name), 100)
		if err != nil || k.TotalSupply != nil {
			t.Errorf("%s: supply %v, %v", name, k.TotalSupply, err)
		}
	}
	if _, err := warm.Inspect(context.Background(), d.Account(0).Address, 100); err != chain.ErrNoCode {
		t.Errorf("EOA: %v", err)
	}
}

// TestInspectOneBlock: when a block lands during the first batch, the
// batch is asked again at the later head, so every read is at Head.
func TestInspectOneBlock(t *testing.T) {
	t.Parallel()
	d, p, _ := setup(t, 0)
	c := client(t, p)
	var head hexutil.Uint64
	if err := c.Call(context.Background(), &head, "eth_blockNumber"); err != nil {
		t.Fatal(err)
	}
	p.staleHead.Store(true)
	before := p.trips.Load()
	k, err := client(t, p).Inspect(context.Background(), scenario(d, "transparent"), 43_200)
	if err != nil {
		t.Fatal(err)
	}
	if trips := p.trips.Load() - before; trips != 3 || k.Head < uint64(head) || k.AdminOwner == nil || len(k.ImplementationCode) == 0 {
		t.Errorf("%d round trips, head %d (was %d), admin owner %v", trips, k.Head, head, k.AdminOwner)
	}
	if p.staleHead.Load() {
		t.Error("the first batch was not answered")
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
