package hitl_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/hitl"
)

// An approve or deny that carries edited_args is refused (the edit would
// be dropped without a word and the original call run), and the question
// stays open for an answer that says what it means.
func TestApproveWithEditedArgsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, oneCall("rm /tmp/logs")...)
	done, reqs := f.start(t, 1)
	ctx := context.Background()
	edited := map[string]any{"cmd": "rm /tmp/logs/old"}
	for _, a := range []any{
		hitl.ApproveAnswer{Decision: hitl.DecisionApprove, EditedArgs: edited, Digest: reqs[0].Digest},
		hitl.ApproveAnswer{Decision: hitl.DecisionDeny, Reason: "no", EditedArgs: edited, Digest: reqs[0].Digest},
		json.RawMessage(`{"decision":"approve","edited_args":{}}`),
	} {
		if err := f.channel.Answer(ctx, reqs[0].QuestionID, a); !errors.Is(err, hitl.ErrWrongKind) {
			t.Errorf("answer %+v: %v, want ErrWrongKind", a, err)
		}
	}
	if q, err := f.store.GetQuestion(ctx, "session-1", reqs[0].QuestionID); err != nil || q.Status != checkpoint.QuestionPending {
		t.Fatalf("question after the refusals: %+v, %v", q, err)
	}
	// null is no edit.
	if err := f.channel.Answer(ctx, reqs[0].QuestionID, json.RawMessage(`{"decision":"deny","reason":"no","edited_args":null}`)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := f.ranCmds(); len(got) != 0 {
		t.Fatalf("ran %v", got)
	}
}

// The same for a tool_interrupt question (interrupt's ToolDecision): only
// "edit" carries arguments, and a digest given must be the question's.
func TestToolDecisionRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ch := hitl.NewCheckpointedChannel(memory.New(), "t", nil)
	q := &checkpoint.Question{ThreadID: "t", ID: "approve_c1", CallID: "c1", Tool: "pay", Kind: "tool_interrupt",
		Payload: json.RawMessage(`{"kind":"tool_interrupt","tool_name":"pay","tool_call_id":"c1","arguments":{"amount":5}}`), Digest: "v2:sha256:ab"}
	if _, _, err := ch.Store().CreateQuestion(ctx, q); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		answer string
		want   error
	}{
		{`{"action":"approve","arguments":{"amount":500}}`, hitl.ErrWrongKind},
		{`{"action":"deny","message":"no","arguments":{}}`, hitl.ErrWrongKind},
		{`{"arguments":{"amount":500}}`, hitl.ErrWrongKind},
		{`{"action":"approve","digest":"v2:sha256:cd"}`, hitl.ErrDigestMismatch},
	} {
		if err := ch.Answer(ctx, q.ID, json.RawMessage(c.answer)); !errors.Is(err, c.want) {
			t.Errorf("answer %s: %v, want %v", c.answer, err, c.want)
		}
	}
	if err := ch.Answer(ctx, q.ID, json.RawMessage(`{"action":"edit","arguments":{"amount":4},"digest":"v2:sha256:ab"}`)); err != nil {
		t.Fatal(err)
	}
}

// With RequireDigest (the HTTP API's answers), an answer to a question
// bound to a digest must carry it — an approve, a deny, a tool_interrupt
// decision; a plain true has no place for it — and the question stays
// open; a question with no digest (confirm, ask) needs none. Without the
// option (a program answering in process) the digest may be left out.
func TestDigestRequired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ch := hitl.NewCheckpointedChannel(memory.New(), "", nil)
	for _, q := range []*checkpoint.Question{
		{ThreadID: "t", ID: "approve_c1", CallID: "c1", Tool: "pay", Kind: "tool_interrupt",
			Payload: json.RawMessage(`{"kind":"tool_interrupt","tool_name":"pay","tool_call_id":"c1","arguments":{"amount":5}}`), Digest: "sha256:ab"},
		{ThreadID: "t", ID: "hitl_c2", CallID: "c2", Tool: "bash", Kind: hitl.KindApprove,
			Payload: json.RawMessage(`{"kind":"approve","tool_name":"bash","args":{"cmd":"ls"}}`), Digest: "sha256:cd"},
		{ThreadID: "t", ID: "hitl_c3", CallID: "c3", Tool: "bash", Kind: hitl.KindConfirm, Payload: json.RawMessage(`{"kind":"confirm"}`)},
	} {
		if _, _, err := ch.Store().CreateQuestion(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	require := &hitl.AnswerOptions{RequireDigest: true}
	for _, c := range []struct{ id, answer string }{
		{"approve_c1", `true`},
		{"approve_c1", `{"action":"approve"}`},
		{"approve_c1", `{"action":"reject","message":"no"}`},
		{"hitl_c2", `{"decision":"approve"}`},
		{"hitl_c2", `{"decision":"deny","reason":"no"}`},
	} {
		if _, err := ch.AnswerWith(ctx, "t", c.id, json.RawMessage(c.answer), require); !errors.Is(err, hitl.ErrDigestRequired) {
			t.Errorf("answer %s to %s: %v, want ErrDigestRequired", c.answer, c.id, err)
		}
	}
	for _, id := range []string{"approve_c1", "hitl_c2"} {
		if q, err := ch.Store().GetQuestion(ctx, "t", id); err != nil || q.Status != checkpoint.QuestionPending {
			t.Fatalf("%s after the refusals: %+v, %v", id, q, err)
		}
	}
	if _, err := ch.AnswerWith(ctx, "t", "approve_c1", json.RawMessage(`{"action":"approve","digest":"sha256:ab"}`), require); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.AnswerWith(ctx, "t", "hitl_c3", json.RawMessage(`true`), require); err != nil {
		t.Fatalf("confirm: %v", err)
	}
	if _, err := ch.AnswerWith(ctx, "t", "hitl_c2", json.RawMessage(`{"decision":"approve"}`), nil); err != nil {
		t.Fatalf("in process, no digest: %v", err)
	}
}
