package hitl_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
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
	ch := hitl.NewMemoryChannel("t", nil)
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
