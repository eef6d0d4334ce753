package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/tollgate/tollgate/admin"
	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/gateway"
	"github.com/tollgate/tollgate/gateway/inprocess"
	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/mcpserver"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/payment/exact"
	"github.com/tollgate/tollgate/service"
	"github.com/tollgate/tollgate/service/catalog"
	"github.com/tollgate/tollgate/service/chain"
	"github.com/tollgate/tollgate/service/forecast"
	"github.com/tollgate/tollgate/service/forecast/kronos"
	"github.com/tollgate/tollgate/service/market"
	"github.com/tollgate/tollgate/service/whales"
	"github.com/tollgate/tollgate/store"
)

// Base mainnet facts (production mode).
const (
	baseChainID   = 8453
	baseNetwork   = "eip155:8453"
	baseNetworkV1 = "base"
	baseUSDC      = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
	usdcName      = "USD Coin"
	usdcVersion   = "2"
	usdcDecimals  = 6
)

// maxHeaderBytes bounds a request's headers: payment headers are a few
// KiB.
const maxHeaderBytes = 64 << 10

// listeners are the sockets serve binds before wiring.
type listeners struct {
	http, grpc, devnet net.Listener // devnet is nil outside devnet mode
	admin              net.Listener // nil with --admin off
}

// serve binds the listeners of cfg and serves until ctx ends. Every
// address that cannot be bound is reported at once, each with its flag.
func serve(ctx context.Context, cfg *config, logOut io.Writer) error {
	logger := newLogger(cfg, logOut)
	var lc net.ListenConfig
	var ls listeners
	var errs []error
	for _, b := range []struct {
		dst        *net.Listener
		flag, addr string
		def        string // the flag's default
		want       bool
	}{{&ls.grpc, "grpc", cfg.GRPCAddr, defaultGRPC, true}, {&ls.http, "http", cfg.HTTPAddr, defaultHTTP, true},
		{&ls.devnet, "devnet-rpc", cfg.DevnetRPC, defaultDevnetRPC, cfg.ChainRPC == "" && cfg.DevnetURL == ""},
		{&ls.admin, "admin", cfg.AdminAddr, defaultAdmin, cfg.AdminAddr != adminOff}} {
		if !b.want {
			continue
		}
		var err error
		if *b.dst, err = lc.Listen(ctx, "tcp", b.addr); err != nil {
			errs = append(errs, listenError(b.flag, b.addr, b.def, err))
		}
	}
	if len(errs) > 0 {
		for _, l := range []net.Listener{ls.http, ls.grpc, ls.devnet, ls.admin} {
			if l != nil {
				l.Close()
			}
		}
		return errors.Join(errs...)
	}
	return serveOn(ctx, cfg, logger, ls)
}

// listenError names the flag of an address serve could not bind (def is
// the flag's default) and, when another process holds the address, what
// to do: two serves on one machine, replicas of one devnet say, need an
// address of their own for every listener (README "Several replicas").
// Serve never moves a listener elsewhere on its own: Prometheus, the load
// balancer and tollgate healthcheck find each one where its flag says.
func listenError(flag, addr, def string, err error) error {
	name := "--" + flag + " " + addr
	if addr == def {
		name += " (the default)"
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s: %w", name, err)
	}
	example := ""
	if host, port, perr := net.SplitHostPort(addr); perr == nil {
		if n, aerr := strconv.Atoi(port); aerr == nil && n > 0 && n+10 <= 65535 {
			example = fmt.Sprintf(" (e.g. --%s %s)", flag, net.JoinHostPort(host, strconv.Itoa(n+10)))
		}
	}
	var fix string
	switch flag {
	case "admin":
		fix = "(a second tollgate serve?); give each serve on this machine its own --admin" + example + ", and point Prometheus and tollgate healthcheck (TOLLGATE_ADMIN) at it; or --admin off"
	case "http":
		fix = "(a second tollgate serve?); give each serve on this machine its own --http" + example + " and the --public-url clients reach it at"
	case "devnet-rpc":
		fix = "(a tollgate devnet, or another serve's in-process chain?); to share that chain, serve with --devnet-url http://" + dialAddr(addr) +
			"; for a chain of this serve's own, give it its own --devnet-rpc" + example
	default:
		fix = "(a second tollgate serve?); give each serve on this machine its own --" + flag + example
	}
	return fmt.Errorf("%s: %w: another process listens there %s", name, err, fix)
}

// dialAddr is an address to reach a listen address at: an unspecified
// host (":8545", "0.0.0.0:8545") becomes loopback.
func dialAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// serveOn wires everything on listeners the caller bound (tests pass ":0"
// ones) and serves until ctx ends, then shuts down gracefully.
func serveOn(ctx context.Context, cfg *config, logger *slog.Logger, ls listeners) (err error) {
	var cleanups []func()
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
		if err == nil {
			logger.Info("stopped") // the last line of a clean stop: everything is closed
		}
	}()
	// The background work started on the way up (counters, claimer,
	// watchers) ends with ctx: a start that fails after it began cancels
	// it before the cleanups wait for it, and returns at once instead of
	// waiting for an interrupt.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer func() {
		if err != nil { // the servers close them on a clean shutdown
			ls.http.Close()
			ls.grpc.Close()
			if ls.admin != nil {
				ls.admin.Close()
			}
		}
	}()
	cat, err := catalog.Load()
	if err != nil {
		return err
	}
	var unresolved func(context.Context) (int, time.Time, error) // set once the ledger is open
	metrics := admin.NewMetrics(admin.Build{Version: buildVersion(), Revision: buildRevision()},
		func(ctx context.Context) (int, time.Duration, error) {
			if unresolved == nil {
				return 0, 0, nil
			}
			n, oldest, err := unresolved(ctx)
			if err != nil || oldest.IsZero() {
				return n, 0, err
			}
			return n, time.Since(oldest), nil
		})
	candles, candleSource, err := newCandles(cfg, metrics)
	if err != nil {
		return err
	}
	chainHTTP := &http.Client{Transport: metrics.Transport("chain", admin.JSONRPC, http.DefaultTransport.(*http.Transport).Clone())}
	if cfg.Database == "" { // SQLite: this process alone owns the data dir
		release, err := lockDataDir(cfg.DataDir)
		if err != nil {
			return err
		}
		cleanups = append(cleanups, release)
	}
	pay, err := newPayments(ctx, cfg, logger, ls.devnet, chainHTTP, metrics)
	if err != nil {
		return err
	}
	cleanups = append(cleanups, pay.close)
	ledger, err := openLedger(ctx, cfg.Database, cfg.DataDir, pay.deployment(), logger)
	if err != nil {
		return err
	}
	cleanups = append(cleanups, func() { ledger.Close() })
	unresolved = ledger.UnresolvedSummary
	gc := pay.gateConfig
	gc.Observer = metrics
	gc.IDs = ledger // the payment-identifier extension's ids
	gc.SignIn = &payment.SignIn{Nonces: ledger, Purchases: ledger, Chain: pay.wallets}
	exactSide, err := exact.NewServer(exact.ServerConfig{SettleTimeout: 60 * time.Second}, pay.facilitator, ledger, pay.audit)
	if err != nil {
		return err
	}
	gc.Schemes = []payment.Scheme{exactSide}
	batchSide, err := newBatchSide(cfg, pay, ledger, metrics, logger)
	if err != nil {
		return err
	}
	if batchSide != nil {
		gc.Schemes = append(gc.Schemes, batchSide.scheme)
		metrics.ExpectBatch(batchSide.claimer.Outcomes())
		go batchSide.claimer.Run(ctx)
		batchSide.watcher.Start(ctx)
		decimals := pay.gateConfig.Decimals
		metrics.WatchBatch(func(ctx context.Context) (int, float64, time.Duration, error) {
			n, unclaimed, oldest, err := ledger.BatchUnclaimed(ctx)
			if err != nil || n == 0 {
				return n, 0, 0, err
			}
			usd := payment.USD(unclaimed, decimals)
			if oldest.IsZero() { // rows charged before their age was kept
				return n, usd, 0, nil
			}
			return n, usd, time.Since(oldest), nil
		})
	}
	routes := gateway.PaidRoutes(cat)
	gate, err := payment.NewGate(gc, routes, ledger, logger)
	if err != nil {
		return err
	}
	// Every series the dashboard and the alerts read exists from the
	// start, at zero where nothing happened yet.
	ops, reasons := gate.Outcomes()
	metrics.ExpectPayments(ops, payment.Transports(), reasons.Refused, reasons.Failed)
	metrics.ExpectSignIns(ops, payment.SIWxReasons())
	metrics.ExpectRoutes(gateway.Routes(cat), gateway.Statuses())
	rc := exact.DefaultReconcilerConfig()
	rc.PayTo = pay.gateConfig.PayTo
	if cfg.Database != "" { // replicas take turns: one reconciles per lease period
		holder := replicaName()
		rc.Turn = func(ctx context.Context) (bool, error) {
			return ledger.Lease(ctx, reconcilerLease, holder, 2*rc.Interval)
		}
	}
	reconciler, err := exact.NewReconciler(rc, ledger, pay.audit, logger.With("component", "reconciler"))
	if err != nil {
		return err
	}
	go reconciler.Run(ctx)
	countersDone := make(chan struct{})
	cleanups = append(cleanups, func() { <-countersDone }) // the last flush is written before the ledger closes
	go func() { gate.RunCounters(ctx, 10*time.Second); close(countersDone) }()
	rpcClient, err := rpc.DialOptions(ctx, pay.rpcURL, rpc.WithHTTPClient(chainHTTP))
	if err != nil {
		return fmt.Errorf("chain rpc: %w", err)
	}
	cleanups = append(cleanups, rpcClient.Close)
	chainClient, err := chain.New(rpcClient, chain.DefaultConfig())
	if err != nil {
		return err
	}
	equities, equitySource, err := newEquities(cfg, metrics)
	if err != nil {
		return err
	}
	var model service.Model // nil: the embedded model only
	modelSource := service.DataSource{Kind: "model", Name: forecast.ModelName,
		Description: "the embedded damped-trend exponential smoothing of log closes (docs/rules.md)"}
	if cfg.KronosModel != "" {
		k, err := loadKronos(cfg, metrics, logger)
		if err != nil {
			return err
		}
		model = k
		modelSource = service.DataSource{Kind: "model", Name: k.Name(), Description: "Kronos, the open K-line foundation model (github.com/shiyu-coder/Kronos, MIT), " +
			"run in process; the embedded damped-trend smoothing answers when it fails (the answer's fallback says so)", Cost: k.Cost}
		warmUp(ctx, k, cfg.ForecastTimeout, logger)
	}
	if cfg.ForecastModel != "" {
		conn, err := dialModel(cfg, metrics.UnaryClient("model"))
		if err != nil {
			return err
		}
		cleanups = append(cleanups, func() { conn.Close() })
		model = service.NewRemoteModel(tollgatev1.NewForecastModelServiceClient(conn), cfg.ForecastTimeout)
		modelSource = service.DataSource{Kind: "model", Name: "remote model", Description: "a ForecastModelService at " + cfg.ForecastModel +
			"; the embedded damped-trend smoothing answers when it fails (the answer's fallback says so)"}
	}
	wc := whaleConfig(cfg, pay)
	wc.Observe = func(st whales.Stats, took time.Duration, err error) {
		metrics.WhaleScan(took, st.Calls, st.Head-min(st.Head, st.To), err)
	}
	scanner, err := whales.New(rpcClient, wc, logger.With("component", "whales"))
	if err != nil {
		return err
	}
	whaleSrc := startWhales(ctx, scanner, ledger, cfg.Database != "", logger)
	if pay.mode == "devnet" { // a sample tape so /lanes has content; idempotent by close id
		if _, _, err := ledger.ImportCloses(ctx, devnetTape()); err != nil {
			return fmt.Errorf("devnet sample tape: %w", err)
		}
	}
	discovery, err := service.NewDiscovery(service.DiscoveryConfig{
		PublicURL:       cfg.PublicURL,
		Version:         buildVersion(),
		Revision:        buildRevision(),
		CommitTime:      buildInfo().Time,
		Sources:         []service.DataSource{candleSource, equitySource, modelSource},
		Mode:            pay.mode,
		Terms:           pay.terms,
		DevnetContracts: pay.scenario,
		MCPPath:         mcpserver.Path,
	}, cat, gateCounters{gate: gate, ledger: ledger})
	if err != nil {
		return err
	}

	interceptors := service.Interceptors(cat, logger)
	grpcSrv := grpc.NewServer(grpc.ChainUnaryInterceptor(interceptors...))
	metrics.ExpectCaches(service.Caches()...)
	analytics := service.NewAnalytics(service.Sources{Candles: candles, Chain: chainClient, Whales: whaleSrc, Tape: ledger, Model: model, Equities: equities, Log: logger,
		CacheLookup: metrics.CacheLookup})
	tollgatev1.RegisterAnalyticsServiceServer(grpcSrv, analytics)
	tollgatev1.RegisterDiscoveryServiceServer(grpcSrv, discovery)
	tollgatev1.RegisterLaneServiceServer(grpcSrv, service.NewLaneServer(ledger)) // private listener only: no REST route
	healthSrv := health.NewServer()
	healthpb.RegisterHealthServer(grpcSrv, healthSrv)
	for name := range grpcSrv.GetServiceInfo() {
		healthSrv.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	reflection.Register(grpcSrv)

	// REST and MCP reach the analytics in process, through the same
	// interceptors as the gRPC listener: no encoding, no loopback socket
	// (bench/outside measured the hop at about a fifth of a voucher call).
	// Discovery and /health cross the gRPC listener, which /health proves.
	conn := inprocess.New(interceptors...)
	tollgatev1.RegisterAnalyticsServiceServer(conn, analytics)
	tollgatev1.RegisterDiscoveryServiceServer(conn, discovery) // MCP's resources
	loop, err := grpc.NewClient(dialTarget(ls.grpc.Addr()), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("gateway client: %w", err)
	}
	defer loop.Close()
	gw, err := gateway.New(ctx, gateway.Config{Timeout: cfg.RequestTimeout}, conn, loop, cat, logger)
	if err != nil {
		return err
	}
	tools, err := mcpserver.New(mcpserver.Config{Timeout: cfg.RequestTimeout, Version: buildVersion(), Instructions: service.MCPInstructions, PublicURL: cfg.PublicURL},
		conn, cat, routes, gate, logger.With("component", "mcp"))
	if err != nil {
		return err
	}
	limiter, err := gateway.NewLimiter(cfg.Limits)
	if err != nil {
		return err
	}
	// The public listener serves two facades: MCP at /mcp, whose gate
	// runs inside each tool call, and REST behind the gate's middleware.
	// Each is behind the limiter, which refuses floods before a signature
	// is checked: REST by its payment headers, MCP by its body's _meta.
	// The split is by exact path, not a ServeMux, which would redirect
	// unclean paths ("//regime") that the gateway refuses with its body.
	mcpAPI, restAPI := mcpserver.Limit(limiter, tools), limiter.Handler(gate.Handler(gw))
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == mcpserver.Path {
			mcpAPI.ServeHTTP(w, r)
			return
		}
		restAPI.ServeHTTP(w, r)
	})
	// Outside in: the access log sees every answer (429s too); the metrics
	// time it; oversized headers get the JSON 431; then the facades.
	public := gateway.AccessLog(logger, metrics.Instrument(routeOf(cat),
		gateway.LimitHeaderBytes(maxHeaderBytes, api)))
	httpSrv := &http.Server{
		Handler:           public,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      cfg.RequestTimeout + 60*time.Second, // room for verify and settlement around the handler
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    1 << 20, // net/http's own limit (plain-text 431) sits above ours (JSON 431)
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}

	ready := admin.NewReadiness(metrics, 3*time.Second, readiness(ledger, rpcClient, candles)...)
	var adminSrv *http.Server
	adminAddr := adminOff
	if ls.admin != nil {
		adminSrv = &http.Server{Handler: admin.Handler(metrics, ready), ReadHeaderTimeout: 5 * time.Second,
			ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
		adminAddr = ls.admin.Addr().String()
	}

	errc := make(chan error, 3)
	go func() { errc <- grpcSrv.Serve(ls.grpc) }()
	go func() { errc <- httpSrv.Serve(ls.http) }()
	if adminSrv != nil {
		go func() { errc <- adminSrv.Serve(ls.admin) }()
	}
	logger.Info("tollgate serving",
		"http", ls.http.Addr().String(), "grpc", ls.grpc.Addr().String(), "admin", adminAddr,
		"public_url", cfg.PublicURL, "data_dir", cfg.DataDir, "mode", pay.mode, "candles", candleSource.Name,
		"pay_to", pay.terms.PayTo, "facilitator", pay.terms.Facilitator, "version", buildVersion())
	for _, w := range cfg.warnings() {
		logger.Warn(w)
	}
	if pay.banner != "" {
		logger.Warn("DEVNET: a test chain; payments are not real money")
		fmt.Fprint(os.Stderr, pay.banner)
	}
	allowedBy := "devnet mode"
	if cfg.production() {
		allowedBy = "--synthetic-market-data"
	}
	for _, src := range []service.DataSource{candleSource, equitySource} {
		if src.Synthetic {
			logger.Warn("SYNTHETIC market data: answers from this feed are generated, not market data, and say "+src.Name,
				"feed", src.Kind, "mode", pay.mode, "allowed_by", allowedBy)
		}
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
		logger.Error("server stopped", "err", serveErr)
	}

	logger.Info("shutting down", "timeout", cfg.ShutdownTimeout, "drain_delay", cfg.DrainDelay)
	ready.Drain() // load balancers see not-ready first
	healthSrv.Shutdown()
	if cfg.DrainDelay > 0 {
		time.Sleep(cfg.DrainDelay)
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := httpSrv.Shutdown(sctx); err != nil {
		logger.Warn("http shutdown", "err", err)
	}
	if adminSrv != nil {
		_ = adminSrv.Shutdown(sctx)
	}
	stopped := make(chan struct{})
	go func() { grpcSrv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-sctx.Done():
		grpcSrv.Stop()
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// reconcilerLease is the store lease whose holder reconciles.
const reconcilerLease = "reconciler"

// replicaName names this process among the replicas in store leases:
// host, pid and a random part ("host/pid/random", unique even for two
// processes of one pid namespace in two containers).
func replicaName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%x", host, os.Getpid(), rand.Uint64())
}

// startWhales starts the whale scan. One process on SQLite scans as it
// always did, in memory. Replicas sharing PostgreSQL scan one at a time
// under a store lease and answer from the snapshot it writes there
// (docs/storage.md "Work done once").
func startWhales(ctx context.Context, scanner *whales.Scanner, db *store.DB, shared bool, logger *slog.Logger) service.Whales {
	if !shared {
		go scanner.Run(ctx)
		return scanner
	}
	s := whales.NewShared(scanner, db, replicaName(), logger.With("component", "whales"))
	go s.Run(ctx)
	return s
}

// whaleConfig is the whale scan of the deployment: the flags, else the
// devnet's exchanges (its V2-style factory and, when it has one, its
// Uniswap V4 PoolManager), else Base's factories.
func whaleConfig(cfg *config, pay *payments) whales.Config {
	wc := whales.DefaultConfig()
	wc.WindowBlocks, wc.Interval, wc.Confirmations = cfg.WhaleWindow, cfg.WhaleInterval, cfg.WhaleConfirm
	if pay.dex != nil {
		wc.Factories = []whales.Factory{{Address: pay.dex.Factory, Kind: whales.UniswapV2}}
		if pay.dex.V4 != nil {
			wc.Factories = append(wc.Factories, whales.Factory{Address: pay.dex.V4.PoolManager, Kind: whales.UniswapV4})
		}
		wc.Quotes = []common.Address{pay.dex.WETH} // native ETH, a V4 pool's 0x0, is always one
		wc.Confirmations = 0                       // the devnet never reorganizes
	}
	if len(cfg.factories) > 0 {
		wc.Factories = cfg.factories
	}
	if len(cfg.quotes) > 0 {
		wc.Quotes = cfg.quotes
	}
	return wc
}

// launchPool names a devnet launch's pool as /tollgate lists it: "pair
// 0x…" (V2-style) or "v4 pool 0x…" (its id in the PoolManager).
func launchPool(t devnet.LaunchedToken) string {
	if t.Venue == devnet.VenueV4 {
		return "v4 pool " + t.Pool()
	}
	return "pair " + t.Pool()
}

// payments is the payment side of the deployment.
type payments struct {
	mode        string
	rpcURL      string
	scenario    []service.DevnetContract
	dex         *devnet.Dex // devnet only: the exchange the whale scan follows
	genesis     common.Hash // of the chain: one devnet run, or Base
	gateConfig  payment.GateConfig
	facilitator exact.Facilitator
	batch       batch.Facilitator   // nil: the facilitator does not do batch-settlement
	logs        batch.Logs          // the chain's logs, for the escrow watcher
	audit       *exact.Auditor      // reads settlements back from the chain
	wallets     payment.WalletChain // asks contract wallets whether they signed (sign-in-with-x)
	terms       *service.PaymentTerms
	banner      string
	close       func()
}

// newPayments starts the devnet (when neither --chain-rpc nor --devnet-url
// is set) or connects to the shared one (--devnet-url), and builds the
// facilitator and the gate's terms.
func newPayments(ctx context.Context, cfg *config, logger *slog.Logger, devnetLis net.Listener, chainHTTP *http.Client, metrics *admin.Metrics) (*payments, error) {
	p := &payments{mode: "production", close: func() {}}
	gc := payment.GateConfig{
		PublicURL: cfg.PublicURL, Network: baseNetwork, NetworkV1: baseNetworkV1, ChainID: big.NewInt(baseChainID),
		Asset: common.HexToAddress(baseUSDC), AssetName: usdcName, AssetVersion: usdcVersion, Decimals: usdcDecimals,
		MaxTimeout: cfg.MaxTimeout,
	}
	rpcURL := cfg.ChainRPC
	var key string
	var chain *devnetChain
	var err error
	switch {
	case cfg.DevnetURL != "":
		chain, err = dialDevnet(ctx, cfg.DevnetURL, cfg.PublicURL)
	case cfg.ChainRPC == "":
		chain, err = startDevnet(ctx, devnetLis, cfg.PublicURL, cfg.DevnetBlockTime)
	}
	if err != nil {
		return nil, err
	}
	if chain != nil {
		d := chain.desc
		p.mode, p.close = "devnet", chain.close
		rpcURL = chain.rpcURL
		gc.Asset, gc.AssetName, gc.AssetVersion, gc.Decimals = chain.token.Address, chain.token.Name, chain.token.Version, int(chain.token.Decimals)
		if a, ok := d.Account(devnet.RolePayTo); ok {
			gc.PayTo = a.Address
		}
		key = fmt.Sprintf("%x", crypto.FromECDSA(chain.gas.Key))
		p.banner = chain.banner
		for _, sc := range d.Scenario {
			p.scenario = append(p.scenario, service.DevnetContract{Name: sc.Name, Address: sc.Address.Hex(), Expect: sc.Expect, Role: "rug-check scenario"})
		}
		if d.Dex != nil {
			p.dex = d.Dex
			p.scenario = append(p.scenario,
				service.DevnetContract{Name: "dex-factory", Address: d.Dex.Factory.Hex(), Role: "V2-style factory (whale scan)"},
				service.DevnetContract{Name: "weth", Address: d.Dex.WETH.Hex(), Role: "quote asset of the exchange"})
			if v4 := d.Dex.V4; v4 != nil {
				p.scenario = append(p.scenario,
					service.DevnetContract{Name: "v4-pool-manager", Address: v4.PoolManager.Hex(), Role: "Uniswap V4 PoolManager, v4-core (whale scan)"},
					service.DevnetContract{Name: "v4-swap-router", Address: v4.SwapRouter.Hex(), Role: "v4-core PoolSwapTest: swaps through the PoolManager"},
					service.DevnetContract{Name: "v4-liquidity-router", Address: v4.LiquidityRouter.Hex(), Role: "v4-core PoolModifyLiquidityTest: liquidity through the PoolManager"})
			}
			for _, t := range d.Dex.Tokens {
				p.scenario = append(p.scenario, service.DevnetContract{Name: strings.ToLower(t.Name), Address: t.Token.Hex(),
					Role: fmt.Sprintf("launched token, %s; %s", t.Fate, launchPool(t))})
			}
		}
		if cfg.DevnetURL != "" {
			logger.Warn("DEVNET: shared test chain; payments are not real money", "devnet_url", redactURL(cfg.DevnetURL),
				"asset", gc.Asset.Hex(), "gas_account", chain.gas.Address.Hex())
		}
	} else {
		gc.PayTo = common.HexToAddress(cfg.PayTo)
		k, err := facilitatorKey(cfg)
		if err != nil {
			return nil, err
		}
		key = k
	}
	if cfg.PayTo != "" {
		gc.PayTo = common.HexToAddress(cfg.PayTo)
	}
	rc, err := rpc.DialOptions(ctx, rpcURL, rpc.WithHTTPClient(chainHTTP))
	if err != nil {
		p.close()
		return nil, fmt.Errorf("chain rpc: %w", err)
	}
	client := ethclient.NewClient(rc)
	p.wallets = client
	prevClose := p.close
	p.close = func() { client.Close(); prevClose() }
	if id, err := client.ChainID(ctx); err != nil || id.Int64() != baseChainID {
		p.close()
		return nil, fmt.Errorf("chain rpc %s: chain id %v (%v); want %d (Base)", rpcURL, id, err, baseChainID)
	}
	genesis, err := client.HeaderByNumber(ctx, big.NewInt(0))
	if err != nil {
		p.close()
		return nil, fmt.Errorf("chain rpc %s: genesis block: %w", redactURL(rpcURL), err)
	}
	p.genesis = genesis.Hash()
	p.logs = client
	if p.audit, err = exact.NewAuditor(exact.DefaultAuditConfig(), client); err != nil {
		p.close()
		return nil, err
	}
	logger.Info("settlements are confirmed on chain before a paid body is released", "chain_rpc", redactURL(rpcURL))
	facilitatorName := "self-hosted"
	switch {
	case cfg.Facilitator != "":
		fc, err := payment.NewClient(payment.ClientConfig{URL: cfg.Facilitator, Timeout: 90 * time.Second, CDPKeyID: os.Getenv("CDP_API_KEY_ID"), CDPKeySecret: os.Getenv("CDP_API_KEY_SECRET")},
			&http.Client{Transport: metrics.Transport("facilitator", admin.PathMethod, nil)})
		if err != nil {
			p.close()
			return nil, err
		}
		p.facilitator, facilitatorName = exact.NewRemote(fc), cfg.Facilitator
		if p.batch, err = batch.NewRemote(fc, batch.Escrow{ChainID: big.NewInt(baseChainID), Address: batch.EscrowAddress}); err != nil {
			p.close()
			return nil, err
		}
	default:
		k, err := crypto.HexToECDSA(strings.TrimPrefix(strings.TrimSpace(key), "0x"))
		if err != nil {
			p.close()
			return nil, errors.New("facilitator key is not a hex secp256k1 key")
		}
		// One gas key, one sender: every scheme's transactions share its nonces.
		local, err := payment.NewLocal(payment.LocalConfig{ChainID: big.NewInt(baseChainID), Key: k, ReceiptTimeout: 30 * time.Second}, client)
		if err != nil {
			p.close()
			return nil, err
		}
		if p.facilitator, err = exact.NewLocal(exact.LocalConfig{ChainID: big.NewInt(baseChainID), Grace: 6 * time.Second,
			Assets: []payment.Asset{{Address: gc.Asset, Name: gc.AssetName, Version: gc.AssetVersion}}}, client, local); err != nil {
			p.close()
			return nil, err
		}
		if p.batch, err = batch.NewLocal(batch.LocalConfig{Escrow: batch.Escrow{ChainID: big.NewInt(baseChainID), Address: batch.EscrowAddress},
			Tokens: []payment.Asset{{Address: gc.Asset, Name: gc.AssetName, Version: gc.AssetVersion}}}, client, local); err != nil {
			p.close()
			return nil, err
		}
		logger.Info("self-hosted facilitator", "signer", local.Signer().Hex())
	}
	p.gateConfig = gc
	p.rpcURL = rpcURL
	p.terms = &service.PaymentTerms{
		Network: gc.Network, NetworkV1: gc.NetworkV1, Asset: gc.Asset.Hex(), AssetName: gc.AssetName,
		AssetVersion: gc.AssetVersion, Decimals: gc.Decimals, PayTo: gc.PayTo.Hex(), MaxTimeoutSeconds: gc.MaxTimeout,
		Facilitator: facilitatorName,
	}
	return p, nil
}

// deployment is what the ledger of these payments belongs to.
func (p *payments) deployment() store.Deployment {
	return store.Deployment{Mode: p.mode, Network: p.gateConfig.Network, Asset: p.gateConfig.Asset.Hex(), Genesis: p.genesis.Hex()}
}

// openLedger opens the store (PostgreSQL at database, else SQLite in dir)
// for deployment d. A store of another deployment is refused, except that
// a devnet restart (a new chain) on SQLite puts the previous run's
// database aside in dir/previous, replacing the one there, and starts an
// empty ledger: revenue of a chain that no longer exists is never shown
// (docs/payments.md "Ledger"). A shared PostgreSQL database is never put
// aside by a replica: the operator gives a new devnet run a new database.
func openLedger(ctx context.Context, database, dir string, d store.Deployment, logger *slog.Logger) (*store.DB, error) {
	db, where, err := openStore(ctx, database, dir)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", where, err)
	}
	err = db.Bind(ctx, d)
	var m *store.MismatchError
	if errors.As(err, &m) && m.PreviousDevnetRun() && database == "" {
		db.Close()
		prev := filepath.Join(dir, "previous")
		if err := store.MoveSQLite(dir, prev); err != nil {
			return nil, fmt.Errorf("ledger %s: %w", dir, err)
		}
		logger.Info("devnet restart: a new chain starts a new ledger; the previous run's is in "+prev, "previous_genesis", m.Have.Genesis, "genesis", d.Genesis)
		if db, err = store.OpenSQLite(ctx, dir); err != nil {
			return nil, fmt.Errorf("ledger %s: %w", dir, err)
		}
		err = db.Bind(ctx, d)
	}
	if err != nil {
		db.Close()
		if database != "" {
			return nil, fmt.Errorf("ledger %s (--database): %w", where, err)
		}
		return nil, fmt.Errorf("ledger %s (--data-dir): %w", dir, err)
	}
	if database != "" {
		logger.Info("ledger on PostgreSQL, shared by the replicas of this deployment", "database", where)
	}
	return db, nil
}

// redactURL keeps the scheme and host of a URL: RPC providers put API
// keys in paths and queries, which do not belong in logs.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparsed URL)"
	}
	return u.Scheme + "://" + u.Host
}

// facilitatorKey reads the gas key from TOLLGATE_FACILITATOR_KEY or the
// key file. It is never logged.
func facilitatorKey(cfg *config) (string, error) {
	if cfg.FacilitatorKey != "" {
		return cfg.FacilitatorKey, nil
	}
	if cfg.KeyFile != "" {
		b, err := os.ReadFile(cfg.KeyFile)
		if err != nil {
			return "", fmt.Errorf("facilitator key file: %w", err)
		}
		return string(b), nil
	}
	return "", nil
}

// gateCounters adapts the gate's counters (atomic units) and the
// ledger's unresolved payments to /metrics (USD).
type gateCounters struct {
	gate   *payment.Gate
	ledger *store.DB
}

func (g gateCounters) Unresolved(ctx context.Context) (int, time.Time, error) {
	return g.ledger.UnresolvedSummary(ctx)
}

func (g gateCounters) Counters(ctx context.Context) (map[string]service.OpCounters, error) {
	cs, err := g.gate.Counters(ctx)
	if err != nil {
		return nil, err
	}
	unit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(g.gate.Decimals())), nil)
	out := map[string]service.OpCounters{}
	for name, c := range cs {
		amount, _ := new(big.Int).SetString(c.Amount, 10)
		usd := new(big.Rat).SetFrac(amount, unit)
		out[name] = service.OpCounters{Challenges: c.Challenges, Paid: c.Paid, RevenueUSD: usd.FloatString(g.gate.Decimals())}
	}
	return out, nil
}

// syntheticWhy says, in /tollgate's source descriptions, why a synthetic
// feed is served.
func syntheticWhy(cfg *config) string {
	if cfg.production() {
		return "; served outside devnet because --synthetic-market-data is set"
	}
	return " (devnet)"
}

// candleCache names the candle store in tollgate_cache_requests_total.
const candleCache = "candles"

// newCandles builds the candle store over the feed validate chose:
// Coinbase Exchange at its URL, or the synthetic generator.
func newCandles(cfg *config, metrics *admin.Metrics) (*market.Cache, service.DataSource, error) {
	src, desc, err := candleSource(cfg, metrics)
	if err != nil {
		return nil, desc, err
	}
	cc := market.DefaultCacheConfig()
	cc.Observe = func(hit bool) { metrics.CacheLookup(candleCache, hit) }
	metrics.ExpectCaches(candleCache)
	cache, err := market.NewCache(src, cc)
	return cache, desc, err
}

// candleSource is the candle feed validate chose: Coinbase Exchange at
// its URL, or the synthetic feed.
func candleSource(cfg *config, metrics *admin.Metrics) (market.Source, service.DataSource, error) {
	var src market.Source = market.NewDevnet()
	desc := service.DataSource{Kind: "candles", Name: src.Name(), Synthetic: true,
		Description: "deterministic synthetic OHLCV generated in process" + syntheticWhy(cfg) + "; not market data"}
	if !cfg.candles.synthetic() {
		cb, err := market.NewCoinbase(market.DefaultCoinbaseConfig(cfg.candles.url),
			&http.Client{Transport: metrics.Transport("candles", admin.Named("candles"), http.DefaultTransport.(*http.Transport).Clone())})
		if err != nil {
			return nil, desc, err
		}
		src = cb
		desc = service.DataSource{Kind: "candles", Name: cb.Name(), Description: "Coinbase Exchange public candles at " + cfg.candles.url}
	}
	return src, desc, nil
}

// newEquities returns the equity feed validate chose: Yahoo Finance at its
// URL, or the synthetic session bars.
func newEquities(cfg *config, metrics *admin.Metrics) (service.EquityBars, service.DataSource, error) {
	if cfg.equities.synthetic() {
		return market.NewDevnetEquities(), service.DataSource{Kind: "equities", Name: "devnet-synthetic", Synthetic: true,
			Description: "deterministic synthetic NSE session bars generated in process" + syntheticWhy(cfg) + "; not market data"}, nil
	}
	y, err := market.NewYahoo(market.YahooConfig{BaseURL: cfg.equities.url, RequestTimeout: 15 * time.Second, Days: 200},
		&http.Client{Transport: metrics.Transport("equities", admin.Named("chart"), http.DefaultTransport.(*http.Transport).Clone())})
	if err != nil {
		return nil, service.DataSource{}, err
	}
	return y, service.DataSource{Kind: "equities", Name: "yahoo-finance", Description: "Yahoo Finance chart API at " + cfg.equities.url}, nil
}

// dialModel connects to the remote forecasting model: grpc:// in the
// clear (a private network), grpcs:// over TLS, verified against the
// system roots or the PEM bundle of --forecast-model-ca.
func dialModel(cfg *config, interceptors ...grpc.UnaryClientInterceptor) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	target, tlsOn := strings.CutPrefix(cfg.ForecastModel, "grpcs://")
	if tlsOn {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.ForecastModelCA != "" {
			pem, err := os.ReadFile(cfg.ForecastModelCA)
			if err != nil {
				return nil, fmt.Errorf("--forecast-model-ca: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--forecast-model-ca %s: no PEM certificate in it", cfg.ForecastModelCA)
			}
		}
		creds = credentials.NewTLS(tc)
	} else {
		target = strings.TrimPrefix(cfg.ForecastModel, "grpc://")
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds), grpc.WithChainUnaryInterceptor(interceptors...))
	if err != nil {
		return nil, fmt.Errorf("--forecast-model: %w", err)
	}
	return conn, nil
}

// readiness are the checks of /readyz: the store answers, the chain
// answers with Base's chain id (the devnet's too), and the candle cache
// has data (warmed here on first probe, so a fresh replica becomes ready
// without waiting for a paid call).
func readiness(db *store.DB, rpcClient *rpc.Client, candles *market.Cache) []admin.Check {
	return []admin.Check{
		{Name: "store", Run: db.Ping},
		{Name: "chain", Run: func(ctx context.Context) error {
			var id hexutil.Big
			if err := rpcClient.CallContext(ctx, &id, "eth_chainId"); err != nil {
				return fmt.Errorf("eth_chainId: %w", err)
			}
			if id.ToInt().Int64() != baseChainID {
				return fmt.Errorf("chain id %s, want %d", id.ToInt(), baseChainID)
			}
			return nil
		}},
		{Name: "market", Run: func(ctx context.Context) error {
			if candles.Has("ETH-USD", time.Hour) {
				return nil
			}
			_, err := candles.Series(ctx, "ETH-USD", time.Hour, 1)
			return err
		}},
	}
}

// dialTarget returns an address the gateway can dial to reach lis: an
// unspecified host (":9402", "[::]:9402") becomes loopback.
func dialTarget(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return addr.String()
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
}

func newLogger(cfg *config, out io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		opts.ReplaceAttr = readableDurations
		return slog.New(slog.NewJSONHandler(out, opts))
	}
	return slog.New(slog.NewTextHandler(out, opts))
}

// readableDurations writes durations in JSON logs as Go duration text
// ("1.204s", "850µs"), as the text format does, instead of integer
// nanoseconds.
func readableDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// routeOf names a public request's route for the metrics: the MCP
// endpoint's, or the REST operation's pattern.
func routeOf(cat *catalog.Catalog) func(*http.Request) string {
	rest := gateway.RouteOf(cat)
	return func(r *http.Request) string {
		if r.URL.Path == mcpserver.Path {
			return mcpserver.Path
		}
		return rest(r)
	}
}

// warmUp runs Kronos once at a cold /forecast's size and logs the time;
// a time near --forecast-timeout is a warning: forecasts would fall back
// to the embedded model (the answer says so) rather than wait for Kronos.
func warmUp(ctx context.Context, k *service.KronosModel, timeout time.Duration, logger *slog.Logger) {
	took, err := k.WarmUp(ctx)
	switch {
	case err != nil:
		logger.Warn("kronos warm-up inference failed: forecasts will answer with the embedded model when Kronos cannot within --forecast-timeout",
			"took", took.Round(time.Millisecond), "forecast_timeout", timeout, "err", err)
	case took > timeout*2/3:
		logger.Warn("kronos warm-up inference took close to --forecast-timeout: cold forecasts may time out and answer with the embedded model; "+
			"raise --forecast-timeout or choose a smaller checkpoint", "took", took.Round(time.Millisecond), "forecast_timeout", timeout, "model", k.Name())
	default:
		logger.Info("kronos warm-up inference", "took", took.Round(time.Millisecond), "candles", 464, "steps", 48, "forecast_timeout", timeout, "model", k.Name())
	}
}

// loadKronos reads the Kronos checkpoints and serves them with the
// service's sampling, each inference in the metrics.
func loadKronos(cfg *config, metrics *admin.Metrics, logger *slog.Logger) (*service.KronosModel, error) {
	start := time.Now()
	m, err := kronos.Load(cfg.KronosModel, cfg.KronosTokenizer)
	if err != nil {
		return nil, err // "kronos: <file>: …" names what failed
	}
	info := m.Info()
	k := service.NewKronosModel(m, service.KronosSampling(), cfg.ForecastTimeout, metrics.Inference)
	metrics.ExpectModel(k.Name())
	logger.Info("kronos loaded", "model", k.Name(), "params", info.Params, "tokenizer_params", info.TokenizerParams,
		"from", cfg.KronosModel, "tokenizer", cfg.KronosTokenizer, "took", time.Since(start).Round(time.Millisecond))
	return k, nil
}
