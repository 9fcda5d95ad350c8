package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/apiclient"
)

// The audit log reads the same on the store and against the server, one
// line an event with who, the decision, the rule, the digest, the
// latency and the tool.
func TestAuditSameOnStoreAndServer(t *testing.T) {
	f := newCLIFixture(t)
	f.prompt("t1", "$ printf one >> log.txt", 1)
	f.prompt("t2", "$ echo fine\n$ touch forbidden\n$ printf two > y", 1)
	if _, err := f.h.Answer(context.Background(), "t2", "hitl_call_1_3", json.RawMessage(`{"decision":"approve"}`), "alice"); err != nil {
		t.Fatal(err)
	}
	f.settle("t2", 0)

	out := f.same("audit")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "SEQ  AT") || !strings.Contains(lines[0], "EVENT") || !strings.Contains(lines[0], "LATENCY") {
		t.Errorf("header %q", lines[0])
	}
	has := func(parts ...string) bool {
		for _, l := range lines {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(l, p)
			}
			if ok {
				return true
			}
		}
		return false
	}
	for _, want := range [][]string{
		{"t1", "run_started", "prompt: $ printf one >> log.txt"},
		{"t1", "question_asked", "asked", "test: ask", "bash", "question hitl_call_1_1, deadline "},
		{"t1", "run_parked", "parked", "waiting for hitl_call_1_1"},
		{"t2", "tool_result", "allowed", "bash", "call call_1_1"},
		{"t2", "tool_result", "policy_deny", "call call_1_2: no forbidden things"},
		{"t2", "question_resolved", "alice", "approve", "test: ask", "bash", "question hitl_call_1_3"},
		{"t2", "tool_result", "alice", "approve", "test: ask", "call call_1_3"},
		{"t2", "run_finished", "end_turn"},
	} {
		if !has(want...) {
			t.Errorf("no audit line with %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `\u003e`) {
		t.Errorf("escaped:\n%s", out)
	}

	out = f.same("audit", "--thread", "t1")
	if strings.Contains(out, "t2") || !strings.Contains(out, "run_parked") {
		t.Errorf("audit --thread t1:\n%s", out)
	}
	out = f.same("audit", "--json")
	jl := strings.Split(strings.TrimSpace(out), "\n")
	if len(jl) != len(lines)-1 || strings.Contains(out, `\u003e`) || !strings.Contains(out, `"prompt":"$ printf one >> log.txt"`) {
		t.Errorf("audit --json (%d lines for %d events):\n%s", len(jl), len(lines)-1, out)
	}
	var first apiclient.Event
	if err := json.Unmarshal([]byte(jl[0]), &first); err != nil || first.Type != "run_started" || first.Seq == 0 {
		t.Fatalf("first event %+v %v", first, err)
	}
	var third apiclient.Event
	_ = json.Unmarshal([]byte(jl[2]), &third)
	out = f.same("audit", "--json", "--after", "2", "--limit", "1")
	if strings.TrimSpace(out) != jl[2] {
		t.Errorf("audit --after 2 --limit 1:\n%s\nwant\n%s", out, jl[2])
	}
	if out := f.same("audit", "--after", "1000"); out != "no events\n" {
		t.Errorf("audit after the end: %q", out)
	}
	if code, _, errOut := f.server(rootSecret, "audit", "--thread", "nope"); code != 1 || !strings.Contains(errOut, "no thread nope in the server") {
		t.Errorf("audit of an unknown thread: %d %s", code, errOut)
	}
}
