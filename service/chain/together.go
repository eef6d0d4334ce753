package chain

import (
	"context"
	"sync"

	"github.com/ethereum/go-ethereum/rpc"
)

// Together returns n clients for readers running side by side (one
// goroutine each) whose requests are merged into shared round trips: a
// request waits until every reader still running has one waiting too,
// then all of them go to the node in one JSON-RPC batch. Readers that
// make the same number of requests in turn so cost that many round trips
// together, not each. Each reader calls Done on its client when it will
// send nothing more (a reader that never does holds the others); the
// clients keep c's configuration, not its caches.
func (c *Client) Together(n int) []*Client {
	m := &merger{r: c.rpc, active: n}
	out := make([]*Client, n)
	for i := range out {
		out[i] = &Client{rpc: m, cfg: c.cfg, sem: make(chan struct{}, c.cfg.MaxConcurrent), merge: m}
	}
	return out
}

// Done tells the client's merger that its reader sends nothing more; a
// no-op for a client not made by Together.
func (c *Client) Done() {
	if c.merge != nil {
		c.merge.done()
	}
}

// merger gathers the requests of readers side by side into one batch
// each time every running reader has one waiting.
type merger struct {
	r      RPC
	mu     sync.Mutex
	active int
	queue  []*merged
}

// merged is one reader's request waiting for the batch.
type merged struct {
	ctx   context.Context
	elems []rpc.BatchElem
	done  chan error
}

func (m *merger) done() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.active--
	m.flush()
}

// flush sends the waiting requests once every running reader has one.
func (m *merger) flush() {
	if len(m.queue) == 0 || len(m.queue) < m.active {
		return
	}
	qs := m.queue
	m.queue = nil
	go func() {
		var all []rpc.BatchElem
		for _, q := range qs {
			all = append(all, q.elems...)
		}
		err := m.r.BatchCallContext(qs[0].ctx, all)
		i := 0
		for _, q := range qs {
			for j := range q.elems {
				q.elems[j].Error = all[i].Error
				i++
			}
			q.done <- err
		}
	}()
}

// BatchCallContext queues b for the next shared batch.
func (m *merger) BatchCallContext(ctx context.Context, b []rpc.BatchElem) error {
	q := &merged{ctx: ctx, elems: b, done: make(chan error, 1)}
	m.mu.Lock()
	m.queue = append(m.queue, q)
	m.flush()
	m.mu.Unlock()
	select {
	case err := <-q.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CallContext queues one call as a batch of one.
func (m *merger) CallContext(ctx context.Context, result any, method string, args ...any) error {
	b := []rpc.BatchElem{{Method: method, Args: args, Result: result}}
	if err := m.BatchCallContext(ctx, b); err != nil {
		return err
	}
	return b[0].Error
}
