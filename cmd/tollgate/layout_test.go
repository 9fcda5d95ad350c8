package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/server"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

// TestServeRefusesStateInWorkdir: a store, policy or tokens file inside the
// bash tool's working directory is refused at start-up, naming the risk,
// unless --allow-state-in-workdir (issue 21's attacks B and C: an
// approved command rewrote the store and the policy there).
func TestServeRefusesStateInWorkdir(t *testing.T) {
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte("default: ask\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := "sqlite:" + filepath.Join(t.TempDir(), "t.db")
	for name, args := range map[string][]string{
		"store":  {"--store", "sqlite:" + filepath.Join(dir, "t.db")},
		"policy": {"--store", outside, "--policy", policyFile},
	} {
		code, _, errOut := runCLI(t, "", append([]string{"serve", "--addr", "127.0.0.1:0", "--dir", dir}, args...)...)
		if code != 2 || !strings.Contains(errOut, "inside the bash tool's working directory") || !strings.Contains(errOut, "--allow-state-in-workdir") {
			t.Errorf("%s inside --dir: exit %d, %q; want 2 and the risk named", name, code, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "t.db")); err == nil {
		t.Error("the refused store was created")
	}
}

// TestDefaultStoreIsNotInTheWorkingDirectory: with no --store, serve's
// store is in the user's state directory (0700), not where it starts.
func TestDefaultStoreIsNotInTheWorkingDirectory(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	want := "sqlite:" + filepath.Join(state, "tollgate", "tollgate.db")
	if got := defaultStore(); got != want {
		t.Fatalf("defaultStore() = %q, want %q", got, want)
	}
	if err := ensureStoreDir(defaultStore(), defaultStore()); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(state, "tollgate"))
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("state directory: %v, %v; want 0700", st, err)
	}
	t.Setenv("XDG_STATE_HOME", "")
	if got := defaultStore(); !strings.HasPrefix(got, "sqlite:~/.local/state/tollgate/") {
		t.Errorf("without XDG_STATE_HOME: %q", got)
	}
}

// TestConfinedCommandsDoNotSeeTheStore: a store the user keeps in the
// working directory anyway is empty and read-only in a confined
// command's view, while it holds the threads outside.
func TestConfinedCommandsDoNotSeeTheStore(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	code, out, errOut := runCLI(t, "", "run", "--policy", "builtin", "--store", "sqlite:"+filepath.Join(dir, "t.db"), "--dir", dir, "$ wc -c t.db t.db-wal")
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	st, err := os.Stat(filepath.Join(dir, "t.db"))
	if err != nil || st.Size() == 0 {
		t.Fatalf("the store outside the sandbox: %v, %v; the test proves nothing", st, err)
	}
	if !strings.Contains(out, "0 t.db\n") || !strings.Contains(out, "0 t.db-wal") || !strings.Contains(out, "0 total") {
		t.Errorf("the confined command saw the store:\n%s", out)
	}
}

// TestGatewayTokensAreNotInTheWorkingDirectory: the gateway's token files
// are made in the user's configuration directory, not the current one,
// where an allowed read_file returned the reviewers' token (issue 21's
// attack D).
func TestGatewayTokensAreNotInTheWorkingDirectory(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Chdir(t.TempDir())
	for _, name := range []string{"gateway.token", "gateway.reviewer-token"} {
		file := configFile(name)
		if !strings.HasPrefix(file, "~/.config/tollgate/") {
			t.Fatalf("configFile(%q) = %q", name, file)
		}
		if _, _, err := secretFile("TOLLGATE_TEST_UNSET_TOKEN", file, "a token"); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(filepath.Join(home, ".config", "tollgate", name))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want a 0600 file in ~/.config/tollgate", name, st, err)
		}
	}
	if entries, _ := os.ReadDir("."); len(entries) > 0 {
		t.Errorf("the current directory holds %v", entries)
	}
	if got := gatewayStore(); !strings.HasPrefix(got, "sqlite:~/.local/state/tollgate/") {
		t.Errorf("gatewayStore() = %q", got)
	}
}

// TestServeRefusesAPasswordOnTheCommandLine: a store URL's password on
// the command line is readable by every process in /proc; serve says
// where to put it instead.
func TestServeRefusesAPasswordOnTheCommandLine(t *testing.T) {
	code, _, errOut := runCLI(t, "", "serve", "--addr", "127.0.0.1:0", "--dir", t.TempDir(), "--store", "postgres://tollgate:s3cret@127.0.0.1:1/tollgate")
	if code != 2 || !strings.Contains(errOut, "PGPASSWORD") || strings.Contains(errOut, "s3cret") {
		t.Errorf("exit %d, %q; want 2, PGPASSWORD named and the password not shown", code, errOut)
	}
}

// TestUnconfinedIsLoud: with --sandbox unconfined the start-up line says
// that the tool's commands can reach tollgate's state.
func TestUnconfinedIsLoud(t *testing.T) {
	f := sandboxFlags{profile: "unconfined"}
	if line := f.startupLine(); !strings.Contains(line, "UNCONFINED") || !strings.Contains(line, "approve its own calls") {
		t.Errorf("unconfined: %q", line)
	}
	// And the page says it to every reviewer.
	if n := f.notices(); len(n) != 1 || n[0].Code != "unconfined" || !strings.Contains(n[0].Message, "approve its own calls") {
		t.Errorf("unconfined: notices %+v", n)
	}
	f.profile = "workspace-write"
	if line := f.startupLine(); strings.Contains(line, "UNCONFINED") {
		t.Errorf("workspace-write: %q", line)
	}
	// Where the kernel cannot enforce the profile, the page says that
	// instead; where it can, nothing.
	if n, err := f.notices(), bash.Check().Enforceable(bash.WorkspaceWrite); err == nil && len(n) != 0 || err != nil && (len(n) != 1 || n[0].Code != "sandbox") {
		t.Errorf("workspace-write (enforceable: %v): notices %+v", err, n)
	}
}

// TestPolicyReloadThatAllowsMoreWarns: a reload that loosens the policy
// is logged as a warning naming what it may now allow (issue 21's attack
// C: an approved printf made the policy's default allow, silently).
func TestPolicyReloadThatAllowsMoreWarns(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	write := func(data string) {
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("default: ask\nrules:\n  - {name: no-rm, tool: bash, command: rm, action: block}\n")
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := watchedPolicy(ctx, file, slog.New(slog.NewTextHandler(&logs, nil)), "reloaded", policyWatch{}); err != nil {
		t.Fatal(err)
	}
	write("default: allow\nrules: []\n")
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), "may allow more") {
		if time.Now().After(deadline) {
			t.Fatalf("no warning after the policy was loosened; the log:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "the default is allow, was ask") {
		t.Errorf("the warning does not say what changed:\n%s", out)
	}
}

// TestPolicyReloadManual: with --policy-reload manual a changed policy
// file takes effect on SIGHUP only — not while a file watched the default
// way (the control, started at the same time) is reloaded twice — and a
// reload that loosens it reaches the page's notices, saying what and
// which file.
func TestPolicyReloadManual(t *testing.T) {
	dir := t.TempDir()
	manualFile, autoFile := filepath.Join(dir, "manual.yaml"), filepath.Join(dir, "auto.yaml")
	write := func(file, data string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	strict, loose := "default: ask\nrules: []\n", "default: allow\nrules: []\n"
	write(manualFile, strict)
	write(autoFile, strict)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	board := &noticeBoard{fixed: []server.Notice{{Code: "unconfined", Message: "x"}}}
	log := slog.New(slog.DiscardHandler)
	manual, err := watchedPolicy(ctx, manualFile, log, "reloaded", policyWatch{manual: true, loosened: board.policyLoosened})
	if err != nil {
		t.Fatal(err)
	}
	auto, err := watchedPolicy(ctx, autoFile, log, "reloaded", policyWatch{})
	if err != nil {
		t.Fatal(err)
	}
	allows := func(rp *policy.Reloadable) func() bool {
		return func() bool {
			return rp.Evaluate(ctx, policy.Call{Tool: "bash", Args: map[string]any{"cmd": "touch x"}}).Action == policy.Allow
		}
	}
	write(manualFile, loose)
	write(autoFile, loose)
	waitFor(t, "the watched file's reload", 20*time.Second, allows(auto))
	write(autoFile, strict)
	waitFor(t, "the watched file's second reload", 20*time.Second, func() bool { return !allows(auto)() })
	if allows(manual)() || len(board.list()) != 1 {
		t.Fatalf("the manual policy was reloaded without SIGHUP: %v", board.list())
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload on SIGHUP", 20*time.Second, allows(manual))
	waitFor(t, "the loosened notice", 20*time.Second, func() bool { return len(board.list()) == 2 })
	n := board.list()[1]
	if n.Code != "policy_loosened" || !strings.Contains(n.Message, manualFile) || !strings.Contains(n.Message, "the default is allow, was ask") || n.At.IsZero() {
		t.Errorf("notice %+v", n)
	}
}

// syncBuffer is a buffer a logger writes while a test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMissingModelKeyIsSaidAtStart: a model whose key is not set is said
// in one line at start-up (run stops there; serve warns), not as the
// SDK's error on every message.
func TestMissingModelKeyIsSaidAtStart(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "")
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	for _, spec := range []string{"anthropic:claude-sonnet-4-6", "openai:gpt-4.1"} {
		code, _, errOut := runCLI(t, "", "run", "--model", spec, "--dir", t.TempDir(), "hi")
		if code != 2 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "_API_KEY is not set") {
			t.Errorf("%s without a key: exit %d, %q; want 2 and one line naming the variable", spec, code, errOut)
		}
	}
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
	if p := credentialProblem("openai:llama3.1"); p != "" {
		t.Errorf("a local OpenAI-compatible server needs no key: %q", p)
	}
	if p := credentialProblem("demo"); p != "" {
		t.Errorf("demo: %q", p)
	}
}
