package policy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const profilePolicy = `
version: 1
rules:
  - name: reads
    tool: bash
    command: [ls, cat]
    action: allow
    sandbox: read-only
  - name: builds
    tool: bash
    command: make
    action: allow
    sandbox: workspace-write
  - name: echo
    tool: bash
    command: echo
    action: allow
`

func TestSandboxProfile(t *testing.T) {
	t.Parallel()
	p := mustParse(t, profilePolicy, nil)
	for cmd, want := range map[string]string{
		"ls":          SandboxReadOnly,
		"make":        SandboxWorkspaceWrite,
		"make; cat x": SandboxReadOnly, // the most confined wins
		"echo hi":     "",
		"echo; make":  SandboxWorkspaceWrite,
	} {
		d := p.Evaluate(context.Background(), bash(cmd))
		if d.Action != Allow || d.Sandbox != want {
			t.Errorf("%q: %s sandbox %q, want allow %q", cmd, d.Action, d.Sandbox, want)
		}
	}
	if d := p.Evaluate(context.Background(), bash("rm x")); d.Sandbox != "" {
		t.Errorf("ask with sandbox %q", d.Sandbox)
	}
}

// TestSandboxNotEnforced: where the kernel cannot enforce a profile, the
// rules that require it ask; the others still allow.
func TestSandboxNotEnforced(t *testing.T) {
	t.Parallel()
	p := mustParse(t, profilePolicy, &Options{Sandbox: func(profile string) error {
		if profile == SandboxReadOnly {
			return errors.New("no Landlock")
		}
		return nil
	}})
	d := p.Evaluate(context.Background(), bash("ls"))
	if d.Action != Ask || d.Rule != "reads" || !strings.Contains(d.Reason, "sandbox read-only, which cannot be enforced here: no Landlock") {
		t.Fatalf("%+v", d)
	}
	if d := p.Evaluate(context.Background(), bash("make")); d.Action != Allow || d.Sandbox != SandboxWorkspaceWrite {
		t.Fatalf("%+v", d)
	}
	var b strings.Builder
	if err := p.Explain(context.Background(), bash("ls")).Write(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "cannot be enforced here: no Landlock") {
		t.Fatalf("explanation:\n%s", b.String())
	}
}

func TestSandboxExplained(t *testing.T) {
	t.Parallel()
	p := mustParse(t, profilePolicy, nil)
	e := p.Explain(context.Background(), bash("cat x"))
	var b strings.Builder
	if err := e.Write(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "sandbox:  read-only") {
		t.Fatalf("explanation:\n%s", b.String())
	}
	js, _ := json.Marshal(e)
	if !strings.Contains(string(js), `"sandbox":"read-only"`) {
		t.Fatalf("%s", js)
	}
}

func TestSandboxErrors(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		"version: 1\nrules:\n  - {name: a, tool: bash, action: ask, sandbox: read-only}\n":  "sandbox is for allow rules",
		"version: 1\nrules:\n  - {name: a, tool: bash, action: allow, sandbox: readonly}\n": `unknown sandbox profile "readonly"`,
	} {
		_, err := Parse("p.yaml", []byte(src), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
}

// TestSandboxFor: outside a run (no tool call in the context) only an
// allowed call gets a profile; anything else is refused.
func TestSandboxFor(t *testing.T) {
	t.Parallel()
	p := mustParse(t, profilePolicy, nil)
	f := p.SandboxFor("bash")
	if got, err := f(context.Background(), json.RawMessage(`{"cmd":"ls"}`)); err != nil || got != SandboxReadOnly {
		t.Fatalf("%q %v", got, err)
	}
	if got, err := f(context.Background(), json.RawMessage(`{"cmd":"echo"}`)); err != nil || got != "" {
		t.Fatalf("%q %v", got, err)
	}
	if _, err := f(context.Background(), json.RawMessage(`{"cmd":"rm -rf x"}`)); err == nil || !strings.Contains(err.Error(), "no person approved it") {
		t.Fatal(err)
	}
}

func TestSandboxInTests(t *testing.T) {
	t.Parallel()
	p := mustParse(t, profilePolicy+`tests:
  - {cmd: ls, want: allow, sandbox: read-only}
  - {cmd: echo, want: allow, sandbox: none}
  - {cmd: make, want: allow, sandbox: read-only}
`, nil)
	rep := p.RunTests(context.Background(), p.Tests())
	if rep.Passed != 2 || rep.Failed != 1 {
		t.Fatalf("%+v", rep)
	}
	var b strings.Builder
	_ = rep.Write(&b, false)
	if !strings.Contains(b.String(), "- want: allow, sandbox read-only") || !strings.Contains(b.String(), "+ got:  allow (rule builds), sandbox workspace-write") {
		t.Fatalf("%s", b.String())
	}
	if _, err := Parse("p.yaml", []byte(profilePolicy+"tests:\n  - {cmd: rm, want: ask, sandbox: read-only}\n"), nil); err == nil || !strings.Contains(err.Error(), "sandbox is for tests that want allow") {
		t.Fatal(err)
	}
}
