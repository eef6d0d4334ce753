package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
)

// TestOneServePerDataDir: a second serve on a SQLite data dir in use is
// refused with the holder's pid; once the first stops, the dir is free.
func TestOneServePerDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := serveFor(t, []string{"--data-dir", dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = serveFor(t, []string{"--data-dir", dir}, nil)
	if err == nil || !strings.Contains(err.Error(), "in use by another tollgate serve (pid "+strconv.Itoa(os.Getpid())+")") ||
		!strings.Contains(err.Error(), "--data-dir") {
		t.Fatalf("second serve on %s: %v", dir, err)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := serveFor(t, []string{"--data-dir", dir}, nil); err != nil {
		t.Fatalf("serve after the first stopped: %v", err)
	}
}

// TestRateLimitWired: serve's flags reach the limiter: unpaid requests
// over the burst get 429 with Retry-After and the JSON Error body, /health
// never does, and a request with a payment header uses its own bucket.
func TestRateLimitWired(t *testing.T) {
	t.Parallel()
	s, err := serveFor(t, []string{"--data-dir", t.TempDir(), "--rate-limit", "0.5", "--rate-burst", "3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string, header ...string) *http.Response {
		req, _ := http.NewRequest("GET", s.base+path, nil)
		if len(header) == 2 {
			req.Header.Set(header[0], header[1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var codes []int
	for range 5 {
		resp := get("/tollgate")
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	if codes[2] != 200 || codes[3] != 429 || codes[4] != 429 {
		t.Fatalf("five free requests with a burst of 3: %v", codes)
	}
	resp := get("/regime")
	var e struct {
		Error  string
		Status int
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 429 || e.Error != "resource_exhausted" || e.Status != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("over the limit: %d %+v Retry-After %q", resp.StatusCode, e, resp.Header.Get("Retry-After"))
	}
	if resp := get("/health"); resp.StatusCode != 200 {
		t.Errorf("/health limited: %d", resp.StatusCode)
	}
	// A (junk) payment is judged by the gate, not refused by the free bucket.
	if resp := get("/regime", "PAYMENT-SIGNATURE", "bm90LWEtcGF5bWVudA=="); resp.StatusCode == 429 {
		t.Error("a request with a payment header was refused by the free bucket")
	}
}

// TestHeadersTooLarge: oversized headers get 431 with the JSON Error body.
func TestHeadersTooLarge(t *testing.T) {
	t.Parallel()
	s, err := serveFor(t, []string{"--data-dir", t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", s.base+"/health", nil)
	req.Header.Set("X-Padding", strings.Repeat("a", 70<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error   string
		Status  int
		Message string
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != 431 || e.Error != "request_header_fields_too_large" || e.Status != 431 {
		t.Errorf("70 KiB of headers: %d %+v (%v)", resp.StatusCode, e, err)
	}
}

// TestStartupWarnings: a default --public-url beside another --http port
// is a warning that says what 402 resources will contain.
func TestStartupWarnings(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		warn bool
	}{
		{[]string{"--http", ":9000"}, true},
		{[]string{"--http", "127.0.0.1:9000", "--public-url", "https://api.example.com"}, false},
		{[]string{"--http", ":8402"}, false},
	} {
		fs, cfg := newServeFlags(envOf(nil))
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if err := cfg.validate(); err != nil {
			t.Fatal(err)
		}
		w := cfg.warnings()
		if got := len(w) == 1 && strings.Contains(w[0], "http://localhost:8402") && strings.Contains(w[0], "402 resources"); got != tt.warn {
			t.Errorf("%v: warnings %q", tt.args, w)
		}
	}
}

// TestJSONLogDurations: durations in JSON logs read as durations.
func TestJSONLogDurations(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	fs, cfg := newServeFlags(envOf(nil))
	if err := fs.Parse([]string{"--log-format", "json"}); err != nil {
		t.Fatal(err)
	}
	newLogger(cfg, &buf).Info("http", "duration", 1500*time.Microsecond, slog.Duration("timeout", 15*time.Second))
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["duration"] != "1.5ms" || line["timeout"] != "15s" {
		t.Errorf("JSON log line %s (%v)", buf.String(), err)
	}
}

// TestHelpListsEnvironment: --help prints the environment variable of
// every flag of serve and the secrets read only from the environment.
func TestHelpListsEnvironment(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	_ = run(context.Background(), []string{"--help"}, envOf(nil), &out, &out)
	help := out.String()
	fs, _ := newServeFlags(envOf(nil))
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(help, envName(f.Name)+" ") {
			t.Errorf("--help does not list %s", envName(f.Name))
		}
	})
	for _, secret := range []string{"TOLLGATE_FACILITATOR_KEY ", "TOLLGATE_PAYER_KEY", "CDP_API_KEY_SECRET"} {
		if !strings.Contains(help, secret) {
			t.Errorf("--help does not list %s", secret)
		}
	}
}

// echoModel answers Predict with a fixed path.
type echoModel struct {
	tollgatev1.UnimplementedForecastModelServiceServer
}

func (echoModel) Predict(_ context.Context, req *tollgatev1.PredictRequest) (*tollgatev1.PredictResponse, error) {
	return &tollgatev1.PredictResponse{Closes: make([]float64, req.GetPredLen()), Model: "tls-model"}, nil
}

// TestForecastModelTLS: grpcs:// talks TLS to the model and verifies it
// against --forecast-model-ca; an unknown CA or a plaintext grpc:// dial
// fails.
func TestForecastModelTLS(t *testing.T) {
	t.Parallel()
	certPEM, cert := selfSigned(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
	tollgatev1.RegisterForecastModelServiceServer(srv, echoModel{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	for _, tt := range []struct {
		name, model, ca string
		ok              bool
	}{
		{"TLS with the model's CA", "grpcs://" + addr, ca, true},
		{"TLS with the system roots", "grpcs://" + addr, "", false},
		{"plaintext to a TLS server", "grpc://" + addr, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := &config{ForecastModel: tt.model, ForecastModelCA: tt.ca}
			conn, err := dialModel(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err := tollgatev1.NewForecastModelServiceClient(conn).Predict(ctx, &tollgatev1.PredictRequest{PredLen: 2})
			if ok := err == nil && resp.GetModel() == "tls-model"; ok != tt.ok {
				t.Errorf("Predict: %v %v, want ok %v", resp, err, tt.ok)
			}
		})
	}
	fs, cfg := newServeFlags(envOf(nil))
	if err := fs.Parse([]string{"--forecast-model", "grpc://model:9000", "--forecast-model-ca", ca}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "--forecast-model-ca") {
		t.Errorf("a CA for a plaintext model: %v", err)
	}
}

// selfSigned makes a certificate for 127.0.0.1, its own CA.
func selfSigned(t *testing.T) ([]byte, tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "model"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, cert
}

// TestDevnetBlockTime: serve's in-process devnet seals on Base's 2 s
// rhythm when asked, and a paid call settles on it; a fractional block
// time is refused.
func TestDevnetBlockTime(t *testing.T) {
	t.Parallel()
	s, err := serveFor(t, []string{"--data-dir", t.TempDir(), "--devnet-block-time", "2s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"pay", s.base + "/regime"}, envOf(nil), &out, &errOut); err != nil {
		t.Fatalf("pay: %v\n%s", err, errOut.String())
	}
	client, err := ethclient.Dial(s.devnetRPC)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// The settlement's block was sealed on the rhythm; wait for the next
	// one (the block before the settlement's may be setup's last).
	settled, err := client.BlockNumber(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var head *types.Header
	for head == nil || head.Number.Uint64() <= settled {
		time.Sleep(200 * time.Millisecond)
		if head, err = client.HeaderByNumber(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	parent, err := client.HeaderByNumber(context.Background(), new(big.Int).Sub(head.Number, big.NewInt(1)))
	if err != nil {
		t.Fatal(err)
	}
	if head.Time%2 != 0 || head.Time-parent.Time != 2 {
		t.Errorf("blocks at %d and %d: want every 2 s", parent.Time, head.Time)
	}
	fs, cfg := newServeFlags(envOf(nil))
	if err := fs.Parse([]string{"--devnet-block-time", "1500ms"}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "--devnet-block-time") {
		t.Errorf("1.5 s block time: %v", err)
	}
}
