package chain_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/service/chain"
)

// echoRPC answers every call with its method's name and counts the round
// trips and the calls they carried.
type echoRPC struct {
	trips, calls atomic.Int64
}

func (e *echoRPC) CallContext(_ context.Context, result any, method string, _ ...any) error {
	e.trips.Add(1)
	e.calls.Add(1)
	raw, _ := json.Marshal(method)
	return json.Unmarshal(raw, result)
}

func (e *echoRPC) BatchCallContext(_ context.Context, b []rpc.BatchElem) error {
	e.trips.Add(1)
	for i := range b {
		e.calls.Add(1)
		raw, _ := json.Marshal(b[i].Method)
		b[i].Error = json.Unmarshal(raw, b[i].Result)
	}
	return nil
}

// TestTogether: readers side by side, each making its requests in turn,
// share one round trip a turn; each gets its own answers; a reader done
// early holds no one.
func TestTogether(t *testing.T) {
	t.Parallel()
	node := &echoRPC{}
	c, err := chain.New(node, chain.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	turns := []int{3, 2, 3, 0} // requests per reader
	rs := c.Together(len(turns))
	var wg sync.WaitGroup
	for i, n := range turns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer rs[i].Done()
			for k := range n {
				method := []string{"a", "b", "c"}[k]
				if k%2 == 0 {
					var got string
					if err := rs[i].Call(context.Background(), &got, method); err != nil || got != method {
						t.Errorf("reader %d call %d: %q, %v", i, k, got, err)
					}
					continue
				}
				var x, y string
				b := []rpc.BatchElem{{Method: method, Result: &x}, {Method: method + method, Result: &y}}
				if err := rs[i].Batch(context.Background(), b); err != nil || x != method || y != method+method {
					t.Errorf("reader %d batch %d: %q %q, %v", i, k, x, y, err)
				}
			}
		}()
	}
	wg.Wait()
	if trips, calls := node.trips.Load(), node.calls.Load(); trips != 3 || calls != 11 {
		t.Errorf("%d round trips carrying %d calls, want 3 carrying 11", trips, calls)
	}
}
