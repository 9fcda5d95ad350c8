package memory_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/checkpointtest"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
)

func TestConformance(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) checkpoint.Store { return memory.New() })
}

// The pending questions in deadline order, what a host's deadline loop
// reads on every new question, are kept in that order: listing the first
// of 20,000 does not go over all of them, and pages through them as the
// general listing does.
func TestPendingByDeadlineIndexed(t *testing.T) {
	ctx := t.Context()
	s := memory.New()
	base := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	const n = 20000
	for i := range n {
		q := &checkpoint.Question{ThreadID: "t", ID: fmt.Sprint("q", i), Kind: "approve", CreatedAt: base}
		switch i % 4 {
		case 0: // no deadline
		case 1, 2:
			q.Deadline = base.Add(time.Duration((i*7919)%n) * time.Second) // out of creation order, some equal
		case 3:
			q.Deadline = base.Add(time.Duration(i%10) * time.Second)
		}
		if _, _, err := s.CreateQuestion(ctx, q); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 && i%4 != 0 {
			if _, err := s.ResolveQuestion(ctx, "t", q.ID, checkpoint.Resolution{Status: checkpoint.QuestionAborted, By: "x", At: base}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The general listing (a thread's filter) is the definition.
	list := func(f checkpoint.QuestionFilter) []string {
		var ids []string
		for {
			qs, next, err := s.ListQuestions(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range qs {
				ids = append(ids, q.ID)
			}
			if next == "" {
				return ids
			}
			f.After = next
		}
	}
	indexed := list(checkpoint.QuestionFilter{Status: checkpoint.QuestionPending, Order: checkpoint.DeadlineFirst, Limit: 997})
	general := list(checkpoint.QuestionFilter{ThreadID: "t", Status: checkpoint.QuestionPending, Order: checkpoint.DeadlineFirst, Limit: 997})
	if !slices.Equal(indexed, general) {
		t.Fatalf("the indexed listing (%d) differs from the general one (%d)", len(indexed), len(general))
	}
	first := checkpoint.QuestionFilter{Status: checkpoint.QuestionPending, Order: checkpoint.DeadlineFirst, Limit: 8}
	allocs := testing.AllocsPerRun(20, func() {
		if qs, _, err := s.ListQuestions(ctx, first); err != nil || len(qs) != 8 {
			t.Fatalf("%d questions, %v", len(qs), err)
		}
	})
	// Eight copied questions and a page (19 here); sorting every pending
	// question grows a slice of thousands (40, and milliseconds).
	if allocs > 25 {
		t.Errorf("listing the 8 earliest deadlines of %d questions made %.0f allocations", n, allocs)
	}
}
