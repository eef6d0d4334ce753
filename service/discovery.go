package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tollgate/tollgate/gen/openapi"
	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service/catalog"
)

// Facts of the deployment that every catalog repeats.
const (
	projectName = "Tollgate"
	description = "Pay-per-call data about tokens and wallets on Base (eip155:8453) and about ETH/BTC markets, paid per call with x402 in USDC on Base. No signup, no API key."
	network     = "eip155:8453"
	disclaimer  = "Data and model output for information only; not financial advice. No accuracy or performance is implied."
	// MCPInstructions tell an agent connecting to the MCP endpoint what the
	// server is and how its tools are paid.
	MCPInstructions = description + " Every tool is one of the paid operations, at its price. " + mcpHowTo + " " + disclaimer
	mcpHowTo        = "A tool call without payment returns a result with isError whose structuredContent (and content[0].text) is the x402 v2 PaymentRequired, resource mcp://tool/<name>; pay one of its accepts (exact or batch-settlement) and call again with the PaymentPayload object in params._meta[\"x402/payment\"]; the result carries the settlement in _meta[\"x402/payment-response\"] (x402 specs/transports-v2/mcp.md). Bad arguments are refused before any payment."
	payHowTo        = "Call a paid URL without payment to receive 402 with the payment requirements (x402 v1 JSON body and v2 PAYMENT-REQUIRED header). Sign an EIP-3009 TransferWithAuthorization of USDC on eip155:8453 for the price and retry the same request with X-PAYMENT (v1) or PAYMENT-SIGNATURE (v2). Bad parameters are refused with 400 before any payment. Free samples of every response are at /demo/{op}."
)

// DiscoveryConfig holds what the free operations say about the deployment.
type DiscoveryConfig struct {
	// PublicURL is the absolute base URL clients reach the REST API at;
	// catalogs, the OpenAPI servers entry and (later) x402 resources use it.
	PublicURL string
	// Version is the server's build version; Revision and CommitTime the
	// VCS commit it was built from (empty when unknown).
	Version, Revision, CommitTime string
	// Sources are the upstreams answers are computed from, for /tollgate.
	Sources []DataSource
	// Mode is "devnet" or "production".
	Mode string
	// Terms are the x402 terms, for /tollgate; nil when payments are off.
	Terms *PaymentTerms
	// DevnetContracts are the devnet's scenario contracts (devnet only).
	DevnetContracts []DevnetContract
	// MCPPath is the path of the MCP endpoint on the public listener.
	MCPPath string
}

// DevnetContract is a scenario contract shown in the project facts.
type DevnetContract struct{ Name, Address, Expect, Role string }

// PaymentTerms are the x402 terms shown in the project facts.
type PaymentTerms struct {
	Network, NetworkV1, Asset, AssetName, AssetVersion, PayTo, Facilitator string
	Decimals, MaxTimeoutSeconds                                            int
}

// Counters is what /metrics reads: per paid operation, the 402s sent and
// the paid calls (exact's settled payments and batch-settlement's voucher calls, from the ledger), and the payments whose
// settlement is unresolved. *payment.Gate and the ledger provide them
// through cmd's adapter.
type Counters interface {
	Counters(ctx context.Context) (map[string]OpCounters, error)
	// Unresolved counts the payments still verified or pending and says
	// when the oldest was first seen (zero when none is).
	Unresolved(ctx context.Context) (count int, oldest time.Time, err error)
}

// OpCounters are one operation's counters.
type OpCounters struct {
	Challenges, Paid uint64
	// RevenueUSD is the settled amount as an exact decimal, e.g. "0.15".
	RevenueUSD string
}

// DataSource describes an upstream in the project facts.
type DataSource struct {
	Kind, Name, Description string
	Synthetic               bool
	// Cost, for the in-process model, reads what it costs to run; nil
	// for other sources.
	Cost func() ModelCost
}

// ModelCost is what the in-process forecasting model costs to run.
type ModelCost struct {
	Checkpoint string
	Parameters int64
	// WarmUp is the start-up inference's time, Timeout the deadline of
	// one prediction, Last the latest inference's time, ended at LastAt.
	WarmUp, Timeout, Last time.Duration
	LastAt                time.Time
}

// Validate reports every problem of c at once.
func (c DiscoveryConfig) Validate() error {
	var errs []error
	u, err := url.Parse(c.PublicURL)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("public URL: %w", err))
	case u.Scheme != "http" && u.Scheme != "https":
		errs = append(errs, fmt.Errorf("public URL %q: scheme must be http or https", c.PublicURL))
	case u.Host == "":
		errs = append(errs, fmt.Errorf("public URL %q: no host", c.PublicURL))
	case u.RawQuery != "" || u.Fragment != "":
		errs = append(errs, fmt.Errorf("public URL %q: no query or fragment allowed", c.PublicURL))
	}
	if c.Version == "" {
		errs = append(errs, errors.New("version is empty"))
	}
	if !strings.HasPrefix(c.MCPPath, "/") {
		errs = append(errs, fmt.Errorf("MCP path %q is not a path", c.MCPPath))
	}
	return errors.Join(errs...)
}

// Discovery implements tollgatev1.DiscoveryServiceServer.
type Discovery struct {
	tollgatev1.UnimplementedDiscoveryServiceServer

	cfg        DiscoveryConfig
	base       string // PublicURL without a trailing slash
	mcp        string // the MCP endpoint's absolute URL
	cat        *catalog.Catalog
	apiVersion string
	openapi    []byte
	llms       []byte
	project    *tollgatev1.GetProjectResponse
	x402       *tollgatev1.GetX402DiscoveryResponse
	demos      map[string]*tollgatev1.GetDemoResponse
	counters   Counters
}

// NewDiscovery builds the free catalogs from cat and the generated OpenAPI
// document; counters, when not nil, feed /metrics. It does no I/O.
func NewDiscovery(cfg DiscoveryConfig, cat *catalog.Catalog, counters Counters) (*Discovery, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("discovery config: %w", err)
	}
	d := &Discovery{cfg: cfg, base: strings.TrimSuffix(cfg.PublicURL, "/"), cat: cat, counters: counters}
	d.mcp = d.base + cfg.MCPPath
	doc, version, err := servedOpenAPI(openapi.Document(), d.base)
	if err != nil {
		return nil, err
	}
	d.openapi, d.apiVersion = doc, version
	d.project = d.buildProject()
	if d.x402, err = d.buildX402(openapi.Document()); err != nil {
		return nil, err
	}
	d.llms = d.buildLLMs()
	d.demos = demos()
	for _, op := range cat.Paid() {
		if _, ok := d.demos[op.Name]; !ok {
			return nil, fmt.Errorf("no demo sample for paid operation %q", op.Name)
		}
	}
	return d, nil
}

// GetIndex implements tollgatev1.DiscoveryServiceServer.
func (d *Discovery) GetIndex(context.Context, *tollgatev1.GetIndexRequest) (*tollgatev1.GetIndexResponse, error) {
	return &tollgatev1.GetIndexResponse{
		Name:        projectName,
		Description: description,
		Openapi:     d.base + "/openapi.json",
		Catalog:     d.base + "/tollgate",
		Llms:        d.base + "/llms.txt",
		X402:        d.base + "/.well-known/x402",
		Health:      d.base + "/health",
		Mcp:         d.mcp,
	}, nil
}

// GetHealth implements tollgatev1.DiscoveryServiceServer.
func (d *Discovery) GetHealth(context.Context, *tollgatev1.GetHealthRequest) (*tollgatev1.GetHealthResponse, error) {
	return &tollgatev1.GetHealthResponse{Status: "ok", Version: d.cfg.Version, Revision: d.cfg.Revision, CommitTime: d.cfg.CommitTime}, nil
}

// GetProject implements tollgatev1.DiscoveryServiceServer.
func (d *Discovery) GetProject(context.Context, *tollgatev1.GetProjectRequest) (*tollgatev1.GetProjectResponse, error) {
	p := proto.CloneOf(d.project)
	for i, src := range d.cfg.Sources {
		if src.Cost != nil { // live: the model's latest inference
			p.Sources[i].Cost = modelCost(src.Cost())
		}
	}
	return p, nil
}

// modelCost is c on the wire.
func modelCost(c ModelCost) *tollgatev1.ModelCost {
	out := &tollgatev1.ModelCost{Checkpoint: c.Checkpoint, Parameters: c.Parameters, WarmupSeconds: c.WarmUp.Seconds(),
		LastInferenceSeconds: c.Last.Seconds(), TimeoutSeconds: c.Timeout.Seconds()}
	if !c.LastAt.IsZero() {
		out.LastInferenceAt = c.LastAt.UTC().Format(time.RFC3339)
	}
	return out
}

// GetLlmsTxt implements tollgatev1.DiscoveryServiceServer.
func (d *Discovery) GetLlmsTxt(context.Context, *tollgatev1.GetLlmsTxtRequest) (*tollgatev1.GetLlmsTxtResponse, error) {
	return &tollgatev1.GetLlmsTxtResponse{Body: &httpbody.HttpBody{
		ContentType: "text/plain; charset=utf-8",
		Data:        bytes.Clone(d.llms),
	}}, nil
}

// GetOpenAPI implements tollgatev1.DiscoveryServiceServer.
func (d *Discovery) GetOpenAPI(context.Context, *tollgatev1.GetOpenAPIRequest) (*tollgatev1.GetOpenAPIResponse, error) {
	return &tollgatev1.GetOpenAPIResponse{Body: &httpbody.HttpBody{
		ContentType: "application/json",
		Data:        bytes.Clone(d.openapi),
	}}, nil
}

// GetDemo implements tollgatev1.DiscoveryServiceServer. The interceptor has
// already refused ops outside the declared set.
func (d *Discovery) GetDemo(_ context.Context, req *tollgatev1.GetDemoRequest) (*tollgatev1.GetDemoResponse, error) {
	demo, ok := d.demos[req.GetOp()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no demo for op %q", req.GetOp())
	}
	return proto.CloneOf(demo), nil
}

// GetX402Discovery implements tollgatev1.DiscoveryServiceServer.
func (d *Discovery) GetX402Discovery(context.Context, *tollgatev1.GetX402DiscoveryRequest) (*tollgatev1.GetX402DiscoveryResponse, error) {
	return proto.CloneOf(d.x402), nil
}

// GetMetrics implements tollgatev1.DiscoveryServiceServer: per paid
// endpoint and in total, challenges (402s sent for a missing payment),
// paid (settled or charged on a voucher, from the ledger), conversion (paid / challenges, the
// share of challenges that turned into payments, capped at 1 when payers
// pay without asking for a 402 first: paid / max(challenges, paid)) and
// revenue; and the payments whose settlement is unresolved.
func (d *Discovery) GetMetrics(ctx context.Context, _ *tollgatev1.GetMetricsRequest) (*tollgatev1.GetMetricsResponse, error) {
	counts := map[string]OpCounters{}
	if d.counters != nil {
		var err error
		if counts, err = d.counters.Counters(ctx); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	now := time.Now()
	resp := &tollgatev1.GetMetricsResponse{AsOf: now.UTC().Format(time.RFC3339), Settlements: &tollgatev1.SettlementCounters{}}
	if d.counters != nil {
		n, oldest, err := d.counters.Unresolved(ctx)
		if err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
		resp.Settlements.Unresolved = uint32(min(n, 1<<32-1))
		if n > 0 && !oldest.IsZero() {
			resp.Settlements.OldestUnresolvedAgeSeconds = wrapperspb.UInt32(uint32(min(max(now.Sub(oldest), 0)/time.Second, 1<<32-1)))
		}
	}
	var total OpCounters
	revenue := new(big.Rat)
	for _, op := range d.cat.Paid() {
		c := counts[op.Name]
		resp.Endpoints = append(resp.Endpoints, endpointCounters(op.Name, c))
		total.Challenges += c.Challenges
		total.Paid += c.Paid
		if r, ok := new(big.Rat).SetString(orZero(c.RevenueUSD)); ok {
			revenue.Add(revenue, r)
		}
	}
	total.RevenueUSD = decimalString(revenue)
	resp.Totals = endpointCounters("total", total)
	return resp, nil
}

func endpointCounters(name string, c OpCounters) *tollgatev1.EndpointCounters {
	revenue := "0"
	if r, ok := new(big.Rat).SetString(orZero(c.RevenueUSD)); ok {
		revenue = decimalString(r)
	}
	out := &tollgatev1.EndpointCounters{
		Name: name, Challenges: uint32(min(c.Challenges, 1<<32-1)), Paid: uint32(min(c.Paid, 1<<32-1)), RevenueUsd: revenue,
	}
	if n := max(c.Paid, c.Challenges); n > 0 {
		out.Conversion = wrapperspb.Double(float64(c.Paid) / float64(n))
	}
	return out
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// decimalString writes an exact decimal without trailing zeros ("0.15").
func decimalString(r *big.Rat) string {
	s := r.FloatString(18)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func (d *Discovery) buildProject() *tollgatev1.GetProjectResponse {
	p := &tollgatev1.GetProjectResponse{
		Name:        projectName,
		Description: description,
		ApiVersion:  d.apiVersion,
		BaseUrl:     d.base,
		Network:     network,
		Payment:     "x402",
		Currency:    "USD",
		Disclaimer:  disclaimer,
		Mode:        d.cfg.Mode,
		Mcp:         d.mcp,
	}
	if t := d.cfg.Terms; t != nil {
		p.Terms = &tollgatev1.PaymentTerms{
			Scheme: "exact", Network: t.Network, NetworkV1: t.NetworkV1, Asset: t.Asset, AssetName: t.AssetName,
			AssetVersion: t.AssetVersion, Decimals: int32(t.Decimals), PayTo: t.PayTo,
			MaxTimeoutSeconds: int32(t.MaxTimeoutSeconds), Facilitator: t.Facilitator,
		}
	}
	for _, c := range d.cfg.DevnetContracts {
		p.DevnetContracts = append(p.DevnetContracts, &tollgatev1.DevnetContract{Name: c.Name, Address: c.Address, Expect: c.Expect, Role: c.Role})
	}
	for _, src := range d.cfg.Sources {
		p.Sources = append(p.Sources, &tollgatev1.DataSource{Kind: src.Kind, Name: src.Name, Synthetic: src.Synthetic, Description: src.Description})
	}
	for _, op := range d.cat.Operations() {
		if !op.Paid() {
			for _, path := range op.Paths {
				p.Free = append(p.Free, &tollgatev1.FreeOperation{
					Name: op.Name, Method: op.HTTPMethod, Path: path, Url: d.base + path, Summary: op.Summary,
				})
			}
			continue
		}
		po := &tollgatev1.PaidOperation{
			Name:     op.Name,
			Method:   op.HTTPMethod,
			Path:     op.Path(),
			Url:      d.base + op.Path(),
			PriceUsd: op.PriceUSD,
			Summary:  op.Summary,
			Demo:     d.base + "/demo/" + op.Name,
			Tool:     op.Name,
		}
		for _, prm := range op.Params {
			po.Parameters = append(po.Parameters, parameter(prm))
		}
		p.Paid = append(p.Paid, po)
	}
	return p
}

func parameter(p catalog.Param) *tollgatev1.Parameter {
	out := &tollgatev1.Parameter{Name: p.Name, In: p.In, Required: p.Required(), Type: "string", Enum: p.Rule.GetEnum(), Clamp: p.Rule.GetClamp()}
	if p.Integer() {
		out.Type, out.IntEnum = "integer", p.Rule.GetIntEnum()
	}
	if s := p.Rule.GetPattern(); s != "" {
		out.Pattern = &s
	}
	if s := p.Rule.GetDefault(); s != "" {
		out.Default = &s
	}
	out.Minimum, out.Maximum = p.Rule.Minimum, p.Rule.Maximum
	return out
}

// buildX402 lists the paid operations for /.well-known/x402, each with
// its input and output read from the OpenAPI document doc: the JSON
// Schemas of its parameters and of its response, as the bazaar extension
// of its 402 declares them (gateway.PaidRoutes reads the same document,
// through the same [catalog.OpenAPI], for the gate; a gateway test holds
// the two equal).
func (d *Discovery) buildX402(doc []byte) (*tollgatev1.GetX402DiscoveryResponse, error) {
	api, err := catalog.ParseOpenAPI(doc)
	if err != nil {
		return nil, err
	}
	x := &tollgatev1.GetX402DiscoveryResponse{
		Version:      1,
		Instructions: payHowTo + " MCP: " + mcpHowTo,
		Openapi:      d.base + "/openapi.json",
		Llms:         d.base + "/llms.txt",
		Mcp:          d.mcp,
	}
	for _, op := range d.cat.Paid() {
		input, output, err := describe(api, op)
		if err != nil {
			return nil, fmt.Errorf("openapi document: %s: %w", op.Name, err)
		}
		in, err := structpb.NewStruct(input)
		if err != nil {
			return nil, err
		}
		out, err := structpb.NewStruct(output)
		if err != nil {
			return nil, err
		}
		tool, err := structpb.NewStruct(describeTool(input, op))
		if err != nil {
			return nil, err
		}
		x.Tools = append(x.Tools, &tollgatev1.X402Resource{
			Resource: "mcp://tool/" + op.Name, PriceUsd: op.PriceUSD, Network: network, MimeType: "application/json",
			Description: op.Summary, Input: tool, Output: out,
		})
		x.Resources = append(x.Resources, d.base+op.Path())
		x.Items = append(x.Items, &tollgatev1.X402Resource{
			Resource:      d.base + op.Path(),
			Method:        op.HTTPMethod,
			PriceUsd:      op.PriceUSD,
			Network:       network,
			MimeType:      "application/json",
			Description:   op.Summary,
			Input:         in,
			Output:        out,
			RouteTemplate: routeTemplate(op),
		})
	}
	return x, nil
}

// describe returns the input and output of op's primary path, read from
// api, in the shape of X402Resource.input and .output.
func describe(api *catalog.OpenAPI, op *catalog.Operation) (input, output map[string]any, err error) {
	ps, response, err := api.Operation(op.Path())
	if err != nil {
		return nil, nil, err
	}
	params := map[string]map[string]any{}
	for _, p := range ps {
		m := params[p.In]
		if m == nil {
			m = map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false}
			params[p.In] = m
		}
		prop := p.Schema
		if p.Description != "" {
			prop["description"] = p.Description
		}
		m["properties"].(map[string]any)[p.Name] = prop
		if p.Required {
			req, _ := m["required"].([]any)
			m["required"] = append(req, p.Name)
		}
	}
	input = map[string]any{"type": "http", "method": op.HTTPMethod}
	query := params[catalog.InQuery]
	if query == nil {
		query = map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false}
	}
	input["queryParams"] = query
	if m := params[catalog.InPath]; m != nil {
		input["pathParams"] = m
	}
	return input, map[string]any{"type": "json", "schema": response}, nil
}

// describeTool returns the input of op as an MCP tool, from its HTTP
// input (describe's): every parameter, path or query, a property of one
// object, the path's required.
func describeTool(httpInput map[string]any, op *catalog.Operation) map[string]any {
	props, required := map[string]any{}, []any{}
	for _, in := range []string{"pathParams", "queryParams"} {
		m, _ := httpInput[in].(map[string]any)
		ps, _ := m["properties"].(map[string]any)
		for name, p := range ps {
			props[name] = p
		}
		req, _ := m["required"].([]any)
		required = append(required, req...)
	}
	schema := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		schema["required"] = required
	}
	return map[string]any{"type": "mcp", "toolName": op.Name, "description": op.Summary, "transport": "streamable-http", "inputSchema": schema}
}

// routeTemplate writes op's path the way the bazaar extension does,
// "/rugcheck/:addr"; "" when it has no path parameter.
func routeTemplate(op *catalog.Operation) string {
	segs := strings.Split(op.Path(), "/")
	vars := false
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			name, _, _ := strings.Cut(s[1:len(s)-1], "=")
			segs[i], vars = ":"+name, true
		}
	}
	if !vars {
		return ""
	}
	return strings.Join(segs, "/")
}

func (d *Discovery) buildLLMs() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n> %s\n\n", projectName, description)
	b.WriteString("## Paid endpoints (HTTP GET, x402, USDC on Base)\n\n")
	for _, op := range d.cat.Paid() {
		fmt.Fprintf(&b, "- [%s %s](%s): %s USD. %s.", op.HTTPMethod, op.Path(), d.base+op.Path(), op.PriceUSD, op.Summary)
		if len(op.Params) > 0 {
			var ps []string
			for _, p := range op.Params {
				ps = append(ps, paramText(p))
			}
			fmt.Fprintf(&b, " Parameters: %s.", strings.Join(ps, "; "))
		}
		fmt.Fprintf(&b, " Sample: %s/demo/%s\n", d.base, op.Name)
	}
	b.WriteString("\n## How to pay\n\n" + payHowTo + "\n\n")
	fmt.Fprintf(&b, "## MCP (for agents)\n\n%s is an MCP server (Streamable HTTP, POST, stateless): every paid endpoint above is the tool of its name (%s), with the same parameters as its arguments, the same price and the same JSON record as structuredContent. %s\n\n",
		d.mcp, strings.Join(toolNames(d.cat), ", "), mcpHowTo)
	b.WriteString("## Free endpoints\n\n")
	for _, op := range d.cat.Operations() {
		if op.Paid() {
			continue
		}
		for _, path := range op.Paths {
			fmt.Fprintf(&b, "- [%s %s](%s): %s\n", op.HTTPMethod, path, d.base+path, op.Summary)
		}
	}
	fmt.Fprintf(&b, "\n## Notes\n\n- %s\n- Every paid response carries asOf, the RFC 3339 UTC time it was computed.\n- Errors other than 402 share one JSON body: {\"error\", \"message\", \"status\", \"param\", \"accepted\"}.\n", disclaimer)
	return []byte(b.String())
}

// toolNames are the MCP tools' names, one per paid operation.
func toolNames(cat *catalog.Catalog) []string {
	var out []string
	for _, op := range cat.Paid() {
		out = append(out, op.Name)
	}
	return out
}

// paramText describes a parameter in one phrase for llms.txt.
func paramText(p catalog.Param) string {
	var parts []string
	switch {
	case len(p.Accepted()) > 0:
		parts = append(parts, "one of "+strings.Join(p.Accepted(), ", "))
	case p.Rule.GetPattern() != "":
		parts = append(parts, "matching "+p.Rule.GetPattern())
	case p.Integer() && p.Rule.Minimum != nil && p.Rule.Maximum != nil:
		verb := "from"
		if p.Rule.GetClamp() {
			verb = "clamped into"
		}
		parts = append(parts, fmt.Sprintf("integer %s %d-%d", verb, p.Rule.GetMinimum(), p.Rule.GetMaximum()))
	}
	if d := p.Rule.GetDefault(); d != "" {
		parts = append(parts, "default "+d)
	}
	where := p.In
	if p.Required() {
		where += ", required"
	}
	return fmt.Sprintf("%s (%s) %s", p.Name, where, strings.Join(parts, ", "))
}

// servedOpenAPI returns the generated document with its servers entry set
// to base, keeping the top-level key order, and its info.version.
func servedOpenAPI(doc []byte, base string) ([]byte, string, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, "", fmt.Errorf("openapi document: not a JSON object")
	}
	var out bytes.Buffer
	out.WriteByte('{')
	var version string
	for first := true; dec.More(); first = false {
		tok, err := dec.Token()
		if err != nil {
			return nil, "", fmt.Errorf("openapi document: %w", err)
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, "", fmt.Errorf("openapi document: %s: %w", key, err)
		}
		switch key {
		case "servers":
			val, _ = json.Marshal([]map[string]string{{"url": base, "description": "This server"}})
		case "info":
			var info struct{ Version string }
			if err := json.Unmarshal(val, &info); err != nil {
				return nil, "", fmt.Errorf("openapi document: info: %w", err)
			}
			version = info.Version
		}
		if !first {
			out.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		out.Write(k)
		out.WriteByte(':')
		if err := json.Compact(&out, val); err != nil {
			return nil, "", err
		}
	}
	out.WriteByte('}')
	if version == "" {
		return nil, "", errors.New("openapi document: no info.version")
	}
	return out.Bytes(), version, nil
}
