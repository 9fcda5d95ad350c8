package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// tollgate-hook is tollgate hook: the input goes to the server with the
// hook's headers, the answer comes out; bad flags are a usage error.
func TestHook(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		if r.URL.Path != "/v1/hooks/codex" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"tollgate: no"}}`))
	}))
	defer srv.Close()
	t.Setenv("TOLLGATE_TOKEN", "tok-0123456789abcdef")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"codex", "--server", srv.URL, "--timeout", "20s", "--confine-exe", "/usr/bin/tollgate"},
		strings.NewReader(`{"hook_event_name":"PreToolUse"}`), &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), `"permissionDecision":"deny"`) {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	if got.Get("Authorization") != "Bearer tok-0123456789abcdef" || got.Get("X-Tollgate-Hook-Wait") != "18" ||
		!strings.Contains(got.Get("X-Tollgate-Hook-Confine"), `"enforced":true`) {
		t.Errorf("headers: %v", got)
	}
	if code := run(context.Background(), []string{"cursor"}, strings.NewReader(""), &out, &errOut); code != 2 {
		t.Errorf("an unknown agent: exit %d", code)
	}
	if code := run(context.Background(), []string{"codex", "--on-error", "maybe"}, strings.NewReader(""), &out, &errOut); code != 2 {
		t.Errorf("a bad flag: exit %d", code)
	}
}
