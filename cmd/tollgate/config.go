package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/gateway"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/service/whales"
)

// config is everything serve needs; each field has a flag and an
// environment variable TOLLGATE_<FLAG>.
type config struct {
	HTTPAddr        string
	AdminAddr       string // operator listener, or adminOff
	GRPCAddr        string
	PublicURL       string
	DataDir         string
	Database        string // postgres:// URL of a shared store, or empty for SQLite in DataDir; never logged (may hold a password)
	CandlesURL      string
	DevnetRPC       string
	DevnetURL       string // a shared devnet (tollgate devnet); never inferred from ChainRPC
	ChainRPC        string
	PayTo           string
	Facilitator     string
	FacilitatorKey  string // from TOLLGATE_FACILITATOR_KEY or --facilitator-key-file; never logged
	KeyFile         string
	MaxTimeout      int
	LogFormat       string
	LogLevel        slog.Level
	RequestTimeout  time.Duration
	ShutdownTimeout time.Duration
	DrainDelay      time.Duration
	DevnetBlockTime time.Duration // in-process devnet: 0 seals per transaction
	DexFactories    string        // kind:address,... (whales.Factory)
	QuoteTokens     string        // address,...
	WhaleWindow     uint64
	WhaleInterval   time.Duration
	WhaleConfirm    uint64
	ForecastModel   string // grpc:// or grpcs://host:port of a ForecastModelService, or empty
	ForecastModelCA string // PEM bundle trusted for grpcs://, empty: the system roots
	Limits          gateway.LimitConfig
	TrustedProxies  string
	EquitiesURL     string
	ForecastTimeout time.Duration
	KronosModel     string // directory of a Kronos predictor checkpoint, or empty
	KronosTokenizer string // directory of its tokenizer checkpoint
	// Batch-settlement (docs/batch-settlement.md): offered beside exact
	// when a receiver authorizer key is at hand (devnet: payTo's key).
	BatchSettlement     bool
	BatchAuthorizerKey  string // from TOLLGATE_BATCH_AUTHORIZER_KEY or --batch-authorizer-key-file; never logged
	BatchKeyFile        string
	BatchWithdrawDelay  time.Duration
	BatchMinDeposit     string // USD
	BatchClaimInterval  time.Duration
	BatchClaimThreshold string // USD
	BatchStateTTL       time.Duration
	// SyntheticMarketData allows the synthetic candles and equity bars
	// outside devnet, where they would be sold as market data.
	SyntheticMarketData bool

	factories []whales.Factory // parsed by validate
	quotes    []common.Address
	candles   marketFeed // resolved by validate from CandlesURL
	equities  marketFeed // resolved by validate from EquitiesURL
	envErrs   []error    // TOLLGATE_* values that did not parse
}

// production reports a deployment on a real chain (--chain-rpc), as
// opposed to the embedded devnet.
func (c *config) production() bool { return c.ChainRPC != "" }

// Default locations of state (README, docs/payments.md "Ledger"): devnet
// state lives apart from production state, so that neither can open the
// other's ledger by default.
const (
	productionDataDir = "data"
	devnetDataDir     = "data/devnet"
)

// defaultDataDir is the store serve uses when --data-dir is not set.
// tollgate ledger and tollgate lanes import use it too, deciding the mode
// the way serve does: production when a chain RPC is configured.
func defaultDataDir(production bool) string {
	if production {
		return productionDataDir
	}
	return devnetDataDir
}

// Market sources (docs/rules.md "Candles"). Outside devnet the feeds
// default to the real public upstreams; the synthetic feeds are the devnet
// default and are refused elsewhere unless --synthetic-market-data is set.
const (
	coinbaseExchangeURL = "https://api.exchange.coinbase.com"
	yahooChartURL       = "https://query1.finance.yahoo.com"
	// syntheticFeed is the value of --candles-url or --equities-url that
	// names the synthetic feed explicitly.
	syntheticFeed = "synthetic"
)

// marketFeed is where one market feed comes from: an upstream URL, or the
// synthetic generator when url is empty.
type marketFeed struct {
	url string
}

func (f marketFeed) synthetic() bool { return f.url == "" }

// resolveFeed chooses the source of one feed from its flag's value: a URL,
// "synthetic", or empty for the deployment's default (the synthetic feed in
// devnet, upstream in production, or the synthetic feed in production when
// allowSynthetic says so). A synthetic feed in production without
// allowSynthetic is refused: it would sell generated candles for money.
func resolveFeed(flagName, value string, production, allowSynthetic bool, upstream string) (marketFeed, error) {
	switch {
	case value == "" && production && !allowSynthetic:
		return marketFeed{url: upstream}, nil
	case value == "" || value == syntheticFeed:
		if production && !allowSynthetic {
			return marketFeed{}, fmt.Errorf("--%s %s: outside devnet (--chain-rpc is set) synthetic market data would be sold as real; "+
				"set --synthetic-market-data (TOLLGATE_SYNTHETIC_MARKET_DATA=true) to serve it anyway, or give an upstream URL such as %s", flagName, value, upstream)
		}
		return marketFeed{}, nil
	}
	if u, err := url.Parse(value); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return marketFeed{}, fmt.Errorf("--%s %q: want an absolute http(s) URL such as %s, or %q", flagName, value, upstream, syntheticFeed)
	}
	return marketFeed{url: value}, nil
}

// The listeners' default addresses, the value that turns the operator
// listener off, and the default public URL.
const (
	defaultHTTP      = ":8402"
	defaultGRPC      = "127.0.0.1:9402"
	defaultAdmin     = "127.0.0.1:9403"
	defaultDevnetRPC = "127.0.0.1:8545"
	adminOff         = "off"
	defaultPublicURL = "http://localhost:8402"
)

// newServeFlags declares the flags of serve. Defaults come from getenv
// (TOLLGATE_<FLAG>) when set, so a flag given on the command line wins.
func newServeFlags(getenv func(string) string) (*flag.FlagSet, *config) {
	cfg := &config{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	str := func(p *string, name, def, usage string) {
		fs.StringVar(p, name, envDefault(getenv, &cfg.envErrs, name, def, func(s string) (string, error) { return s, nil }), usage)
	}
	dur := func(p *time.Duration, name string, def time.Duration, usage string) {
		fs.DurationVar(p, name, envDefault(getenv, &cfg.envErrs, name, def, time.ParseDuration), usage)
	}
	u64 := func(p *uint64, name string, def uint64, usage string) {
		parse := func(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) }
		fs.Uint64Var(p, name, envDefault(getenv, &cfg.envErrs, name, def, parse), usage)
	}
	str(&cfg.HTTPAddr, "http", defaultHTTP, "public REST listen address (x402-paid API and free endpoints)")
	str(&cfg.GRPCAddr, "grpc", defaultGRPC, "private gRPC listen address (reflection, health; unmetered: keep it off public networks)")
	str(&cfg.AdminAddr, "admin", defaultAdmin, "operator listen address: Prometheus /metrics, /readyz, /debug/pprof (keep it off public networks; each serve on one machine needs its own), or \"off\"")
	str(&cfg.PublicURL, "public-url", defaultPublicURL, "absolute base URL clients use; catalogs, OpenAPI servers and x402 resources are built from it")
	str(&cfg.DataDir, "data-dir", "", "directory for the embedded database and other state, created if missing; empty: "+productionDataDir+" with --chain-rpc, "+devnetDataDir+" in devnet mode")
	str(&cfg.Database, "database", "", databaseUsage)
	str(&cfg.CandlesURL, "candles-url", "", "Coinbase Exchange REST base URL for candles, or \"synthetic\"; empty: "+coinbaseExchangeURL+" with --chain-rpc, the synthetic feed in devnet mode")
	str(&cfg.DevnetRPC, "devnet-rpc", defaultDevnetRPC, "devnet mode (no --chain-rpc): where the in-process chain serves Ethereum JSON-RPC")
	dur(&cfg.DevnetBlockTime, "devnet-block-time", 0, "devnet mode, in-process chain: seal a block every this many whole seconds, empty or not (2s: Base's rhythm); 0: a block as soon as a transaction is pending")
	str(&cfg.DevnetURL, "devnet-url", "", "devnet mode on a shared chain: JSON-RPC URL of a \"tollgate devnet\" (e.g. http://127.0.0.1:8545), instead of an in-process chain; not with --chain-rpc")
	str(&cfg.ChainRPC, "chain-rpc", "", "Ethereum JSON-RPC URL of a Base node (chain id 8453); empty: run the embedded devnet")
	str(&cfg.PayTo, "pay-to", "", "address receiving payments (required with --chain-rpc; devnet: test account #1)")
	str(&cfg.Facilitator, "facilitator", "", "URL of a remote x402 facilitator (POST /verify, /settle); empty: the self-hosted one")
	str(&cfg.KeyFile, "facilitator-key-file", "", "file holding the hex gas key of the self-hosted facilitator (or set TOLLGATE_FACILITATOR_KEY)")
	cfg.FacilitatorKey = getenv("TOLLGATE_FACILITATOR_KEY")
	fs.IntVar(&cfg.MaxTimeout, "max-timeout", envDefault(getenv, &cfg.envErrs, "max-timeout", 300, strconv.Atoi),
		"seconds a payment authorization must stay valid (maxTimeoutSeconds)")
	str(&cfg.LogFormat, "log-format", "text", "log format: text or json")
	level := envDefault(getenv, &cfg.envErrs, "log-level", slog.LevelInfo, func(s string) (slog.Level, error) {
		var l slog.Level
		err := l.UnmarshalText([]byte(s))
		return l, err
	})
	fs.TextVar(&cfg.LogLevel, "log-level", level, "log level: debug, info, warn or error")
	dur(&cfg.RequestTimeout, "request-timeout", 30*time.Second, "deadline of one proxied call; past it the answer is 504")
	dur(&cfg.ShutdownTimeout, "shutdown-timeout", 15*time.Second, "how long shutdown waits for in-flight requests")
	dur(&cfg.DrainDelay, "drain-delay", 0, "on shutdown, how long /readyz says not ready before the listeners close (behind a load balancer: its check interval × fall count, e.g. 2s)")
	str(&cfg.DexFactories, "dex-factories", "", "whale scan: DEX venues as kind:address,... with kind v2, v3, v4 (the PoolManager), aerodrome, slipstream (a CL factory) or pancakev3; empty: every venue of Base (docs/rules.md; devnet: its V2-style factory and V4 PoolManager)")
	str(&cfg.QuoteTokens, "quote-tokens", "", "whale scan: quote assets as address,... (native ETH always counts); empty: WETH, USDC, VIRTUAL, ZORA, flETH and cbBTC on Base (docs/rules.md; devnet: its WETH)")
	u64(&cfg.WhaleWindow, "whale-window", 302_400, "whale scan: blocks of pool history followed (302400 = 7 days of Base)")
	u64(&cfg.WhaleConfirm, "whale-confirmations", 3, "whale scan: blocks kept behind the head against reorganizations (devnet: 0)")
	str(&cfg.EquitiesURL, "equities-url", "", "Yahoo Finance chart API base URL for the .NS equities, or \"synthetic\"; empty: "+yahooChartURL+" with --chain-rpc, the synthetic session bars in devnet mode")
	fs.BoolVar(&cfg.SyntheticMarketData, "synthetic-market-data", envDefault(getenv, &cfg.envErrs, "synthetic-market-data", false, strconv.ParseBool),
		"serve the synthetic candles and equity bars outside devnet too (answers say devnet-synthetic); without it they are refused with --chain-rpc")
	str(&cfg.ForecastModel, "forecast-model", "", "remote forecasting model (tollgate.v1.ForecastModelService) as grpc://host:port (plaintext, private network) or grpcs://host:port (TLS); empty: the embedded model only")
	str(&cfg.ForecastModelCA, "forecast-model-ca", "", "PEM file of the CA certificates trusted for a grpcs:// --forecast-model; empty: the system roots")
	dur(&cfg.ForecastTimeout, "forecast-timeout", 20*time.Second, "deadline of one model prediction (Kronos in process, or the remote model), its wait for its turn included; past it the embedded model answers (keep it under --request-timeout)")
	str(&cfg.KronosModel, "kronos-model", "", "directory of a Kronos predictor checkpoint (config.json + model.safetensors, as NeoQuasar/Kronos-small on Hugging Face): /forecast and /signal run Kronos in process; needs --kronos-tokenizer; empty: no Kronos")
	str(&cfg.KronosTokenizer, "kronos-tokenizer", "", "directory of the Kronos tokenizer checkpoint (as NeoQuasar/Kronos-Tokenizer-base) for --kronos-model")
	dur(&cfg.WhaleInterval, "whale-interval", time.Minute, "whale scan: pause between cycles once caught up")
	lim := gateway.DefaultLimitConfig()
	f64 := func(p *float64, name string, def float64, usage string) {
		fs.Float64Var(p, name, envDefault(getenv, &cfg.envErrs, name, def, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }), usage)
	}
	num := func(p *int, name string, def int, usage string) {
		fs.IntVar(p, name, envDefault(getenv, &cfg.envErrs, name, def, strconv.Atoi), usage)
	}
	f64(&cfg.Limits.Free.PerSecond, "rate-limit", lim.Free.PerSecond, "requests a second per client without a payment header (free endpoints, 402 challenges); 0: no limit")
	num(&cfg.Limits.Free.Burst, "rate-burst", lim.Free.Burst, "burst allowed above --rate-limit")
	f64(&cfg.Limits.Paid.PerSecond, "paid-rate-limit", lim.Paid.PerSecond, "requests a second per client with a payment header (only stops floods of junk payments); 0: no limit")
	num(&cfg.Limits.Paid.Burst, "paid-rate-burst", lim.Paid.Burst, "burst allowed above --paid-rate-limit")
	num(&cfg.Limits.MaxClients, "rate-limit-clients", lim.MaxClients, "clients tracked by the rate limits at most (least recently seen forgotten first)")
	fs.BoolVar(&cfg.BatchSettlement, "batch-settlement", envDefault(getenv, &cfg.envErrs, "batch-settlement", true, strconv.ParseBool),
		"offer the x402 batch-settlement scheme beside exact (needs a receiver authorizer key outside devnet; false: exact only)")
	str(&cfg.BatchKeyFile, "batch-authorizer-key-file", "", "batch-settlement: file holding the hex key of the channels' receiver authorizer, which signs claims and refunds (or set TOLLGATE_BATCH_AUTHORIZER_KEY; devnet: payTo's key)")
	cfg.BatchAuthorizerKey = getenv("TOLLGATE_BATCH_AUTHORIZER_KEY")
	dur(&cfg.BatchWithdrawDelay, "batch-withdraw-delay", time.Hour, "batch-settlement: the channels' withdrawDelay, how long a payer's timed withdrawal waits (15m to 720h): the claimer's time to claim; at least 2 × --batch-claim-interval + 5m")
	str(&cfg.BatchMinDeposit, "batch-min-deposit", "1.00", "batch-settlement: the deposit announced to clients (extra.minDeposit), USD; a route's price when larger")
	dur(&cfg.BatchClaimInterval, "batch-claim-interval", 10*time.Minute, "batch-settlement: claim and settle served vouchers at least this often; at most (--batch-withdraw-delay − 5m) / 2, so that two claims fit before a timed withdrawal finalizes")
	str(&cfg.BatchClaimThreshold, "batch-claim-threshold", "5.00", "batch-settlement: claim at once when this much (USD) is served and unclaimed; 0: no threshold")
	dur(&cfg.BatchStateTTL, "batch-state-ttl", 0, "batch-settlement: how long a channel's mirrored on-chain state serves vouchers without asking the chain; 0: withdraw delay / 3, between 30s and 5m")
	str(&cfg.TrustedProxies, "trusted-proxies", "", "load balancers whose X-Forwarded-For names the client, as CIDRs or IPs, comma-separated; empty: the TCP peer is the client")
	return fs, cfg
}

// envName is the environment variable of flag name: TOLLGATE_<NAME>,
// upper case with dashes as underscores.
func envName(name string) string {
	return "TOLLGATE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// envDefault is a flag's default: TOLLGATE_<FLAG> parsed when set, else
// def. A value that does not parse is recorded in errs (validate reports
// it) and def is kept.
func envDefault[T any](getenv func(string) string, errs *[]error, name string, def T, parse func(string) (T, error)) T {
	key := envName(name)
	v := getenv(key)
	if v == "" {
		return def
	}
	x, err := parse(v)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("%s: %w", key, err))
		return def
	}
	return x
}

// warnings are what validate accepts but an operator most likely did not
// mean.
func (c *config) warnings() []string {
	var out []string
	if c.PublicURL == defaultPublicURL {
		if _, port, err := net.SplitHostPort(c.HTTPAddr); err == nil && port != "8402" {
			out = append(out, fmt.Sprintf("--public-url is the default %s but --http listens on %s: 402 resources, catalogs and the OpenAPI servers entry will name %s; set --public-url to the URL clients use",
				defaultPublicURL, c.HTTPAddr, defaultPublicURL))
		}
	}
	return out
}

// validate reports every problem of cfg at once.
func (c *config) validate() error {
	errs := append([]error(nil), c.envErrs...)
	for _, a := range []struct{ flag, addr string }{{"http", c.HTTPAddr}, {"grpc", c.GRPCAddr}, {"admin", c.AdminAddr}} {
		if a.addr == adminOff && a.flag == "admin" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			errs = append(errs, fmt.Errorf("--%s %q: %w", a.flag, a.addr, err))
		}
	}
	if c.DataDir == "" {
		c.DataDir = defaultDataDir(c.production())
	}
	var err error
	if c.candles, err = resolveFeed("candles-url", c.CandlesURL, c.production(), c.SyntheticMarketData, coinbaseExchangeURL); err != nil {
		errs = append(errs, err)
	}
	if c.equities, err = resolveFeed("equities-url", c.EquitiesURL, c.production(), c.SyntheticMarketData, yahooChartURL); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format %q: want text or json", c.LogFormat))
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--request-timeout %s: must be positive", c.RequestTimeout))
	}
	if c.ChainRPC != "" && !common.IsHexAddress(c.PayTo) {
		errs = append(errs, fmt.Errorf("--pay-to %q: a valid receiving address is required outside devnet", c.PayTo))
	}
	if c.PayTo != "" && !common.IsHexAddress(c.PayTo) {
		errs = append(errs, fmt.Errorf("--pay-to %q is not an address", c.PayTo))
	}
	if err := validDatabase(c.Database); err != nil {
		errs = append(errs, err)
	}
	if err := validDevnetURL(c.DevnetURL, c.ChainRPC); err != nil {
		errs = append(errs, err)
	}
	if c.ChainRPC != "" && c.Facilitator == "" && c.FacilitatorKey == "" && c.KeyFile == "" {
		errs = append(errs, errors.New("the self-hosted facilitator needs a gas key: TOLLGATE_FACILITATOR_KEY or --facilitator-key-file (or use --facilitator URL)"))
	}
	if c.MaxTimeout < 30 {
		errs = append(errs, fmt.Errorf("--max-timeout %d: at least 30 seconds", c.MaxTimeout))
	}
	if c.ForecastModel != "" && !strings.HasPrefix(c.ForecastModel, "grpc://") && !strings.HasPrefix(c.ForecastModel, "grpcs://") {
		errs = append(errs, fmt.Errorf("--forecast-model %q: want grpc://host:port or grpcs://host:port (TLS)", c.ForecastModel))
	}
	if c.Limits.TrustedProxies, err = gateway.ParseTrustedProxies(c.TrustedProxies); err != nil {
		errs = append(errs, fmt.Errorf("--trusted-proxies: %w", err))
	} else if err := c.Limits.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("rate limits: %w", err))
	}
	if c.DevnetBlockTime < 0 || c.DevnetBlockTime%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--devnet-block-time %s: want a whole number of seconds", c.DevnetBlockTime))
	}
	if c.ForecastModelCA != "" && !strings.HasPrefix(c.ForecastModel, "grpcs://") {
		errs = append(errs, errors.New("--forecast-model-ca applies only to a grpcs:// --forecast-model"))
	}
	if c.ForecastTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--forecast-timeout %s: must be positive", c.ForecastTimeout))
	}
	if (c.KronosModel == "") != (c.KronosTokenizer == "") {
		errs = append(errs, errors.New("--kronos-model and --kronos-tokenizer go together: a predictor checkpoint and its tokenizer's"))
	}
	if c.KronosModel != "" && c.ForecastModel != "" {
		errs = append(errs, errors.New("--kronos-model and --forecast-model both name the forecasting model: choose one"))
	}
	if c.WhaleWindow == 0 || c.WhaleInterval <= 0 {
		errs = append(errs, fmt.Errorf("--whale-window %d, --whale-interval %s: must be positive", c.WhaleWindow, c.WhaleInterval))
	}
	c.factories, c.quotes = nil, nil
	for _, f := range splitList(c.DexFactories) {
		factory, err := whales.ParseFactory(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("--dex-factories %w", err))
			continue
		}
		c.factories = append(c.factories, factory)
	}
	for _, q := range splitList(c.QuoteTokens) {
		if !common.IsHexAddress(q) {
			errs = append(errs, fmt.Errorf("--quote-tokens %q is not an address", q))
			continue
		}
		c.quotes = append(c.quotes, common.HexToAddress(q))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout %s: must be positive", c.ShutdownTimeout))
	}
	if d := c.BatchWithdrawDelay; d%time.Second != 0 || d < batch.MinWithdrawDelay*time.Second || d > batch.MaxWithdrawDelay*time.Second {
		errs = append(errs, fmt.Errorf("--batch-withdraw-delay %s: want whole seconds from 15m to 720h (the escrow's bounds)", d))
	}
	if _, err := payment.AtomicAmount(c.BatchMinDeposit, usdcDecimals); err != nil {
		errs = append(errs, fmt.Errorf("--batch-min-deposit %q: %w", c.BatchMinDeposit, err))
	}
	if _, err := claimThreshold(c.BatchClaimThreshold, usdcDecimals); err != nil {
		errs = append(errs, fmt.Errorf("--batch-claim-threshold %q: %w", c.BatchClaimThreshold, err))
	}
	if c.BatchClaimInterval <= 0 || c.BatchStateTTL < 0 {
		errs = append(errs, fmt.Errorf("--batch-claim-interval %s must be positive, --batch-state-ttl %s not negative", c.BatchClaimInterval, c.BatchStateTTL))
	} else if most := maxClaimInterval(c.BatchWithdrawDelay); c.BatchWithdrawDelay >= batch.MinWithdrawDelay*time.Second && c.BatchClaimInterval > most {
		errs = append(errs, fmt.Errorf("--batch-claim-interval %s: at most %s with --batch-withdraw-delay %s ((delay − %s) / 2), or a payer's timed withdrawal can finalize before anything served is claimed",
			c.BatchClaimInterval, most, c.BatchWithdrawDelay, claimMargin))
	}
	return errors.Join(errs...)
}

// claimMargin is what the claim interval leaves of the withdraw delay, as
// well as a second interval: the time a claim takes to land, and clocks.
const claimMargin = 5 * time.Minute

// maxClaimInterval is the longest claim interval the channels' withdraw
// delay allows. The claimer claims a value at most an interval after it
// was served, and at once when the escrow watcher sees a timed withdrawal
// start; with the watcher blind (its event feed failing), a payer who
// starts one right after a call is caught only by the periodic claim. Two
// intervals and a margin fit in the delay, so that one failed claim (the
// facilitator or the chain down at that moment) is still made up in time.
func maxClaimInterval(withdrawDelay time.Duration) time.Duration {
	return (withdrawDelay - claimMargin) / 2
}

// claimThreshold parses --batch-claim-threshold: USD in atomic units of
// decimals, or nil for 0 (no threshold: the interval and withdrawals
// decide).
func claimThreshold(usd string, decimals int) (*big.Int, error) {
	if whole, frac, _ := strings.Cut(usd, "."); whole != "" && strings.Trim(whole+frac, "0") == "" {
		return nil, nil
	}
	return payment.AtomicAmount(usd, decimals)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
