package batch

import (
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// recent keeps, per channel, the copy of its row this process last wrote
// for a voucher, with the store's version: the payer's next voucher
// starts from it instead of reading the store (bench/voucher, issue 20
// item 9). A copy is only ever a starting point. A voucher it would not
// serve as it stands (a resend, a mismatch, a refusal, a stale mirror)
// is judged on the store's row instead, and a charge is written from it
// only while the row has not moved since (Store.UpdateChannelFrom);
// otherwise the update reads the row and judges again. A channel written
// by someone else meanwhile (another replica, the claimer, a refund) is
// not kept for a while, so that replicas taking turns on one channel do
// not pay for a missed write on every call.
type recent struct {
	mu sync.Mutex
	m  map[common.Hash]recentCopy
}

type recentCopy struct {
	c Channel
	// skipUntil, when set, is until when the channel is read from the
	// store (a copy missed): c is empty.
	skipUntil time.Time
}

const (
	// recentMax is how many channels are kept; a new one beyond pushes an
	// arbitrary one out.
	recentMax = 8192
	// recentSkip is how long a channel whose copy missed is read from
	// the store.
	recentSkip = time.Minute
)

// get returns channel id's copy, if one is kept.
func (r *recent) get(id common.Hash) (Channel, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[id]
	if !ok || !e.skipUntil.IsZero() {
		return Channel{}, false
	}
	return e.c, true
}

// put keeps c, written at its Version; a write whose version is unknown
// (the update read the row again) marks the channel missed instead.
func (r *recent) put(c Channel, now time.Time) {
	if c.Version == "" {
		r.missed(c.ID, now)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !now.Before(r.m[c.ID].skipUntil) {
		r.setLocked(c.ID, recentCopy{c: c})
	}
}

// missed reads channel id from the store for recentSkip.
func (r *recent) missed(id common.Hash, now time.Time) {
	r.set(id, recentCopy{skipUntil: now.Add(recentSkip)})
}

// drop forgets channel id: this process is about to write it otherwise.
func (r *recent) drop(id common.Hash) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[id]; ok && e.skipUntil.IsZero() {
		delete(r.m, id)
	}
}

func (r *recent) set(id common.Hash, e recentCopy) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setLocked(id, e)
}

// setLocked is set with r.mu held.
func (r *recent) setLocked(id common.Hash, e recentCopy) {
	if r.m == nil {
		r.m = make(map[common.Hash]recentCopy)
	}
	if _, ok := r.m[id]; !ok && len(r.m) >= recentMax {
		for k := range r.m {
			delete(r.m, k)
			break
		}
	}
	r.m[id] = e
}
