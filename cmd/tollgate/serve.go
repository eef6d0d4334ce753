package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/tollgate/tollgate/gateway"
	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service"
	"github.com/tollgate/tollgate/service/catalog"
	"github.com/tollgate/tollgate/service/market"
)

// serve binds the listeners of cfg and serves until ctx ends.
func serve(ctx context.Context, cfg *config, logOut io.Writer) error {
	logger := newLogger(cfg, logOut)
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	var lc net.ListenConfig
	grpcLis, err := lc.Listen(ctx, "tcp", cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("grpc listener: %w", err)
	}
	httpLis, err := lc.Listen(ctx, "tcp", cfg.HTTPAddr)
	if err != nil {
		grpcLis.Close()
		return fmt.Errorf("http listener: %w", err)
	}
	return serveOn(ctx, cfg, logger, httpLis, grpcLis)
}

// serveOn serves on listeners the caller bound (tests pass ":0" ones) and
// closes them when ctx ends, after a graceful shutdown.
func serveOn(ctx context.Context, cfg *config, logger *slog.Logger, httpLis, grpcLis net.Listener) (err error) {
	defer func() {
		if err != nil { // the servers close them on a clean shutdown
			httpLis.Close()
			grpcLis.Close()
		}
	}()
	cat, err := catalog.Load()
	if err != nil {
		return err
	}
	candles, candleSource, err := newCandles(cfg)
	if err != nil {
		return err
	}
	discovery, err := service.NewDiscovery(service.DiscoveryConfig{
		PublicURL: cfg.PublicURL,
		Version:   buildVersion(),
		Sources:   []service.DataSource{candleSource},
	}, cat)
	if err != nil {
		return err
	}

	grpcSrv := grpc.NewServer(grpc.ChainUnaryInterceptor(service.Interceptors(cat, logger)...))
	tollgatev1.RegisterAnalyticsServiceServer(grpcSrv, service.NewAnalytics(candles))
	tollgatev1.RegisterDiscoveryServiceServer(grpcSrv, discovery)
	healthSrv := health.NewServer()
	healthpb.RegisterHealthServer(grpcSrv, healthSrv)
	for name := range grpcSrv.GetServiceInfo() {
		healthSrv.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	reflection.Register(grpcSrv)

	conn, err := grpc.NewClient(dialTarget(grpcLis.Addr()), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("gateway client: %w", err)
	}
	defer conn.Close()
	gw, err := gateway.New(ctx, gateway.Config{Timeout: cfg.RequestTimeout}, conn, cat, logger)
	if err != nil {
		return err
	}
	httpSrv := &http.Server{
		Handler:           gateway.AccessLog(logger, gw),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      cfg.RequestTimeout + 30*time.Second, // room for settlement after the handler
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10, // payment headers are a few KiB
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}

	errc := make(chan error, 2)
	go func() { errc <- grpcSrv.Serve(grpcLis) }()
	go func() { errc <- httpSrv.Serve(httpLis) }()
	logger.Info("tollgate serving",
		"http", httpLis.Addr().String(), "grpc", grpcLis.Addr().String(),
		"public_url", cfg.PublicURL, "data_dir", cfg.DataDir, "candles", candleSource.Name,
		"version", buildVersion())
	if candleSource.Synthetic {
		logger.Warn("DEVNET candles: /candles, /regime and /signal-pack are computed from synthetic candles, not market data; set --candles-url for a real feed")
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
		logger.Error("server stopped", "err", serveErr)
	}

	logger.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	healthSrv.Shutdown()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := httpSrv.Shutdown(sctx); err != nil {
		logger.Warn("http shutdown", "err", err)
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

// newCandles builds the candle store: Coinbase Exchange at --candles-url,
// or the devnet's synthetic feed when none is set.
func newCandles(cfg *config) (*market.Cache, service.DataSource, error) {
	var src market.Source = market.NewDevnet()
	desc := service.DataSource{Kind: "candles", Name: src.Name(), Synthetic: true,
		Description: "deterministic synthetic OHLCV generated in process (devnet); not market data"}
	if cfg.CandlesURL != "" {
		cb, err := market.NewCoinbase(market.DefaultCoinbaseConfig(cfg.CandlesURL), &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()})
		if err != nil {
			return nil, desc, err
		}
		src = cb
		desc = service.DataSource{Kind: "candles", Name: cb.Name(), Description: "Coinbase Exchange public candles at " + cfg.CandlesURL}
	}
	cache, err := market.NewCache(src, market.DefaultCacheConfig())
	return cache, desc, err
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
		return slog.New(slog.NewJSONHandler(out, opts))
	}
	return slog.New(slog.NewTextHandler(out, opts))
}
