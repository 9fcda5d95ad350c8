package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/internal/agenttest"
	"github.com/tollgate-ai/tollgate/server"
)

// The hook policy of the agents' tests: reads run, .slow asks for 2 s,
// writes inside the project run, everything else is asked.
const agentsPolicy = `version: 1
default: ask
timeout: 1m
shell:
  Bash: command
rules:
  - name: reads
    tool: Bash
    command: [ls, cat]
    when: command.outside.size() == 0
    action: allow
  - name: slow
    tool: Bash
    command: touch
    when: command.args.exists(a, a == "slow.txt")
    action: ask
    timeout: 2s
  - name: edits-inside
    tool: Write
    when: path_inside(args.file_path, dir)
    action: allow
`

const (
	agentSecret    = "agent-secret-0123456789"
	reviewerSecret = "alice-secret-0123456789"
)

// hookServer is a tollgate serve with tokens: the agent's hook holds a
// client token, alice (the test) answers with a reviewer's.
type hookServer struct {
	*serveProc
	tokenFile string
}

func startHookServer(t *testing.T) *hookServer {
	t.Helper()
	dir := t.TempDir()
	pol := filepath.Join(dir, "hooks.yaml")
	os.WriteFile(pol, []byte(agentsPolicy), 0o600)
	tokens := fmt.Sprintf("tokens:\n  - {name: agent, role: client, token_sha256: %s}\n  - {name: alice, role: reviewer, token_sha256: %s}\n",
		server.HashToken(agentSecret), server.HashToken(reviewerSecret))
	os.WriteFile(filepath.Join(dir, "tokens.yaml"), []byte(tokens), 0o600)
	tok := filepath.Join(dir, "hook.token")
	os.WriteFile(tok, []byte(agentSecret+"\n"), 0o600)
	p := startServe(t, "--store", "sqlite:"+filepath.Join(dir, "t.db"), "--tokens", filepath.Join(dir, "tokens.yaml"),
		"--hook-policy", pol, "--dir", t.TempDir())
	return &hookServer{serveProc: p, tokenFile: tok}
}

// api calls the server as alice.
func (s *hookServer) api(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	return apiCall(t, reviewerSecret, method, s.base+path, body)
}

// pending waits for n pending questions (of any thread) and returns them
// by call id.
func (s *hookServer) pending(t *testing.T, n int) map[string]map[string]any {
	t.Helper()
	var out map[string]map[string]any
	waitFor(t, fmt.Sprintf("%d pending questions", n), 60*time.Second, func() bool {
		_, body := s.api(t, "GET", "/v1/questions?status=pending", "")
		qs, _ := body["questions"].([]any)
		out = map[string]map[string]any{}
		for _, q := range qs {
			m := q.(map[string]any)
			out[m["call_id"].(string)] = m
		}
		return len(out) >= n
	})
	return out
}

// answer answers q as alice, with the digest of the call she saw.
func (s *hookServer) answer(t *testing.T, q map[string]any, answer string) {
	t.Helper()
	path := "/v1/questions/" + url.PathEscape(q["thread_id"].(string)) + "/" + url.PathEscape(q["id"].(string)) + "/answer"
	var a map[string]any
	if err := json.Unmarshal([]byte(answer), &a); err != nil {
		t.Fatalf("answer %s: %v", answer, err)
	}
	a["digest"] = q["digest"]
	withDigest, _ := json.Marshal(a)
	if code, body := s.api(t, "POST", path, string(withDigest)); code != 200 {
		t.Fatalf("answering %s: %d %v", q["id"], code, body)
	}
}

// threadShow is tollgate threads show of the thread, from the server.
func (s *hookServer) threadShow(t *testing.T, thread string) string {
	t.Helper()
	t.Setenv("TOLLGATE_TOKEN", reviewerSecret)
	_, out, errOut := runCLI(t, "", "threads", "show", "--server", s.base, thread)
	return out + errOut
}

// noUnallowedRuns checks that no report of a run call in the threads of
// the agent's sessions says tollgate did not allow it: every call these
// tests let the agent run — as it asked, edited, confined — is reported
// run with the input tollgate let through.
func (s *hookServer) noUnallowedRuns(t *testing.T, prefix string) {
	t.Helper()
	_, body := apiCall(t, reviewerSecret, "GET", s.base+"/v1/threads?limit=100", "")
	for _, x := range body["threads"].([]any) {
		id := x.(map[string]any)["id"].(string)
		if !strings.HasPrefix(id, prefix) {
			continue
		}
		if out := s.threadShow(t, id); strings.Contains(out, "which tollgate did not allow") {
			t.Errorf("thread %s holds a report of a call tollgate did not allow:\n%s", id, out)
		}
	}
}

// project is a directory the agent works in, with a file to read.
func project(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "seed.txt"), []byte("seed content 42\n"), 0o644)
	return dir
}

// downServer is the URL of a server that is not there: a port nothing
// listens on.
func downServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	return "http://" + ln.Addr().String()
}

func exists(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}

// install runs tollgate hook install for the agent into dir (claude-code)
// or $CODEX_HOME; the hook is this test binary, run as tollgate.
func install(t *testing.T, agent, dir, server, tokenFile string, extra ...string) {
	t.Helper()
	args := append([]string{"hook", "install", agent, "--server", server, "--token-file", tokenFile, "--timeout", "30s"}, extra...)
	if agent == "claude-code" {
		args = append(args, "--project", dir)
	}
	if code, out, errOut := runCLI(t, "", args...); code != 0 {
		t.Fatalf("hook install: %d\n%s\n%s", code, out, errOut)
	}
}

// asCLI is the environment in which the agent's hooks run this test
// binary as tollgate.
var asCLI = []string{"TOLLGATE_TEST_AS_CLI=1", "TOLLGATE_TOKEN="}

func bashCall(cmd string) agenttest.Call {
	return agenttest.Call{Name: "Bash", Input: map[string]any{"command": cmd, "description": "a command"}}
}

// Claude Code's own hooks, installed by tollgate hook install, decide
// every call through tollgate serve: what each answer does to the call,
// the model's tool result, and the files.
func TestClaudeCodeHooks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Claude Code and tollgate serve")
	}
	agenttest.ClaudeCode(t)
	s := startHookServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func(t *testing.T, dir string, turns ...[]agenttest.Call) (*agenttest.Model, *agenttest.Run) {
		m := agenttest.NewAnthropic(t, turns...)
		return m, agenttest.StartClaude(t, ctx, m, dir, t.TempDir(), asCLI...)
	}

	t.Run("allowed", func(t *testing.T) {
		dir := project(t)
		install(t, "claude-code", dir, s.base, s.tokenFile)
		m, r := run(t, dir, []agenttest.Call{bashCall("cat seed.txt")})
		r.Wait(t, time.Minute)
		res, ok := m.Result(agenttest.CallID(0, 0))
		if !ok || res.IsError || !strings.Contains(res.Content, "seed content 42") {
			t.Fatalf("the model got %+v (%v); claude said:\n%s", res, ok, r.Output)
		}
		_, body := s.api(t, "GET", "/v1/questions?status=answered", "")
		if qs, _ := body["questions"].([]any); len(qs) != 0 {
			t.Errorf("an allowed call asked: %v", qs)
		}
		// PostToolUse: what came back is in the thread.
		var thread string
		waitFor(t, "the call's output in the thread", 10*time.Second, func() bool {
			_, th := apiCall(t, reviewerSecret, "GET", s.base+"/v1/threads?limit=50", "")
			for _, x := range th["threads"].([]any) {
				id := x.(map[string]any)["id"].(string)
				if strings.HasPrefix(id, "claude-code:") && strings.Contains(s.threadShow(t, id), "seed content 42") {
					thread = id
					return true
				}
			}
			return false
		})
		out := s.threadShow(t, thread)
		for _, want := range []string{"Claude Code session", "→ Bash (call " + agenttest.CallID(0, 0) + ")", "allowed by the policy", "Claude Code ran it", "seed content 42"} {
			if !strings.Contains(out, want) {
				t.Errorf("threads show lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "hook-call:") {
			t.Errorf("threads show prints the relay's envelope:\n%s", out)
		}
	})

	t.Run("approved, denied, edited", func(t *testing.T) {
		dir := project(t)
		install(t, "claude-code", dir, s.base, s.tokenFile)
		// Three turns of one call each: Claude runs them one after the
		// other, each waiting for its answer.
		m, r := run(t, dir,
			[]agenttest.Call{bashCall("echo once >> count.txt")},
			[]agenttest.Call{bashCall("touch denied.txt")},
			[]agenttest.Call{bashCall("touch wrong.txt")})
		q := s.pending(t, 1)[agenttest.CallID(0, 0)]
		if q["tool"] != "Bash" || !strings.HasPrefix(q["thread_id"].(string), "claude-code:") {
			t.Fatalf("the question: %v", q)
		}
		if exists(dir, "count.txt") {
			t.Fatal("the call ran before it was approved")
		}
		s.answer(t, q, `{"decision": "approve"}`)
		q = s.pending(t, 1)[agenttest.CallID(1, 0)]
		s.answer(t, q, `{"decision": "deny", "reason": "not in this repo"}`)
		q = s.pending(t, 1)[agenttest.CallID(2, 0)]
		s.answer(t, q, `{"decision": "edit", "edited_args": {"command": "touch edited.txt", "description": "a command"}}`)
		r.Wait(t, time.Minute)
		if b, _ := os.ReadFile(filepath.Join(dir, "count.txt")); string(b) != "once\n" {
			t.Errorf("the approved call ran %q, want once", b)
		}
		res, _ := m.Result(agenttest.CallID(1, 0))
		if !res.IsError || !strings.Contains(res.Content, "denied by alice: not in this repo") || exists(dir, "denied.txt") {
			t.Errorf("denied: the model got %+v; the file exists: %v", res, exists(dir, "denied.txt"))
		}
		if !exists(dir, "edited.txt") || exists(dir, "wrong.txt") {
			t.Errorf("edited: edited.txt %v, wrong.txt %v", exists(dir, "edited.txt"), exists(dir, "wrong.txt"))
		}
	})

	t.Run("timed out", func(t *testing.T) {
		dir := project(t)
		install(t, "claude-code", dir, s.base, s.tokenFile)
		m, r := run(t, dir, []agenttest.Call{bashCall("touch slow.txt")})
		r.Wait(t, time.Minute)
		res, _ := m.Result(agenttest.CallID(0, 0))
		if !res.IsError || !strings.Contains(res.Content, "timed out: nobody answered within 2s") || exists(dir, "slow.txt") {
			t.Errorf("the model got %+v; the file exists: %v", res, exists(dir, "slow.txt"))
		}
	})

	t.Run("server down", func(t *testing.T) {
		dir := project(t)
		install(t, "claude-code", dir, downServer(t), s.tokenFile)
		m, r := run(t, dir, []agenttest.Call{bashCall("cat seed.txt; touch down.txt")})
		r.Wait(t, time.Minute)
		res, _ := m.Result(agenttest.CallID(0, 0))
		if !res.IsError || !strings.Contains(res.Content, "cannot be reached") || exists(dir, "down.txt") {
			t.Errorf("the model got %+v; the file exists: %v", res, exists(dir, "down.txt"))
		}
	})

	t.Run("two calls at once", func(t *testing.T) {
		// Claude Code runs read-only commands at once: both are asked (they
		// read outside the project), both questions wait together, and
		// each gets its own answer.
		dir := project(t)
		install(t, "claude-code", dir, s.base, s.tokenFile)
		outside := t.TempDir()
		os.WriteFile(filepath.Join(outside, "a.txt"), []byte("alpha\n"), 0o644)
		os.WriteFile(filepath.Join(outside, "b.txt"), []byte("beta\n"), 0o644)
		m, r := run(t, dir, []agenttest.Call{bashCall("cat " + filepath.Join(outside, "a.txt")), bashCall("cat " + filepath.Join(outside, "b.txt"))})
		qs := s.pending(t, 2)
		a, b := qs[agenttest.CallID(0, 0)], qs[agenttest.CallID(0, 1)]
		if a == nil || b == nil || a["thread_id"] == b["thread_id"] {
			t.Fatalf("two pending questions on threads of their own: %v", qs)
		}
		s.answer(t, b, `{"decision": "deny", "reason": "not b"}`)
		s.answer(t, a, `{"decision": "approve"}`)
		r.Wait(t, time.Minute)
		ra, _ := m.Result(agenttest.CallID(0, 0))
		rb, _ := m.Result(agenttest.CallID(0, 1))
		if ra.IsError || !strings.Contains(ra.Content, "alpha") || !rb.IsError || !strings.Contains(rb.Content, "not b") {
			t.Errorf("a: %+v, b: %+v", ra, rb)
		}
	})

	t.Run("writes", func(t *testing.T) {
		dir := project(t)
		install(t, "claude-code", dir, s.base, s.tokenFile)
		outside := t.TempDir()
		m, r := run(t, dir, []agenttest.Call{
			{Name: "Write", Input: map[string]any{"file_path": filepath.Join(dir, "in.txt"), "content": "inside\n"}},
		}, []agenttest.Call{
			{Name: "Write", Input: map[string]any{"file_path": filepath.Join(outside, "out.txt"), "content": "outside\n"}},
		})
		q := s.pending(t, 1)[agenttest.CallID(1, 0)]
		if q == nil || !exists(dir, "in.txt") {
			t.Fatalf("the write inside ran at once (%v), the one outside waits: %v", exists(dir, "in.txt"), q)
		}
		s.answer(t, q, `{"decision": "deny", "reason": "stay in the project"}`)
		r.Wait(t, time.Minute)
		res, _ := m.Result(agenttest.CallID(1, 0))
		if !res.IsError || !strings.Contains(res.Content, "stay in the project") || exists(outside, "out.txt") {
			t.Errorf("outside: the model got %+v; written: %v", res, exists(outside, "out.txt"))
		}
	})

	t.Run("tollgate-hook", func(t *testing.T) {
		// The small binary, found on PATH by the install.
		bin := t.TempDir()
		build := exec.Command("go", "build", "-o", filepath.Join(bin, "tollgate-hook"), "../tollgate-hook")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building tollgate-hook: %v\n%s", err, out)
		}
		t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		dir := project(t)
		install(t, "claude-code", dir, s.base, s.tokenFile)
		raw, _ := os.ReadFile(filepath.Join(dir, ".claude", "settings.json"))
		if !strings.Contains(string(raw), filepath.Join(bin, "tollgate-hook")+" claude-code") {
			t.Fatalf("not the small hook:\n%s", raw)
		}
		m, r := run(t, dir, []agenttest.Call{bashCall("cat seed.txt")}, []agenttest.Call{bashCall("touch denied.txt")})
		s.answer(t, s.pending(t, 1)[agenttest.CallID(1, 0)], `{"decision": "deny", "reason": "no"}`)
		r.Wait(t, time.Minute)
		if res, _ := m.Result(agenttest.CallID(0, 0)); !strings.Contains(res.Content, "seed content 42") {
			t.Errorf("allowed: %+v", res)
		}
		if res, _ := m.Result(agenttest.CallID(1, 0)); !res.IsError || !strings.Contains(res.Content, "denied by alice: no") || exists(dir, "denied.txt") {
			t.Errorf("denied: %+v", res)
		}
	})

	t.Run("http hook", func(t *testing.T) {
		dir := project(t)
		install(t, "claude-code", dir, s.base, s.tokenFile, "--http")
		raw, _ := os.ReadFile(filepath.Join(dir, ".claude", "settings.json"))
		if !strings.Contains(string(raw), `"type": "http"`) {
			t.Fatalf("not an http hook:\n%s", raw)
		}
		m := agenttest.NewAnthropic(t, []agenttest.Call{bashCall("cat seed.txt")}, []agenttest.Call{bashCall("echo http >> count.txt")})
		r := agenttest.StartClaude(t, ctx, m, dir, t.TempDir(), "TOLLGATE_HOOK_TOKEN="+agentSecret)
		q := s.pending(t, 1)[agenttest.CallID(1, 0)]
		s.answer(t, q, `{"decision": "approve"}`)
		r.Wait(t, time.Minute)
		if res, _ := m.Result(agenttest.CallID(0, 0)); !strings.Contains(res.Content, "seed content 42") {
			t.Errorf("allowed over http: %+v", res)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "count.txt")); string(b) != "http\n" {
			t.Errorf("approved over http ran %q", b)
		}
	})
	s.noUnallowedRuns(t, "claude-code:")
}

// Codex's hooks (in $CODEX_HOME/hooks.json, written by tollgate hook
// install) decide its shell calls through tollgate serve. Codex hooks its
// shell only (tool Bash): apply_patch edits and its other tools are not
// hooked in 0.169.
func TestCodexHooks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Codex and tollgate serve")
	}
	agenttest.Codex(t)
	s := startHookServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	shell := func(cmd string) agenttest.Call {
		return agenttest.Call{Name: "exec_command", Input: map[string]any{"cmd": cmd}}
	}
	run := func(t *testing.T, server string, turns ...[]agenttest.Call) (string, *agenttest.Model, *agenttest.Run) {
		dir := project(t)
		m := agenttest.NewResponses(t, turns...)
		home := agenttest.CodexHome(t, m)
		t.Setenv("CODEX_HOME", home)
		install(t, "codex", dir, server, s.tokenFile)
		return dir, m, agenttest.StartCodex(t, ctx, dir, home, asCLI...)
	}

	t.Run("allowed, approved, denied, edited", func(t *testing.T) {
		dir, m, r := run(t, s.base,
			[]agenttest.Call{shell("cat seed.txt")},
			[]agenttest.Call{shell("echo once >> count.txt")},
			[]agenttest.Call{shell("touch denied.txt")},
			[]agenttest.Call{shell("touch wrong.txt")})
		s.answer(t, s.pending(t, 1)[agenttest.CallID(1, 0)], `{"decision": "approve"}`)
		s.answer(t, s.pending(t, 1)[agenttest.CallID(2, 0)], `{"decision": "deny", "reason": "not in this repo"}`)
		s.answer(t, s.pending(t, 1)[agenttest.CallID(3, 0)], `{"decision": "edit", "edited_args": {"command": "touch edited.txt"}}`)
		r.Wait(t, 2*time.Minute)
		if res, _ := m.Result(agenttest.CallID(0, 0)); !strings.Contains(res.Content, "seed content 42") {
			t.Errorf("allowed: the model got %+v; codex said:\n%s", res, r.Output)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "count.txt")); string(b) != "once\n" {
			t.Errorf("approved ran %q", b)
		}
		if res, _ := m.Result(agenttest.CallID(2, 0)); !strings.Contains(res.Content, "Command blocked by PreToolUse hook: tollgate: denied by alice: not in this repo") || exists(dir, "denied.txt") {
			t.Errorf("denied: %+v", res)
		}
		if !exists(dir, "edited.txt") || exists(dir, "wrong.txt") {
			t.Errorf("edited: edited.txt %v, wrong.txt %v", exists(dir, "edited.txt"), exists(dir, "wrong.txt"))
		}
		threads := map[string]bool{}
		_, body := s.api(t, "GET", "/v1/threads?limit=50", "")
		for _, x := range body["threads"].([]any) {
			if id := x.(map[string]any)["id"].(string); strings.HasPrefix(id, "codex:") {
				threads[id] = true
				if out := s.threadShow(t, id); strings.Contains(out, "→ Bash (call "+agenttest.CallID(0, 0)+")") && !strings.Contains(out, "Codex ran it") {
					t.Errorf("codex's PostToolUse is not in the thread:\n%s", out)
				}
			}
		}
		if len(threads) == 0 {
			t.Error("no codex session thread")
		}
	})

	t.Run("timed out, and two at once", func(t *testing.T) {
		dir, m, r := run(t, s.base,
			[]agenttest.Call{shell("touch slow.txt")},
			[]agenttest.Call{shell("touch a.txt"), shell("touch b.txt")})
		qs := s.pending(t, 2)
		a, b := qs[agenttest.CallID(1, 0)], qs[agenttest.CallID(1, 1)]
		if a == nil || b == nil {
			t.Fatalf("two pending questions: %v", qs)
		}
		s.answer(t, b, `{"decision": "deny", "reason": "not b"}`)
		s.answer(t, a, `{"decision": "approve"}`)
		r.Wait(t, 2*time.Minute)
		if res, _ := m.Result(agenttest.CallID(0, 0)); !strings.Contains(res.Content, "timed out") || exists(dir, "slow.txt") {
			t.Errorf("timed out: %+v", res)
		}
		if !exists(dir, "a.txt") || exists(dir, "b.txt") {
			t.Errorf("a.txt %v (approved), b.txt %v (denied)", exists(dir, "a.txt"), exists(dir, "b.txt"))
		}
	})

	t.Run("server down", func(t *testing.T) {
		dir, m, r := run(t, downServer(t), []agenttest.Call{shell("touch down.txt")})
		r.Wait(t, 2*time.Minute)
		if res, _ := m.Result(agenttest.CallID(0, 0)); !strings.Contains(res.Content, "cannot be reached") || exists(dir, "down.txt") {
			t.Errorf("server down: %+v, file %v", res, exists(dir, "down.txt"))
		}
	})
	s.noUnallowedRuns(t, "codex:")
}
