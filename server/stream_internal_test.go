package server

import (
	"context"
	"sort"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestBroadcaster(t *testing.T) {
	b := newBroadcaster()
	a, other, all := b.wait("a"), b.wait("b"), b.wait("")
	b.notify("a")
	if !closed(a) || closed(other) || !closed(all) {
		t.Fatalf("notify(a): a %v, b %v, all %v", closed(a), closed(other), closed(all))
	}
	a = b.wait("a")
	if closed(a) {
		t.Fatal("a fresh wait is already woken")
	}
	b.notify("")
	if !closed(a) || !closed(other) {
		t.Fatal("notify(\"\") left a stream asleep")
	}
}

// sparseStore holds events whose sequence numbers have holes, as a
// PostgreSQL sequence leaves them.
type sparseStore struct {
	*memory.Store
	seqs []int64
}

func (s *sparseStore) ListEvents(ctx context.Context, thread string, after int64, limit int) ([]*checkpoint.Event, error) {
	i := sort.Search(len(s.seqs), func(i int) bool { return s.seqs[i] > after })
	var out []*checkpoint.Event
	for ; i < len(s.seqs) && len(out) < limit; i++ {
		out = append(out, &checkpoint.Event{Seq: s.seqs[i]})
	}
	return out, nil
}

func TestFindHead(t *testing.T) {
	for _, seqs := range [][]int64{nil, {1}, {7}, {1, 2, 3}, {5, 90, 91, 4000, 1 << 40}} {
		s := &sparseStore{Store: memory.New(), seqs: seqs}
		want := int64(0)
		if len(seqs) > 0 {
			want = seqs[len(seqs)-1]
		}
		if got, err := findHead(context.Background(), s); err != nil || got != want {
			t.Errorf("findHead(%v) = %d, %v; want %d", seqs, got, err, want)
		}
	}
	var dense []int64
	for i := int64(1); i <= 1000; i++ {
		dense = append(dense, i)
	}
	reads := 0
	s := &countingStore{sparseStore: sparseStore{Store: memory.New(), seqs: dense}, reads: &reads}
	if got, _ := findHead(context.Background(), s); got != 1000 || reads > 25 {
		t.Errorf("findHead of 1000 events: %d in %d reads", got, reads)
	}
}

type countingStore struct {
	sparseStore
	reads *int
}

func (s *countingStore) ListEvents(ctx context.Context, thread string, after int64, limit int) ([]*checkpoint.Event, error) {
	*s.reads++
	return s.sparseStore.ListEvents(ctx, thread, after, limit)
}
