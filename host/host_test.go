package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/storetest"
	"github.com/tollgate-ai/tollgate/interrupt"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

type cmdArgs struct {
	Cmd string `json:"cmd" jsonschema:"the command"`
}

// fakeShell is a "bash" tool that records what it ran instead of running it.
type fakeShell struct {
	mu   sync.Mutex
	ran  []string
	gate chan struct{} // when set, each run waits for a receive on it
}

func (f *fakeShell) tool() *agent.Tool {
	return agent.NewTool("bash", "Run a command.", func(ctx context.Context, a cmdArgs) (string, error) {
		if f.gate != nil {
			select {
			case <-f.gate:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		f.mu.Lock()
		f.ran = append(f.ran, a.Cmd)
		f.mu.Unlock()
		return "ran " + a.Cmd, nil
	}, nil)
}

func (f *fakeShell) runs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ran...)
}

// testPolicy allows ls, blocks "rm -rf /", asks for the rest (with the
// given timeout), and blocks edits to anything containing "sudo".
func testPolicy(timeout time.Duration) hitl.Policy {
	return hitl.Typed(func(ctx context.Context, c *hitl.PolicyContext, a cmdArgs) hitl.ApprovalDecision {
		switch {
		case strings.HasPrefix(a.Cmd, "ls"):
			return hitl.Approve()
		case a.Cmd == "rm -rf /", strings.Contains(a.Cmd, "sudo"):
			return hitl.Deny("destructive")
		}
		return hitl.AskUser(hitl.AskOptions{Timeout: timeout, Details: map[string]any{"matched_rule": "ask", "impact": "changes files"}})
	})
}

type fixture struct {
	store checkpoint.Store
	shell *fakeShell
	cfg   host.Config
}

func newFixture(t *testing.T, store checkpoint.Store, timeout time.Duration, clk clock.Clock) *fixture {
	t.Helper()
	if store == nil {
		store = storetest.New(t)
	}
	f := &fixture{store: store, shell: &fakeShell{}}
	f.cfg = host.Config{
		Store: store,
		Clock: clk,
		Agent: agent.Config{
			Provider:   scripted.Demo{},
			Tools:      []*agent.Tool{f.shell.tool()},
			Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(store, "", nil), testPolicy(timeout))},
		},
	}
	return f
}

func (f *fixture) start(t *testing.T) *host.Host {
	t.Helper()
	h, err := host.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Shutdown(ctx)
	})
	return h
}

// eventually polls cond until it holds, failing after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (f *fixture) thread(t *testing.T, id string) (*checkpoint.Thread, []agent.Message) {
	t.Helper()
	th, err := f.store.LoadThread(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []agent.Message
	if err := json.Unmarshal(th.Messages, &msgs); err != nil {
		t.Fatal(err)
	}
	return th, msgs
}

func (f *fixture) idle(t *testing.T, id string) func() bool {
	return func() bool {
		th, err := f.store.LoadThread(context.Background(), id)
		return err == nil && th.Status == checkpoint.ThreadIdle
	}
}

func (f *fixture) pending(t *testing.T, thread string) []*checkpoint.Question {
	t.Helper()
	qs, _, err := f.store.ListQuestions(context.Background(), checkpoint.QuestionFilter{ThreadID: thread, Status: checkpoint.QuestionPending})
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

func (f *fixture) waitPending(t *testing.T, thread string, n int) []*checkpoint.Question {
	t.Helper()
	var qs []*checkpoint.Question
	eventually(t, fmt.Sprintf("%d pending questions on %s", n, thread), func() bool {
		qs = f.pending(t, thread)
		return len(qs) >= n
	})
	return qs
}

// promptParked posts text to thread and waits until its run has parked on
// n questions, which it returns.
func (f *fixture) promptParked(t *testing.T, h *host.Host, thread, text string, n int) []*checkpoint.Question {
	t.Helper()
	if _, _, err := h.Prompt(context.Background(), thread, text, nil); err != nil {
		t.Fatal(err)
	}
	qs := f.waitPending(t, thread, n)
	eventually(t, "the run to park", func() bool {
		th, err := f.store.LoadThread(context.Background(), thread)
		if err != nil {
			return false
		}
		st, _ := h.State(th)
		return st == host.RunParked
	})
	return qs
}

func lastText(msgs []agent.Message) string { return msgs[len(msgs)-1].Text }

func TestAllowedRunCompletes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, 0, nil)
	h := f.start(t)
	runID, existing, err := h.Prompt(context.Background(), "t1", "$ ls", nil)
	if err != nil || existing || runID == "" {
		t.Fatalf("Prompt = %q, %v, %v", runID, existing, err)
	}
	eventually(t, "the run to end", f.idle(t, "t1"))
	if got := f.shell.runs(); len(got) != 1 || got[0] != "ls" {
		t.Fatalf("ran %v", got)
	}
}

func TestAskedCallParksAndResumesOnAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, 0, nil)
	h := f.start(t)
	qs := f.promptParked(t, h, "t1", "$ ls\n$ touch x", 1)
	th, _ := f.thread(t, "t1")
	if st, _ := h.State(th); st != host.RunParked {
		t.Fatalf("state %s, want parked", st)
	}
	if got := f.shell.runs(); len(got) != 1 || got[0] != "ls" {
		t.Fatalf("before the answer ran %v, want only the allowed ls", got)
	}
	if _, _, err := h.Prompt(context.Background(), "t1", "$ ls", nil); !errors.Is(err, host.ErrRunActive) {
		t.Fatalf("Prompt on a parked thread = %v, want ErrRunActive", err)
	}
	q := qs[0]
	if q.Tool != "bash" {
		t.Errorf("question tool %q, want bash", q.Tool)
	}
	ans, _ := json.Marshal(hitl.ApproveAnswer{Decision: "approve", Digest: q.Digest})
	resolved, err := h.Answer(context.Background(), "t1", q.ID, ans, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if resolved.AnsweredBy != "alice" || resolved.Status != checkpoint.QuestionAnswered {
		t.Fatalf("resolved %+v", resolved)
	}
	eventually(t, "the run to end", f.idle(t, "t1"))
	if got := f.shell.runs(); len(got) != 2 || got[1] != "touch x" {
		t.Fatalf("ran %v", got)
	}
	if _, err := h.Answer(context.Background(), "t1", q.ID, ans, "bob"); !errors.Is(err, hitl.ErrAlreadyAnswered) {
		t.Fatalf("second answer = %v, want ErrAlreadyAnswered", err)
	}
	var types []string
	var joined string
	// run_finished commits with the thread going idle; idle was seen.
	eventually(t, "run_finished in the audit log", func() bool {
		events, _ := f.store.ListEvents(context.Background(), "t1", 0, 100)
		types = types[:0]
		for _, e := range events {
			types = append(types, e.Type)
		}
		joined = strings.Join(types, " ")
		return strings.Contains(joined, "run_finished")
	})
	// Each entry as often as its change happened (ls, allowed, and the
	// question about touch come in either order: the calls run at once).
	counts := map[string]int{}
	for _, typ := range types {
		counts[typ]++
	}
	want := map[string]int{"run_started": 1, "question_asked": 1, "run_parked": 1, "question_resolved": 1, "tool_result": 2, "run_finished": 1}
	if !maps.Equal(counts, want) || types[0] != "run_started" || types[len(types)-1] != "run_finished" {
		t.Errorf("audit log %v: want, from run_started to run_finished, %v", types, want)
	}
}

func TestAnswerFromAnotherProcessResumes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, 0, nil)
	h := f.start(t)
	q := f.promptParked(t, h, "t1", "$ touch x", 1)[0]
	// Another process: a plain channel over the same store, no host.
	other := hitl.NewCheckpointedChannel(f.store, "t1", nil)
	if err := other.Answer(context.Background(), q.ID, hitl.ApproveAnswer{Decision: "deny", Reason: "not today"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to end", f.idle(t, "t1"))
	_, msgs := f.thread(t, "t1")
	if !strings.Contains(lastText(msgs), "not today") {
		t.Fatalf("final message %q does not give the reason", lastText(msgs))
	}
	if got := f.shell.runs(); len(got) != 0 {
		t.Fatalf("a denied call ran: %v", got)
	}
}

func TestDeadlineFiresWithoutAWaitingRun(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	f := newFixture(t, nil, time.Minute, clk)
	h := f.start(t)
	q := f.promptParked(t, h, "t1", "$ touch x", 1)[0]
	clk.Advance(59 * time.Second)
	time.Sleep(20 * time.Millisecond)
	if got, _ := f.store.GetQuestion(context.Background(), "t1", q.ID); got.Status != checkpoint.QuestionPending {
		t.Fatalf("status %s before the deadline", got.Status)
	}
	clk.Advance(time.Second)
	eventually(t, "the timeout to be recorded", func() bool {
		got, _ := f.store.GetQuestion(context.Background(), "t1", q.ID)
		return got.Status == checkpoint.QuestionTimedOut
	})
	eventually(t, "the run to end", f.idle(t, "t1"))
	_, msgs := f.thread(t, "t1")
	var res *agent.ToolResult
	for _, m := range msgs {
		if m.Role == agent.RoleTool {
			res = m.Result
		}
	}
	if res == nil || !res.IsError || res.Details["hitl"].(map[string]any)["decision"] != "timed_out" {
		t.Fatalf("result %+v, want a timed_out block", res)
	}
	ans, _ := json.Marshal(hitl.ApproveAnswer{Decision: "approve"})
	if _, err := h.Answer(context.Background(), "t1", q.ID, ans, "late"); !errors.Is(err, hitl.ErrExpired) {
		t.Fatalf("late answer = %v, want ErrExpired", err)
	}
}

func TestInvalidEditIsRefusedAndTheQuestionStaysOpen(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, 0, nil)
	h := f.start(t)
	q := f.promptParked(t, h, "t1", "$ touch x", 1)[0]

	schemaBad := json.RawMessage(`{"decision":"edit","edited_args":{"cmd":7,"extra":true}}`)
	_, err := h.Answer(context.Background(), "t1", q.ID, schemaBad, "alice")
	var ve *agent.ValidationError
	if !errors.Is(err, hitl.ErrInvalidAnswer) || !errors.As(err, &ve) || len(ve.Problems) < 2 {
		t.Fatalf("schema-bad edit = %v, want ErrInvalidAnswer listing every problem", err)
	}
	policyBad := json.RawMessage(`{"decision":"edit","edited_args":{"cmd":"sudo touch x"}}`)
	if _, err := h.Answer(context.Background(), "t1", q.ID, policyBad, "alice"); !errors.Is(err, hitl.ErrInvalidAnswer) || !strings.Contains(err.Error(), "destructive") {
		t.Fatalf("policy-denied edit = %v, want ErrInvalidAnswer with the policy's reason", err)
	}
	if got, _ := f.store.GetQuestion(context.Background(), "t1", q.ID); got.Status != checkpoint.QuestionPending {
		t.Fatalf("question %s after refused edits, want pending", got.Status)
	}
	wrongDigest := json.RawMessage(`{"decision":"approve","digest":"sha256:00"}`)
	if _, err := h.Answer(context.Background(), "t1", q.ID, wrongDigest, "alice"); !errors.Is(err, hitl.ErrDigestMismatch) {
		t.Fatalf("wrong digest = %v", err)
	}
	good := json.RawMessage(`{"decision":"edit","edited_args":{"cmd":"touch y"}}`)
	if _, err := h.Answer(context.Background(), "t1", q.ID, good, "alice"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to end", f.idle(t, "t1"))
	if got := f.shell.runs(); len(got) != 1 || got[0] != "touch y" {
		t.Fatalf("ran %v, want the edited command", got)
	}
}

func TestIdempotencyKeyReturnsTheSameRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, 0, nil)
	h := f.start(t)
	opts := &host.PromptOptions{IdempotencyKey: "req-1"}
	first, existing, err := h.Prompt(context.Background(), "t1", "$ touch x", opts)
	if err != nil || existing {
		t.Fatal(first, existing, err)
	}
	again, existing, err := h.Prompt(context.Background(), "t1", "$ touch x", opts)
	if err != nil || !existing || again != first {
		t.Fatalf("retry = %q, %v, %v; want %q, existing", again, existing, err, first)
	}
	q := f.waitPending(t, "t1", 1)[0]
	ans, _ := json.Marshal(hitl.ApproveAnswer{Decision: "approve"})
	if _, err := h.Answer(context.Background(), "t1", q.ID, ans, "a"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to end", f.idle(t, "t1"))
	// After the run ended, the same key still names the same run.
	again, existing, err = h.Prompt(context.Background(), "t1", "$ touch x", opts)
	if err != nil || !existing || again != first {
		t.Fatalf("retry after the end = %q, %v, %v", again, existing, err)
	}
	if got := f.shell.runs(); len(got) != 1 {
		t.Fatalf("ran %v, want once", got)
	}
}

func TestAbortParkedRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, 0, nil)
	h := f.start(t)
	f.promptParked(t, h, "t1", "$ touch a\n$ touch b", 2)
	if err := h.Abort(context.Background(), "t1", "user closed tab"); err != nil {
		t.Fatal(err)
	}
	th, msgs := f.thread(t, "t1")
	if th.Status != checkpoint.ThreadIdle || msgs[len(msgs)-1].StopReason != agent.StopAborted {
		t.Fatalf("after abort: %s, last %+v", th.Status, msgs[len(msgs)-1])
	}
	if len(f.pending(t, "t1")) != 0 {
		t.Fatal("questions still pending after abort")
	}
	if h.Stats().Parked != 0 {
		t.Fatalf("stats %+v after abort", h.Stats())
	}
	// The thread takes a new message.
	if _, _, err := h.Prompt(context.Background(), "t1", "$ ls", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new run to end", f.idle(t, "t1"))
}

func TestRunActiveWhileRunning(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, 0, nil)
	f.shell.gate = make(chan struct{})
	h := f.start(t)
	if _, _, err := h.Prompt(context.Background(), "t1", "$ ls", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.Prompt(context.Background(), "t1", "$ ls", nil); !errors.Is(err, host.ErrRunActive) {
		t.Fatalf("second Prompt = %v, want ErrRunActive", err)
	}
	close(f.shell.gate)
	eventually(t, "the run to end", f.idle(t, "t1"))
}

func TestRestartResumesUnfinishedRunsAndKeepsParkedOnes(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	f := newFixture(t, store, 0, nil)
	h1, err := host.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := h1.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h1.Prompt(context.Background(), "waits", "$ touch x", nil); err != nil {
		t.Fatal(err)
	}
	f.waitPending(t, "waits", 1)
	eventually(t, "the run to park", func() bool { return h1.Stats().Parked == 1 })
	stats, err := h1.Shutdown(context.Background())
	if err != nil || stats.Parked != 1 {
		t.Fatalf("Shutdown = %+v, %v", stats, err)
	}
	// A crash mid-run: a thread left running with its call approved by the
	// policy but not yet executed (the model's message is stored, no result).
	crashed, _ := agent.New(agent.Config{Provider: scripted.Demo{}, Checkpointer: store, ThreadID: "crashed",
		Tools: []*agent.Tool{agent.NewTool("bash", "x", func(ctx context.Context, a cmdArgs) (string, error) {
			return "", errors.New("crash")
		}, nil)},
		Middleware: []agent.Middleware{agent.BeforeToolFunc(func(ctx context.Context, c *agent.ToolCallContext) (agent.Decision, error) {
			return agent.Decision{}, fmt.Errorf("%w: simulated crash before the tool", agent.ErrQuestion)
		})}})
	if _, err := crashed.Prompt(context.Background(), "$ ls"); err == nil {
		t.Fatal("the simulated crash did not stop the run")
	}

	h2 := f.start(t)
	eventually(t, "the crashed run to be resumed and end", f.idle(t, "crashed"))
	if got := f.shell.runs(); len(got) != 1 || got[0] != "ls" {
		t.Fatalf("ran %v, want the crashed run's ls", got)
	}
	if h2.Stats().Parked != 1 {
		t.Fatalf("stats %+v, want the waiting run parked", h2.Stats())
	}
	q := f.pending(t, "waits")[0]
	ans, _ := json.Marshal(hitl.ApproveAnswer{Decision: "approve"})
	if _, err := h2.Answer(context.Background(), "waits", q.ID, ans, "a"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the parked run to end", f.idle(t, "waits"))
}

func TestManyParkedRunsHoldNoGoroutines(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	// Not parallel: it counts every goroutine of the process, and the
	// other tests' runs would be counted too.
	f := newFixture(t, nil, 0, nil)
	h := f.start(t)
	before := runtime.NumGoroutine()
	const n = 300
	for i := range n {
		if _, _, err := h.Prompt(context.Background(), fmt.Sprintf("t%03d", i), "$ touch x", nil); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "every run to park", func() bool { return h.Stats().Parked == n && h.Stats().Active == 0 })
	time.Sleep(50 * time.Millisecond) // let exiting goroutines finish
	if after := runtime.NumGoroutine(); after > before+20 {
		t.Fatalf("%d goroutines with %d parked runs, %d before: parked runs must hold none", after, n, before)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	if _, err := host.New(host.Config{}); err == nil {
		t.Fatal("no store accepted")
	}
	if _, err := host.New(host.Config{Store: storetest.New(t)}); err == nil {
		t.Fatal("no provider accepted")
	}
	tool := (&fakeShell{}).tool()
	if _, err := host.New(host.Config{Store: storetest.New(t), Agent: agent.Config{Provider: scripted.Demo{}, Tools: []*agent.Tool{tool, tool}}}); err == nil {
		t.Fatal("two tools of one name accepted")
	}
}

func TestAbortRacingAnAnswerRunsNothingItCloses(t *testing.T) {
	t.Parallel()
	for i := range 20 {
		f := newFixture(t, nil, 0, nil)
		f.shell.gate = make(chan struct{})
		h := f.start(t)
		thread := fmt.Sprintf("r%d", i)
		qs := f.promptParked(t, h, thread, "$ touch a\n$ touch b", 2)
		ans, _ := json.Marshal(hitl.ApproveAnswer{Decision: "approve"})
		if _, err := h.Answer(context.Background(), thread, qs[0].ID, ans, "a"); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); h.Abort(context.Background(), thread, "closed") }()
		go func() { defer wg.Done(); h.Answer(context.Background(), thread, qs[1].ID, ans, "b") }()
		wg.Wait()
		close(f.shell.gate)
		eventually(t, "the thread to settle", func() bool {
			th, err := f.store.LoadThread(context.Background(), thread)
			st, _ := h.State(th)
			return err == nil && th.Status == checkpoint.ThreadIdle && st == host.RunIdle && h.Stats().Active == 0
		})
		_, msgs := f.thread(t, thread)
		ran := map[string]bool{}
		for _, c := range f.shell.runs() {
			ran[c] = true
		}
		for _, m := range msgs {
			if m.Role != agent.RoleTool {
				continue
			}
			var cmd string
			for _, mm := range msgs {
				for _, c := range mm.ToolCalls {
					if c.ID == m.Result.CallID {
						var a cmdArgs
						json.Unmarshal(c.Arguments, &a)
						cmd = a.Cmd
					}
				}
			}
			if ran[cmd] && strings.HasPrefix(m.Result.Content, "Tool call aborted") {
				t.Fatalf("round %d: %q ran but its result says it was aborted", i, cmd)
			}
		}
		if ran["touch b"] && ran["touch a"] && msgs[len(msgs)-1].StopReason == agent.StopAborted {
			t.Fatalf("round %d: both calls ran in an aborted run: %v", i, f.shell.runs())
		}
	}
}

func TestToolInterruptEditIsReadAsTheRunReadsIt(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	shell := &fakeShell{}
	noRm := hitl.Typed(func(ctx context.Context, c *hitl.PolicyContext, a cmdArgs) hitl.ApprovalDecision {
		if strings.Contains(a.Cmd, "rm") {
			return hitl.Deny("no rm")
		}
		return hitl.Approve()
	})
	mw, err := interrupt.New(interrupt.Rule{Tool: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(host.Config{Store: store, Agent: agent.Config{Provider: scripted.Demo{}, Tools: []*agent.Tool{shell.tool()},
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(store, "", nil), noRm), mw}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	f := &fixture{store: store, shell: shell}
	q := f.promptParked(t, h, "t1", "$ ls", 1)[0]
	for _, answer := range []string{
		`{"action":"edit","arguments":{"cmd":"rm -rf /"}}`,
		`{"action":"edit","arguments":{"cmd":"rm -rf /"},"Action":"approve"}`,
		`{"Action":"approve","action":"edit","arguments":{"cmd":"rm -rf /"}}`,
	} {
		if _, err := h.Answer(context.Background(), "t1", q.ID, json.RawMessage(answer), "x"); !errors.Is(err, hitl.ErrInvalidAnswer) {
			t.Fatalf("answer %s = %v, want the policy's refusal", answer, err)
		}
	}
	if got := shell.runs(); len(got) != 0 {
		t.Fatalf("ran %v", got)
	}
}

// The two seeds' answer semantics hold for parked runs: an approved
// approve question passes through with no hitl details (seed 003), and a
// tool_interrupt edit replaces only the keys it names (seed 000).
func TestParkedRunsKeepTheSeedsAnswerSemantics(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, 0, nil)
	h := f.start(t)
	q := f.promptParked(t, h, "approve", "$ touch x", 1)[0]
	ans, _ := json.Marshal(hitl.ApproveAnswer{Decision: "approve", Digest: q.Digest})
	if _, err := h.Answer(context.Background(), "approve", q.ID, ans, "a"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the approved run to end", f.idle(t, "approve"))
	_, msgs := f.thread(t, "approve")
	for _, m := range msgs {
		if m.Role == agent.RoleTool && (m.Result.IsError || m.Result.Details["hitl"] != nil) {
			t.Fatalf("an approved call's result %+v carries hitl details or an error", m.Result)
		}
	}

	type twoArgs struct {
		Cmd  string `json:"cmd"`
		Note string `json:"note,omitempty"`
	}
	var ran []twoArgs
	var mu sync.Mutex
	tool := agent.NewTool("bash", "Run.", func(ctx context.Context, a twoArgs) (string, error) {
		mu.Lock()
		ran = append(ran, a)
		mu.Unlock()
		return "ok", nil
	}, nil)
	mw, err := interrupt.New(interrupt.Rule{Tool: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	store := storetest.New(t)
	model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "bash", twoArgs{Cmd: "ls", Note: "keep"})}}, scripted.Turn{Text: "done"})
	h2, err := host.New(host.Config{Store: store, Agent: agent.Config{Provider: model, Tools: []*agent.Tool{tool}, Middleware: []agent.Middleware{mw}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer h2.Shutdown(context.Background())
	f2 := &fixture{store: store}
	iq := f2.promptParked(t, h2, "t1", "go", 1)[0]
	if iq.ID != interrupt.ID("c1") || iq.Kind != interrupt.KindToolInterrupt {
		t.Fatalf("question %s of kind %s", iq.ID, iq.Kind)
	}
	if _, err := h2.Answer(context.Background(), "t1", iq.ID, json.RawMessage(`{"action":"edit","arguments":{"cmd":"pwd"}}`), "a"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the interrupted run to end", f2.idle(t, "t1"))
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 1 || ran[0] != (twoArgs{Cmd: "pwd", Note: "keep"}) {
		t.Fatalf("ran %+v, want the edit merged over the call's arguments", ran)
	}
}

// unreachable fails the first writes that claim a tool call with
// checkpoint.ErrUnavailable, as a store out of reach for a moment does.
type unreachable struct {
	checkpoint.Store
	mu   sync.Mutex
	left int
}

func (s *unreachable) Commit(ctx context.Context, b *checkpoint.Batch) (*checkpoint.Committed, error) {
	if len(b.ToolCalls) == 1 && b.ToolCalls[0].State == checkpoint.ToolCallExecuting {
		s.mu.Lock()
		fail := s.left > 0
		s.left--
		s.mu.Unlock()
		if fail {
			return nil, fmt.Errorf("connection refused: %w", checkpoint.ErrUnavailable)
		}
	}
	return s.Store.Commit(ctx, b)
}

// Issue 22 item 6: a run that stops because its store could not be
// reached is not left failed: the host goes on with it once the store is
// back (from what the store holds), and writes no run_finished for a
// stop that was no end.
func TestRunOutlastsTheStoreAway(t *testing.T) {
	t.Parallel()
	store := &unreachable{Store: storetest.New(t), left: 3}
	f := newFixture(t, store, 0, nil)
	h := f.start(t)
	if _, _, err := h.Prompt(context.Background(), "t1", "$ ls", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to end", f.idle(t, "t1"))
	if got := f.shell.runs(); len(got) != 1 || got[0] != "ls" {
		t.Errorf("ran %v, want ls once", got)
	}
	if s := h.Stats(); s.Failed != 0 {
		t.Errorf("stats %+v: a run left failed", s)
	}
	evs, err := store.ListEvents(context.Background(), "t1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == "run_finished" && strings.Contains(string(e.Data), `"error"`) {
			t.Errorf("run_finished with an error: %s", e.Data)
		}
	}
}

// questionReads counts GetQuestion.
type questionReads struct {
	checkpoint.Store
	mu    sync.Mutex
	reads int
}

func (s *questionReads) GetQuestion(ctx context.Context, thread, id string) (*checkpoint.Question, error) {
	s.mu.Lock()
	s.reads++
	s.mu.Unlock()
	return s.Store.GetQuestion(ctx, thread, id)
}

func (s *questionReads) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// An approval cycle reads its question once, where the answer is checked:
// asking it on a turn the store does not hold yet reads nothing, and the
// resumed run is handed the question the answer resolved.
func TestCycleReadsTheQuestionOnce(t *testing.T) {
	t.Parallel()
	store := &questionReads{Store: storetest.New(t)}
	f := newFixture(t, store, 0, nil)
	h := f.start(t)
	qs := f.promptParked(t, h, "t1", "$ echo hi", 1)
	if n := store.count(); n != 0 {
		t.Errorf("asking read the question %d times; nothing of the turn was stored", n)
	}
	var a hitl.ApproveAnswer
	a.Decision, a.Digest = hitl.DecisionApprove, qs[0].Digest
	raw, _ := json.Marshal(a)
	if _, err := h.Answer(context.Background(), "t1", qs[0].ID, raw, "ann"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to end", f.idle(t, "t1"))
	if got := f.shell.runs(); len(got) != 1 || got[0] != "echo hi" {
		t.Fatalf("ran %v", got)
	}
	if n := store.count(); n != 1 {
		t.Errorf("the cycle read the question %d times, want 1 (the answer's check)", n)
	}
}
