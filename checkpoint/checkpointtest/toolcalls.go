package checkpointtest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

func testToolCalls(t *testing.T, setup setupFunc) {
	t.Run("PutReplaceList", func(t *testing.T) {
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
	})

	t.Run("PerRun", func(t *testing.T) {
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
	})
}
