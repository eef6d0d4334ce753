// Command tollgate serves Tollgate's pay-per-call API: the gRPC services on a
// private listener and the REST gateway on the public one.
//
//	tollgate serve [flags]
//	tollgate devnet [--rpc 127.0.0.1:8545]
//	tollgate --help
//
// main only wires: it reads configuration (flags, then TOLLGATE_* env,
// then defaults), builds each part in dependency order and serves until
// SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"text/tabwriter"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	default:
		fmt.Fprintln(os.Stderr, "tollgate:", err)
		os.Exit(1)
	}
}

const usage = `tollgate serves a pay-per-call data API about Base tokens and wallets and
ETH/BTC markets, paid per call with x402.

Usage:
  tollgate serve [flags]   run the gRPC server and the REST gateway (devnet unless --chain-rpc)
  tollgate devnet [--rpc 127.0.0.1:8545]
                           run the devnet chain alone, shared by servers started with --devnet-url
  tollgate pay [flags] URL pay one x402-priced GET and print the body, or with --tool NAME MCP_URL
                           call one paid MCP tool (tollgate pay --help)
  tollgate facilitator     serve the self-hosted facilitator's x402 HTTP API (tollgate facilitator --help)
  tollgate lanes import FILE
                           store trade-tape closes from JSONL or CSV (all or nothing; idempotent by id)
  tollgate ledger list|export|reconcile|channels
                           the payments ledger: list (filters --state, --since, --payer), export as CSV,
                           reconcile unresolved settlements against the chain once (--chain-rpc),
                           channels: batch-settlement channels, charged, claimed and unclaimed
  tollgate backtest [--product ETH-USD] [--model kronos --kronos-model DIR --kronos-tokenizer DIR]
                           score the forecaster (embedded, or Kronos) against the random walk on the candle feed
  tollgate kronos --kronos-model DIR --kronos-tokenizer DIR --pred-len N [--greedy] FILE.csv
                           forecast a CSV of candles with Kronos and print the forecast as CSV (tollgate kronos --help)
  tollgate version         the binary's version, VCS revision and commit time
  tollgate healthcheck [--url URL]
                           exit 0 if the operator listener's /readyz says ready (container HEALTHCHECK)
  tollgate --help          show this help

Every flag of serve can also be set with the environment variable
TOLLGATE_<FLAG>, upper case with dashes as underscores (--public-url ->
TOLLGATE_PUBLIC_URL). A flag on the command line wins over the environment.

Flags of serve:
`

// run parses args and runs the chosen command until ctx ends.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		fs, _ := newServeFlags(getenv)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		printEnv(stdout, fs)
		if len(args) == 0 {
			return errors.New("no command given")
		}
		return flag.ErrHelp
	}
	switch args[0] {
	case "serve":
		fs, cfg := newServeFlags(getenv)
		fs.Usage = func() {
			fmt.Fprint(fs.Output(), usage)
			fs.PrintDefaults()
			printEnv(fs.Output(), fs)
		}
		if err := parseFlags(fs, "serve", args[1:], stdout); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("serve: unexpected arguments %q", fs.Args())
		}
		if err := cfg.validate(); err != nil {
			return err
		}
		return serve(ctx, cfg, stderr)
	case "devnet":
		return devnetCmd(ctx, args[1:], getenv, stdout, stderr)
	case "pay":
		return pay(ctx, args[1:], getenv, stdout, stderr)
	case "facilitator":
		return facilitator(ctx, args[1:], getenv, stdout, stderr)
	case "lanes":
		return lanesCmd(ctx, args[1:], getenv, stdout, stderr)
	case "ledger":
		return ledgerCmd(ctx, args[1:], getenv, stdout, stderr)
	case "backtest":
		return backtest(ctx, args[1:], getenv, stdout, stderr)
	case "kronos":
		return kronosCmd(ctx, args[1:], getenv, stdout, stderr)
	case "version", "--version":
		return version(stdout)
	case "healthcheck":
		return healthcheck(ctx, args[1:], getenv, stdout, stderr)
	default:
		return fmt.Errorf("unknown command %q; see tollgate --help", args[0])
	}
}

// parseFlags parses args into fs, the flags of tollgate's command name:
// -h or --help prints fs's usage on stdout and returns flag.ErrHelp (the
// process exits 0); a flag that does not parse is one error line naming
// the command's --help, not the usage around it.
func parseFlags(fs *flag.FlagSet, name string, args []string, stdout io.Writer) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		if isHelp(a) && a != "help" {
			fs.SetOutput(stdout)
			fs.Usage()
			return flag.ErrHelp
		}
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%s: %w (tollgate %s --help lists its flags)", name, err, name)
	}
	return nil
}

// isHelp reports whether a is a request for help.
func isHelp(a string) bool {
	return a == "-h" || a == "-help" || a == "--help" || a == "--h" || a == "help"
}

// printEnv prints the environment table: the variable of every flag of
// serve, and the secrets that are only ever read from the environment.
func printEnv(w io.Writer, fs *flag.FlagSet) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nEnvironment (a flag on the command line wins):")
	fs.VisitAll(func(f *flag.Flag) {
		fmt.Fprintf(tw, "  %s\t--%s\n", envName(f.Name), f.Name)
	})
	for _, e := range [][2]string{
		{"TOLLGATE_FACILITATOR_KEY", "the self-hosted facilitator's hex gas key (never logged; or --facilitator-key-file)"},
		{"TOLLGATE_BATCH_AUTHORIZER_KEY", "batch-settlement: the receiver authorizer's hex key, signing claims and refunds (never logged; or --batch-authorizer-key-file)"},
		{"TOLLGATE_PAYER_KEY", "tollgate pay: the payer's hex key (default: devnet test account #0)"},
		{"CDP_API_KEY_ID, CDP_API_KEY_SECRET", "credentials for a Coinbase CDP --facilitator (a JWT is signed per request)"},
		{"TOLLGATE_ADMIN", "tollgate healthcheck: the operator listener to ask (default " + defaultAdmin + ")"},
	} {
		fmt.Fprintf(tw, "  %s\t%s\n", e[0], e[1])
	}
	tw.Flush()
}

// build is what the binary's build info says of it.
type build struct {
	Version  string // module version: a tag, a pseudo-version of the commit, or devel+<revision>
	Revision string // VCS commit, empty when built without VCS information
	Time     string // the commit's time, RFC 3339
	Modified bool   // built from a working tree with uncommitted changes
	Go       string
}

// buildInfo reads the binary's build info. `go build` in a checkout stamps
// the module version (Go 1.24+) and the VCS revision; `go run` and `go
// test` do not, and are "devel".
func buildInfo() build {
	b := build{Version: "devel"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Go = bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	switch {
	case bi.Main.Version != "" && bi.Main.Version != "(devel)":
		b.Version = bi.Main.Version
	case b.Revision != "":
		b.Version = "devel+" + b.Revision[:min(12, len(b.Revision))]
	}
	return b
}

// buildVersion is the version reported by /health, /tollgate and logs.
func buildVersion() string { return buildInfo().Version }

// buildRevision is the VCS revision, with "+modified" for a dirty tree.
func buildRevision() string {
	b := buildInfo()
	if b.Modified && b.Revision != "" {
		return b.Revision + "+modified"
	}
	return b.Revision
}

// version prints `tollgate version`.
func version(stdout io.Writer) error {
	b := buildInfo()
	fmt.Fprintf(stdout, "tollgate %s\n", b.Version)
	if b.Revision != "" {
		modified := ""
		if b.Modified {
			modified = " (with uncommitted changes)"
		}
		fmt.Fprintf(stdout, "revision %s%s\ncommit time %s\n", b.Revision, modified, b.Time)
	} else {
		fmt.Fprintln(stdout, "revision unknown (built without VCS information: go run, or -buildvcs=false)")
	}
	fmt.Fprintf(stdout, "go %s\n", b.Go)
	return nil
}
