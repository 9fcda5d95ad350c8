package checkpointtest

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

func testToolCalls(t *testing.T, setup setupFunc) {
	t.Run("PutReplaceList", func(t *testing.T) { testToolCallsPutReplaceList(t, setup) })

	t.Run("ExecutingIsAClaim", func(t *testing.T) { testToolCallsExecutingIsAClaim(t, setup) })

	t.Run("DoneInsertsOrReplaces", func(t *testing.T) { testToolCallsDoneInsertsOrReplaces(t, setup) })

	t.Run("PerRun", func(t *testing.T) { testToolCallsPerRun(t, setup) })
}

func testToolCallsPutReplaceList(t *testing.T, setup setupFunc) {
	s := setup(t)
	thread := id("thread")
	tc := &checkpoint.ToolCall{
		ThreadID: thread,
		RunID:    "run-1",
		CallID:   "call-1",
		Tool:     "bash",
		Args:     json.RawMessage(`{"cmd": "rm -rf /tmp/x",  "n":1}`),
		State:    checkpoint.ToolCallExecuting,
	}
	if err := s.PutToolCall(ctx(t), tc); err != nil {
		t.Fatalf("PutToolCall(executing): %v", err)
	}
	if !recent(tc.UpdatedAt) {
		t.Errorf("UpdatedAt = %v, want the store's current time", tc.UpdatedAt)
	}
	list, err := s.ListToolCalls(ctx(t), thread, "run-1")
	if err != nil {
		t.Fatalf("ListToolCalls: %v", err)
	}
	if len(list) != 1 {
		t.Fatalf("ListToolCalls = %d calls, want 1", len(list))
	}
	got := list[0]
	if got.ThreadID != thread || got.RunID != "run-1" || got.CallID != "call-1" || got.Tool != "bash" || got.State != checkpoint.ToolCallExecuting {
		t.Errorf("stored call = %+v", got)
	}
	checkJSON(t, "Args", got.Args, tc.Args)
	if len(got.Result) != 0 {
		t.Errorf("Result = %q before the call is done", got.Result)
	}
	checkTime(t, "UpdatedAt", got.UpdatedAt, tc.UpdatedAt)

	// Replace: the same call, now done.
	done := *tc
	done.State = checkpoint.ToolCallDone
	done.Result = json.RawMessage(`{"output":"ok\n", "exit":0}`)
	if err := s.PutToolCall(ctx(t), &done); err != nil {
		t.Fatalf("PutToolCall(done): %v", err)
	}
	list, err = s.ListToolCalls(ctx(t), thread, "run-1")
	if err != nil {
		t.Fatalf("ListToolCalls: %v", err)
	}
	if len(list) != 1 {
		t.Fatalf("ListToolCalls after replace = %d calls, want 1", len(list))
	}
	if list[0].State != checkpoint.ToolCallDone {
		t.Errorf("State = %q, want done", list[0].State)
	}
	checkJSON(t, "Result", list[0].Result, done.Result)
	checkJSON(t, "Args", list[0].Args, tc.Args)
}

func testToolCallsExecutingIsAClaim(t *testing.T, setup setupFunc) {
	s := setup(t)
	thread := id("thread")
	first := &checkpoint.ToolCall{
		ThreadID: thread, RunID: "run-1", CallID: "call-1", Tool: "transfer",
		Args: json.RawMessage(`{"amount": 100}`), State: checkpoint.ToolCallExecuting,
	}
	if err := s.PutToolCall(ctx(t), first); err != nil {
		t.Fatalf("PutToolCall(executing, fresh call): %v", err)
	}
	stored := mustToolCall(t, s, thread, "run-1", "call-1")

	// A second claim, with other arguments, as another driver of the
	// run would write it: refused, and the record is untouched.
	second := &checkpoint.ToolCall{
		ThreadID: thread, RunID: "run-1", CallID: "call-1", Tool: "transfer2",
		Args: json.RawMessage(`{"amount": 999}`), State: checkpoint.ToolCallExecuting,
	}
	if err := s.PutToolCall(ctx(t), second); !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("PutToolCall(executing, call already executing) = %v, want ErrConflict", err)
	}
	checkToolCall(t, "after a refused claim", mustToolCall(t, s, thread, "run-1", "call-1"), stored)

	// Done replaces the claim.
	done := *first
	done.State, done.Result = checkpoint.ToolCallDone, json.RawMessage(`{"content":"transferred"}`)
	if err := s.PutToolCall(ctx(t), &done); err != nil {
		t.Fatalf("PutToolCall(done, call executing): %v", err)
	}
	stored = mustToolCall(t, s, thread, "run-1", "call-1")
	if stored.State != checkpoint.ToolCallDone {
		t.Fatalf("State = %q after done, want done", stored.State)
	}
	checkJSON(t, "Result", stored.Result, done.Result)

	// A claim on a call that is done is refused too.
	if err := s.PutToolCall(ctx(t), second); !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("PutToolCall(executing, call done) = %v, want ErrConflict", err)
	}
	checkToolCall(t, "after a refused claim of a done call", mustToolCall(t, s, thread, "run-1", "call-1"), stored)

	// The same call id in another run, or another thread, is another call.
	for _, c := range []struct{ thread, run string }{{thread, "run-2"}, {id("thread"), "run-1"}} {
		other := *second
		other.ThreadID, other.RunID = c.thread, c.run
		if err := s.PutToolCall(ctx(t), &other); err != nil {
			t.Errorf("PutToolCall(executing, %s/%s/call-1): %v", c.thread, c.run, err)
		}
	}
}

func testToolCallsDoneInsertsOrReplaces(t *testing.T, setup setupFunc) {
	s := setup(t)
	thread := id("thread")
	// Done with no claim before it (a call that was blocked or denied
	// never executes): inserted.
	done := &checkpoint.ToolCall{
		ThreadID: thread, RunID: "run-1", CallID: "call-1", Tool: "bash",
		Args: json.RawMessage(`{"cmd":"ls"}`), State: checkpoint.ToolCallDone,
		Result: json.RawMessage(`{"is_error":true,"content":"denied"}`),
	}
	if err := s.PutToolCall(ctx(t), done); err != nil {
		t.Fatalf("PutToolCall(done, fresh call): %v", err)
	}
	if !recent(done.UpdatedAt) {
		t.Errorf("UpdatedAt = %v, want the store's current time", done.UpdatedAt)
	}
	got := mustToolCall(t, s, thread, "run-1", "call-1")
	if got.State != checkpoint.ToolCallDone || got.Tool != "bash" {
		t.Errorf("stored call = %+v", got)
	}
	checkJSON(t, "Args", got.Args, done.Args)
	checkJSON(t, "Result", got.Result, done.Result)
	checkTime(t, "UpdatedAt", got.UpdatedAt, done.UpdatedAt)

	// Done again: replaced.
	again := *done
	again.Args, again.Result = json.RawMessage(`{"cmd":"ls -l"}`), json.RawMessage(`{"content":"ok"}`)
	if err := s.PutToolCall(ctx(t), &again); err != nil {
		t.Fatalf("PutToolCall(done, call done): %v", err)
	}
	got = mustToolCall(t, s, thread, "run-1", "call-1")
	checkJSON(t, "Args", got.Args, again.Args)
	checkJSON(t, "Result", got.Result, again.Result)
}

func testToolCallsPerRun(t *testing.T, setup setupFunc) {
	s := setup(t)
	thread, other := id("thread"), id("other")
	put := func(thread, run, call string) {
		t.Helper()
		err := s.PutToolCall(ctx(t), &checkpoint.ToolCall{
			ThreadID: thread, RunID: run, CallID: call, Tool: "t",
			Args: json.RawMessage(`{}`), State: checkpoint.ToolCallExecuting,
		})
		if err != nil {
			t.Fatalf("PutToolCall(%s/%s/%s): %v", thread, run, call, err)
		}
	}
	put(thread, "run-1", "a")
	put(thread, "run-1", "b")
	put(thread, "run-1", "c")
	put(thread, "run-2", "a")
	put(other, "run-1", "z")

	calls := func(thread, run string) string {
		t.Helper()
		list, err := s.ListToolCalls(ctx(t), thread, run)
		if err != nil {
			t.Fatalf("ListToolCalls(%s, %s): %v", thread, run, err)
		}
		var ids []string
		for _, tc := range list {
			if tc.ThreadID != thread || tc.RunID != run {
				t.Errorf("ListToolCalls(%s, %s) returned a call of %s/%s", thread, run, tc.ThreadID, tc.RunID)
			}
			ids = append(ids, tc.CallID)
		}
		slices.Sort(ids)
		return strings.Join(ids, ",")
	}
	for _, c := range []struct{ thread, run, want string }{
		{thread, "run-1", "a,b,c"},
		{thread, "run-2", "a"},
		{other, "run-1", "z"},
		{other, "run-2", ""},
		{id("nobody"), "run-1", ""},
	} {
		if got := calls(c.thread, c.run); got != c.want {
			t.Errorf("calls of %s/%s = %q, want %q", c.thread, c.run, got, c.want)
		}
	}
}

// mustToolCall returns the one stored call of a run with the given id.
func mustToolCall(t *testing.T, s checkpoint.Store, thread, run, call string) *checkpoint.ToolCall {
	t.Helper()
	list, err := s.ListToolCalls(ctx(t), thread, run)
	if err != nil {
		t.Fatalf("ListToolCalls(%s, %s): %v", thread, run, err)
	}
	var found *checkpoint.ToolCall
	for _, tc := range list {
		if tc.CallID == call {
			if found != nil {
				t.Fatalf("ListToolCalls(%s, %s): call %s listed twice", thread, run, call)
			}
			found = tc
		}
	}
	if found == nil {
		t.Fatalf("ListToolCalls(%s, %s): no call %s", thread, run, call)
	}
	return found
}

// checkToolCall compares every field of a stored call with want.
func checkToolCall(t *testing.T, what string, got, want *checkpoint.ToolCall) {
	t.Helper()
	if got.ThreadID != want.ThreadID || got.RunID != want.RunID || got.CallID != want.CallID ||
		got.Tool != want.Tool || got.State != want.State {
		t.Errorf("%s: stored call = %s/%s/%s %s %s, want %s/%s/%s %s %s", what,
			got.ThreadID, got.RunID, got.CallID, got.Tool, got.State,
			want.ThreadID, want.RunID, want.CallID, want.Tool, want.State)
	}
	checkJSON(t, what+": Args", got.Args, want.Args)
	checkJSON(t, what+": Result", got.Result, want.Result)
	checkTime(t, what+": UpdatedAt", got.UpdatedAt, want.UpdatedAt)
}
