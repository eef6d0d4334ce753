package batch

import (
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// TestRecent: copies are kept up to recentMax channels; a channel whose
// copy missed is not kept again until recentSkip has passed; a copy of
// unknown version counts as a miss; drop forgets a copy, not a miss.
func TestRecent(t *testing.T) {
	var r recent
	now := time.Unix(1_900_000_000, 0)
	for i := range recentMax + 10 {
		r.put(Channel{ID: common.Hash{byte(i), byte(i >> 8), 1}, Version: "1"}, now)
	}
	if n := len(r.m); n > recentMax {
		t.Errorf("%d channels kept, at most %d", n, recentMax)
	}

	id := common.Hash{0xaa}
	r.put(Channel{ID: id, Version: "7"}, now)
	if c, ok := r.get(id); !ok || c.Version != "7" {
		t.Fatalf("a kept copy: %v %v", c.Version, ok)
	}
	r.put(Channel{ID: id}, now) // written, version unknown
	if _, ok := r.get(id); ok {
		t.Error("a copy is served after a miss")
	}
	r.put(Channel{ID: id, Version: "8"}, now.Add(recentSkip/2))
	if _, ok := r.get(id); ok {
		t.Error("a copy was kept within the skip after a miss")
	}
	r.drop(id)
	r.put(Channel{ID: id, Version: "9"}, now.Add(recentSkip/2))
	if _, ok := r.get(id); ok {
		t.Error("drop forgot a miss")
	}
	r.put(Channel{ID: id, Version: "10"}, now.Add(recentSkip+time.Second))
	if c, ok := r.get(id); !ok || c.Version != "10" {
		t.Errorf("after the skip: %v %v", c.Version, ok)
	}
	r.drop(id)
	if _, ok := r.get(id); ok {
		t.Error("a dropped copy is served")
	}
}
