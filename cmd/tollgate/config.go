package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// config is everything serve needs; each field has a flag and an
// environment variable TOLLGATE_<FLAG>.
type config struct {
	HTTPAddr        string
	GRPCAddr        string
	PublicURL       string
	DataDir         string
	CandlesURL      string
	DevnetRPC       string
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

	envErrs []error // TOLLGATE_* values that did not parse
}

// newServeFlags declares the flags of serve. Defaults come from getenv
// (TOLLGATE_<FLAG>) when set, so a flag given on the command line wins.
func newServeFlags(getenv func(string) string) (*flag.FlagSet, *config) {
	cfg := &config{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	env := func(name, def string) string {
		if v := getenv("TOLLGATE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); v != "" {
			return v
		}
		return def
	}
	str := func(p *string, name, def, usage string) {
		fs.StringVar(p, name, env(name, def), usage)
	}
	str(&cfg.HTTPAddr, "http", ":8402", "public REST listen address (x402-paid API and free endpoints)")
	str(&cfg.GRPCAddr, "grpc", "127.0.0.1:9402", "private gRPC listen address (reflection, health; unmetered: keep it off public networks)")
	str(&cfg.PublicURL, "public-url", "http://localhost:8402", "absolute base URL clients use; catalogs, OpenAPI servers and x402 resources are built from it")
	str(&cfg.DataDir, "data-dir", "data", "directory for the embedded database and other state; created if missing")
	str(&cfg.CandlesURL, "candles-url", "", "Coinbase Exchange REST base URL for candles (e.g. https://api.exchange.coinbase.com); empty: the devnet's synthetic feed")
	str(&cfg.DevnetRPC, "devnet-rpc", "127.0.0.1:8545", "devnet mode (no --chain-rpc): where the in-process chain serves Ethereum JSON-RPC")
	str(&cfg.ChainRPC, "chain-rpc", "", "Ethereum JSON-RPC URL of a Base node (chain id 8453); empty: run the embedded devnet")
	str(&cfg.PayTo, "pay-to", "", "address receiving payments (required with --chain-rpc; devnet: test account #1)")
	str(&cfg.Facilitator, "facilitator", "", "URL of a remote x402 facilitator (POST /verify, /settle); empty: the self-hosted one")
	str(&cfg.KeyFile, "facilitator-key-file", "", "file holding the hex gas key of the self-hosted facilitator (or set TOLLGATE_FACILITATOR_KEY)")
	cfg.FacilitatorKey = getenv("TOLLGATE_FACILITATOR_KEY")
	maxTimeout := 300
	if v := env("max-timeout", ""); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			cfg.envErrs = append(cfg.envErrs, fmt.Errorf("TOLLGATE_MAX_TIMEOUT: %w", err))
		} else {
			maxTimeout = n
		}
	}
	fs.IntVar(&cfg.MaxTimeout, "max-timeout", maxTimeout, "seconds a payment authorization must stay valid (maxTimeoutSeconds)")
	str(&cfg.LogFormat, "log-format", "text", "log format: text or json")
	level := slog.LevelInfo
	if s := env("log-level", ""); s != "" {
		if err := level.UnmarshalText([]byte(s)); err != nil {
			cfg.envErrs = append(cfg.envErrs, fmt.Errorf("TOLLGATE_LOG_LEVEL: %w", err))
		}
	}
	fs.TextVar(&cfg.LogLevel, "log-level", level, "log level: debug, info, warn or error")
	dur := func(p *time.Duration, name string, def time.Duration, usage string) {
		if s := env(name, ""); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil {
				cfg.envErrs = append(cfg.envErrs, fmt.Errorf("TOLLGATE_%s: %w", strings.ToUpper(strings.ReplaceAll(name, "-", "_")), err))
			} else {
				def = d
			}
		}
		fs.DurationVar(p, name, def, usage)
	}
	dur(&cfg.RequestTimeout, "request-timeout", 30*time.Second, "deadline of one proxied call; past it the answer is 504")
	dur(&cfg.ShutdownTimeout, "shutdown-timeout", 15*time.Second, "how long shutdown waits for in-flight requests")
	return fs, cfg
}

// validate reports every problem of cfg at once.
func (c *config) validate() error {
	errs := append([]error(nil), c.envErrs...)
	for _, a := range []struct{ flag, addr string }{{"http", c.HTTPAddr}, {"grpc", c.GRPCAddr}} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			errs = append(errs, fmt.Errorf("--%s %q: %w", a.flag, a.addr, err))
		}
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("--data-dir is empty"))
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
	if c.ChainRPC != "" && c.Facilitator == "" && c.FacilitatorKey == "" && c.KeyFile == "" {
		errs = append(errs, errors.New("the self-hosted facilitator needs a gas key: TOLLGATE_FACILITATOR_KEY or --facilitator-key-file (or use --facilitator URL)"))
	}
	if c.MaxTimeout < 30 {
		errs = append(errs, fmt.Errorf("--max-timeout %d: at least 30 seconds", c.MaxTimeout))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout %s: must be positive", c.ShutdownTimeout))
	}
	return errors.Join(errs...)
}
