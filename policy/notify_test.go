package policy

import (
	"context"
	"strings"
	"testing"
)

// notify: and escalate: reach the question's details (package notify
// reads them there), only on ask rules, with an escalation before the
// timeout.
func TestNotifyRoute(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `version: 1
default: ask
timeout: 3m
rules:
  - name: infra
    tool: deploy
    action: ask
    notify: [team-infra]
    escalate: {after: 2m, to: [oncall]}
  - name: plain
    tool: other
    action: ask
`, nil)
	d := p.Evaluate(context.Background(), Call{Tool: "deploy"})
	route, _ := d.Details()["notify"].(map[string]any)
	esc, _ := route["escalate"].(map[string]any)
	if to, _ := route["to"].([]any); len(to) != 1 || to[0] != "team-infra" || esc["after"] != "2m0s" || esc["to"].([]any)[0] != "oncall" {
		t.Errorf("details %v", d.Details())
	}
	if _, ok := p.Evaluate(context.Background(), Call{Tool: "other"}).Details()["notify"]; ok {
		t.Error("a rule without notify: has a route")
	}
	if got := strings.Join(p.NotifyGroups(), ","); got != "oncall,team-infra" {
		t.Errorf("NotifyGroups %q", got)
	}
	for _, tc := range []struct{ rule, want string }{
		{"action: allow\n    notify: [g]", "notify is only for ask rules"},
		{"action: ask\n    escalate: {after: 5m, to: [g]}", "at or after the question's timeout"},
		{"action: ask\n    escalate: {to: [g]}", "escalate needs after"},
		{"action: ask\n    escalate: {after: 1m, to: []}", "escalate.to names no group"},
		{"action: ask\n    notify: []", "notify names no group"},
	} {
		_, err := Parse("p.yaml", []byte("version: 1\ntimeout: 3m\nrules:\n  - name: r\n    tool: x\n    "+tc.rule+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.rule, err, tc.want)
		}
	}
}
