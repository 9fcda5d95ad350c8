package server_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// runParked counts the thread's run_parked audit entries.
func (f *fixture) runParked(thread string) int {
	f.t.Helper()
	evs, err := f.store.ListEvents(context.Background(), thread, 0, 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == "run_parked" {
			n++
		}
	}
	return n
}

// A second answer to a question answered already is a 409, and nothing
// more: the run, parked on the thread's other question, is not resumed
// (it parked again each time, with a run_parked entry and metric).
func TestAlreadyAnsweredLeavesTheRunParked(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	qs := f.prompt("two", "$ rm -r /tmp/a\n$ rm -r /tmp/b")
	if len(qs) != 2 {
		t.Fatalf("%d pending questions, want 2", len(qs))
	}
	first := qs[0]
	f.do("POST", "/v1/questions/two/"+first.ID+"/answer", aliceSecret, map[string]string{"decision": "approve", "digest": first.Digest}).want(t, http.StatusOK, "")
	if left := f.settle("two"); len(left) != 1 {
		t.Fatalf("%d pending questions after one answer, want 1", len(left))
	}
	entries, parked := f.runParked("two"), f.metric(`tollgate_runs_total{outcome="parked"}`)
	for range 3 {
		f.do("POST", "/v1/questions/two/"+first.ID+"/answer", aliceSecret, map[string]string{"decision": "deny", "digest": first.Digest}).want(t, http.StatusConflict, "already_answered")
		f.settle("two")
	}
	if got := f.runParked("two"); got != entries {
		t.Errorf("run_parked entries: %d after the 409s, %d before", got, entries)
	}
	if got := f.metric(`tollgate_runs_total{outcome="parked"}`); got != parked {
		t.Errorf("runs parked: %s after the 409s, %s before", got, parked)
	}
	if q, err := f.store.GetQuestion(context.Background(), "two", qs[1].ID); err != nil || q.Status != checkpoint.QuestionPending {
		t.Errorf("the other question: %v, %v", q, err)
	}
}

// An approve or a deny with edited_args is a 422, and the question stays
// open: the edit would have been dropped and the original call run.
func TestAnswerWithIgnoredEditRefused(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	q := f.ask("edit", "rm -r /tmp/a")
	for _, decision := range []string{"approve", "deny"} {
		res := f.do("POST", "/v1/questions/edit/"+q.ID+"/answer", aliceSecret, map[string]any{
			"decision": decision, "edited_args": map[string]string{"cmd": "rm -r /tmp/a/old"}, "digest": q.Digest,
		}).want(t, http.StatusUnprocessableEntity, "invalid_answer")
		if !bytes.Contains(res.body, []byte(`edited_args`)) {
			t.Errorf("%s: the refusal does not say why: %s", decision, res.body)
		}
	}
	if got, err := f.store.GetQuestion(context.Background(), "edit", q.ID); err != nil || got.Status != checkpoint.QuestionPending {
		t.Fatalf("question after the refusals: %+v, %v", got, err)
	}
}
