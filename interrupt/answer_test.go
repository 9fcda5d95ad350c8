package interrupt

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"testing"
)

func TestInterpret(t *testing.T) {
	t.Parallel()
	original := map[string]any{"amount": 1500, "to": "alice"}
	approve := Outcome{Action: ActionApprove, Arguments: original}
	deny := func(msg string) Outcome { return Outcome{Action: ActionDeny, Message: msg} }
	edit := func(edits, merged map[string]any) Outcome {
		return Outcome{Action: ActionEdit, Arguments: merged, Edits: edits}
	}
	type decisionStruct struct {
		Action  string         `json:"action"`
		Args    map[string]any `json:"arguments,omitempty"`
		Message string         `json:"message,omitempty"`
		Extra   int            `json:"extra"`
	}
	for _, tc := range []struct {
		name   string
		answer any
		want   Outcome
	}{
		// "True or ToolDecision(action="approve") runs the call."
		{"true", true, approve},
		{"JSON true", j(`true`), approve},
		{"JSON true with spaces", []byte(" true\n"), approve},
		{"Approve()", Approve(), approve},
		{"decision approve", ToolDecision{Action: ActionApprove}, approve},
		{"pointer decision", &ToolDecision{Action: ActionApprove}, approve},
		{"JSON approve", j(`{"action": "approve"}`), approve},
		{"JSON approve ignores arguments", j(`{"action": "approve", "arguments": {"amount": 1}}`), approve},
		{"JSON approve ignores unknown fields", j(`{"action": "approve", "by": "bob"}`), approve},
		{"JSON approve with message", j(`{"action": "approve", "message": "ok"}`), approve},
		// "A dict works like a ToolDecision."
		{"map approve", map[string]any{"action": "approve"}, approve},
		{"typed map approve", map[string]string{"action": "approve"}, approve},
		{"struct approve", decisionStruct{Action: "approve"}, approve},
		{"pointer to struct approve", &decisionStruct{Action: "approve"}, approve},

		// "ToolDecision(action="edit", arguments=...) runs it with those keys
		// replacing the call's."
		{"JSON edit", j(`{"action": "edit", "arguments": {"amount": 900}}`),
			edit(map[string]any{"amount": json.Number("900")}, map[string]any{"amount": json.Number("900"), "to": "alice"})},
		{"JSON edit adds a key", j(`{"action": "edit", "arguments": {"memo": "x"}}`),
			edit(map[string]any{"memo": "x"}, map[string]any{"amount": 1500, "to": "alice", "memo": "x"})},
		{"JSON edit to null", j(`{"action": "edit", "arguments": {"to": null}}`),
			edit(map[string]any{"to": nil}, map[string]any{"amount": 1500, "to": nil})},
		{"JSON edit nothing", j(`{"action": "edit", "arguments": {}}`), edit(map[string]any{}, original)},
		{"JSON edit keeps big integers exact", j(`{"action": "edit", "arguments": {"amount": 9007199254740993}}`),
			edit(map[string]any{"amount": json.Number("9007199254740993")}, map[string]any{"amount": json.Number("9007199254740993"), "to": "alice"})},
		{"Edit()", Edit(map[string]any{"amount": 1}), edit(map[string]any{"amount": 1}, map[string]any{"amount": 1, "to": "alice"})},
		{"Edit(nil) runs unchanged", Edit(nil), edit(map[string]any{}, original)},
		{"map edit", map[string]any{"action": "edit", "arguments": map[string]any{"to": "bob"}},
			edit(map[string]any{"to": "bob"}, map[string]any{"amount": 1500, "to": "bob"})},
		{"struct edit", decisionStruct{Action: "edit", Args: map[string]any{"to": "bob"}},
			edit(map[string]any{"to": "bob"}, map[string]any{"amount": 1500, "to": "bob"})},

		// "Anything else denies."
		{"false", false, deny("")},
		{"JSON false", j(`false`), deny("")},
		{"nil", nil, deny("")},
		{"JSON null", j(`null`), deny("")},
		{"string", "approve", deny("")},
		{"Go string true", "true", deny("")},
		{"JSON string", j(`"approve"`), deny("")},
		{"JSON string true", j(`"true"`), deny("")},
		{"number 1", 1, deny("")},
		{"JSON 1", j(`1`), deny("")},
		{"JSON array", j(`[true]`), deny("")},
		{"garbage", j(`{"action": "approve"`), deny("")},
		{"empty", j(``), deny("")},
		{"trailing", j(`true false`), deny("")},
		{"empty object", j(`{}`), deny("")},
		{"unknown action", j(`{"action": "yes"}`), deny("")},
		{"action case", j(`{"action": "Approve"}`), deny("")},
		{"action not a string", j(`{"action": true}`), deny("")},
		{"approve with mistyped message", j(`{"action": "approve", "message": 5}`), deny("")},
		{"approve with mistyped arguments", j(`{"action": "approve", "arguments": [1]}`), deny("")},
		{"edit without arguments", j(`{"action": "edit"}`), deny("")},
		{"edit with null arguments", j(`{"action": "edit", "arguments": null}`), deny("")},
		{"edit with array arguments", j(`{"action": "edit", "arguments": [1]}`), deny("")},
		{"edit with string arguments", j(`{"action": "edit", "arguments": "{\"amount\": 1}"}`), deny("")},
		{"edit decision without arguments", ToolDecision{Action: ActionEdit}, deny("")},
		{"nil decision pointer", (*ToolDecision)(nil), deny("")},
		{"empty decision", ToolDecision{}, deny("")},
		{"slice", []any{true}, deny("")},
		{"func", func() {}, deny("")},

		// "A deny carries message as the reason."
		{"JSON deny", j(`{"action": "deny", "message": "too much"}`), deny("too much")},
		{"JSON deny without message", j(`{"action": "deny"}`), deny("")},
		{"JSON deny null message", j(`{"action": "deny", "message": null}`), deny("")},
		{"Deny()", Deny("not today"), deny("not today")},
		{"map deny", map[string]string{"action": "deny", "message": "no"}, deny("no")},
		{"malformed keeps its message", j(`{"action": "reject", "message": "no"}`), deny("no")},
		{"edit without arguments keeps its message", j(`{"action": "edit", "message": "hm"}`), deny("hm")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before := maps.Clone(original)
			got := Interpret(tc.answer, original)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Interpret(%v) = %#v; want %#v", tc.answer, got, tc.want)
			}
			if !reflect.DeepEqual(original, before) {
				t.Fatalf("Interpret modified the original arguments: %v", original)
			}
		})
	}
}

func TestInterpretNilOriginal(t *testing.T) {
	t.Parallel()
	got := Interpret(j(`{"action":"edit","arguments":{"a":"b"}}`), nil)
	if want := map[string]any{"a": "b"}; !reflect.DeepEqual(got.Arguments, want) {
		t.Fatalf("Arguments = %v; want %v", got.Arguments, want)
	}
}

func TestPayloadJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    any
		want string
	}{
		{NewToolInterrupt("transfer", "fc:1", map[string]any{"amount": 1500}),
			`{"kind":"tool_interrupt","tool_name":"transfer","tool_call_id":"fc:1","arguments":{"amount":1500}}`},
		{NewToolInterrupt("ls", "c1", nil),
			`{"kind":"tool_interrupt","tool_name":"ls","tool_call_id":"c1","arguments":{}}`},
		{Approve(), `{"action":"approve"}`},
		{Deny("too much"), `{"action":"deny","message":"too much"}`},
		{Edit(map[string]any{"amount": 900}), `{"action":"edit","arguments":{"amount":900}}`},
		{Edit(nil), `{"action":"edit","arguments":{}}`}, // runs unchanged, not a deny
		{ToolDecision{Action: ActionEdit}, `{"action":"edit"}`},
	} {
		got, err := json.Marshal(tc.v)
		if err != nil || string(got) != tc.want {
			t.Errorf("json.Marshal(%#v) = %s, %v; want %s", tc.v, got, err, tc.want)
		}
		// What is sent reads back as what was meant.
		if d, ok := tc.v.(ToolDecision); ok {
			orig := map[string]any{"amount": 1500}
			if a, b := Interpret(d, orig), Interpret(json.RawMessage(got), orig); a.Action != b.Action || a.Message != b.Message {
				t.Errorf("%s reads as %+v, the Go value as %+v", got, b, a)
			}
		}
	}
}

func TestToolDeniedError(t *testing.T) {
	t.Parallel()
	var err error = fmt.Errorf("run: %w", &ToolDeniedError{ToolName: "transfer", ToolCallID: "fc:1", Message: "too much"})
	var denied *ToolDeniedError
	if !errors.As(err, &denied) || denied.Message != "too much" {
		t.Fatalf("errors.As = %v", denied)
	}
	if got, want := denied.Error(), "tool call denied by the reviewer: too much"; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
	if got, want := (&ToolDeniedError{}).Error(), "tool call denied by the reviewer"; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
}
