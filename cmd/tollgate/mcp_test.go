package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/payment/exact"
	"github.com/tollgate/tollgate/service/catalog"
)

// TestMCPTools: the paid operations as MCP tools at /mcp, paid with x402
// over MCP by the go-sdk client and the repository's payer, on a devnet
// server: the nine tools and their schemas; bad arguments refused before
// any payment; the requirement of an unpaid call (also in _meta for
// Cloudflare's client); exact and batch-settlement paid calls whose
// record is the REST record and whose money moved on chain; a failed tool
// never charged; a payment spent on one transport buys nothing on the
// other; the funnel counted per transport.
func TestMCPTools(t *testing.T) {
	t.Parallel()
	s, err := serveFor(t, []string{"--data-dir", t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	session := mcpSession(t, s.base+"/mcp")
	key, _ := devnet.DeriveKey(devnet.Mnemonic, devnet.PayerAccount)
	payer := crypto.PubkeyToAddress(key.PublicKey)
	p := &payment.Payer{Version: 2, Schemes: []payment.SchemeClient{exact.Payer{Key: key}}}
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("tools", func(t *testing.T) {
		res, err := session.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*mcp.Tool{}
		for _, tl := range res.Tools {
			byName[tl.Name] = tl
		}
		paid := cat.Paid()
		if len(res.Tools) != len(paid) || len(paid) != 9 {
			t.Fatalf("%d tools for %d paid operations", len(res.Tools), len(paid))
		}
		for _, op := range paid {
			tl := byName[op.Name]
			if tl == nil {
				t.Fatalf("no tool %s", op.Name)
			}
			in, _ := json.Marshal(tl.InputSchema)
			out, _ := json.Marshal(tl.OutputSchema)
			if !strings.Contains(tl.Description, op.PriceUSD+" USD") || !bytes.Contains(out, []byte(`"anyOf"`)) || !bytes.Contains(out, []byte(`"x402Version"`)) {
				t.Errorf("%s: description %q, outputSchema %s", op.Name, tl.Description, out)
			}
			for _, prm := range op.Params {
				if !bytes.Contains(in, []byte(`"`+prm.Name+`"`)) {
					t.Errorf("%s: inputSchema %s lacks %s", op.Name, in, prm.Name)
				}
			}
		}
		var fc struct {
			Properties map[string]map[string]any
			Required   []string
		}
		b, _ := json.Marshal(byName["forecast"].InputSchema)
		_ = json.Unmarshal(b, &fc)
		if pl := fc.Properties["pred_len"]; pl["type"] != "integer" || pl["minimum"] != 1.0 || pl["maximum"] != 48.0 || pl["default"] != 24.0 || len(fc.Required) != 0 {
			t.Errorf("forecast inputSchema %s", b)
		}
		b, _ = json.Marshal(byName["rugcheck"].InputSchema)
		if !bytes.Contains(b, []byte(`"required":["addr"]`)) || !bytes.Contains(b, []byte(`"pattern":"^0x[0-9a-fA-F]{40}$"`)) {
			t.Errorf("rugcheck inputSchema %s", b)
		}
	})

	t.Run("discovery", func(t *testing.T) {
		get := func(path string) []byte {
			t.Helper()
			resp, err := http.Get(s.base + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			return b.Bytes()
		}
		for _, path := range []string{"/", "/tollgate", "/llms.txt", "/.well-known/x402"} {
			if !bytes.Contains(get(path), []byte(s.base+"/mcp")) {
				t.Errorf("%s does not point at %s/mcp", path, s.base)
			}
		}
		// The two facades split by exact path: an unclean one is the
		// gateway's 404 with its body, not a redirect around the limiter.
		noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for _, path := range []string{"//regime", "/x/../mcp", "/mcp/"} {
			resp, err := noRedirect.Get(s.base + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
			}
		}
		var wk struct {
			Tools []struct {
				Resource string
				PriceUsd string
				Input    map[string]any
			}
		}
		if err := json.Unmarshal(get("/.well-known/x402"), &wk); err != nil || len(wk.Tools) != 9 {
			t.Fatalf("/.well-known/x402 tools: %v %+v", err, wk)
		}
		listed, err := session.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range wk.Tools {
			name, _ := item.Input["toolName"].(string)
			var tl *mcp.Tool
			for _, x := range listed.Tools {
				if x.Name == name {
					tl = x
				}
			}
			r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: exampleArgs(tl)})
			if tl == nil || err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var req payment.RequiredV2
			b, _ := json.Marshal(r.StructuredContent)
			_ = json.Unmarshal(b, &req)
			bazaar, _ := json.Marshal(req.Extensions["bazaar"].(map[string]any)["info"].(map[string]any)["input"].(map[string]any)["inputSchema"])
			listedSchema, _ := json.Marshal(tl.InputSchema)
			known, _ := json.Marshal(item.Input["inputSchema"])
			if item.Resource != "mcp://tool/"+name || item.Input["type"] != "mcp" || item.Input["transport"] != "streamable-http" ||
				!sameRecord(t, known, listedSchema) || !sameRecord(t, known, bazaar) {
				t.Errorf("%s: /.well-known/x402 has %s %v\ntools/list has %s\nthe requirement's bazaar has %s", name, item.Resource, item.Input, listedSchema, bazaar)
			}
		}
	})

	t.Run("free documents as resources", func(t *testing.T) {
		listed, err := session.ListResources(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var uris []string
		for _, r := range listed.Resources {
			uris = append(uris, r.URI)
		}
		for _, path := range []string{"/llms.txt", "/openapi.json", "/.well-known/x402", "/tollgate"} {
			if !slices.Contains(uris, s.base+path) {
				t.Errorf("resources %v lack %s", uris, s.base+path)
			}
		}
		templates, err := session.ListResourceTemplates(ctx, nil)
		if err != nil || len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != s.base+"/demo/{op}" {
			t.Fatalf("templates: %v %+v", err, templates)
		}
		for _, path := range []string{"/llms.txt", "/demo/whales"} {
			r, err := session.ReadResource(ctx, &mcp.ReadResourceParams{URI: s.base + path})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.Get(s.base + path)
			if err != nil {
				t.Fatal(err)
			}
			var rest bytes.Buffer
			_, _ = rest.ReadFrom(resp.Body)
			resp.Body.Close()
			if c := r.Contents[0]; c.Text != rest.String() || c.MIMEType != strings.Split(resp.Header.Get("Content-Type"), ";")[0] && c.MIMEType != resp.Header.Get("Content-Type") {
				t.Errorf("%s: resource %s %.80q, REST %s %.80q", path, c.MIMEType, c.Text, resp.Header.Get("Content-Type"), rest.String())
			}
		}
		// Invalid params, MCP's "resource not found", with the URI and
		// REST's 404 body in its data.
		_, err = session.ReadResource(ctx, &mcp.ReadResourceParams{URI: s.base + "/demo/nothing"})
		if rpcErr := (*jsonrpc.Error)(nil); !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams ||
			!bytes.Contains(rpcErr.Data, []byte(`"uri":"`+s.base+`/demo/nothing"`)) || !bytes.Contains(rpcErr.Data, []byte(`"error":"not_found"`)) {
			t.Errorf("a demo of no operation: %v", err)
		}
	})

	t.Run("bad arguments cost nothing", func(t *testing.T) {
		for _, tt := range []struct {
			tool string
			args map[string]any
			want string
		}{
			{"forecast", map[string]any{"product": "XYZ"}, `unsupported value \"XYZ\"`},
			{"forecast", map[string]any{"pred_len": "24"}, `must be a JSON integer`},
			{"forecast", map[string]any{"pred_len": 2.5}, `must be a JSON integer`},
			{"rugcheck", map[string]any{}, `\"addr\" is required`},
			{"rugcheck", map[string]any{"addr": "0x12"}, `does not match`},
			{"regime", map[string]any{"product": "ETH-USD"}, `takes no arguments`},
			{"candles", map[string]any{"granularity": 61}, `unsupported value 61`},
		} {
			r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args,
				Meta: mcp.Meta{payment.MetaPayment: map[string]any{"x402Version": 2}}})
			if err != nil {
				t.Fatal(err)
			}
			if !r.IsError || r.StructuredContent != nil || r.Meta[payment.MetaError] != nil || !strings.Contains(text(r), tt.want) || !strings.Contains(text(r), `"status":400`) {
				t.Errorf("%s %v: %+v %s, want an invalid_argument error saying %s", tt.tool, tt.args, r, text(r), tt.want)
			}
		}
	})

	var required payment.RequiredV2
	t.Run("unpaid", func(t *testing.T) {
		r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "regime", Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		sc, _ := json.Marshal(r.StructuredContent)
		meta, _ := json.Marshal(r.Meta[payment.MetaError])
		if !r.IsError || !sameRecord(t, []byte(text(r)), sc) || !bytes.Equal(meta, sc) {
			t.Fatalf("unpaid regime: %+v", r)
		}
		if err := json.Unmarshal(sc, &required); err != nil {
			t.Fatal(err)
		}
		bazaar, _ := json.Marshal(required.Extensions["bazaar"])
		if required.X402Version != 2 || required.Resource.URL != "mcp://tool/regime" || len(required.Accepts) != 2 ||
			required.Accepts[0].Scheme != exact.Scheme || required.Accepts[1].Scheme != batch.Scheme ||
			!bytes.Contains(bazaar, []byte(`"type":"mcp"`)) || !bytes.Contains(bazaar, []byte(`"toolName":"regime"`)) || !bytes.Contains(bazaar, []byte(`"transport":"streamable-http"`)) {
			t.Fatalf("requirement %s", sc)
		}
	})

	client, err := ethclient.Dial(s.devnetRPC)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	w := &escrowWatch{t: t, ctx: ctx, c: client, token: common.HexToAddress(required.Accepts[0].Asset)}
	price, _ := new(big.Int).SetString(required.Accepts[0].Amount, 10)

	t.Run("exact: the REST record, paid on chain", func(t *testing.T) {
		before := w.balance(payer)
		res, err := p.CallTool(ctx, session, "regime", nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Result.IsError || res.Settlement == nil || !res.Settlement.Success || res.Settlement.Network != "eip155:8453" || res.Settlement.Payer != payer.Hex() {
			t.Fatalf("paid regime: %+v %s", res.Settlement, text(res.Result))
		}
		rcpt, err := client.TransactionReceipt(ctx, common.HexToHash(res.Settlement.Transaction))
		if err != nil || rcpt.Status != 1 {
			t.Fatalf("settlement %s: %v %v", res.Settlement.Transaction, rcpt, err)
		}
		if got := new(big.Int).Sub(before, w.balance(payer)); got.Cmp(price) != 0 {
			t.Errorf("the payer paid %s, want %s", got, price)
		}
		rest, err := p.Get(ctx, s.base+"/regime")
		if err != nil || rest.Status != http.StatusOK {
			t.Fatalf("REST regime: %v %+v", err, rest)
		}
		sc, _ := json.Marshal(res.Result.StructuredContent)
		if !sameRecord(t, []byte(text(res.Result)), sc) || !sameRecord(t, sc, rest.Body, "asOf") {
			t.Errorf("MCP record %s\ncontent %s\nREST record %s", sc, text(res.Result), rest.Body)
		}
	})

	t.Run("cloudflare's form: base64 in _meta", func(t *testing.T) {
		o, err := p.ToolOffer(ctx, session, "token", map[string]any{"addr": required.Accepts[0].Asset}, exact.Scheme)
		if err != nil {
			t.Fatal(err)
		}
		signed, err := exact.Payer{Key: key}.Pay(o)
		if err != nil {
			t.Fatal(err)
		}
		r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "token", Arguments: map[string]any{"addr": required.Accepts[0].Asset},
			Meta: mcp.Meta{payment.MetaPayment: signed.Value}})
		if err != nil {
			t.Fatal(err)
		}
		if r.IsError || r.Meta[payment.MetaPaymentResponse] == nil {
			t.Fatalf("token paid in base64: %s %v", text(r), r.Meta)
		}
	})

	t.Run("a failed tool is not charged", func(t *testing.T) {
		before := w.balance(payer)
		res, err := p.CallTool(ctx, session, "rugcheck", map[string]any{"addr": "0x0000000000000000000000000000000000000001"})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Result.IsError || res.Settlement != nil || res.Required != nil || !strings.Contains(text(res.Result), "failed_precondition") {
			t.Fatalf("rugcheck of no contract: %+v %s", res.Settlement, text(res.Result))
		}
		if after := w.balance(payer); after.Cmp(before) != 0 {
			t.Errorf("the payer's balance went from %s to %s", before, after)
		}
	})

	t.Run("one payment, one transport", func(t *testing.T) {
		// REST first: a paid GET, then its payment over MCP, as it is and
		// without its resource (which the ledger's record still refuses).
		signed, err := p.Sign(ctx, s.base+"/regime")
		if err != nil {
			t.Fatal(err)
		}
		if res, err := p.Send(ctx, s.base+"/regime", signed); err != nil || res.Status != http.StatusOK {
			t.Fatalf("REST: %v %+v", err, res)
		}
		before := w.balance(payer)
		// Refused by the resource it names, if it names one, else by the
		// ledger's record of its authorization.
		refused := func(body string) bool {
			return strings.Contains(body, `"error":"`+payment.ReasonResourceMismatch+`"`) || strings.Contains(body, `"error":"`+exact.ReasonAuthorizationReplayed+`"`)
		}
		for _, payload := range []json.RawMessage{decoded(t, signed.Value), decoded(t, withoutResource(t, signed.Value))} {
			r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "regime", Meta: mcp.Meta{payment.MetaPayment: payload}})
			if err != nil {
				t.Fatal(err)
			}
			if !r.IsError || r.StructuredContent == nil || !refused(text(r)) {
				t.Errorf("a REST payment over MCP: %s, want a requirement refusing it", text(r))
			}
		}
		// MCP first: a paid tool call, then its payment over REST.
		o, err := p.ToolOffer(ctx, session, "regime", nil, exact.Scheme)
		if err != nil {
			t.Fatal(err)
		}
		signed, err = exact.Payer{Key: key}.Pay(o)
		if err != nil {
			t.Fatal(err)
		}
		r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "regime", Meta: mcp.Meta{payment.MetaPayment: decoded(t, signed.Value)}})
		if err != nil || r.IsError {
			t.Fatalf("MCP: %v %s", err, text(r))
		}
		for _, value := range []string{signed.Value, withoutResource(t, signed.Value)} {
			res, err := p.Send(ctx, s.base+"/regime", payment.SignedPayment{Header: payment.HeaderPaymentV2, Value: value})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != http.StatusPaymentRequired || !refused(string(res.Body)) {
				t.Errorf("an MCP payment over REST: %d %s, want a 402 refusing it", res.Status, res.Body)
			}
		}
		if spent := new(big.Int).Sub(before, w.balance(payer)); spent.Cmp(price) != 0 {
			t.Errorf("the payer paid %s for one MCP call and three refused replays, want %s", spent, price)
		}
	})

	t.Run("batch-settlement: a channel for many calls", func(t *testing.T) {
		o, err := p.ToolOffer(ctx, session, "regime", nil, batch.Scheme)
		if err != nil {
			t.Fatal(err)
		}
		sess, _, err := batchSession(key, o, t.TempDir(), big.NewInt(1_000_000))
		if err != nil {
			t.Fatal(err)
		}
		bp := &payment.Payer{Version: 2, Schemes: []payment.SchemeClient{sess}}
		for i := 1; i <= 4; i++ {
			res, err := bp.CallTool(ctx, session, "regime", nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Result.IsError || res.Settlement == nil || !res.Settlement.Success {
				t.Fatalf("call %d: %s %+v", i, text(res.Result), res.Settlement)
			}
		}
		if want := new(big.Int).Mul(price, big.NewInt(4)); sess.Charged.Cmp(want) != 0 {
			t.Errorf("charged %s over 4 calls, want %s", sess.Charged, want)
		}
	})

	t.Run("tollgate pay --tool", func(t *testing.T) {
		dir := t.TempDir()
		challenges := func() float64 {
			v, _ := sample(scrape(t, s.admin)["tollgate_payment_challenges_total"].GetMetric(), "operation", "forecast", "transport", "mcp")
			return v
		}
		for _, scheme := range []string{exact.Scheme, batch.Scheme, batch.Scheme} {
			before := challenges()
			var out, errOut bytes.Buffer
			args := []string{"pay", "--scheme", scheme, "--channel-dir", dir, "--tool", "forecast", "--args", `{"product":"ETH-USD","pred_len":100}`, s.base + "/mcp"}
			if err := run(ctx, args, envOf(nil), &out, &errOut); err != nil {
				t.Fatalf("%s: %v\n%s", scheme, err, errOut.String())
			}
			var f struct{ PredLen int }
			if err := json.Unmarshal(out.Bytes(), &f); err != nil || f.PredLen != 48 || !strings.Contains(errOut.String(), "settlement: success=true") {
				t.Errorf("%s: %s %s", scheme, out.String(), errOut.String())
			}
			if n := challenges() - before; n != 1 {
				t.Errorf("%s: %v unpaid calls before paying, want 1", scheme, n)
			}
		}
		var out, errOut bytes.Buffer
		if err := run(ctx, []string{"pay", "--tool", "forecast", "--args", `{"product":"DOGE"}`, s.base + "/mcp"}, envOf(nil), &out, &errOut); err == nil || !strings.Contains(out.String(), "invalid_argument") {
			t.Errorf("bad arguments: %v %s", err, out.String())
		}
		for _, scheme := range []string{exact.Scheme, batch.Scheme} {
			err := run(ctx, []string{"pay", "--scheme", scheme, "--channel-dir", dir, "--max-amount", "1", "--tool", "forecast", s.base + "/mcp"}, envOf(nil), &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), "above the limit") {
				t.Errorf("%s past --max-amount: %v", scheme, err)
			}
		}
	})

	t.Run("funnel by transport", func(t *testing.T) {
		fams := scrape(t, s.admin)
		for _, tt := range []struct {
			name, op, transport string
			atLeast             float64
		}{
			{"tollgate_payment_settled_total", "regime", "mcp", 6},
			{"tollgate_payment_settled_total", "regime", "rest", 2},
			{"tollgate_payment_challenges_total", "forecast", "mcp", 6}, // discovery's and pay --tool's five; the bad arguments' none
		} {
			v, ok := sample(fams[tt.name].GetMetric(), "operation", tt.op, "transport", tt.transport)
			if !ok || v < tt.atLeast || tt.name == "tollgate_payment_challenges_total" && v != tt.atLeast {
				t.Errorf("%s{operation=%q,transport=%q} = %v (%v), want %v", tt.name, tt.op, tt.transport, v, ok, tt.atLeast)
			}
		}
	})
}

// mcpSession connects an MCP client to endpoint for the test.
func mcpSession(t testing.TB, endpoint string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "tollgate-test", Version: "v0"}, nil)
	session, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { session.Close() })
	return session
}

// text is a result's first text content.
func text(r *mcp.CallToolResult) string {
	if r == nil || len(r.Content) == 0 {
		return ""
	}
	if tc, ok := r.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// sameRecord reports whether two JSON records are equal but for the keys
// ignored (a time stamp).
func sameRecord(t *testing.T, a, b []byte, ignore ...string) bool {
	t.Helper()
	var x, y map[string]any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	for _, k := range ignore {
		delete(x, k)
		delete(y, k)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

func decoded(t *testing.T, value string) json.RawMessage {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(value)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// exampleArgs are arguments tl accepts: each required parameter's first
// acceptable value (a devnet token for an address).
func exampleArgs(tl *mcp.Tool) map[string]any {
	var schema struct {
		Required []string
	}
	b, _ := json.Marshal(tl.InputSchema)
	_ = json.Unmarshal(b, &schema)
	args := map[string]any{}
	for _, name := range schema.Required {
		args[name] = "0x00f59693Ab3a491356FDB4Facb4B04D811135E22" // addr is the only required parameter
	}
	return args
}

// BenchmarkToolCall compares a paid /regime over REST with the regime tool
// over MCP on one devnet (a block a second), one call at a time: the
// unpaid requirement (a 402; a tool result), an exact call with a payment
// signed in advance, and a batch-settlement voucher call (the voucher
// signed in the call; each transport on its own channel, whose first,
// deposit-waiting call is left out). It reports p50 and p99:
//
//	go test -run x -bench ToolCall -benchtime 50x ./cmd/tollgate/
func BenchmarkToolCall(b *testing.B) {
	s, err := serveFor(b, []string{"--data-dir", b.TempDir(), "--log-level", "warn", "--batch-min-deposit", "10.00", "--rate-limit", "0", "--paid-rate-limit", "0"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	session := mcpSession(b, s.base+"/mcp")
	key, _ := devnet.DeriveKey(devnet.Mnemonic, devnet.PayerAccount)
	p := &payment.Payer{HTTP: http.DefaultClient, Version: 2, Schemes: []payment.SchemeClient{exact.Payer{Key: key}}}
	url := s.base + "/regime"
	timed := func(b *testing.B, call func(i int)) {
		took := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			call(i)
			took = append(took, time.Since(start))
		}
		b.StopTimer()
		reportLatency(b, took, 0)
	}
	b.Run("requirement/rest", func(b *testing.B) {
		timed(b, func(int) {
			resp, err := http.Get(url)
			if err != nil || resp.StatusCode != http.StatusPaymentRequired {
				b.Fatal(err, resp)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	})
	b.Run("requirement/mcp", func(b *testing.B) {
		timed(b, func(int) {
			r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "regime"})
			if err != nil || !r.IsError {
				b.Fatal(err, r)
			}
		})
	})
	b.Run("exact/rest", func(b *testing.B) {
		signed := make([]payment.SignedPayment, b.N)
		for i := range signed {
			if signed[i], err = p.Sign(ctx, url); err != nil {
				b.Fatal(err)
			}
		}
		timed(b, func(i int) {
			if res, err := p.Send(ctx, url, signed[i]); err != nil || res.Status != http.StatusOK {
				b.Fatal(err, res)
			}
		})
	})
	b.Run("exact/mcp", func(b *testing.B) {
		o, err := p.ToolOffer(ctx, session, "regime", nil, exact.Scheme)
		if err != nil {
			b.Fatal(err)
		}
		payloads := make([]json.RawMessage, b.N)
		for i := range payloads {
			signed, err := exact.Payer{Key: key}.Pay(o)
			if err != nil {
				b.Fatal(err)
			}
			payloads[i], _ = base64.StdEncoding.DecodeString(signed.Value)
		}
		timed(b, func(i int) {
			r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "regime", Meta: mcp.Meta{payment.MetaPayment: payloads[i]}})
			if err != nil || r.IsError {
				b.Fatal(err, text(r))
			}
		})
	})
	account := uint32(3) // a new channel for each run
	b.Run("batch/rest", func(b *testing.B) {
		c := newBatchCaller(b, s.base, account)
		account++
		entry, resource := c.entry("/regime")
		c.pay("/regime", entry, resource) // the deposit
		timed(b, func(int) {
			if a := c.pay("/regime", entry, resource); a.status != http.StatusOK {
				b.Fatalf("%d %s", a.status, a.body)
			}
		})
	})
	b.Run("batch/mcp", func(b *testing.B) {
		k, _ := devnet.DeriveKey(devnet.Mnemonic, account)
		account++
		o, err := p.ToolOffer(ctx, session, "regime", nil, batch.Scheme)
		if err != nil {
			b.Fatal(err)
		}
		sess, _, err := batchSession(k, o, b.TempDir(), big.NewInt(10_000_000))
		if err != nil {
			b.Fatal(err)
		}
		call := func() {
			signed, err := sess.Pay(o)
			if err != nil {
				b.Fatal(err)
			}
			payload, _ := base64.StdEncoding.DecodeString(signed.Value)
			r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "regime", Meta: mcp.Meta{payment.MetaPayment: json.RawMessage(payload)}})
			if err != nil || r.IsError {
				b.Fatal(err, text(r))
			}
			var settled payment.SettleResponse
			raw, _ := json.Marshal(r.Meta[payment.MetaPaymentResponse])
			if err := json.Unmarshal(raw, &settled); err != nil {
				b.Fatal(err)
			}
			if err := sess.Paid(o, settled); err != nil {
				b.Fatal(err)
			}
		}
		call() // the deposit
		timed(b, func(int) { call() })
	})
}
