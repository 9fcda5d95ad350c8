package hitl

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// approveAnswers are answers to an approve question, taken by the plain
// path or not: checkAnswer must give each what the general path gives.
var approveAnswers = []any{
	ApproveAnswer{Decision: DecisionApprove},
	ApproveAnswer{Decision: DecisionApprove, Digest: "sha256:abc"},
	ApproveAnswer{Decision: DecisionApprove, Digest: "sha256:other"},
	ApproveAnswer{Decision: DecisionDeny, Reason: `no <rm> & "quotes" \ back`, Digest: "sha256:abc"},
	ApproveAnswer{Decision: DecisionDeny, Reason: "line\nbreak\u2028sep\ttab é ✓"},
	ApproveAnswer{Decision: DecisionDeny, Reason: "bad \xff utf-8"},
	ApproveAnswer{Decision: DecisionEdit},
	ApproveAnswer{Decision: DecisionEdit, EditedArgs: map[string]any{}},
	ApproveAnswer{Decision: DecisionApprove, EditedArgs: map[string]any{"cmd": "ls"}},
	ApproveAnswer{Decision: "maybe"},
	ApproveAnswer{},
	&ApproveAnswer{Decision: DecisionApprove, Digest: "sha256:abc"},
	json.RawMessage(`{"decision":"approve","digest":"sha256:abc"}`),
	json.RawMessage(" \t{ \"digest\" :\r\n\"sha256:abc\" , \"decision\": \"approve\" }\n"),
	json.RawMessage(`{"decision":"deny","reason":"no <way> & é"}`),
	json.RawMessage(`{"decision":"deny","reason":"tab\tinside"}`),
	json.RawMessage(`{"decision":"deny","reason":"esc\"aped"}`),
	json.RawMessage(`{"decision":"deny","reason":"bad \xff"}`),
	json.RawMessage(`{"decision":"approve","digest":"sha256:other"}`),
	json.RawMessage(`{"decision":"approve","decision":"deny"}`),
	json.RawMessage(`{"Decision":"approve"}`),
	json.RawMessage(`{"decision":"approve","extra":"x"}`),
	json.RawMessage(`{"decision":"approve","digest":null}`),
	json.RawMessage(`{"decision":"edit"}`),
	json.RawMessage(`{"decision":"edit","edited_args":{"cmd":"ls"}}`),
	json.RawMessage(`{"decision":"approve"} {}`),
	json.RawMessage(`{"decision":"approve",}`),
	json.RawMessage(`{"decision":"approve"`),
	json.RawMessage(`{"decision":1}`),
	json.RawMessage(`{}`),
	json.RawMessage(` {} `),
	json.RawMessage(`[]`),
	json.RawMessage(`"approve"`),
	json.RawMessage(``),
	[]byte(`{"decision":"approve"}`),
	map[string]any{"decision": "approve"},
	"approve",
}

func TestApproveFastMatchesGeneral(t *testing.T) {
	t.Parallel()
	q := &checkpoint.Question{Kind: KindApprove, Digest: "sha256:abc"}
	for i, answer := range approveAnswers {
		checkSamePaths(t, i, q, answer)
	}
}

// FuzzApproveFast: checkAnswer on JSON text gives what the general path
// gives, whether the plain path takes it or not.
func FuzzApproveFast(f *testing.F) {
	for _, a := range approveAnswers {
		if raw, ok := a.(json.RawMessage); ok {
			f.Add([]byte(raw))
		}
	}
	q := &checkpoint.Question{Kind: KindApprove, Digest: "sha256:abc"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkSamePaths(t, 0, q, json.RawMessage(raw))
	})
}

func checkSamePaths(t *testing.T, i int, q *checkpoint.Question, answer any) {
	t.Helper()
	got, gerr := checkAnswer(q, answer)
	want, werr := checkAnswerGeneral(q, answer)
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() || !bytes.Equal(got, want) {
		t.Errorf("%d: %#v: checkAnswer = %s, %v; the general path = %s, %v", i, answer, got, gerr, want, werr)
	}
	if raw, ok := answer.(json.RawMessage); ok {
		if a, ok := flatApprove(raw); ok {
			pa, err := parseApprove(raw)
			if err == nil && (pa.Decision != a.Decision || pa.Reason != a.Reason || pa.Digest != a.Digest) {
				t.Errorf("%d: parseApprove(%s) = %+v, flatApprove %+v", i, raw, pa, a)
			}
		}
	}
}
