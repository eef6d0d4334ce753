package devnet

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/miner"
	"github.com/ethereum/go-ethereum/params"
)

// historyLead is how far before Start the genesis block lies: the setup
// blocks follow it a second apart, so the history stays in the past as
// long as it has fewer blocks than this has seconds.
const historyLead = time.Hour

// epochLength is the number of blocks between finalized blocks, as
// go-ethereum's simulated beacon reports them.
const epochLength = 32

// seal builds a block with timestamp ts on the head from the pool's
// pending transactions, imports it and makes it the head: what a
// consensus client does through engine_forkchoiceUpdated, getPayload and
// newPayload, done here on the node's own miner and chain so that the
// devnet, not time.Now, picks the timestamp. Unless empty is allowed, it
// seals nothing and returns nil when no transaction is pending. Only one
// goroutine seals at a time: Start's while it sets up, then clock's.
func (c *Chain) seal(ts uint64, allowEmpty bool) (*types.Block, error) {
	bc := c.eth.BlockChain()
	parent := bc.CurrentBlock()
	if ts <= parent.Time {
		return nil, fmt.Errorf("block time %d is not after its parent's %d", ts, parent.Time)
	}
	if now := time.Now().Unix(); int64(ts) > now {
		return nil, fmt.Errorf("block time %d is in the future (now %d)", ts, now)
	}
	// The pool promotes accepted transactions and drops included ones on
	// a background loop; Sync runs it to the end, so that no transaction
	// is sealed twice and the block takes what the pool has promoted (a
	// sender's later nonce may still be queued: it gets the next block,
	// and setup waits for it, see awaitPending).
	if err := c.eth.TxPool().Sync(); err != nil {
		return nil, err
	}
	if pending, _ := c.eth.TxPool().Stats(); pending == 0 && !allowEmpty {
		return nil, nil
	}
	var random common.Hash
	_, _ = rand.Read(random[:]) // never fails
	// Without transactions of its own, the testing payload is filled from
	// the pool as engine_getPayload's would be, but built once, in this
	// goroutine, at exactly ts.
	block, _, err := c.eth.Miner().BuildTestingPayload(&miner.BuildPayloadArgs{
		Parent: parent.Hash(), Timestamp: ts, Random: random, BeaconRoot: &common.Hash{},
	}, nil, false, nil)
	if err != nil {
		return nil, fmt.Errorf("build block: %w", err)
	}
	if _, err := bc.InsertBlockWithoutSetHead(context.Background(), block, false); err != nil {
		return nil, fmt.Errorf("import block: %w", err)
	}
	if _, err := bc.SetCanonical(block); err != nil {
		return nil, fmt.Errorf("set head: %w", err)
	}
	bc.SetSafe(block.Header())
	bc.SetFinalized(bc.GetHeaderByNumber(block.NumberU64() / epochLength * epochLength))
	return block, nil
}

// sealSetup seals the transactions sent so far into the next block of
// Start's history, one second after its parent.
func (c *Chain) sealSetup() (*types.Block, error) {
	ts := c.eth.BlockChain().CurrentBlock().Time + 1
	if !c.sleepUntil(ts) {
		return nil, errors.New("devnet closed")
	}
	block, err := c.seal(ts, false)
	if err == nil && block == nil {
		err = errors.New("no transaction reached the pool")
	}
	return block, err
}

// clock seals every block after Start. It wakes when a transaction becomes
// pending and seals it at once in the current second, or, if that second
// already has its block, at the next second with whatever else arrived
// meanwhile. Every second it also checks the head's age and seals an empty
// block once the head is 2 s behind, so eth_call sees a current
// block.timestamp (EIP-3009 time windows are checked against it).
func (c *Chain) clock() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		heartbeat := false
		select {
		case <-c.stop:
			return
		case <-c.wake:
		case now := <-tick.C:
			if now.Unix()-int64(c.eth.BlockChain().CurrentBlock().Time) < 2 {
				continue
			}
			heartbeat = true
		}
		ts := max(uint64(time.Now().Unix()), c.eth.BlockChain().CurrentBlock().Time+1)
		if !c.sleepUntil(ts) {
			return
		}
		block, err := c.seal(ts, heartbeat)
		if err != nil {
			c.sealErr.CompareAndSwap(nil, &err) // Close reports the first
			continue
		}
		if block != nil && block.GasUsed()+params.TxGas > block.GasLimit() {
			c.poke() // a full block: the rest goes into the next
		}
	}
}

// interval seals every blockTime instead of clock: a block on each tick,
// empty or not, at the first second that is a multiple of blockTime after
// the head, with whatever the pool has then.
func (c *Chain) interval() {
	step := uint64(c.blockTime / time.Second)
	for {
		head := c.eth.BlockChain().CurrentBlock().Time
		ts := (max(head, uint64(time.Now().Unix()))/step + 1) * step
		if !c.sleepUntil(ts) {
			return
		}
		if _, err := c.seal(ts, true); err != nil { // a full block leaves the rest for the next, on time
			c.sealErr.CompareAndSwap(nil, &err) // Close reports the first
		}
	}
}

// poke wakes clock; a wake already waiting covers this one.
func (c *Chain) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// forward pokes clock for every batch of transactions the pool promotes
// to pending, until the subscription ends. It never blocks: the pool sends
// these events synchronously from the loop that clock's seal waits for.
func (c *Chain) forward(events <-chan core.NewTxsEvent, done <-chan error) {
	for {
		select {
		case <-events:
			c.poke()
		case <-done:
			return
		}
	}
}

// sleepUntil waits until the wall clock reaches second ts; false means the
// devnet is closing.
func (c *Chain) sleepUntil(ts uint64) bool {
	for {
		d := time.Until(time.Unix(int64(ts), 0))
		if d <= 0 {
			return true
		}
		t := time.NewTimer(d)
		select {
		case <-c.stop:
			t.Stop()
			return false
		case <-t.C:
		}
	}
}
