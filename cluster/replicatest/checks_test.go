package replicatest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fixture is what the checks read of one job, as a run that went right
// leaves it.
type fixture struct {
	j       *job
	th      apiThread
	q       apiQuestion
	events  []apiEvent
	logged  []logLine
	callsOf map[[2]int][]modelCall
}

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func event(typ string, data map[string]any) apiEvent {
	b, _ := json.Marshal(data)
	return apiEvent{Type: typ, Data: b, At: apiTime{t0}}
}

func goodFixture(p plan) *fixture {
	const n = 7
	j := &job{n: n, thread: "job-7", replica: 2, plan: p, answeredOn: 3}
	fx := &fixture{j: j,
		th: apiThread{ID: j.thread, Status: "idle", RunState: "idle",
			Messages: []apiMessage{{Role: "user", Text: "job 7"}, {Role: "assistant", Text: "done job 7"}}},
		callsOf: map[[2]int][]modelCall{
			{n, 1}: {{Replica: 2, Job: n, Turn: 1, Start: t0.Add(-time.Second)}},
			{n, 2}: {{Replica: 3, Job: n, Turn: 2, Start: t0.Add(100 * time.Millisecond)}},
		},
	}
	resolution := map[string]any{"question_id": j.questionID(), "call_id": callID(n), "status": "answered", "by": "dev"}
	result := map[string]any{"call_id": callID(n), "tool": "bash", "is_error": false}
	switch p {
	case approve:
		fx.q = apiQuestion{ThreadID: j.thread, ID: j.questionID(), Status: "answered", Answer: json.RawMessage(`{"decision":"approve"}`), AnsweredBy: "dev", ResolvedAt: apiTime{t0}}
		resolution["decision"] = "approve"
		fx.logged = []logLine{{n: n, at: t0.Add(40 * time.Millisecond)}}
	case deny:
		fx.q = apiQuestion{ThreadID: j.thread, ID: j.questionID(), Status: "answered", Answer: json.RawMessage(`{"decision":"deny","reason":"no"}`), AnsweredBy: "dev", ResolvedAt: apiTime{t0}}
		resolution["decision"] = "deny"
		result["is_error"], result["reason"] = true, "denied by dev: no"
	case leave:
		fx.q = apiQuestion{ThreadID: j.thread, ID: j.questionID(), Status: "timed_out", AnsweredBy: "timeout", ResolvedAt: apiTime{t0}}
		resolution["status"], resolution["by"] = "timed_out", "timeout"
		result["is_error"], result["reason"] = true, "approval_timeout"
	}
	fx.events = []apiEvent{
		event("run_started", map[string]any{"prompt": "job 7"}),
		event("question_asked", map[string]any{"question_id": j.questionID()}),
		event("run_parked", map[string]any{"questions": []string{j.questionID()}}),
		event("question_resolved", resolution),
		event("tool_result", result),
		event("run_finished", map[string]any{"stop_reason": "end_turn"}),
	}
	return fx
}

func (fx *fixture) check(killedAt time.Time) *report {
	rep := &report{}
	checkJob(rep, fx.j, &fx.th, &fx.q, nil, fx.events, fx.logged, fx.callsOf, killedAt)
	return rep
}

func (rep *report) violations() map[string]int {
	v := map[string]int{}
	for _, k := range rep.kinds(true) {
		if len(k.list) > 0 {
			v[k.key] = len(k.list)
		}
	}
	return v
}

// TestChecksCatch shows that each check of TestReplicas fails when what it
// checks goes wrong, and that a job that went right passes them all.
func TestChecksCatch(t *testing.T) {
	killedAt := t0.Add(50 * time.Millisecond)
	for _, p := range []plan{approve, deny, leave} {
		if v := goodFixture(p).check(killedAt).violations(); len(v) > 0 {
			t.Errorf("a %v job that went right: %v", p, v)
		}
	}
	for _, c := range []struct {
		name   string
		plan   plan
		mutate func(fx *fixture)
		want   string // the check that must fail
	}{
		{"thread still running", approve, func(fx *fixture) { fx.th.Status = "running" }, "unfinished"},
		{"no final text", approve, func(fx *fixture) { fx.th.Messages = fx.th.Messages[:1] }, "unfinished"},
		{"finished twice", approve, func(fx *fixture) { fx.events = append(fx.events, event("run_finished", nil)) }, "unfinished"},
		{"no turn 2", approve, func(fx *fixture) { delete(fx.callsOf, [2]int{7, 2}) }, "unfinished"},
		{"a failed driver", approve, func(fx *fixture) {
			fx.events = append(fx.events, event("run_finished", map[string]any{"error": "agent: the tool call was claimed by another driver of this run"}))
		}, "failedRuns"},
		{"question pending", approve, func(fx *fixture) { fx.q.Status = "pending" }, "lost"},
		{"resolved twice", approve, func(fx *fixture) { fx.events = append(fx.events, fx.events[3]) }, "lost"},
		{"no resolution entry", deny, func(fx *fixture) { fx.events = append(fx.events[:3], fx.events[4:]...) }, "lost"},
		{"answered otherwise", approve, func(fx *fixture) { fx.q.Answer = json.RawMessage(`{"decision":"deny"}`) }, "lost"},
		{"ran twice", approve, func(fx *fixture) { fx.logged = append(fx.logged, fx.logged[0]) }, "twice"},
		{"two results", approve, func(fx *fixture) { fx.events = append(fx.events, fx.events[4]) }, "twice"},
		{"ran though denied", deny, func(fx *fixture) { fx.logged = []logLine{{n: 7, at: t0}} }, "unapproved"},
		{"ran though timed out", leave, func(fx *fixture) { fx.logged = []logLine{{n: 7, at: t0}} }, "unapproved"},
		{"deadline never fired", leave, func(fx *fixture) { fx.q.Status = "pending" }, "deadlines"},
		{"deadline fired twice", leave, func(fx *fixture) { fx.events = append(fx.events, fx.events[3]) }, "deadlines"},
		{"answered instead of timing out", leave, func(fx *fixture) { fx.q.Status = "answered" }, "deadlines"},
		{"timed out before its answer", approve, func(fx *fixture) { fx.q.Status, fx.q.AnsweredBy = "timed_out", "timeout" }, "deadlines"},
		{"a turn's model call twice", approve, func(fx *fixture) {
			k := [2]int{7, 2}
			fx.callsOf[k] = append(fx.callsOf[k], modelCall{Replica: 2, Job: 7, Turn: 2, Start: t0.Add(time.Second)})
		}, "dupForbidden"},
		{"a call again long after the kill's window", approve, func(fx *fixture) {
			k := [2]int{7, 1}
			fx.callsOf[k] = []modelCall{{Replica: 1, Start: killedAt.Add(-time.Minute)}, {Replica: 2, Start: killedAt.Add(time.Second)}}
		}, "dupForbidden"},
		{"approved, neither run nor cut off", approve, func(fx *fixture) { fx.logged = nil }, "notRun"},
		{"approved, an error", approve, func(fx *fixture) {
			fx.events[4] = event("tool_result", map[string]any{"call_id": callID(7), "is_error": true, "reason": "boom"})
		}, "badResult"},
		{"denied, no error", deny, func(fx *fixture) {
			fx.events[4] = event("tool_result", map[string]any{"call_id": callID(7), "is_error": false})
		}, "badResult"},
	} {
		fx := goodFixture(c.plan)
		c.mutate(fx)
		if v := fx.check(killedAt).violations(); v[c.want] == 0 {
			t.Errorf("%s: the %s check did not fail (%v)", c.name, c.want, v)
		}
	}

	// What the rescue legitimately repeats and cuts off is reported, not
	// failed.
	fx := goodFixture(approve)
	k := [2]int{7, 2}
	fx.callsOf[k] = []modelCall{{Replica: 1, Start: killedAt.Add(-10 * time.Millisecond)}, {Replica: 3, Start: killedAt.Add(5 * time.Second)}}
	fx.logged = nil
	fx.events[4] = event("tool_result", map[string]any{"call_id": callID(7), "is_error": true,
		"reason": `The outcome of this call is unknown: tool "bash" was executing when the run was interrupted, and it is not run again because it is not idempotent.`})
	rep := fx.check(killedAt)
	if v := rep.violations(); len(v) > 0 || len(rep.dupAllowed) != 1 || len(rep.cutOff) != 1 {
		t.Errorf("a rescued run: violations %v, allowed duplicates %v, cut off %v", v, rep.dupAllowed, rep.cutOff)
	}
	fx = goodFixture(approve)
	fx.events = append(fx.events, event("run_finished", map[string]any{"error": "agent: run stopped: context canceled"}))
	if rep := fx.check(killedAt); len(rep.violations()) > 0 || len(rep.interrupted) != 1 {
		t.Errorf("a run cut off by a shutdown: violations %v, interrupted %v", rep.violations(), rep.interrupted)
	}

	// The tool's log: a line no job wrote is found.
	path := filepath.Join(t.TempDir(), logFile)
	os.WriteFile(path, []byte("job-3 1772355600.123456\nsomething else\n"), 0o644)
	lines, bad, err := readLog(path)
	if err != nil || len(lines) != 1 || lines[0].n != 3 || lines[0].at.UnixMicro() != 1772355600123456 || len(bad) != 1 {
		t.Errorf("readLog: %v %v %v", lines, bad, err)
	}
}
