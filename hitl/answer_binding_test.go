package hitl_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/storetest"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// TestChannelRefusesOtherThread: a channel bound to one thread does not
// answer another thread's question, which stays open.
func TestChannelRefusesOtherThread(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, oneCall("rm /tmp/logs")...)
	done, reqs := f.start(t, 1)
	ctx := context.Background()
	other := hitl.NewCheckpointedChannel(f.store, "session-2", nil)
	err := other.AnswerIn(ctx, "session-1", reqs[0].QuestionID, hitl.ApproveAnswer{Decision: "approve"})
	if !errors.Is(err, hitl.ErrOtherThread) {
		t.Fatalf("answer through another thread's channel: %v", err)
	}
	if _, err := other.AnswerWith(ctx, "session-1", reqs[0].QuestionID, hitl.ApproveAnswer{Decision: "approve"}, nil); !errors.Is(err, hitl.ErrOtherThread) {
		t.Fatalf("AnswerWith through another thread's channel: %v", err)
	}
	if q, err := f.store.GetQuestion(ctx, "session-1", reqs[0].QuestionID); err != nil || q.Status != checkpoint.QuestionPending {
		t.Fatalf("question after the refusal: %+v, %v", q, err)
	}
	if err := f.channel.Answer(ctx, reqs[0].QuestionID, hitl.ApproveAnswer{Decision: "deny"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(f.ranCmds()) != 0 {
		t.Fatal("the denied call ran")
	}
	// A channel for every thread answers any.
	f2 := newFixture(t, nil, oneCall("rm /tmp/logs")...)
	done, reqs = f2.start(t, 1)
	all := hitl.NewCheckpointedChannel(f2.store, "", &hitl.ChannelOptions{Clock: f2.clock})
	if err := all.AnswerIn(ctx, "session-1", reqs[0].QuestionID, hitl.ApproveAnswer{Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestStoredDigestMismatchDenied: an answer written to the store by other
// code, whose digest is not the question's, is denied on resume and the
// denial is in the audit log.
func TestStoredDigestMismatchDenied(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	f := askThenStop(t, store, "rm /tmp/logs")
	bg := context.Background()
	if _, err := store.ResolveQuestion(bg, "session-1", "hitl_call_1", checkpoint.Resolution{Status: checkpoint.QuestionAnswered,
		Answer: json.RawMessage(`{"decision":"approve","digest":"sha256:00"}`), By: "elsewhere", At: f.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	f2 := newFixture(t, store, scripted.Turn{Text: "done"})
	if _, err := f2.agent.Resume(bg); err != nil {
		t.Fatal(err)
	}
	if got := f2.ranCmds(); len(got) != 0 {
		t.Fatalf("ran %v on an answer about other arguments", got)
	}
	res := lastResult(t, f2.agent)
	if h := hitlTrace(res); !res.IsError || h["decision"] != "policy_deny" || h["digest_mismatch"] != true || h["answer_digest"] != "sha256:00" {
		t.Fatalf("result %+v", res)
	}
	events, err := store.ListEvents(bg, "session-1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	audited := false
	for _, e := range events {
		audited = audited || e.Type == "tool_result" && strings.Contains(string(e.Data), `"digest_mismatch":true`)
	}
	if !audited {
		t.Fatal("the denial is not in the audit log")
	}
}

// TestAnswersDuplicateKeysAndCanonical: an answer with a key twice is
// refused, and answers are stored in canonical form.
func TestAnswersDuplicateKeysAndCanonical(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, oneCall("rm /tmp/logs")...)
	done, reqs := f.start(t, 1)
	id := reqs[0].QuestionID
	ctx := context.Background()
	for _, raw := range []string{
		`{"decision":"deny","decision":"approve"}`,
		`{"decision":"edit","edited_args":{"cmd":"ls","cmd":"rm -rf /tmp/x"}}`,
		`{"decision":"approve","reason":"a","reason":"b"}`,
	} {
		if err := f.channel.Answer(ctx, id, json.RawMessage(raw)); !errors.Is(err, hitl.ErrWrongKind) || !strings.Contains(err.Error(), "twice") {
			t.Errorf("answer %s: %v", raw, err)
		}
	}
	// Same keys in different objects are fine.
	q, err := f.channel.AnswerWith(ctx, "session-1", id, json.RawMessage(` { "edited_args" : { "cmd" : "ls  -la" }, "decision" : "edit" } `), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"decision":"edit","edited_args":{"cmd":"ls  -la"}}`; string(q.Answer) != want {
		t.Fatalf("stored %s, want %s", q.Answer, want)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := f.ranCmds(); len(got) != 1 || got[0] != "ls  -la" {
		t.Fatalf("ran %v", got)
	}
}

// askThenStop runs a prompt whose call of cmd is asked, and stops the run
// while the question is pending, as a crash would.
func askThenStop(t *testing.T, store checkpoint.Store, cmd string) *fixture {
	t.Helper()
	f := newFixture(t, store, oneCall(cmd)[:1]...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := f.agent.Prompt(ctx, "go"); done <- err }()
	waitFor(t, func() bool { reqs, _ := f.channel.Pending(context.Background()); return len(reqs) == 1 })
	cancel()
	<-done
	return f
}

// TestDigestBindsTheCall: the same command with the same call id in two
// threads (a scripted or restarted model numbers its calls the same way)
// gets two digests, and an answer carrying one thread's digest does not
// approve the other thread's call.
func TestDigestBindsTheCall(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	ctx := context.Background()
	a := newThreadFixture(t, store, "session-1", oneCall("rm /tmp/logs")...)
	b := newThreadFixture(t, store, "session-2", oneCall("rm /tmp/logs")...)
	doneA, reqsA := a.start(t, 1)
	doneB, reqsB := b.start(t, 1)
	if reqsA[0].QuestionID != reqsB[0].QuestionID {
		t.Fatalf("question ids %s and %s: the test wants the same call id in both threads", reqsA[0].QuestionID, reqsB[0].QuestionID)
	}
	if reqsA[0].Digest == reqsB[0].Digest {
		t.Fatalf("both threads' calls have the digest %s: an answer about one would approve the other", reqsA[0].Digest)
	}
	if want := agent.CallDigest("session-2", "call_1", "bash", json.RawMessage(`{"cmd":"rm /tmp/logs"}`)); reqsB[0].Digest != want {
		t.Fatalf("digest %s, want CallDigest %s", reqsB[0].Digest, want)
	}
	err := b.channel.Answer(ctx, reqsB[0].QuestionID, hitl.ApproveAnswer{Decision: "approve", Digest: reqsA[0].Digest})
	if !errors.Is(err, hitl.ErrDigestMismatch) {
		t.Fatalf("approving session-2's call with session-1's digest: %v", err)
	}
	if q, err := store.GetQuestion(ctx, "session-2", reqsB[0].QuestionID); err != nil || q.Status != checkpoint.QuestionPending {
		t.Fatalf("question after the refusal: %+v, %v", q, err)
	}
	if err := b.channel.Answer(ctx, reqsB[0].QuestionID, hitl.ApproveAnswer{Decision: "approve", Digest: reqsB[0].Digest}); err != nil {
		t.Fatal(err)
	}
	if err := a.channel.Answer(ctx, reqsA[0].QuestionID, hitl.ApproveAnswer{Decision: "deny", Digest: reqsA[0].Digest}); err != nil {
		t.Fatal(err)
	}
	for _, done := range []<-chan error{doneA, doneB} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := a.ranCmds(); len(got) != 0 {
		t.Fatalf("session-1 ran %v", got)
	}
	if got := b.ranCmds(); len(got) != 1 {
		t.Fatalf("session-2 ran %v", got)
	}
}

// TestQuestionWithArgsDigestStillAnswers: a question stored by a version
// whose digests bound only the tool and the arguments (agent.ArgsDigest),
// and answered with that digest, is still the run's question after an
// upgrade: the call runs.
func TestQuestionWithArgsDigestStillAnswers(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	ctx := context.Background()
	f := newFixture(t, store, oneCall("rm /tmp/logs")...)
	old := agent.ArgsDigest("bash", json.RawMessage(`{"cmd":"rm /tmp/logs"}`))
	payload, _ := json.Marshal(hitl.Payload{Kind: hitl.KindApprove, ToolName: "bash", Args: map[string]any{"cmd": "rm /tmp/logs"}})
	if _, _, err := store.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "session-1", ID: hitl.QuestionID("call_1"), RunID: "run_old",
		CallID: "call_1", Tool: "bash", Kind: hitl.KindApprove, Payload: payload, Digest: old, CreatedAt: f.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := hitl.NewCheckpointedChannel(store, "session-1", &hitl.ChannelOptions{Clock: f.clock}).Answer(ctx, hitl.QuestionID("call_1"),
		hitl.ApproveAnswer{Decision: "approve", Digest: old}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.agent.Prompt(ctx, "go"); err != nil {
		t.Fatal(err)
	}
	if got := f.ranCmds(); len(got) != 1 {
		t.Fatalf("ran %v; result %+v", got, lastResult(t, f.agent))
	}
}

// TestAnswerBindsTheDirectory: a call approved where its tools work in one
// directory, resumed by a process whose tools work in another (serve
// started again with another --dir), is denied saying both, and never
// runs; resumed in the directory it was asked in, it runs. An edit is
// bound the same way; a deny stays a deny.
func TestAnswerBindsTheDirectory(t *testing.T) {
	t.Parallel()
	bg := context.Background()
	ask := func(t *testing.T, dir string) (checkpoint.Store, *fixture) {
		store := storetest.New(t)
		f := newDirFixture(t, store, "session-1", dir, oneCall("rm /tmp/logs")[:1]...)
		ctx, cancel := context.WithCancel(bg)
		done := make(chan error, 1)
		go func() { _, err := f.agent.Prompt(ctx, "go"); done <- err }()
		waitFor(t, func() bool { reqs, _ := f.channel.Pending(bg); return len(reqs) == 1 })
		cancel()
		<-done
		q, err := store.GetQuestion(bg, "session-1", "hitl_call_1")
		if err != nil {
			t.Fatal(err)
		}
		var p hitl.Payload
		if err := json.Unmarshal(q.Payload, &p); err != nil || p.Details["dir"] != dir {
			t.Fatalf("the question's details %v (%v): want dir %s, which the reviewer reads", p.Details, err, dir)
		}
		return store, f
	}
	for _, answer := range []hitl.ApproveAnswer{
		{Decision: "approve"},
		{Decision: "edit", EditedArgs: map[string]any{"cmd": "rm /tmp/logs/old"}},
	} {
		t.Run(answer.Decision, func(t *testing.T) {
			store, f := ask(t, "/srv/project-a")
			if err := f.channel.Answer(bg, "hitl_call_1", answer); err != nil {
				t.Fatal(err)
			}
			moved := newDirFixture(t, store, "session-1", "/srv/project-b", scripted.Turn{Text: "done"})
			if _, err := moved.agent.Resume(bg); err != nil {
				t.Fatal(err)
			}
			if got := moved.ranCmds(); len(got) != 0 {
				t.Fatalf("ran %v in /srv/project-b, approved in /srv/project-a", got)
			}
			res := lastResult(t, moved.agent)
			h := hitlTrace(res)
			if !res.IsError || h["dir_mismatch"] != true || h["asked_in"] != "/srv/project-a" || h["runs_in"] != "/srv/project-b" ||
				!strings.Contains(res.Content, "/srv/project-a") || !strings.Contains(res.Content, "/srv/project-b") {
				t.Fatalf("result %+v", res)
			}
		})
	}
	t.Run("same directory", func(t *testing.T) {
		store, f := ask(t, "/srv/project-a")
		if err := f.channel.Answer(bg, "hitl_call_1", hitl.ApproveAnswer{Decision: "approve"}); err != nil {
			t.Fatal(err)
		}
		again := newDirFixture(t, store, "session-1", "/srv/project-a", scripted.Turn{Text: "done"})
		if _, err := again.agent.Resume(bg); err != nil {
			t.Fatal(err)
		}
		if got := again.ranCmds(); len(got) != 1 || got[0] != "rm /tmp/logs" {
			t.Fatalf("ran %v, want the approved call", got)
		}
	})
	t.Run("deny", func(t *testing.T) {
		store, f := ask(t, "/srv/project-a")
		if err := f.channel.Answer(bg, "hitl_call_1", hitl.ApproveAnswer{Decision: "deny", Reason: "not today"}); err != nil {
			t.Fatal(err)
		}
		moved := newDirFixture(t, store, "session-1", "/srv/project-b", scripted.Turn{Text: "done"})
		if _, err := moved.agent.Resume(bg); err != nil {
			t.Fatal(err)
		}
		if res := lastResult(t, moved.agent); !res.IsError || hitlTrace(res)["decision"] != "human_deny" || !strings.Contains(res.Content, "not today") {
			t.Fatalf("result %+v", res)
		}
	})
}
