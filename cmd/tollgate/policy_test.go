package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPolicyCommands(t *testing.T) {
	sandbox := filepath.Join("..", "..", "examples", "policies", "sandbox.yaml")
	if code, out, errOut := runCLI(t, "", "policy", "test", sandbox); code != 0 {
		t.Fatalf("policy test on the shipped sandbox: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ := runCLI(t, "", "policy", "explain", sandbox, "--tool", "bash", "--args", `{"cmd":"ls; rm -rf ~"}`)
	if code != 0 || !strings.Contains(out, "block") {
		t.Fatalf("explain: exit %d\n%s", code, out)
	}

	dir := t.TempDir()
	failing := filepath.Join(dir, "p.yaml")
	os.WriteFile(failing, []byte("version: 1\nrules:\n  - name: ls\n    tool: bash\n    command: [ls]\n    action: allow\ntests:\n  - cmd: rm x\n    want: allow\n"), 0o644)
	if code, out, errOut := runCLI(t, "", "policy", "test", failing); code != 1 || !strings.Contains(out+errOut, "rm x") {
		t.Fatalf("a failing policy test: exit %d\n%s\n%s", code, out, errOut)
	}
	broken := filepath.Join(dir, "broken.yaml")
	os.WriteFile(broken, []byte("version: 1\nrules:\n  - name: r\n    tool: bash\n    when: args.cmd ==\n    action: allow\n"), 0o644)
	if code, out, errOut := runCLI(t, "", "policy", "test", broken); code == 0 || !strings.Contains(out+errOut, "broken.yaml:5") {
		t.Fatalf("a broken policy: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "", "run", "--policy", broken, "$ ls"); code != 1 || !strings.Contains(errOut, "broken.yaml") {
		t.Fatalf("run with a broken policy: exit %d %s", code, errOut)
	}
}

func TestRunWithThePolicyFile(t *testing.T) {
	sandbox := filepath.Join("..", "..", "examples", "policies", "sandbox.yaml")
	code, out, errOut := runCLI(t, "d\nnot now\n", "run", "--policy", sandbox, "--dir", t.TempDir(),
		"tidy\n$ ls\n$ ls; rm -rf ~\n$ touch notes.txt")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"`ls`: ran, exit 0",
		"`ls; rm -rf ~`: blocked by the policy:",
		"`touch notes.txt`: denied: not now", // asked, and the person said no
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
