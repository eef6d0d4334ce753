// Package chain reads an Ethereum node over JSON-RPC for the chain
// analytics: batched calls (one round trip for many reads), eth_getLogs
// that splits its range when a provider caps it, per-call deadlines, a
// concurrency cap and bounded retries of transient failures. It works
// unchanged against a Base node and against the devnet's endpoint.
//
// One seam: RPC, which go-ethereum's *rpc.Client provides; tests put a
// counting or capping server behind it.
package chain

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
)

// RPC is the JSON-RPC connection the client uses.
type RPC interface {
	CallContext(ctx context.Context, result any, method string, args ...any) error
	BatchCallContext(ctx context.Context, b []rpc.BatchElem) error
}

// Config configures a Client.
type Config struct {
	// CallTimeout bounds one round trip.
	CallTimeout time.Duration
	// MaxConcurrent caps round trips in flight.
	MaxConcurrent int
	// Retries is how many times a transient failure (transport error,
	// 429, 5xx) is retried, with backoff from 100 ms.
	Retries int
	// LogRange is the widest block range asked of eth_getLogs at first;
	// it halves whenever the provider refuses a range or a result size.
	LogRange uint64
}

// DefaultConfig returns settings fit for public Base providers.
func DefaultConfig() Config {
	return Config{CallTimeout: 10 * time.Second, MaxConcurrent: 8, Retries: 2, LogRange: 10_000}
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	if c.CallTimeout <= 0 || c.MaxConcurrent <= 0 || c.Retries < 0 || c.LogRange == 0 {
		return errors.New("chain: timeout, concurrency and log range must be positive, retries not negative")
	}
	return nil
}

// ErrUnavailable wraps a node that failed past the retries.
var ErrUnavailable = errors.New("chain: node unavailable")

// Client reads the chain through an RPC.
type Client struct {
	rpc RPC
	cfg Config
	sem chan struct{}
	// headHint is the last head seen, for speculative log queries.
	headHint atomic.Uint64
	// roleless: addresses whose code has no getRoleMemberCount and is no
	// proxy (Inspect skips the role counts).
	mu       sync.Mutex
	roleless map[common.Address]bool
	// merge gathers this client's requests with its siblings' (Together).
	merge *merger
}

// New returns a client over r; it does no I/O.
func New(r RPC, cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Client{rpc: r, cfg: cfg, sem: make(chan struct{}, cfg.MaxConcurrent)}, nil
}

// Batch sends elems in one round trip. A transport failure fails the
// whole batch (after retries); per-call errors stay in each elem's Error.
func (c *Client) Batch(ctx context.Context, elems []rpc.BatchElem) error {
	if len(elems) == 0 {
		return nil
	}
	return c.retry(ctx, func(ctx context.Context) error {
		for i := range elems {
			elems[i].Error = nil
		}
		return c.rpc.BatchCallContext(ctx, elems)
	})
}

// Call makes one call.
func (c *Client) Call(ctx context.Context, result any, method string, args ...any) error {
	return c.retry(ctx, func(ctx context.Context) error { return c.rpc.CallContext(ctx, result, method, args...) })
}

func (c *Client) retry(ctx context.Context, f func(context.Context) error) error {
	backoff := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		select {
		case c.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
		err := f(cctx)
		cancel()
		<-c.sem
		if err == nil || !transient(err) || ctx.Err() != nil {
			if err != nil && transient(err) {
				return fmt.Errorf("%w: %v", ErrUnavailable, err)
			}
			return err
		}
		if attempt >= c.cfg.Retries {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff *= 2
	}
}

// transient tells a failure worth retrying (the transport, throttling, a
// node error) from a call's own error (a revert, bad params).
func transient(err error) bool {
	var he rpc.HTTPError
	if errors.As(err, &he) {
		return he.StatusCode == 429 || he.StatusCode >= 500
	}
	var re rpc.Error
	if errors.As(err, &re) {
		return false // the node answered: an execution error or bad request
	}
	return !errors.Is(err, context.Canceled)
}

// LogQuery selects logs.
type LogQuery struct {
	From, To  uint64
	Addresses []common.Address
	Topics    [][]common.Hash
}

// Logs returns the logs of q in block order, splitting the range when the
// provider refuses it ("block range too large", "more than 10000
// results", ...) and stitching the parts.
func (c *Client) Logs(ctx context.Context, q LogQuery) ([]types.Log, error) {
	var out []types.Log
	width := c.cfg.LogRange
	for from := q.From; from <= q.To; {
		to := min(q.To, from+width-1)
		var logs []types.Log
		err := c.Call(ctx, &logs, "eth_getLogs", filterArg(from, to, q))
		if err != nil && rangeRefused(err) && to > from {
			width = max(1, (to-from+1)/2)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("eth_getLogs %d-%d: %w", from, to, err)
		}
		out = append(out, logs...)
		from = to + 1
	}
	return out, nil
}

func filterArg(from, to uint64, q LogQuery) map[string]any {
	arg := map[string]any{
		"fromBlock": hexutil.EncodeBig(new(big.Int).SetUint64(from)),
		"toBlock":   hexutil.EncodeBig(new(big.Int).SetUint64(to)),
	}
	if len(q.Addresses) > 0 {
		arg["address"] = q.Addresses
	}
	if len(q.Topics) > 0 {
		topics := make([]any, len(q.Topics))
		for i, alts := range q.Topics {
			if len(alts) == 0 {
				topics[i] = nil
			} else {
				topics[i] = alts
			}
		}
		arg["topics"] = topics
	}
	return arg
}

// rangeRefused recognises the providers' range and result-size caps.
func rangeRefused(err error) bool {
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"range too large", "range is too large", "range is too wide", "more than 10000 results",
		"query returned more than", "response size exceeded", "is limited to", "limit exceeded", "too many blocks"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
