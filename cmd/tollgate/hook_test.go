package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/exectest"
)

// hookAnswer is what a hook printed, as the agent reads it.
type hookAnswer struct {
	Decision string          `json:"permissionDecision"`
	Reason   string          `json:"permissionDecisionReason"`
	Input    json.RawMessage `json:"updatedInput"`
}

func parseHookOut(t *testing.T, out string) hookAnswer {
	t.Helper()
	var v struct {
		H hookAnswer `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("the hook printed no answer an agent reads: %q", out)
	}
	return v.H
}

const samplePre = `{"session_id":"s","cwd":"/p","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"t1"}`

// A command hook never allows by itself: a server it cannot reach is a
// deny (or the agent's own prompt with --on-error ask; Codex has none).
func TestHookServerDown(t *testing.T) {
	url := downServer(t)
	t.Setenv("TOLLGATE_TOKEN", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"hook", "claude-code", "--server", url}, "deny"},
		{[]string{"hook", "claude-code", "--server", url, "--on-error", "ask"}, "ask"},
		{[]string{"hook", "codex", "--server", url, "--on-error", "ask"}, "deny"},
	} {
		code, out, errOut := runCLI(t, samplePre, c.args...)
		got := parseHookOut(t, out)
		if code != 0 || got.Decision != c.want || !strings.Contains(got.Reason, "cannot be reached") {
			t.Errorf("%v: exit %d, %+v (%s), want %s saying the server cannot be reached", c.args, code, got, errOut, c.want)
		}
	}
	// A result to record has nothing to decide.
	code, out, _ := runCLI(t, `{"hook_event_name":"PostToolUse"}`, "hook", "claude-code", "--server", url)
	if code != 0 || strings.TrimSpace(out) != "{}" {
		t.Errorf("PostToolUse with the server down: %d %q", code, out)
	}
}

// The hook sends the call again while the server restarts (503, or its
// connection lost), and prints the answer that comes.
func TestHookRetries(t *testing.T) {
	var n atomic.Int32
	var sawToken, sawRetry atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawToken.Store(r.Header.Get("Authorization") == "Bearer sekrit-token")
		sawRetry.Store(r.Header.Get("X-Tollgate-Hook-Retry") == "1" && r.Header.Get("X-Tollgate-Hook-Wait") == "28")
		switch n.Add(1) {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			hj, _ := w.(http.Hijacker)
			c, _, _ := hj.Hijack()
			c.Close() // the server went away mid-wait
		default:
			w.Write([]byte(`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}`))
		}
	}))
	defer srv.Close()
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("sekrit-token\n"), 0o600)
	code, out, errOut := runCLI(t, samplePre, "hook", "claude-code", "--server", srv.URL, "--token-file", tok, "--timeout", "30s")
	if got := parseHookOut(t, out); code != 0 || got.Decision != "allow" || n.Load() != 3 {
		t.Fatalf("after a 503 and a lost connection: exit %d, %+v after %d requests (%s)", code, got, n.Load(), errOut)
	}
	if !sawToken.Load() || !sawRetry.Load() {
		t.Error("the hook did not send its token, or did not say it retries and how long it waits")
	}
}

func TestHookInstall(t *testing.T) {
	dir := t.TempDir()
	settings := filepath.Join(dir, ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(settings), 0o755)
	own := `{
  "model": "opus",
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "my-check"}]}
    ]
  }
}
`
	os.WriteFile(settings, []byte(own), 0o600)
	code, out, errOut := runCLI(t, "", "hook", "install", "claude-code", "--project", dir, "--server", "http://127.0.0.1:1", "--timeout", "5m")
	if code != 0 {
		t.Fatalf("install: %d %s %s", code, out, errOut)
	}
	if !strings.Contains(out, "+            \"command\": ") || !strings.Contains(out, "wrote "+settings) {
		t.Errorf("the install shows no diff:\n%s", out)
	}
	raw, _ := os.ReadFile(settings)
	var doc struct {
		Model string
		Hooks map[string][]struct {
			Matcher string
			Hooks   []map[string]any
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Model != "opus" || len(doc.Hooks["PreToolUse"]) != 2 || doc.Hooks["PreToolUse"][0].Hooks[0]["command"] != "my-check" {
		t.Fatalf("the user's settings were not kept:\n%s", raw)
	}
	ours := doc.Hooks["PreToolUse"][1].Hooks[0]
	if cmd, _ := ours["command"].(string); !strings.Contains(cmd, " hook claude-code --server http://127.0.0.1:1 --timeout 300s") || ours["timeout"] != 300.0 {
		t.Errorf("the hook: %v", ours)
	}
	if len(doc.Hooks["PostToolUse"]) != 1 || len(doc.Hooks["PostToolUseFailure"]) != 1 {
		t.Errorf("the result hooks: %v", doc.Hooks)
	}
	if st, _ := os.Stat(settings); st.Mode().Perm() != 0o600 {
		t.Errorf("the file's mode became %v", st.Mode().Perm())
	}
	// Twice: nothing changes.
	if code, out, _ := runCLI(t, "", "hook", "install", "claude-code", "--project", dir, "--server", "http://127.0.0.1:1", "--timeout", "5m"); code != 0 || !strings.Contains(out, "nothing to change") {
		t.Errorf("a second install: %d\n%s", code, out)
	}
	// Another server: the hooks are replaced, not added.
	runCLI(t, "", "hook", "install", "claude-code", "--project", dir, "--server", "http://127.0.0.1:2")
	raw, _ = os.ReadFile(settings)
	if strings.Count(string(raw), " hook claude-code ") != 3 || strings.Contains(string(raw), "127.0.0.1:1") {
		t.Errorf("a reinstall did not replace the hooks:\n%s", raw)
	}
	if code, _, _ := runCLI(t, "", "hook", "uninstall", "claude-code", "--project", dir); code != 0 {
		t.Fatal("uninstall failed")
	}
	raw, _ = os.ReadFile(settings)
	if strings.Contains(string(raw), "hook claude-code") || !strings.Contains(string(raw), "my-check") || strings.Contains(string(raw), "PostToolUse") {
		t.Errorf("after uninstall:\n%s", raw)
	}
	// Not JSON: refused, unchanged.
	os.WriteFile(settings, []byte("{not json"), 0o644)
	if code, _, errOut := runCLI(t, "", "hook", "install", "claude-code", "--project", dir); code != 1 || !strings.Contains(errOut, "is not JSON") {
		t.Errorf("a broken settings file: %d %s", code, errOut)
	}
}

func TestHookInstallCodexAndHTTP(t *testing.T) {
	home := t.TempDir()
	t.Setenv("CODEX_HOME", home)
	code, out, errOut := runCLI(t, "", "hook", "install", "codex", "--server", "http://127.0.0.1:1")
	if code != 0 || !strings.Contains(out, "trust it") {
		t.Fatalf("codex install: %d %s %s", code, out, errOut)
	}
	raw, _ := os.ReadFile(filepath.Join(home, "hooks.json"))
	if !strings.Contains(string(raw), " hook codex ") || strings.Contains(string(raw), "PostToolUseFailure") {
		t.Errorf("codex's hooks.json:\n%s", raw)
	}
	if code, _, errOut := runCLI(t, "", "hook", "install", "codex", "--project", "."); code != 2 || !strings.Contains(errOut, "hooks.json only") {
		t.Errorf("codex --project: %d %s", code, errOut)
	}
	dir := t.TempDir()
	if code, out, _ := runCLI(t, "", "hook", "install", "claude-code", "--project", dir, "--http", "--server", "http://127.0.0.1:1", "--timeout", "2m"); code != 0 || !strings.Contains(out, "TOLLGATE_HOOK_TOKEN") {
		t.Fatalf("--http: %d %s", code, out)
	}
	raw, _ = os.ReadFile(filepath.Join(dir, ".claude", "settings.json"))
	for _, want := range []string{`"type": "http"`, `"url": "http://127.0.0.1:1/v1/hooks/claude-code?wait=120"`, `"Authorization": "Bearer $TOLLGATE_HOOK_TOKEN"`, `"allowedEnvVars"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the http hook lacks %s:\n%s", want, raw)
		}
	}
	if code, _, _ := runCLI(t, "", "hook", "install", "codex", "--http"); code != 2 {
		t.Error("--http for codex was taken")
	}
	// Uninstalled, a file that held nothing but tollgate's hooks is gone
	// (not left as {}); --dry-run only says so.
	hooksJSON := filepath.Join(home, "hooks.json")
	if code, out, _ := runCLI(t, "", "hook", "uninstall", "codex", "--dry-run"); code != 0 || !strings.Contains(out, "+++ /dev/null") {
		t.Errorf("uninstall --dry-run: %d %s", code, out)
	}
	if _, err := os.Stat(hooksJSON); err != nil {
		t.Fatalf("--dry-run removed it: %v", err)
	}
	if code, out, errOut := runCLI(t, "", "hook", "uninstall", "codex"); code != 0 || !strings.Contains(out, "removed "+hooksJSON) {
		t.Errorf("uninstall: %d %s %s", code, out, errOut)
	}
	if raw, err := os.ReadFile(hooksJSON); err == nil {
		t.Errorf("uninstall left %s:\n%s", hooksJSON, raw)
	}
}

// Install writes the small tollgate-hook when it is on PATH (or beside
// tollgate), and --confine the confinement this machine enforces.
func TestHookInstallSmallBinaryAndConfine(t *testing.T) {
	bin := t.TempDir()
	small := filepath.Join(bin, "tollgate-hook")
	exectest.WriteProgram(small, []byte("#!/bin/sh\n"))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	home := t.TempDir()
	t.Setenv("CODEX_HOME", home)
	code, out, errOut := runCLI(t, "", "hook", "install", "codex", "--server", "http://127.0.0.1:1", "--confine")
	if code != 0 {
		t.Fatalf("install: %d %s %s", code, out, errOut)
	}
	raw, _ := os.ReadFile(filepath.Join(home, "hooks.json"))
	if !strings.Contains(string(raw), `"command": "`+small+` codex --server http://127.0.0.1:1`) || !strings.Contains(string(raw), "--confine-exe ") {
		t.Errorf("the small hook with confinement:\n%s", raw)
	}
	// Reinstalled without it, the same hooks are found and replaced.
	os.Remove(small)
	runCLI(t, "", "hook", "install", "codex", "--server", "http://127.0.0.1:1")
	raw, _ = os.ReadFile(filepath.Join(home, "hooks.json"))
	if strings.Contains(string(raw), small) || strings.Count(string(raw), " codex --server") != 2 {
		t.Errorf("after reinstalling with tollgate hook:\n%s", raw)
	}
}

// The install asks the server how long its questions may wait, and says
// when the hook would stop waiting first.
func TestHookInstallTimeoutCheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/hooks" || r.Header.Get("Authorization") != "Bearer install-token-0123456789" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		w.Write([]byte(`{"agents": ["claude-code", "codex"], "max_timeout_seconds": 900}`))
	}))
	defer srv.Close()
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("install-token-0123456789"), 0o600)
	dir := t.TempDir()
	_, out, _ := runCLI(t, "", "hook", "install", "claude-code", "--project", dir, "--server", srv.URL, "--token-file", tok, "--timeout", "5m")
	if !strings.Contains(out, "lets a question wait up to 15m0s, but the hook waits 4m58s") || !strings.Contains(out, "--timeout 15m3s") {
		t.Errorf("a hook shorter than the policy's questions is not said:\n%s", out)
	}
	_, out, _ = runCLI(t, "", "hook", "install", "claude-code", "--project", dir, "--server", srv.URL, "--token-file", tok, "--timeout", "20m")
	if strings.Contains(out, "warning") {
		t.Errorf("a hook long enough is warned about:\n%s", out)
	}
}
