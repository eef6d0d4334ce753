package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/service"
	"github.com/tollgate/tollgate/service/lanes"
	"github.com/tollgate/tollgate/store"
)

// TestLanesBodyMatchesTheDocument: /lanes from an empty tape (lanes is
// still present, as the spec requires) and from a filled one validates
// against the served document.
func TestLanesBodyMatchesTheDocument(t *testing.T) {
	t.Parallel()
	db, err := store.OpenSQLite(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := newStackWith(t, service.NewAnalytics(service.Sources{Tape: db}), 5*time.Second)
	doc := loadServedDocument(t, s)
	r := s.do(t, "GET", "/lanes")
	doc.validateResponse(t, r)
	var empty struct {
		Lanes       map[string]any
		TotalCloses *int
	}
	decodeJSON(t, r, &empty)
	if r.status != 200 || empty.Lanes == nil || empty.TotalCloses == nil || *empty.TotalCloses != 0 {
		t.Errorf("empty tape: %d %s", r.status, r.body)
	}
	closes := []lanes.Close{{ID: "1", Lane: "eth-trend", ClosedAt: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}}
	if _, _, err := db.ImportCloses(context.Background(), closes); err != nil {
		t.Fatal(err)
	}
	r = s.do(t, "GET", "/lanes")
	doc.validateResponse(t, r)
	var filled struct {
		Lanes map[string]struct {
			Closes    int
			LastClose string
		}
		TotalCloses int
	}
	decodeJSON(t, r, &filled)
	if l := filled.Lanes["eth-trend"]; l.Closes != 1 || l.LastClose != "2026-11-01T00:00:00Z" || filled.TotalCloses != 1 {
		t.Errorf("filled tape: %s", r.body)
	}
}
