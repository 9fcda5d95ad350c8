package web_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/policy/learn"
	"github.com/tollgate-ai/tollgate/server"
	"github.com/tollgate-ai/tollgate/server/web"
)

// newLearnEnv is an env whose runs pass a policy file that asks about
// what it does not allow, with the store's learned rules, and whose
// server learns rules from answers.
func newLearnEnv(t *testing.T) *env {
	t.Helper()
	store := memory.New()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	src, err := learn.NewSource(store)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse("p.yaml", []byte("version: 1\ndefault: ask\nrules:\n  - {name: read, tool: bash, command: [ls], action: allow}\n"),
		&policy.Options{Learned: src, Dir: "/srv/ws"})
	if err != nil {
		t.Fatal(err)
	}
	bash := agent.NewTool("bash", "Run a shell command (pretend).", func(ctx context.Context, a bashArgs) (string, error) {
		return "ran: " + a.Cmd, nil
	}, nil)
	mw := hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(store, "", nil), p.HITL())
	h, err := host.New(host.Config{Store: store, Logger: logger,
		Agent: agent.Config{Provider: model{}, Tools: []*agent.Tool{bash}, Middleware: []agent.Middleware{mw}, Logger: logger}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = h.Shutdown(ctx)
	})
	tokens, err := server.ParseTokensEnv("rita:reviewer:" + reviewerSecret + ",ci:client:" + clientSecret + ",ada:admin:" + adminSecret)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Host: h, Logger: logger, Tokens: tokens, PollInterval: 100 * time.Millisecond,
		Page: web.Handler(web.Options{Version: "test"}), Learning: func(string) *policy.Policy { return p }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = srv.Close() })
	return &env{t: t, ts: ts, host: h, store: store}
}

// TestBrowserLearn: on an approval, "Approve + allow like this…" shows the
// narrowest rule and its blast radius; widening an argument widens the
// radius (a denied call it would now allow is flagged); saving approves
// the call and learns the rule; a call like it then runs unasked; Rules
// lists it and revokes it.
func TestBrowserLearn(t *testing.T) {
	b := newBrowser(t)
	e := newLearnEnv(t)
	// History: a call denied earlier, which the widened rule would allow.
	old := e.prompt("past", "$ git log -n 99", 1)
	if code, body := e.api("POST", "/v1/questions/past/"+old[0]["id"].(string)+"/answer", reviewerSecret,
		map[string]any{"decision": "deny", "reason": "too much history", "digest": old[0]["digest"]}); code != http.StatusOK {
		t.Fatalf("deny: %d %v", code, body)
	}
	tb, qs := review(t, b, e, "learn-1", "$ git log -n 5", 1)
	tb.click("#learn-open")
	tb.wait("the proposal", `!!document.querySelector('#learn-dlg[open] #learn-summary')`)
	tb.wait("its radius", `document.getElementById('learn-matched').textContent === '1'`)
	if got := tb.text("#learn-summary"); !strings.Contains(got, "git log -n <inside>") {
		t.Errorf("the proposal says %q", got)
	}
	if !strings.Contains(tb.text("#learn-yaml"), `command: "git"`) {
		t.Errorf("no policy YAML: %q", tb.text("#learn-yaml"))
	}
	tb.shot("learn-proposal")
	// The page's keys do not reach the question behind the dialog.
	tb.press("a")
	if code, body := e.api("GET", "/v1/questions/learn-1/"+qs[0]["id"].(string), reviewerSecret, nil); code != http.StatusOK || body["status"] != "pending" {
		t.Fatalf("a key typed in the dialog answered the question: %d %v", code, body)
	}

	// To everyone: the call denied in another thread is in its radius,
	// flagged.
	setSelect := func(sel, value string) {
		t.Helper()
		js[bool](tb, fmt.Sprintf(`(() => { const s = document.querySelector(%q); s.value = %q; s.dispatchEvent(new Event('change')); return true; })()`, sel, value))
	}
	setSelect("#learn-scope", "2")
	tb.wait("the wider radius", `document.getElementById('learn-matched').textContent === '2'`)
	if got := tb.text("#learn-radius"); !strings.Contains(got, "⚑ denied by rita (too much history)") || !strings.Contains(got, "git log -n 99") {
		t.Errorf("the denied call it would allow is not flagged: %q", got)
	}
	tb.shot("learn-widened")
	// The count exact: that call is out again.
	setSelect(`#learn-dlg select[data-arg="0.2"]`, "exact")
	tb.wait("the narrower radius", `document.getElementById('learn-matched').textContent === '1' && !document.getElementById('learn-radius').textContent.includes('⚑')`)
	if got := tb.text("#learn-summary"); !strings.Contains(got, "git log -n 5") || strings.Contains(got, "<inside>") {
		t.Errorf("the narrowed rule says %q", got)
	}
	// A path inside, as proposed.
	setSelect(`#learn-dlg select[data-arg="0.2"]`, "inside")
	tb.wait("the radius again", `document.getElementById('learn-matched').textContent === '2'`)
	if got := tb.text("#learn-summary"); !strings.Contains(got, "git log -n <inside>") {
		t.Errorf("the widened rule says %q", got)
	}
	if tb.text("#learn-scope option:checked") != "everyone" {
		t.Errorf("the scope is %q", tb.text("#learn-scope option:checked"))
	}
	tb.click("#learn-save")
	tb.wait("the rule saved", `!!document.getElementById('learn-done')`)
	e.waitThread("learn-1", "ran: git log -n 5")
	code, body := e.api("GET", "/v1/questions/learn-1/"+qs[0]["id"].(string), reviewerSecret, nil)
	if code != http.StatusOK || body["answered_by"] != "rita" {
		t.Fatalf("the question: %d %v", code, body)
	}
	rules, err := e.store.(checkpoint.RuleStore).ListRules(context.Background(), checkpoint.RuleFilter{})
	if err != nil || len(rules) != 1 || rules[0].CreatedBy != "rita" || rules[0].Scope != checkpoint.ScopeEveryone {
		t.Fatalf("rules %+v, %v", rules, err)
	}
	tb.click("#learn-close")

	// A call like it runs without a question.
	if code, body := e.api("POST", "/v1/threads/learn-2/messages", clientSecret, map[string]any{"text": "$ git log -n 12"}); code != http.StatusAccepted {
		t.Fatalf("post: %d %v", code, body)
	}
	e.waitThread("learn-2", "ran: git log -n 12")

	// Rules: listed, revoked.
	tb.click("#learn-rules-btn")
	tb.wait("the rules", fmt.Sprintf(`!!document.querySelector('#learn-rules tr[data-rule=%q]')`, rules[0].ID))
	tb.shot("learn-rules")
	tb.setValue("#learn-reason", "too broad")
	tb.click(fmt.Sprintf(`#learn-rules tr[data-rule=%q] button.deny`, rules[0].ID))
	tb.wait("the revocation", fmt.Sprintf(`(document.querySelector('#learn-rules tr[data-rule=%q] .learn-status') || {}).textContent === 'revoked'`, rules[0].ID))
	if r, err := e.store.(checkpoint.RuleStore).GetRule(context.Background(), rules[0].ID); err != nil || r.RevokedBy != "rita" || r.RevokeReason != "too broad" {
		t.Fatalf("revoked: %+v, %v", r, err)
	}
	tb.noScriptRan()
}
