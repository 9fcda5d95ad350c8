package policy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/hitl"
)

const learnSrc = `version: 1
default: ask
rules:
  - name: read
    tool: bash
    command: [ls, cat]
    action: allow
  - name: deploy
    tool: bash
    command: make
    when: command.args.exists(a, a == "deploy")
    action: ask
    learnable: false
  - name: secrets
    tool: bash
    command: [head, tail]
    when: command.secrets.size() > 0
    action: ask
  - name: env-files-ok
    tool: bash
    command: grep
    when: command.secrets.size() > 0
    action: ask
    learnable: true
  - name: prod
    tool: bash
    command: "*"
    when: thread == "prod"
    action: block
  - name: mcp
    tool: "mcp__*"
    action: ask
`

func TestLearnable(t *testing.T) {
	t.Parallel()
	p := mustParse(t, learnSrc, nil)
	for _, tc := range []struct {
		call Call
		want string // "" learnable; otherwise a word of why not
	}{
		{Call{Tool: "bash", Args: map[string]any{"cmd": "npm test"}}, ""},
		{Call{Tool: "bash", Args: map[string]any{"cmd": "ls; npm test"}}, ""},
		{Call{Tool: "bash", Args: map[string]any{"cmd": "make deploy"}}, "learnable: false"},
		{Call{Tool: "bash", Args: map[string]any{"cmd": "make test"}}, ""},
		{Call{Tool: "bash", Args: map[string]any{"cmd": "head .env"}}, "secrets"},
		{Call{Tool: "bash", Args: map[string]any{"cmd": "grep x .env"}}, ""},
		{Call{Tool: "bash", Args: map[string]any{"cmd": "npm test $(cat x)"}}, "only known when it runs"},
		{Call{Tool: "bash", Args: map[string]any{"cmd": "eval npm test"}}, "cannot vouch"},
		{Call{Tool: "bash", Args: map[string]any{"cmd": "rm -r build"}}, "destroys data (rm)"},
		{Call{Tool: "bash", Args: map[string]any{"cmd": "git push --force origin main"}}, "destroys data"},
		{Call{Tool: "bash", Args: map[string]any{"cmd": "git reset --hard"}}, "destroys data"},
		{Call{Tool: "bash", Args: map[string]any{"cmd": "xargs rm < list"}}, "files only known when it runs"},
		{Call{Tool: "mcp__fs__write", Args: map[string]any{"path": "/x"}}, ""},
		{Call{Tool: "mcp__fs__delete", Annotations: map[string]any{"destructive": true, "stated": []any{"destructive"}}}, "destructive"},
		{Call{Tool: "mcp__fs__other", Annotations: map[string]any{"destructive": true, "stated": []any{}}}, ""},
		{Call{Tool: "pay", Args: map[string]any{"amount": 5}}, ""},
	} {
		d := p.EvaluateRules(context.Background(), tc.call)
		if d.Action != Ask {
			t.Errorf("%v: %s, want ask", tc.call.Args, d.Action)
			continue
		}
		if tc.want == "" && (!d.Learnable || d.NotLearnable != "") || tc.want != "" && (d.Learnable || !strings.Contains(d.NotLearnable, tc.want)) {
			t.Errorf("%s %v: learnable %v (%q), want %q", tc.call.Tool, tc.call.Args, d.Learnable, d.NotLearnable, tc.want)
		}
	}
	for _, call := range []Call{
		{Tool: "bash", Args: map[string]any{"cmd": "ls"}},
		{Tool: "bash", Args: map[string]any{"cmd": "npm test"}, ThreadID: "prod"},
	} {
		if d := p.EvaluateRules(context.Background(), call); d.Learnable || d.Action == Ask {
			t.Errorf("%v: %s, learnable %v: only an ask is learnable", call, d.Action, d.Learnable)
		}
	}
	off := mustParse(t, learnSrc+"learn:\n  enabled: false\n", nil)
	if d := off.EvaluateRules(context.Background(), Call{Tool: "bash", Args: map[string]any{"cmd": "npm test"}}); d.Learnable || !strings.Contains(d.NotLearnable, "enabled: false") {
		t.Errorf("learn: enabled: false: learnable %v (%q)", d.Learnable, d.NotLearnable)
	}
	for _, bad := range []string{
		"version: 1\nrules:\n  - {name: a, tool: bash, action: allow, learnable: true}\n",
		"version: 1\nrules:\n  - {name: a, tool: bash, action: block, learnable: false}\n",
		"version: 1\nlearn: {second: true}\nrules:\n  - {name: a, tool: bash, action: ask}\n",
	} {
		if _, err := Parse("p.yaml", []byte(bad), nil); err == nil {
			t.Errorf("Parse accepted %q", bad)
		}
	}
}

// fakeLearned allows what its rule allows, and counts what it is asked.
type fakeLearned struct {
	calls  []Call
	second []bool
	rule   *LearnedRule
	err    error
}

func (f *fakeLearned) Allow(ctx context.Context, call Call, second bool) (*LearnedRule, error) {
	f.calls, f.second = append(f.calls, call), append(f.second, second)
	return f.rule, f.err
}

// A learned rule is asked only about what the file asks about and lets
// it answer for: never a block, never an allow, never learnable: false.
func TestEvaluateLearned(t *testing.T) {
	t.Parallel()
	f := &fakeLearned{rule: &LearnedRule{ID: "lr_1", By: "alice", Scope: "everyone"}}
	p := mustParse(t, learnSrc+"learn:\n  second_reviewer: true\n", &Options{Learned: f, Dir: "/srv/app"})
	ctx := context.Background()
	for _, c := range []Call{
		{Tool: "bash", Args: map[string]any{"cmd": "npm test"}, ThreadID: "prod"},
		{Tool: "bash", Args: map[string]any{"cmd": "ls"}},
		{Tool: "bash", Args: map[string]any{"cmd": "make deploy"}},
		{Tool: "bash", Args: map[string]any{"cmd": "rm x"}},
	} {
		if d := p.Evaluate(ctx, c); d.Action == Allow && d.Learned != nil {
			t.Errorf("%v: allowed by the learned rule", c)
		}
	}
	if len(f.calls) != 0 {
		t.Fatalf("the learned rules were asked about %v", f.calls)
	}
	d := p.Evaluate(ctx, Call{Tool: "bash", Args: map[string]any{"cmd": "npm test"}, ThreadID: "t1"})
	if d.Action != Allow || d.Rule != RuleLearned || d.Learned != f.rule || !strings.Contains(d.Reason, "lr_1") || d.Sandbox != "" ||
		d.Matched[len(d.Matched)-1].Rule != RuleLearned {
		t.Fatalf("a learnable ask with a learned rule: %+v", d)
	}
	if len(f.calls) != 1 || f.calls[0].Dir != "/srv/app" || !f.second[0] {
		t.Errorf("asked %v (second %v), want the call with the policy's Dir and second_reviewer", f.calls, f.second)
	}
	if d := p.Evaluate(ctx, Call{Tool: "bash", Args: map[string]any{"cmd": "npm test"}, Dir: "/home/me/web"}); f.calls[1].Dir != "/home/me/web" || d.Details() != nil {
		t.Errorf("a call's own Dir: asked about %v", f.calls[1])
	}
	if d := p.EvaluateRules(ctx, Call{Tool: "bash", Args: map[string]any{"cmd": "npm test"}}); d.Action != Ask || len(f.calls) != 2 {
		t.Errorf("EvaluateRules: %s, %d asks of the learned rules", d.Action, len(f.calls))
	} else if d.Details()["dir"] != "/srv/app" {
		t.Errorf("an ask's details say no dir: %v", d.Details())
	}
	f.rule, f.err = nil, errors.New("store down")
	d = p.Evaluate(ctx, Call{Tool: "bash", Args: map[string]any{"cmd": "npm test"}})
	if d.Action != Ask || d.Learned != nil || !strings.Contains(d.Matched[len(d.Matched)-1].Reason, "store down") {
		t.Errorf("the learned rules failing: %+v, want ask saying why", d)
	}
	f.err = nil
	if d := p.Evaluate(ctx, Call{Tool: "bash", Args: map[string]any{"cmd": "npm test"}}); d.Action != Ask || d.Learned != nil {
		t.Errorf("no learned rule: %+v", d)
	}
}

// Through HITL, a learned rule's allow names it and its author for the
// audit log; SandboxFor runs it under the tool's own profile, as an
// approval.
func TestLearnedHITL(t *testing.T) {
	t.Parallel()
	f := &fakeLearned{rule: &LearnedRule{ID: "lr_1", By: "alice", Second: "bob", Scope: "project /srv/app"}}
	p := mustParse(t, learnSrc, &Options{Learned: f})
	d := p.HITL()(context.Background(), &hitl.PolicyContext{Tool: "bash", RawArgs: json.RawMessage(`{"cmd":"npm test"}`), Dir: "/srv/app"})
	want := map[string]any{"learned_rule": "lr_1", "learned_by": "alice", "second_reviewer": "bob", "scope": "project /srv/app"}
	if d.Action() != "approve" || !sameDetails(d.Details(), want) || f.calls[0].Dir != "/srv/app" {
		t.Errorf("HITL: %s %v (asked %v), want approve with %v", d, d.Details(), f.calls, want)
	}
	profile, err := p.SandboxFor("bash")(context.Background(), json.RawMessage(`{"cmd":"npm test"}`))
	if err != nil || profile != "" {
		t.Errorf("SandboxFor: %q, %v; want the tool's own profile", profile, err)
	}
	f.rule = nil
	if _, err := p.SandboxFor("bash")(context.Background(), json.RawMessage(`{"cmd":"npm test"}`)); err == nil {
		t.Error("SandboxFor ran a call no rule allows and nobody approved once the learned rule was gone")
	}
}

func sameDetails(a, b map[string]any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestLooserLearning(t *testing.T) {
	t.Parallel()
	base := "version: 1\nrules:\n  - {name: a, tool: bash, action: ask, learnable: false}\n"
	for _, tc := range []struct{ before, after, want string }{
		{base, "version: 1\nrules:\n  - {name: a, tool: bash, action: ask}\n", `rule "a" (ask) is gone or changed`},
		{base + "learn: {enabled: false}\n", base, "learned rules are turned on"},
		{base + "learn: {second_reviewer: true}\n", base, "second reviewer"},
	} {
		b, a := mustParse(t, tc.before, nil), mustParse(t, tc.after, nil)
		if got := strings.Join(Looser(b, []byte(tc.before), a, []byte(tc.after)), "; "); !strings.Contains(got, tc.want) {
			t.Errorf("Looser(%q -> %q) = %q, want %q", tc.before, tc.after, got, tc.want)
		}
	}
}
