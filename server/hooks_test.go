package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/hooks"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/provider/scripted"
	"github.com/tollgate-ai/tollgate/server"
)

// hookFixture is a server that takes coding agents' hooks.
func hookFixture(t *testing.T, dev bool) *fixture {
	t.Helper()
	store := memory.New()
	p, err := policy.Parse("p.yaml", []byte("version: 1\nshell: {Bash: command}\nrules:\n  - {name: reads, tool: Bash, command: [ls], action: allow}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := hooks.New(hooks.Config{Store: store, Policy: p.HITL(), Explain: p.Evaluate, MaxTimeout: p.MaxTimeout})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(host.Config{Store: store, Agent: agent.Config{Provider: scripted.Demo{}}, Kinds: []host.Kind{svc.Kind()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(h); err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Host: h, Hooks: svc, Tokens: testTokens(t), PingInterval: time.Minute}
	if dev {
		cfg.DevMode, cfg.Tokens, cfg.ListenAddr = true, nil, "127.0.0.1:0"
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, store: store, host: h, srv: srv, ts: httptest.NewServer(srv.Handler())}
	t.Cleanup(func() {
		f.ts.Close()
		srv.Close()
		svc.Shutdown()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Shutdown(ctx)
	})
	return f
}

func hookPayload(id, cmd string) string {
	return `{"session_id":"s1","cwd":"/p","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":` + jsonString(cmd) + `},"tool_use_id":"` + id + `"}`
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func hookDecision(t *testing.T, r *response) (string, string) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("a hook got status %d (an agent would decide by its own rules): %s", r.status, r.body)
	}
	var out struct {
		H struct {
			Decision string `json:"permissionDecision"`
			Reason   string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("not a hook's answer: %s", r.body)
	}
	return out.H.Decision, out.H.Reason
}

// A hook is answered in the agent's words whatever goes wrong: a token a
// hook may not hold (one that answers questions) is a deny that says
// why, as is a token the server does not know, a missing one, and an
// agent it does not know.
func TestHookAuth(t *testing.T) {
	t.Parallel()
	f := hookFixture(t, false)
	if d, r := hookDecision(t, f.do("POST", "/v1/hooks/claude-code", clientSecret, hookPayload("t1", "ls"))); d != "allow" {
		t.Errorf("a client's hook: %s %s", d, r)
	}
	for _, c := range []struct{ name, path, secret, want string }{
		{"reviewer", "/v1/hooks/claude-code", aliceSecret, `token "alice" is a reviewer's, which can answer questions`},
		{"admin", "/v1/hooks/claude-code", adminSecret, `token "root" is a admin's`},
		{"unknown", "/v1/hooks/claude-code", "nope-nope-nope-nope", "unknown token"},
		{"none", "/v1/hooks/claude-code", "", "sign in"},
		{"agent", "/v1/hooks/cursor", clientSecret, `unknown coding agent "cursor"`},
	} {
		d, r := hookDecision(t, f.do("POST", c.path, c.secret, hookPayload("t2", "ls")))
		if d != "deny" || !strings.Contains(r, c.want) {
			t.Errorf("%s: %s %q, want a deny saying %q", c.name, d, r, c.want)
		}
	}
	// The hooks' threads take no messages: their calls come from hooks.
	f.do("POST", "/v1/threads/claude-code:s1/messages", clientSecret, map[string]string{"text": "$ rm -rf /"}).want(t, http.StatusConflict, "conflict")
	info := f.do("GET", "/v1/hooks", clientSecret, nil).want(t, http.StatusOK, "").json(t)
	if info["max_timeout_seconds"] != json.Number("180") {
		t.Errorf("GET /v1/hooks: %v", info)
	}
}

func TestHookDevMode(t *testing.T) {
	t.Parallel()
	f := hookFixture(t, true)
	if d, r := hookDecision(t, f.do("POST", "/v1/hooks/codex", "", hookPayload("t1", "ls"))); d != "allow" {
		t.Errorf("dev mode: %s %s", d, r)
	}
}
