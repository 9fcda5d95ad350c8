package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

func needSandbox(t *testing.T) {
	t.Helper()
	if err := bash.Check().Enforceable(bash.ReadOnly); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI: the sandbox must be enforced here: %v", err)
		}
		t.Skip(err)
	}
}

func TestSandboxCheck(t *testing.T) {
	code, out, _ := runCLI(t, "", "sandbox", "check")
	want := 0
	if bash.Check().Enforceable(bash.ReadOnly) != nil {
		want = 1
	}
	if code != want || !strings.Contains(out, "landlock ABI:") || !strings.Contains(out, "read-only ") {
		t.Fatalf("exit %d, want %d:\n%s", code, want, out)
	}
	// The test binary has no helper binary next to it: it is its own, and
	// says why.
	if !strings.Contains(out, "helper:") || !strings.Contains(out, "no tollgate-sandbox next to") {
		t.Fatalf("the report does not say which sandbox helper runs:\n%s", out)
	}
	code, out, _ = runCLI(t, "", "sandbox", "check", "--json")
	if code != want || !strings.Contains(out, `"landlock_abi"`) || !strings.Contains(out, `"profiles"`) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestRunSandboxFromPolicy: a command the policy allows only under
// read-only runs where it cannot write, even though the tool's own profile
// (workspace-write) could; a command allowed without a profile runs under
// the tool's. The start-up line says what is enforced.
func TestRunSandboxFromPolicy(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	pol := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(pol, []byte(`version: 1
rules:
  - name: touch-confined
    tool: bash
    command: touch
    when: command.args.exists(a, a == "confined")
    action: allow
    allow_writes: true
    sandbox: read-only
  - name: touch
    tool: bash
    command: touch
    action: allow
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "", "run", "--policy", pol, "--dir", dir, "$ touch confined\n$ touch free")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "touch: cannot touch 'confined': Read-only file system") {
		t.Errorf("output:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "confined")); err == nil {
		t.Error("the read-only command wrote")
	}
	if _, err := os.Stat(filepath.Join(dir, "free")); err != nil {
		t.Error("the workspace-write command did not write")
	}
	if !strings.Contains(errOut, "sandbox: bash tool profile workspace-write; landlock ABI") {
		t.Errorf("no start-up line:\n%s", errOut)
	}
}

func TestPolicyExplainShowsSandbox(t *testing.T) {
	code, out, _ := runCLI(t, "", "policy", "explain", "../../examples/policies/sandbox.yaml", "--tool", "bash", "--args", `{"cmd":"ls"}`)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	want := "sandbox:  read-only"
	if err := bash.Check().Enforceable(bash.ReadOnly); err != nil {
		want = "cannot be enforced here"
	}
	if !strings.Contains(out, want) {
		t.Fatalf("want %q:\n%s", want, out)
	}
}

// TestRunApprovedRunsUnderToolProfile: what a person approves runs under
// the tool's profile (the policy does not allow it, and the tool finds the
// answered question); here read-only, so the approved write fails.
func TestRunApprovedRunsUnderToolProfile(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	pol := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\nrules:\n  - {name: ls, tool: bash, command: ls, action: allow, sandbox: read-only}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		profile string
		wrote   bool
	}{{"workspace-write", true}, {"read-only", false}} {
		code, out, errOut := runCLI(t, "a\n", "run", "--policy", pol, "--dir", dir, "--sandbox", c.profile, "$ touch approved-"+c.profile)
		if code != 0 || !strings.Contains(out, "ran, exit") {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		if _, err := os.Stat(filepath.Join(dir, "approved-"+c.profile)); (err == nil) != c.wrote {
			t.Errorf("--sandbox %s: wrote %v, want %v\n%s", c.profile, err == nil, c.wrote, out)
		}
	}
}

// sandbox exec runs a command in this directory under a profile, its
// output and exit status passed through: under read-only it writes
// nothing; several words are one command and its arguments, quoted.
func TestSandboxExec(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	t.Chdir(dir)
	os.WriteFile(filepath.Join(dir, "in.txt"), []byte("inside\n"), 0o644)
	code, out, errOut := runCLI(t, "", "sandbox", "exec", "--", "cat in.txt; echo x > out.txt; exit 7")
	if code != 7 || !strings.Contains(out, "inside") || !strings.Contains(errOut, "Read-only file system") {
		t.Fatalf("read-only: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.txt")); err == nil {
		t.Fatal("a read-only command wrote a file")
	}
	code, out, _ = runCLI(t, "", "sandbox", "exec", "--profile", "workspace-write", "--", "sh", "-c", "echo 'it''s' > out.txt; cat out.txt")
	if code != 0 || strings.TrimSpace(out) != "its" {
		t.Fatalf("workspace-write with arguments: exit %d %q", code, out)
	}
	if code, _, errOut := runCLI(t, "", "sandbox", "exec", "--profile", "unconfined", "--", "ls"); code != 2 || !strings.Contains(errOut, "read-only or workspace-write") {
		t.Fatalf("unconfined: %d %s", code, errOut)
	}
}
