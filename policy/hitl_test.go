package policy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/hitl"
)

func TestHITL(t *testing.T) {
	t.Parallel()
	p := mustParse(t, rulesSrc, nil)
	hp := p.HITL()
	type bashArgs struct {
		Cmd string `json:"cmd"`
	}
	tests := []struct {
		name   string
		pc     *hitl.PolicyContext
		action string
		text   string
	}{
		{"raw args, allow", &hitl.PolicyContext{Tool: "bash", RawArgs: json.RawMessage(`{"cmd":"ls -la"}`)}, "approve", ""},
		{"raw args, block", &hitl.PolicyContext{Tool: "bash", RawArgs: json.RawMessage(`{"cmd":"ls; rm -rf ~"}`)}, "deny", "deleting is not allowed"},
		{"typed args only", &hitl.PolicyContext{Tool: "bash", Args: bashArgs{Cmd: "cat x | wc -l"}}, "approve", ""},
		{"ask with timeout and details", &hitl.PolicyContext{Tool: "pay", RawArgs: json.RawMessage(`{"amount": 5000}`)}, "ask", "10m0s"},
		{"thread", &hitl.PolicyContext{Tool: "pay", ThreadID: "untrusted", RawArgs: json.RawMessage(`{"amount": 1}`)}, "deny", "payments are off"},
		{"arguments not an object", &hitl.PolicyContext{Tool: "bash", RawArgs: json.RawMessage(`[1]`)}, "ask", "policy_error"},
		{"no arguments", &hitl.PolicyContext{Tool: "bash"}, "ask", ""},
	}
	for _, tt := range tests {
		d := hp(context.Background(), tt.pc)
		if d.Action() != tt.action || !strings.Contains(d.String(), tt.text) {
			t.Errorf("%s: got %s (%s), want %s containing %q", tt.name, d.Action(), d, tt.action, tt.text)
		}
	}
	d := hp(context.Background(), &hitl.PolicyContext{Tool: "pay", RawArgs: json.RawMessage(`{"amount": 5000}`)})
	if s := d.String(); !strings.Contains(s, "matched_rule:pay-big") || !strings.Contains(s, "impact:money leaves the account") {
		t.Errorf("ask details: %s", s)
	}
}

func TestReloadableHITL(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/p.yaml"
	writeFile(t, path, allowLs)
	r, err := NewReloadable(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	hp := r.HITL()
	pc := &hitl.PolicyContext{Tool: "bash", RawArgs: json.RawMessage(`{"cmd":"ls"}`)}
	if d := hp(context.Background(), pc); d.Action() != "approve" {
		t.Fatalf("got %s", d)
	}
	writeFile(t, path, blockLs)
	if _, err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if d := hp(context.Background(), pc); d.Action() != "deny" {
		t.Errorf("after reload: %s", d)
	}
}
