package server_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-ai/tollgate/server"
)

// signIn opens a page session and returns its cookie and CSRF token.
func (f *fixture) signIn(secret string) (cookie header, csrf string) {
	f.t.Helper()
	res := f.do("POST", "/v1/session", "", map[string]string{"token": secret}).want(f.t, http.StatusCreated, "")
	for _, c := range (&http.Response{Header: res.header}).Cookies() {
		if c.Name == "tollgate_session" {
			cookie = header{"Cookie", c.Name + "=" + c.Value}
		}
	}
	if cookie.v == "" {
		f.t.Fatalf("no session cookie: %v", res.header)
	}
	return cookie, res.json(f.t)["csrf_token"].(string)
}

func TestSessionSignInAndOut(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	res := f.do("POST", "/v1/session", "", map[string]string{"token": aliceSecret}).want(t, http.StatusCreated, "")
	golden(t, "session_create", res.body)
	set := res.header.Get("Set-Cookie")
	for _, attr := range []string{"tollgate_session=", "Path=/", "HttpOnly", "SameSite=Strict", "Max-Age=43200"} {
		if !strings.Contains(set, attr) {
			t.Errorf("Set-Cookie %q lacks %s", set, attr)
		}
	}
	if strings.Contains(set, "Secure") {
		t.Errorf("Secure over plain HTTP: %q", set)
	}
	cookie, csrf := f.signIn(aliceSecret)
	res = f.do("GET", "/v1/session", "", nil, cookie).want(t, http.StatusOK, "")
	golden(t, "session_get", res.body)
	if m := res.json(t); m["name"] != "alice" || m["role"] != "reviewer" || m["csrf_token"] != csrf || m["model"] != "scripted" || m["dev_mode"] != false {
		t.Errorf("session: %v", m)
	}
	// A bearer token says who it is too, with no CSRF token.
	if m := f.do("GET", "/v1/session", clientSecret, nil).want(t, http.StatusOK, "").json(t); m["name"] != "ci" || m["csrf_token"] != nil {
		t.Errorf("bearer session: %v", m)
	}
	f.do("GET", "/v1/session", "", nil).want(t, http.StatusUnauthorized, "unauthenticated")
	f.do("POST", "/v1/session", "", map[string]string{"token": "wrong-secret-0123456789"}).want(t, http.StatusUnauthorized, "unauthenticated")
	f.do("POST", "/v1/session", "", map[string]string{"tok": aliceSecret}).want(t, http.StatusBadRequest, "bad_request")
	f.do("POST", "/v1/session", "", map[string]string{"token": aliceSecret}, header{"Origin", "https://evil.example"}).want(t, http.StatusForbidden, "csrf")

	// Signing out needs the CSRF token like any change.
	f.do("DELETE", "/v1/session", "", nil, cookie).want(t, http.StatusForbidden, "csrf")
	res = f.do("DELETE", "/v1/session", "", nil, cookie, header{"X-CSRF-Token", csrf}, header{"Origin", f.ts.URL}).want(t, http.StatusNoContent, "")
	if set := res.header.Get("Set-Cookie"); !strings.Contains(set, "Max-Age=0") {
		t.Errorf("sign-out cookie %q", set)
	}
	f.do("GET", "/v1/session", "", nil, cookie).want(t, http.StatusUnauthorized, "unauthenticated")
}

func TestSessionCookieSecureOverTLS(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	req := httptest.NewRequest("POST", "https://tollgate.example/v1/session", strings.NewReader(`{"token": "`+aliceSecret+`"}`))
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated || !strings.Contains(rec.Header().Get("Set-Cookie"), "Secure") {
		t.Errorf("%d, Set-Cookie %q", rec.Code, rec.Header().Get("Set-Cookie"))
	}
}

func TestSessionExpiryAndCap(t *testing.T) {
	t.Parallel()
	f := setup(t, &options{cfg: func(c *server.Config) { c.MaxSessions = 2 }})
	first, _ := f.signIn(aliceSecret)
	f.clock.Advance(time.Hour)
	second, _ := f.signIn(aliceSecret)
	third, _ := f.signIn(adminSecret)
	// Full: the session closest to its end went.
	f.do("GET", "/v1/session", "", nil, first).want(t, http.StatusUnauthorized, "unauthenticated")
	f.do("GET", "/v1/session", "", nil, second).want(t, http.StatusOK, "")
	f.do("GET", "/v1/session", "", nil, third).want(t, http.StatusOK, "")
	f.clock.Advance(12 * time.Hour)
	f.do("GET", "/v1/session", "", nil, third).want(t, http.StatusUnauthorized, "unauthenticated")
}

// A page of another site can make the browser send the cookie, but not
// read the CSRF token nor forge the Origin.
func TestCSRF(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	q := f.ask("t1", "rm -r /srv/old")
	answer := "/v1/questions/t1/" + q.ID + "/answer"
	approve := map[string]string{"decision": "approve", "digest": q.Digest}
	cookie, csrf := f.signIn(aliceSecret)
	token := header{"X-CSRF-Token", csrf}
	self := header{"Origin", f.ts.URL}

	// Reading needs no CSRF token.
	f.do("GET", "/v1/questions", "", nil, cookie).want(t, http.StatusOK, "")
	for _, c := range []struct {
		name    string
		headers []header
	}{
		{"no token", []header{cookie, self}},
		{"wrong token", []header{cookie, self, {"X-CSRF-Token", "forged"}}},
		{"foreign origin", []header{cookie, token, {"Origin", "https://evil.example"}}},
		{"null origin", []header{cookie, token, {"Origin", "null"}}},
		{"foreign referer", []header{cookie, token, {"Referer", "https://evil.example/page"}}},
		{"no origin", []header{cookie, token}},
		{"origin of another port", []header{cookie, token, {"Origin", "http://127.0.0.1:1"}}},
	} {
		if res := f.do("POST", answer, "", approve, c.headers...); res.status != http.StatusForbidden || res.code(t) != "csrf" {
			t.Errorf("%s: %d %s", c.name, res.status, res.body)
		}
	}
	// A bearer token needs no CSRF token: browsers do not send it by
	// themselves.
	f.do("GET", "/v1/questions/t1/"+q.ID, aliceSecret, nil, header{"Origin", "https://evil.example"}).want(t, http.StatusOK, "")
	// The page itself: the token and its own origin (a Referer will do).
	res := f.do("POST", answer, "", approve, cookie, token, header{"Referer", f.ts.URL + "/"}).want(t, http.StatusOK, "")
	if by := res.json(t)["answered_by"]; by != "alice" {
		t.Errorf("answered by %v", by)
	}
}

func TestReviewerScope(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	f.ask("t1", "rm a")
	qb := f.ask("team-b-1", "rm b")

	ids := func(secret, path, list, key string) []string {
		var out []string
		m := f.do("GET", path, secret, nil).want(t, http.StatusOK, "").json(t)
		for _, x := range m[list].([]any) {
			out = append(out, x.(map[string]any)[key].(string))
		}
		return out
	}
	if got := ids(bobSecret, "/v1/questions", "questions", "thread_id"); len(got) != 1 || got[0] != "team-b-1" {
		t.Errorf("bob's queue: %v", got)
	}
	if m := f.do("GET", "/v1/questions", bobSecret, nil).json(t); m["total"] != nil {
		t.Errorf("bob's total %v: counting other threads would tell him about them", m["total"])
	}
	if m := f.do("GET", "/v1/questions?thread=team-b-1", bobSecret, nil).json(t); m["total"] == nil {
		t.Errorf("bob's total on his thread is missing")
	}
	if got := ids(aliceSecret, "/v1/questions", "questions", "thread_id"); len(got) != 2 {
		t.Errorf("alice's queue: %v", got)
	}
	if got := ids(bobSecret, "/v1/threads", "threads", "id"); len(got) != 1 || got[0] != "team-b-1" {
		t.Errorf("bob's threads: %v", got)
	}
	// Pages of one: bob's threads only, each once, however many of the
	// others lie between.
	f.ask("t2", "rm c")
	f.ask("t3", "rm d")
	f.ask("team-b-2", "rm e")
	f.ask("t4", "rm f")
	for _, list := range []struct{ path, key, field string }{
		{"/v1/questions?order=oldest&limit=1", "questions", "thread_id"},
		{"/v1/threads?limit=1", "threads", "id"},
	} {
		var seen []string
		cursor := ""
		for range 10 {
			m := f.do("GET", list.path+"&cursor="+cursor, bobSecret, nil).want(t, http.StatusOK, "").json(t)
			for _, x := range m[list.key].([]any) {
				seen = append(seen, x.(map[string]any)[list.field].(string))
			}
			if cursor = m["next_cursor"].(string); cursor == "" {
				break
			}
		}
		if strings.Join(seen, " ") != "team-b-1 team-b-2" && strings.Join(seen, " ") != "team-b-2 team-b-1" {
			t.Errorf("bob's pages of %s: %v", list.key, seen)
		}
	}
	f.do("GET", "/v1/threads/t1/events", bobSecret, nil).want(t, http.StatusForbidden, "forbidden")
	f.do("GET", "/v1/threads/t1/stream", bobSecret, nil).want(t, http.StatusForbidden, "forbidden")
	res := f.do("POST", "/v1/questions/team-b-1/"+qb.ID+"/answer", bobSecret, map[string]string{"digest": qb.Digest, "decision": "deny", "reason": "not today"}).want(t, http.StatusOK, "")
	if by := res.json(t)["answered_by"]; by != "bob" {
		t.Errorf("answered by %v", by)
	}
}

func TestDevMode(t *testing.T) {
	t.Parallel()
	base := setup(t, nil)
	for _, addr := range []string{":8080", "0.0.0.0:8080", "192.168.1.2:80", "example.com:80", ""} {
		if _, err := server.New(server.Config{Host: base.host, DevMode: true, ListenAddr: addr, Logger: slog.New(slog.DiscardHandler)}); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("dev mode on %q: %v", addr, err)
		}
	}
	if _, err := server.New(server.Config{Host: base.host}); err == nil || !strings.Contains(err.Error(), "no tokens") {
		t.Errorf("no tokens: %v", err)
	}

	f := setup(t, &options{dev: true})
	if !strings.Contains(f.logs.String(), "DEV MODE") {
		t.Errorf("no warning in the log:\n%s", f.logs)
	}
	if m := f.do("GET", "/v1/session", "", nil).want(t, http.StatusOK, "").json(t); m["dev_mode"] != true || m["name"] != "dev" || m["role"] != "admin" {
		t.Errorf("dev session: %v", m)
	}
	q := f.ask("t1", "rm -r /opt/x")
	answer := "/v1/questions/t1/" + q.ID + "/answer"
	f.do("POST", answer, "", map[string]string{"digest": q.Digest, "decision": "approve"}, header{"Origin", "https://evil.example"}).want(t, http.StatusForbidden, "csrf")
	f.do("GET", "/v1/threads", "", nil, header{"Host", "evil.example"}).want(t, http.StatusForbidden, "forbidden")
	if by := f.do("POST", answer, "", map[string]string{"digest": q.Digest, "decision": "approve"}).want(t, http.StatusOK, "").json(t)["answered_by"]; by != "dev" {
		t.Errorf("answered by %v", by)
	}
	for _, addr := range []string{"localhost:8080", "[::1]:8080", "127.0.0.2:9"} {
		s, err := server.New(server.Config{Host: base.host, DevMode: true, ListenAddr: addr, Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Errorf("dev mode on %q: %v", addr, err)
			continue
		}
		_ = s.Close()
	}
}

// The request log says who did what, and never a secret or a body.
func TestRequestLog(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	f.do("POST", "/v1/threads/t1/messages", clientSecret, map[string]string{"text": "a very private prompt"}).want(t, http.StatusAccepted, "")
	f.settle("t1")
	f.do("GET", "/v1/threads/t1", clientSecret, nil).want(t, http.StatusOK, "")
	f.do("POST", "/v1/session", "", map[string]string{"token": aliceSecret}).want(t, http.StatusCreated, "")
	f.do("GET", "/v1/threads/t1", "wrong-secret-0123456789", nil).want(t, http.StatusUnauthorized, "")
	logs := f.logs.String()
	for _, want := range []string{`route="POST /v1/threads/{id}/messages" status=202`, `route="GET /v1/threads/{id}" status=200`, "who=ci", "who=alice", "status=401", "code=unauthenticated", "request_id="} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}
	}
	for _, secret := range []string{clientSecret, aliceSecret, "wrong-secret-0123456789", "a very private prompt"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}

// Found by review: a proxy on the same machine must not make its clients
// admins of a dev-mode server.
func TestDevModeRefusesProxiedRequests(t *testing.T) {
	t.Parallel()
	f := setup(t, &options{dev: true})
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-Ip"} {
		f.do("POST", "/v1/threads", "", map[string]string{}, header{h, "1.2.3.4"}).want(t, http.StatusForbidden, "forbidden")
	}
}

// Found by review: signing in again and again with one token pushed every
// other reviewer's session out.
func TestSessionsOfOneHolderAreCapped(t *testing.T) {
	t.Parallel()
	f := setup(t, &options{cfg: func(c *server.Config) { c.MaxSessions = 40 }})
	alice, _ := f.signIn(aliceSecret)
	for range 100 {
		f.signIn(adminSecret)
	}
	f.do("GET", "/v1/session", "", nil, alice).want(t, http.StatusOK, "")
}

// Found by review: an event stream opened with a session went on after
// sign-out.
func TestStreamEndsAtSignOut(t *testing.T) {
	t.Parallel()
	f := setup(t, &options{cfg: func(c *server.Config) { c.PingInterval = 20 * time.Millisecond }})
	cookie, csrf := f.signIn(adminSecret)
	req, _ := http.NewRequest("GET", f.ts.URL+"/v1/stream", nil)
	req.Header.Set("Cookie", cookie.v)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %s", resp.Status)
	}
	f.do("DELETE", "/v1/session", "", nil, cookie, header{"X-CSRF-Token", csrf}, header{"Origin", f.ts.URL}).want(t, http.StatusNoContent, "")
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, resp.Body); done <- err }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream went on after sign-out")
	}
}

// GET /v1/session lists the server's notices (tools unconfined, a policy
// loosened by a reload) for those who answer questions, as they stand at
// each request; a client's session has none.
func TestSessionNotices(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	notices := []server.Notice{{Code: "unconfined", Message: "the bash tool runs unconfined"}}
	f := setup(t, &options{cfg: func(c *server.Config) {
		c.Notices = func() []server.Notice {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(notices)
		}
	}})
	got := func(secret string) []any {
		t.Helper()
		n, _ := f.do("GET", "/v1/session", secret, nil).want(t, http.StatusOK, "").json(t)["notices"].([]any)
		return n
	}
	if n := got(aliceSecret); len(n) != 1 || n[0].(map[string]any)["code"] != "unconfined" || n[0].(map[string]any)["at"] != nil {
		t.Errorf("reviewer's notices %v", n)
	}
	if n := got(clientSecret); n != nil {
		t.Errorf("client's notices %v", n)
	}
	mu.Lock()
	notices = append(notices, server.Notice{Code: "policy_loosened", Message: "policy.yaml may allow more", At: epoch})
	mu.Unlock()
	if n := got(adminSecret); len(n) != 2 || n[1].(map[string]any)["at"] != "2026-03-01T09:00:00.000000Z" {
		t.Errorf("admin's notices %v", n)
	}
}
