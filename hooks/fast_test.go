package hooks_test

import (
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hooks"
	"github.com/tollgate-ai/tollgate/internal/storetest"
)

// record is what a session's thread holds after its calls: the messages,
// the audit entries and the calls' records, with the times left out.
type record struct {
	Status   checkpoint.ThreadStatus
	RunID    string
	Messages []any
	Events   []string
	Calls    []string
}

// dropTimes removes the keys that hold times, at every depth.
func dropTimes(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if k == "created_at" || k == "started_at" || k == "ended_at" {
				delete(v, k)
				continue
			}
			v[k] = dropTimes(x)
		}
	case []any:
		for i, x := range v {
			v[i] = dropTimes(x)
		}
	}
	return v
}

func recordOf(t *testing.T, store checkpoint.Store, thread string) record {
	t.Helper()
	ctx := context.Background()
	th, err := store.LoadThread(ctx, thread)
	if err != nil {
		t.Fatal(err)
	}
	r := record{Status: th.Status, RunID: th.RunID}
	var msgs []any
	if err := json.Unmarshal(th.Messages, &msgs); err != nil {
		t.Fatal(err)
	}
	r.Messages = dropTimes(msgs).([]any)
	evs, err := store.ListEvents(ctx, thread, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]bool{}
	for _, e := range evs {
		r.Events = append(r.Events, e.RunID+" "+e.Type+" "+string(e.Data))
		runs[e.RunID] = true
	}
	for run := range runs {
		recs, err := store.ListToolCalls(ctx, thread, run)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			var res any
			_ = json.Unmarshal(rec.Result, &res)
			out, _ := json.Marshal(dropTimes(res))
			r.Calls = append(r.Calls, rec.RunID+" "+rec.CallID+" "+rec.Tool+" "+string(rec.State)+" "+string(rec.Args)+" "+string(out))
		}
	}
	sort.Strings(r.Calls)
	return r
}

// idle waits for the thread's last run (the one of call) to end: a
// host's run answers the hook before it writes the call's result.
func idle(t *testing.T, store checkpoint.Store, thread string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		th, err := store.LoadThread(context.Background(), thread)
		if err == nil && th.Status == checkpoint.ThreadIdle {
			var msgs []json.RawMessage
			_ = json.Unmarshal(th.Messages, &msgs)
			if len(msgs) == n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %s: not idle with %d messages", thread, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A call the policy allows at once is decided in one commit, without a
// run of the host; what that commit writes — the thread's messages, the
// audit entries, the call's record and what the agent is told — is what
// the host's run of the call writes, so the page, threads show, the audit
// log, a hook sent again and a PostToolUse read it alike.
func TestFastPathIsTheHostsRun(t *testing.T) {
	t.Parallel()
	calls := []struct {
		id, tool string
		input    any
		opts     *hooks.CallOptions
	}{
		{"toolu_1", "Bash", bash("echo '<b> && </b>'"), nil},
		{"toolu_2", "Write", map[string]any{"file_path": "/home/me/p/a.go", "content": "package a\n// <b>&</b>\n"}, nil},
		{"toolu_3", "Bash", bash("cat a"), &hooks.CallOptions{Confine: &hooks.Confine{Exe: "/opt/tg/tollgate", Enforced: true}}},
		{"toolu_4", "Bash", map[string]any{"description": "x", "command": "echo   hi"}, &hooks.CallOptions{Wait: time.Minute}},
	}
	run := func(slow bool) (record, []answer, int64) {
		store := storetest.New(t)
		f := startFixture(t, store)
		t.Cleanup(func() {
			f.svc.Shutdown()
			f.host.Shutdown(context.Background())
		})
		if slow {
			hooks.SlowOnly(f.svc)
		}
		var answers []answer
		for i, c := range calls {
			answers = append(answers, f.handle(t, hooks.ClaudeCode, pre("same", c.id, c.tool, c.input), c.opts))
			idle(t, store, "claude-code:same", 4*(i+1))
		}
		// Sent again: the same answer, read from the store.
		answers = append(answers, f.handle(t, hooks.ClaudeCode, pre("same", "toolu_3", "Bash", bash("cat a")), calls[2].opts))
		th, _ := store.LoadThread(context.Background(), "claude-code:same")
		return recordOf(t, store, "claude-code:same"), answers, th.Version
	}
	hostRun, hostAnswers, hostVersion := run(true)
	fast, fastAnswers, fastVersion := run(false)
	if !reflect.DeepEqual(fastAnswers, hostAnswers) {
		t.Errorf("the agent was told\n%+v\nby the fast path, and\n%+v\nby the host's runs", fastAnswers, hostAnswers)
	}
	if !reflect.DeepEqual(fast, hostRun) {
		a, _ := json.MarshalIndent(fast, "", " ")
		b, _ := json.MarshalIndent(hostRun, "", " ")
		t.Errorf("the fast path wrote\n%s\nthe host's runs\n%s", a, b)
	}
	// One commit a call, where the host's run makes four.
	if fastVersion != int64(len(calls)) || hostVersion != 4*int64(len(calls)) {
		t.Errorf("thread versions: %d with the fast path, %d with the host's runs; want %d and %d", fastVersion, hostVersion, len(calls), 4*len(calls))
	}
}

// Another process (a replica behind the same store) that writes the
// session's thread makes this one's known version stale: its next
// allowed call loses the compare-and-set, writes nothing, and goes the
// host's way, which reads the thread — and the call after is fast again.
// A call sent again to the other process is answered from the first's
// record, not run twice.
func TestFastPathAcrossProcesses(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	a, b := twoProcesses(t, store)
	const thread = "claude-code:two"
	version := func() int64 {
		th, err := store.LoadThread(context.Background(), thread)
		if err != nil {
			t.Fatal(err)
		}
		return th.Version
	}
	for i, step := range []struct {
		f    *fixture
		id   string
		want int64 // the thread's version after the call
	}{
		{a, "toolu_1", 1},  // a creates the thread
		{b, "toolu_2", 2},  // b reads it (first call of the session there)
		{a, "toolu_3", 6},  // stale on a: the host's run, four commits
		{a, "toolu_4", 7},  // a knows it again
		{b, "toolu_5", 11}, // stale on b
		{b, "toolu_6", 12},
	} {
		if got := step.f.handle(t, hooks.ClaudeCode, pre("two", step.id, "Bash", bash("ls")), nil); got.Decision != "allow" {
			t.Fatalf("call %d: %+v", i, got)
		}
		idle(t, store, thread, 4*(i+1))
		if v := version(); v != step.want {
			t.Errorf("after call %s: version %d, want %d", step.id, v, step.want)
		}
	}
	// toolu_4, decided on a, sent again to b, which knows the thread at
	// the version after it.
	if got := b.handle(t, hooks.ClaudeCode, pre("two", "toolu_4", "Bash", bash("ls")), nil); got.Decision != "allow" {
		t.Fatalf("sent again: %+v", got)
	}
	time.Sleep(50 * time.Millisecond)
	if v := version(); v != 12 {
		t.Errorf("a call sent again was written again: version %d, want 12", v)
	}
}

// A call another process decided, sent again to one that has since read
// the session's thread (its version is current there), is answered from
// that record and not written again.
func TestFastPathCallDecidedElsewhere(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	a, b := twoProcesses(t, store)
	const thread = "claude-code:elsewhere"
	call := func(f *fixture, id, cmd, want string, msgs int) {
		t.Helper()
		if got := f.handle(t, hooks.ClaudeCode, pre("elsewhere", id, "Bash", bash(cmd)), nil); got.Decision != want {
			t.Fatalf("call %s: %+v", id, got)
		}
		idle(t, store, thread, msgs)
	}
	call(b, "toolu_1", "ls", "allow", 4)  // b knows the session from its start
	call(a, "toolu_2", "ls", "allow", 8)  // decided on a
	call(b, "toolu_3", "dd", "deny", 12)  // b's host runs it
	call(b, "toolu_4", "ls", "allow", 16) // b reads the thread: toolu_2 is in it
	th, _ := store.LoadThread(context.Background(), thread)
	call(b, "toolu_2", "ls", "allow", 16) // sent again to b
	if again, _ := store.LoadThread(context.Background(), thread); again.Version != th.Version {
		t.Errorf("the call decided on a was written again on b: version %d, then %d", th.Version, again.Version)
	}
}

// twoProcesses are two services and hosts on one store (two replicas),
// stopped at the test's end.
func twoProcesses(t *testing.T, store checkpoint.Store) (a, b *fixture) {
	t.Helper()
	a, b = startFixture(t, store), startFixture(t, store)
	t.Cleanup(func() {
		for _, f := range []*fixture{a, b} {
			f.svc.Shutdown()
			f.host.Shutdown(context.Background())
		}
	})
	return a, b
}
