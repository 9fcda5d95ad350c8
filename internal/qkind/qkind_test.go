package qkind_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/qkind"
)

// Every kind's answers read back as a run reads them.
func TestRead(t *testing.T) {
	for _, c := range []struct {
		kind, answer string
		want         qkind.Answer
	}{
		{"approve", `{"decision":"approve","digest":"sha256:x"}`, qkind.Answer{Decision: "approve", Readable: true}},
		{"approve", `{"decision":"deny","reason":"no"}`, qkind.Answer{Decision: "deny", Readable: true, Reason: "no"}},
		{"approve", `{"decision":"edit","edited_args":{"n":1.50}}`, qkind.Answer{Decision: "edit", Readable: true, Edits: map[string]any{"n": json.Number("1.50")}}},
		{"approve", `{"decision":"maybe"}`, qkind.Answer{}},
		{"approve", `"yes"`, qkind.Answer{}},
		{"tool_interrupt", `true`, qkind.Answer{Decision: "approve", Readable: true}},
		{"tool_interrupt", `false`, qkind.Answer{Decision: "deny", Readable: true}},
		{"tool_interrupt", `{"action":"edit","arguments":{"cmd":"ls"}}`, qkind.Answer{Decision: "edit", Readable: true, Edits: map[string]any{"cmd": "ls"}}},
		// An edit without arguments, or anything else, denies (SPEC).
		{"tool_interrupt", `{"action":"edit"}`, qkind.Answer{Decision: "deny", Readable: true}},
		{"tool_interrupt", `{"action":"nope","message":"why"}`, qkind.Answer{Decision: "deny", Readable: true, Reason: "why"}},
		{"confirm", `true`, qkind.Answer{Decision: "yes", Readable: true}},
		{"confirm", `{"yes":false}`, qkind.Answer{Decision: "no", Readable: true}},
		{"confirm", `"sure"`, qkind.Answer{}},
		{"ask", `"blue"`, qkind.Answer{Decision: "answered", Readable: true, Text: "blue", Words: true}},
		{"ask", `{"color":"blue"}`, qkind.Answer{Decision: "answered", Readable: true}},
		{"survey", `{"a":1}`, qkind.Answer{Decision: "answered", Readable: true}},
	} {
		if got := qkind.Read(c.kind, json.RawMessage(c.answer)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Read(%s, %s) = %+v, want %+v", c.kind, c.answer, got, c.want)
		}
	}
}

// An approval built for a kind reads back as the decision it was built
// from, with its reason and edits, and carries the digest.
func TestApprovalReadsBack(t *testing.T) {
	for _, kind := range []string{"approve", "tool_interrupt"} {
		for _, c := range []struct {
			decision, reason string
			edits            map[string]any
		}{{"approve", "", nil}, {"deny", "too wide", nil}, {"edit", "", map[string]any{"cmd": "ls"}}} {
			raw, err := json.Marshal(qkind.Approval(kind, c.decision, c.reason, c.edits, "sha256:abc"))
			if err != nil {
				t.Fatal(err)
			}
			a := qkind.Read(kind, raw)
			if a.Decision != c.decision || a.Reason != c.reason || !reflect.DeepEqual(a.Edits, c.edits) {
				t.Errorf("%s %s: %s read back as %+v", kind, c.decision, raw, a)
			}
			var d struct{ Digest string }
			if json.Unmarshal(raw, &d) != nil || d.Digest != "sha256:abc" {
				t.Errorf("%s %s: %s carries no digest", kind, c.decision, raw)
			}
		}
	}
	if qkind.Approval("confirm", "approve", "", nil, "") != nil {
		t.Error("an approval built for confirm")
	}
}

// Both approval kinds show the call they ask to run.
func TestCallOf(t *testing.T) {
	for _, q := range []*checkpoint.Question{
		{ID: "a", Kind: "approve", Payload: json.RawMessage(`{"kind":"approve","tool_name":"bash","args":{"cmd":"ls","n":10},"details":{"matched_rule":"r1"}}`)},
		{ID: "b", Kind: "tool_interrupt", Payload: json.RawMessage(`{"kind":"tool_interrupt","tool_name":"bash","tool_call_id":"c1","arguments":{"cmd":"ls","n":10}}`)},
	} {
		c, err := qkind.CallOf(q)
		if err != nil || c.Tool != "bash" || c.Args["cmd"] != "ls" || c.Args["n"] != json.Number("10") {
			t.Errorf("%s: %+v, %v", q.Kind, c, err)
		}
	}
	if _, err := qkind.CallOf(&checkpoint.Question{ID: "c", Kind: "confirm", Payload: json.RawMessage(`{}`)}); err == nil {
		t.Error("a confirm question asks to run a call")
	}
	if k := qkind.Of("survey"); k.Approval || k.Forms != "json '...'" {
		t.Errorf("an unknown kind: %+v", k)
	}
}
