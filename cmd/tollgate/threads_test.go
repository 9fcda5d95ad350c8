package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// threads list and show print the same on the store and against the
// server: the run states, the pending counts, and each call with what
// happened to it.
func TestThreadsSameOnStoreAndServer(t *testing.T) {
	f := newCLIFixture(t)
	f.prompt("t1", "$ printf one >> log.txt\n$ printf two >> log.txt", 2)
	f.prompt("t2", "$ echo fine\n$ touch forbidden\n$ printf 'x\u202e' > y\n$ printf edited > z", 2)
	ctx := context.Background()
	if _, err := f.h.Answer(ctx, "t2", "hitl_call_1_3", json.RawMessage(`{"decision":"deny","reason":"not <now>"}`), "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.h.Answer(ctx, "t2", "hitl_call_1_4", json.RawMessage(`{"decision":"edit","edited_args":{"cmd":"echo instead >> z"}}`), "bob"); err != nil {
		t.Fatal(err)
	}
	f.settle("t2", 0)
	f.prompt("t3", "$ slow thing", 0)

	out := f.same("threads list")
	for _, want := range []string{"THREAD  STATUS   RUN     PENDING  UPDATED", "t1      running  parked  2", "t2      idle     idle    0"} {
		if !strings.Contains(out, want) {
			t.Errorf("threads list lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "t3 "), strings.Index(out, "t1 "); i < 0 || j < i {
		t.Errorf("threads list is not newest first:\n%s", out)
	}
	if out := f.same("threads list", "--status", "running"); strings.Contains(out, "t2") || !strings.Contains(out, "t1") {
		t.Errorf("threads list --status running:\n%s", out)
	}
	// The history's states and search, as the page's.
	for args, want := range map[[2]string][]string{
		{"--state", "waiting"}:    {"t1"},
		{"--state", "finished"}:   {"t2", "t3"},
		{"--state", "timed_out"}:  {"t3"},
		{"--search", "forbidden"}: {"t2"},
	} {
		out := f.same("threads list", args[0], args[1])
		for _, id := range []string{"t1", "t2", "t3"} {
			if got := strings.Contains(out, "\n"+id+" "); got != slices.Contains(want, id) {
				t.Errorf("threads list %s %s: %s listed %v, want %v:\n%s", args[0], args[1], id, got, !got, out)
			}
		}
	}
	if code, _, errOut := f.store("threads list", "--state", "failed"); code != 1 || !strings.Contains(errOut, "known to the server that drives it") {
		t.Errorf("threads list --state failed on a store: %d %s", code, errOut)
	}
	if code, _, errOut := f.store("threads list", "--state", "stuck"); code != 2 || !strings.Contains(errOut, "want waiting, running, failed, finished or timed_out") {
		t.Errorf("threads list --state stuck: %d %s", code, errOut)
	}
	out = f.same("threads list", "--json")
	if !strings.Contains(out, `"id":"t1","status":"running"`) || !strings.Contains(out, `"run_state":"parked"`) || !strings.Contains(out, `"pending_questions":2`) {
		t.Errorf("threads list --json:\n%s", out)
	}

	out = f.same("threads show", "t2")
	for _, want := range []string{
		"thread t2: idle (run ",
		"  → bash (call call_1_1)\n      cmd: echo fine",
		"← bash (call call_1_1): allowed by the policy\n      exit 0\n      stdout:\n        fine",
		"← bash (call call_1_2): blocked by the policy (no forbidden things)",
		"      cmd: printf 'x⟨U+202E⟩' > y\n      warning: 1 invisible",
		"← bash (call call_1_3): denied by alice (not <now>)",
		"← bash (call call_1_4): edited by bob; ran: echo instead >> z",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("threads show lacks %q:\n%s", want, out)
		}
	}
	out = f.same("threads show", "t1")
	if !strings.Contains(out, "thread t1: running, parked") || !strings.Contains(out, "waiting for an answer:\n  hitl_call_1_1  bash: printf one >> log.txt, 59m") {
		t.Errorf("threads show of a parked thread:\n%s", out)
	}
	if out := f.same("threads show", "t3"); !strings.Contains(out, "timed out after 0s") && !strings.Contains(out, "timed out") {
		t.Errorf("threads show of a timed out call:\n%s", out)
	}
	f.same("threads show", "--json", "t1")

	// A call's result shows as soon as it has one, with its own times,
	// while another call of its turn waits for an answer.
	f.prompt("t4", "$ echo live\n$ printf x >> log.txt", 1)
	out = f.same("threads show", "t4")
	for _, want := range []string{
		"← bash (call call_1_1): allowed by the policy\n      exit 0\n      stdout:\n        live\n      ran from ",
		"… bash (call call_1_2): waiting for an answer",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("threads show of a turn in progress lacks %q:\n%s", want, out)
		}
	}

	// A client token sees threads but not questions: no counts.
	code, out, errOut := f.server(clientSecret, "threads list")
	if code != 0 || !strings.Contains(out, "t1      running  parked  -") {
		t.Errorf("threads list as a client: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := f.server(clientSecret, "threads show", "t2"); code != 0 || !strings.Contains(out, "← bash (call call_1_1): ran (allowed by the policy or approved") {
		t.Errorf("threads show as a client: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := f.store("threads show", "nope"); code != 1 || !strings.Contains(errOut, "no thread nope in the store") {
		t.Errorf("unknown thread: %d %s", code, errOut)
	}
}

// threads abort closes the run on the store and against the server, and
// says how many questions and calls it closed; an answer after it is
// refused as aborted.
func TestThreadsAbort(t *testing.T) {
	f := newCLIFixture(t)
	f.prompt("t1", "$ printf one >> log.txt\n$ printf two >> log.txt", 2)
	f.prompt("t2", "$ printf one >> log.txt\n$ echo fine", 1)

	code, out, errOut := f.store("threads abort", "t1")
	if code != 0 || out != "thread t1 aborted (aborted by carol): 2 pending questions aborted, 2 unfinished tool calls denied\n" {
		t.Fatalf("abort on the store: %d %q %s", code, out, errOut)
	}
	code, out, errOut = f.server(rootSecret, "threads abort", "--reason", "user closed the tab", "t2")
	if code != 0 || out != "thread t2 aborted (user closed the tab): 1 pending question aborted, 1 unfinished tool call denied\n" {
		t.Fatalf("abort on the server: %d %q %s", code, out, errOut)
	}
	f.settle("t1", 0)
	f.settle("t2", 0)
	if code, out, _ := f.server(rootSecret, "threads abort", "t1"); code != 0 || out != "thread t1 has no unfinished run: nothing to abort\n" {
		t.Errorf("second abort: %d %q", code, out)
	}
	code, _, errOut = f.server(aliceSecret, "questions answer", "t1", "hitl_call_1_2", "approve")
	if code != 1 || !strings.Contains(errOut, "question hitl_call_1_2 was aborted at ") || !strings.Contains(errOut, "(aborted by carol)") {
		t.Errorf("answer after the abort: %d %s", code, errOut)
	}
	if out := f.same("threads show", "t2"); !strings.Contains(out, "aborted (user closed the tab)") || !strings.Contains(out, "assistant (aborted)") {
		t.Errorf("threads show after the abort:\n%s", out)
	}
	if code, _, errOut := f.server(rootSecret, "threads abort", "nope"); code != 1 || !strings.Contains(errOut, "no thread nope in the server at") {
		t.Errorf("abort of an unknown thread: %d %s", code, errOut)
	}
}

// What a coding agent reports of a call tollgate did not let through
// (package hooks' not_allowed) is not shown as a call's output like any
// other.
func TestShowOutputNotAllowed(t *testing.T) {
	var b strings.Builder
	showOutput(&b, map[string]any{"agent": "claude-code", "output": "removed\n", "not_allowed": "tollgate did not let the call through"})
	if want := "      ! Claude Code reports it ran it, which tollgate did not allow (tollgate did not let the call through):\n        removed\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	b.Reset()
	showOutput(&b, map[string]any{"agent": "claude-code", "output": "ok"})
	if want := "      Claude Code ran it:\n        ok\n"; b.String() != want {
		t.Errorf("an allowed call's output: %q, want %q", b.String(), want)
	}
}
