package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/apiclient"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/provider/scripted"
	"github.com/tollgate-ai/tollgate/server"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

// Secrets of the fixture's server: an admin named root, a reviewer named
// alice, a client named app.
const (
	rootSecret   = "root-secret-0123456789"
	aliceSecret  = "alice-secret-0123456789"
	clientSecret = "client-secret-0123456789"
)

// cliFixture is a SQLite store driven by a started host, as tollgate serve
// drives one, and a server over that host: a command run with
// f.store(...) reads the file, with f.server(...) the API.
type cliFixture struct {
	t     *testing.T
	db    string // sqlite:PATH
	st    checkpoint.Store
	h     *host.Host
	url   string
	quiet *slog.Logger
}

// testPolicy asks about everything but plain echo commands; blocks
// commands that say "forbidden"; gives those that say "slow" 300 ms.
func testPolicy(ctx context.Context, c *hitl.PolicyContext) hitl.ApprovalDecision {
	var a struct {
		Cmd string `json:"cmd"`
	}
	_ = json.Unmarshal(c.RawArgs, &a)
	switch {
	case strings.Contains(a.Cmd, "forbidden"):
		return hitl.Deny("no forbidden things")
	case strings.HasPrefix(a.Cmd, "echo ") && !strings.ContainsAny(a.Cmd, "<>|;&"):
		return hitl.Approve()
	case strings.Contains(a.Cmd, "slow"):
		return hitl.AskUser(hitl.AskOptions{Timeout: 300 * time.Millisecond, Details: map[string]any{"matched_rule": "test: slow", "impact": "none"}})
	}
	return hitl.AskUser(hitl.AskOptions{Timeout: time.Hour, Details: map[string]any{"matched_rule": "test: ask", "impact": "writes files"}})
}

func newCLIFixture(t *testing.T) *cliFixture {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	quiet := slog.New(slog.DiscardHandler)
	st, err := sqlite.Open(ctx, path, &sqlite.Options{PollInterval: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tmpl := bashAgent(st, scripted.Demo{}, agent.Model{ID: "demo", Provider: "scripted"},
		&bash.Options{Dir: t.TempDir(), Timeout: 10 * time.Second}, testPolicy, quiet)
	h, err := host.New(host.Config{Store: st, Agent: tmpl, Logger: quiet, DeadlinePoll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Shutdown(ctx) })
	tokens, err := server.ParseTokensEnv("root:admin:" + rootSecret + ",alice:reviewer:" + aliceSecret + ",app:client:" + clientSecret)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Host: h, Tokens: tokens, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { srv.Close(); ts.Close() })
	// The commands measure time left from a fixed now, a minute on, so
	// that two runs print the same.
	fixed := time.Now().Add(time.Minute).Truncate(time.Second)
	old := cliNow
	cliNow = func() time.Time { return fixed }
	t.Cleanup(func() { cliNow = old })
	t.Setenv("TOLLGATE_STORE", "")
	t.Setenv("TOLLGATE_SERVER", "")
	t.Setenv("TOLLGATE_TOKEN", "")
	t.Setenv("TOLLGATE_USER", "carol")
	return &cliFixture{t: t, db: "sqlite:" + path, st: st, h: h, url: ts.URL, quiet: quiet}
}

// prompt starts a run on the thread and waits until it has parked with
// the given number of pending questions, or finished (want 0).
func (f *cliFixture) prompt(thread, text string, want int) {
	f.t.Helper()
	if _, _, err := f.h.Prompt(context.Background(), thread, text, nil); err != nil {
		f.t.Fatal(err)
	}
	f.settle(thread, want)
}

// settle waits until the thread's run is parked with want pending
// questions, or idle when want is 0.
func (f *cliFixture) settle(thread string, want int) {
	f.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for {
		th, err := f.st.LoadThread(ctx, thread)
		if err == nil {
			n, _ := f.st.CountQuestions(ctx, checkpoint.QuestionFilter{ThreadID: thread, Status: checkpoint.QuestionPending})
			st, _ := f.h.State(th)
			if (want == 0 && th.Status == checkpoint.ThreadIdle) || (want > 0 && int(n) == want && st == host.RunParked) {
				return
			}
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("thread %s did not settle with %d pending questions", thread, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// run runs the CLI with args and returns its exit status, stdout and
// stderr.
func (f *cliFixture) run(stdin string, args ...string) (int, string, string) {
	f.t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := runMain(ctx, args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// store runs a command on the store: "questions list" becomes
// "questions list --store sqlite:PATH".
func (f *cliFixture) store(cmd string, args ...string) (int, string, string) {
	f.t.Helper()
	return f.run("", append(append(strings.Fields(cmd), "--store", f.db), args...)...)
}

// server runs a command against the server with the secret.
func (f *cliFixture) server(secret, cmd string, args ...string) (int, string, string) {
	f.t.Helper()
	return f.run("", append(append(strings.Fields(cmd), "--server", f.url, "--token", secret), args...)...)
}

// same runs a command on the store and against the server (as root) and
// fails unless both print the same; it returns what they printed.
func (f *cliFixture) same(cmd string, args ...string) string {
	f.t.Helper()
	code, out, errOut := f.store(cmd, args...)
	scode, sout, serrOut := f.server(rootSecret, cmd, args...)
	if code != 0 || scode != 0 {
		f.t.Fatalf("%s %q: exit %d on the store (%s), %d on the server (%s)", cmd, args, code, errOut, scode, serrOut)
	}
	if out != sout {
		f.t.Fatalf("%s %q prints differently\non the store:\n%s\non the server:\n%s", cmd, args, out, sout)
	}
	return out
}

// A parked turn of two calls, one call the policy blocks and one denied,
// and one that timed out: the lists, details and JSON are the same on
// the store and against the server, in the order asked, with >> as >>.
func TestQuestionsSameOnStoreAndServer(t *testing.T) {
	f := newCLIFixture(t)
	f.prompt("t1", "two writes\n$ printf one >> log.txt\n$ printf two >> log.txt", 2)
	f.prompt("t2", "$ echo fine\n$ touch forbidden\n$ printf 'x\u202e' > y", 1)
	if _, err := f.h.Answer(context.Background(), "t2", "hitl_call_1_3", json.RawMessage(`{"decision":"deny","reason":"not <now>"}`), "alice"); err != nil {
		t.Fatal(err)
	}
	f.settle("t2", 0)
	f.prompt("t3", "$ slow thing", 0) // times out after 300 ms

	out := f.same("questions list")
	if strings.Contains(out, `\u003e`) || !strings.Contains(out, "printf one >> log.txt") {
		t.Errorf("questions list escapes >>:\n%s", out)
	}
	if i, j := strings.Index(out, "hitl_call_1_1"), strings.Index(out, "hitl_call_1_2"); i < 0 || j < i {
		t.Errorf("the questions of one turn are not in call order:\n%s", out)
	}
	if !strings.Contains(out, "59m") || strings.Contains(out, "t2") || strings.Contains(out, "t3") {
		t.Errorf("questions list shows more than the pending questions with their time left:\n%s", out)
	}
	out = f.same("questions list", "--all")
	for _, want := range []string{"denied by alice (not <now>)", "timed out", "printf 'x⟨U+202E⟩' > y", "pending, 59m"} {
		if !strings.Contains(out, want) {
			t.Errorf("questions list --all lacks %q:\n%s", want, out)
		}
	}
	out = f.same("questions list", "--thread", "t1", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Contains(out, `\u003e`) || !strings.Contains(out, `"cmd":"printf one >> log.txt"`) {
		t.Errorf("questions list --json:\n%s", out)
	}
	var q apiclient.Question
	if err := json.Unmarshal([]byte(lines[0]), &q); err != nil || q.ID != "hitl_call_1_1" || q.Status != "pending" || q.TimeoutSeconds != 3600 {
		t.Errorf("first JSON line %+v (%v)", q, err)
	}

	out = f.same("questions show", "t1", "hitl_call_1_2")
	for _, want := range []string{"tool:      bash", "  cmd: printf two >> log.txt", "rule:      test: ask", "impact:    writes files",
		"digest:    sha256:", "59m", "status:    pending", "tollgate questions answer t1 hitl_call_1_2 approve"} {
		if !strings.Contains(out, want) {
			t.Errorf("questions show lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "warning") {
		t.Errorf("a warning about nothing:\n%s", out)
	}
	out = f.same("questions show", "--thread", "t2", "hitl_call_1_3")
	for _, want := range []string{"cmd: printf 'x⟨U+202E⟩' > y", "warning:   1 invisible", "status:    denied by alice (not <now>)"} {
		if !strings.Contains(out, want) {
			t.Errorf("questions show of the denied call lacks %q:\n%s", want, out)
		}
	}
	f.same("questions show", "--json", "t3", "hitl_call_1_1")
}

// Every refusal says what is wrong in the command line's terms, the same
// on the store and against the server.
func TestQuestionsAnswerErrors(t *testing.T) {
	f := newCLIFixture(t)
	f.prompt("t1", "$ printf one >> log.txt\n$ printf two >> log.txt", 2)
	f.prompt("t3", "$ slow thing", 0)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown question", []string{"t1", "hitl_x", "approve"}, "no question hitl_x in thread t1"},
		{"wrong kind", []string{"t1", "hitl_call_1_1", "yes"}, `question hitl_call_1_1 asks for approval: answer approve, deny "reason" or edit '{...}'`},
		{"unknown answer", []string{"t1", "hitl_call_1_1", "maybe"}, `unknown answer "maybe"`},
		{"edit not JSON", []string{"t1", "hitl_call_1_1", "edit", "{cmd: ls}"}, "edit takes the new arguments as one JSON object"},
		{"invalid edit", []string{"t1", "hitl_call_1_1", "edit", `{"cmd": 5, "cwd": true}`}, "stays open for another:\n  /cmd: "},
		{"digest", []string{"--digest", "sha256:00", "t1", "hitl_call_1_1", "approve"}, "is about another call than the one you were shown"},
		{"digest in JSON", []string{"t1", "hitl_call_1_1", "json", `{"decision": "approve", "digest": "sha256:00"}`}, "is about another call than the one you were shown"},
		{"no digest in JSON", []string{"t1", "hitl_call_1_1", "json", `{"decision": "approve", "digest": ""}`}, "an answer must carry its digest"},
		{"timed out", []string{"t3", "hitl_call_1_1", "approve"}, "question hitl_call_1_1 timed out at"},
	}
	for _, c := range cases {
		code, _, errOut := f.store("questions answer", c.args...)
		scode, _, serrOut := f.server(rootSecret, "questions answer", c.args...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s on the store: exit %d, %q, want %q", c.name, code, errOut, c.want)
		}
		if errOut != serrOut || code != scode {
			t.Errorf("%s: the store says (%d)\n%s\nthe server (%d)\n%s", c.name, code, errOut, scode, serrOut)
		}
	}
	if _, _, errOut := f.store("questions answer", "t1", "hitl_call_1_1", "edit", `{"cmd": 5}`); strings.Contains(errOut, "hitl.") || strings.Contains(errOut, "json:") {
		t.Errorf("a Go name in the message: %s", errOut)
	}
	// On a store, an edit is checked against the policy too (the built-in
	// sandbox policy here).
	if code, _, errOut := f.store("questions answer", "t1", "hitl_call_1_1", "edit", `{"cmd": "rm -rf /"}`); code != 1 || !strings.Contains(errOut, "stays open for another:\n  the policy denies the edited call") {
		t.Errorf("edit the policy blocks: %d %s", code, errOut)
	}
	code, _, errOut := f.store("questions answer", "nope", "hitl_x", "approve")
	if code != 1 || !strings.Contains(errOut, "no thread nope in the store sqlite:") {
		t.Errorf("unknown thread: %d %s", code, errOut)
	}
	code, _, errOut = f.server(rootSecret, "questions answer", "nope", "hitl_x", "approve")
	if code != 1 || !strings.Contains(errOut, "no thread nope in the server at "+f.url) {
		t.Errorf("unknown thread on the server: %d %s", code, errOut)
	}

	// Answered on the store, by --by (flags may follow the answer); then
	// refused on both.
	code, out, errOut := f.store("questions answer", "t1", "hitl_call_1_1", "deny", "not", "today", "--by", "dave")
	if code != 0 || out != "question hitl_call_1_1 in thread t1: denied by dave (not today)\n" {
		t.Fatalf("deny: %d %q %s", code, out, errOut)
	}
	for _, run := range []func(string, ...string) (int, string, string){f.store, func(cmd string, args ...string) (int, string, string) {
		return f.server(aliceSecret, cmd, args...)
	}} {
		code, _, errOut := run("questions answer", "t1", "hitl_call_1_1", "approve")
		if code != 1 || !strings.Contains(errOut, "question hitl_call_1_1 was already answered at ") || !strings.Contains(errOut, "denied by dave (not today)") {
			t.Errorf("second answer: %d %s", code, errOut)
		}
	}
	// Against the server the token's name is recorded.
	code, out, errOut = f.server(aliceSecret, "questions answer", "t1", "hitl_call_1_2", "edit", `{"cmd": "printf 2 >> log.txt"}`)
	if code != 0 || out != "question hitl_call_1_2 in thread t1: edited by alice: printf 2 >> log.txt\n" {
		t.Fatalf("edit on the server: %d %q %s", code, out, errOut)
	}
	f.settle("t1", 0)

	// Usage: reserved names, --by against a server, no store.
	for _, by := range []string{"timeout", "abort", "dev"} {
		if code, _, errOut := f.store("questions answer", "--by", by, "t1", "hitl_call_1_1", "approve"); code != 2 || !strings.Contains(errOut, "is reserved") {
			t.Errorf("--by %s: %d %s", by, code, errOut)
		}
	}
	if code, _, errOut := f.server(aliceSecret, "questions answer", "--by", "mallory", "t1", "hitl_call_1_1", "approve"); code != 2 || !strings.Contains(errOut, "the name of the token") {
		t.Errorf("--by against a server: %d %s", code, errOut)
	}
	missing := filepath.Join(t.TempDir(), "none.db")
	if code, _, errOut := f.run("", "questions", "list", "--store", "sqlite:"+missing); code != 1 || !strings.Contains(errOut, "no store at "+missing) {
		t.Errorf("missing store: %d %s", code, errOut)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("questions list created %s", missing)
	}
}

// An answer given as JSON is bound to the call, as approve, deny and edit
// are: the server takes no answer without the digest the reviewer saw,
// and questions answer, having read the question, sends it.
func TestQuestionsAnswerJSONCarriesTheDigest(t *testing.T) {
	f := newCLIFixture(t)
	f.prompt("t1", "$ printf one >> log.txt\n$ printf two >> log.txt", 2)
	code, out, errOut := f.server(aliceSecret, "questions answer", "t1", "hitl_call_1_1", "json", `{"decision": "deny", "reason": "not <now>"}`)
	if code != 0 || out != "question hitl_call_1_1 in thread t1: denied by alice (not <now>)\n" {
		t.Fatalf("json deny on the server: %d %q %s", code, out, errOut)
	}
	q, err := f.h.Store().GetQuestion(context.Background(), "t1", "hitl_call_1_1")
	if err != nil {
		t.Fatal(err)
	}
	if want := `"digest":"` + q.Digest + `"`; !strings.Contains(string(q.Answer), want) {
		t.Errorf("answer %s lacks %s", q.Answer, want)
	}
	// Straight to the API, the same answer without its digest is refused.
	req, _ := http.NewRequest("POST", f.url+"/v1/questions/t1/hitl_call_1_2/answer", strings.NewReader(`{"decision": "approve"}`))
	req.Header.Set("Authorization", "Bearer "+aliceSecret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), "digest_required") {
		t.Fatalf("approve without a digest: %d %s", res.StatusCode, body)
	}
}

// A server that refuses the token, or is not there, says so.
func TestQuestionsServerRefuses(t *testing.T) {
	f := newCLIFixture(t)
	f.prompt("t1", "$ printf one >> log.txt", 1)
	if code, _, errOut := f.server("wrong-secret-0123456789", "questions list"); code != 1 || !strings.Contains(errOut, "does not know this token: check --token or TOLLGATE_TOKEN") {
		t.Errorf("bad token: %d %s", code, errOut)
	}
	if code, _, errOut := f.server("", "questions list"); code != 1 || !strings.Contains(errOut, "needs a token") {
		t.Errorf("no token: %d %s", code, errOut)
	}
	if code, _, errOut := f.server(clientSecret, "questions answer", "t1", "hitl_call_1_1", "approve"); code != 1 || !strings.Contains(errOut, "refused") {
		t.Errorf("client token: %d %s", code, errOut)
	}
	ts := httptest.NewServer(nil)
	down := ts.URL
	ts.Close()
	code, _, errOut := f.run("", "questions", "list", "--server", down)
	if code != 1 || !strings.Contains(errOut, "cannot reach the server at "+down) {
		t.Errorf("server down: %d %s", code, errOut)
	}
	// TOLLGATE_SERVER chooses the server; --store given wins over it.
	t.Setenv("TOLLGATE_SERVER", down)
	if code, _, errOut := f.run("", "questions", "list"); code != 1 || !strings.Contains(errOut, "cannot reach the server") {
		t.Errorf("TOLLGATE_SERVER: %d %s", code, errOut)
	}
	if code, out, errOut := f.store("questions list"); code != 0 || !strings.Contains(out, "hitl_call_1_1") {
		t.Errorf("--store with TOLLGATE_SERVER set: %d %s %s", code, out, errOut)
	}
}

// Every verb's --help is on stdout with exit 0, with an example of each
// flag.
func TestQuestionsThreadsAuditHelp(t *testing.T) {
	for _, cmd := range [][]string{{"questions", "list"}, {"questions", "show"}, {"questions", "answer"},
		{"threads", "list"}, {"threads", "show"}, {"threads", "abort"}, {"audit"}} {
		var out, errOut bytes.Buffer
		code := runMain(context.Background(), append(cmd, "--help"), strings.NewReader(""), &out, &errOut)
		help := out.String()
		if code != 0 || errOut.Len() > 0 || !strings.Contains(help, "examples:") {
			t.Errorf("%v --help: exit %d, stderr %q", cmd, code, errOut.String())
			continue
		}
		examples := help[strings.Index(help, "examples:"):]
		for _, line := range strings.Split(help, "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "-") {
				name := "--" + strings.TrimLeft(strings.Fields(line)[0], "-")
				if !strings.Contains(examples, name+" ") && !strings.Contains(examples, name+"\n") {
					t.Errorf("%v: no example of %s", cmd, name)
				}
			}
		}
	}
}
