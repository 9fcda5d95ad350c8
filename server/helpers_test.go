package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/provider/scripted"
	"github.com/tollgate-ai/tollgate/server"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// The tokens of every fixture.
const (
	clientSecret   = "client-secret-0123456789"
	aliceSecret    = "alice-secret-0123456789"
	bobSecret      = "bob-secret-0123456789"
	adminSecret    = "admin-secret-0123456789"
	timeoutSeconds = 180
)

var epoch = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func testTokens(t *testing.T) []server.Token {
	t.Helper()
	tokens, err := server.ParseTokensEnv("ci:client:" + clientSecret + ",alice:reviewer:" + aliceSecret + ",root:admin:" + adminSecret)
	if err != nil {
		t.Fatal(err)
	}
	// bob reviews the team-b threads only.
	return append(tokens, server.Token{Name: "bob", Role: server.RoleReviewer, SHA256: server.HashToken(bobSecret), Threads: []string{"team-b-*"}})
}

type bashArgs struct {
	Cmd string `json:"cmd"`
	Cwd string `json:"cwd,omitempty"`
}

// testPolicy allows ls, blocks dd and asks for everything else with a
// 180 s deadline.
var testPolicy = hitl.Typed(func(ctx context.Context, c *hitl.PolicyContext, a bashArgs) hitl.ApprovalDecision {
	switch {
	case strings.HasPrefix(a.Cmd, "ls"):
		return hitl.Approve()
	case strings.HasPrefix(a.Cmd, "dd"):
		return hitl.Deny("destructive I/O")
	}
	return hitl.AskUser(hitl.AskOptions{Timeout: timeoutSeconds * time.Second,
		Details: map[string]any{"matched_rule": "confirm", "impact": "needs human review"}})
})

type options struct {
	// model plays the runs; zero: scripted.Demo ("$ cmd" lines become bash
	// calls).
	model agent.Provider
	store checkpoint.Store
	dev   bool
	cfg   func(*server.Config)
	// policy decides the runs' calls; zero: testPolicy.
	policy hitl.Policy
}

type fixture struct {
	t     *testing.T
	store checkpoint.Store
	host  *host.Host
	srv   *server.Server
	ts    *httptest.Server
	clock *clock.Fake
	reg   *prometheus.Registry
	logs  *syncBuffer
}

// syncBuffer collects the server's log lines.
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

func setup(t *testing.T, o *options) *fixture {
	t.Helper()
	if o == nil {
		o = &options{}
	}
	f := &fixture{t: t, store: o.store, clock: clock.NewFake(epoch), reg: prometheus.NewRegistry(), logs: &syncBuffer{}}
	if f.store == nil {
		f.store = memory.New()
	}
	model := o.model
	if model == nil {
		model = scripted.Demo{}
	}
	bash := agent.NewTool("bash", "Run a shell command (pretend).", func(ctx context.Context, a bashArgs) (string, error) {
		return "ran: " + a.Cmd, nil
	}, nil)
	logger := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	pol := o.policy
	if pol == nil {
		pol = testPolicy
	}
	mw := hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(f.store, "", &hitl.ChannelOptions{Clock: f.clock}), pol)
	h, err := host.New(host.Config{Store: f.store, Clock: f.clock, Logger: logger,
		Agent: agent.Config{Provider: model, Tools: []*agent.Tool{bash}, Middleware: []agent.Middleware{mw}, Logger: logger}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.host = h
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = h.Shutdown(ctx)
	})
	cfg := server.Config{Host: h, Logger: logger, Tokens: testTokens(t), Registry: f.reg, Clock: f.clock,
		Model: "scripted", PollInterval: 50 * time.Millisecond, PingInterval: time.Minute}
	if o.dev {
		cfg.DevMode, cfg.Tokens, cfg.ListenAddr = true, nil, "127.0.0.1:0"
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	f.ts = httptest.NewServer(srv.Handler())
	// Cleanups run last first: streams end, then the listener closes.
	t.Cleanup(f.ts.Close)
	t.Cleanup(func() { _ = srv.Close() })
	return f
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, r.body)
	}
	return m
}

// code is the error code of an error body.
func (r *response) code(t *testing.T) string {
	t.Helper()
	e, _ := r.json(t)["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

type header struct{ k, v string }

// do sends a request: body is sent as it is when a string or []byte, else
// as JSON; secret "" sends no Authorization.
func (f *fixture) do(method, path, secret string, body any, headers ...header) *response {
	f.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			f.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, f.ts.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range headers {
		if h.k == "Host" {
			req.Host = h.v
			continue
		}
		req.Header.Set(h.k, h.v)
	}
	res, err := f.ts.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return &response{status: res.StatusCode, header: res.Header, body: data}
}

// want fails unless the response has the status (and, for errors, the
// code).
func (r *response) want(t *testing.T, status int, code string) *response {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body:\n%s", r.status, status, r.body)
	}
	if code != "" {
		if got := r.code(t); got != code {
			t.Fatalf("code %q, want %q; body:\n%s", got, code, r.body)
		}
	}
	return r
}

// eventually polls cond until it holds (10 s at most).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// prompt posts a message and waits until its run has parked on a question
// or finished; it returns the pending questions of the thread.
func (f *fixture) prompt(thread, text string) []*checkpoint.Question {
	f.t.Helper()
	f.do("POST", "/v1/threads/"+thread+"/messages", clientSecret, map[string]string{"text": text}).want(f.t, http.StatusAccepted, "")
	return f.settle(thread)
}

// settle waits until the thread's run is not active and returns its
// pending questions.
func (f *fixture) settle(thread string) []*checkpoint.Question {
	f.t.Helper()
	var pending []*checkpoint.Question
	eventually(f.t, "thread "+thread+" to settle", func() bool {
		th, err := f.store.LoadThread(context.Background(), thread)
		if err != nil {
			return false
		}
		if st, _ := f.host.State(th); st == host.RunActive {
			return false
		}
		qs, _, err := f.store.ListQuestions(context.Background(), checkpoint.QuestionFilter{ThreadID: thread, Status: checkpoint.QuestionPending})
		pending = qs
		return err == nil && (th.Status == checkpoint.ThreadIdle || len(qs) > 0)
	})
	return pending
}

// ask starts a run that asks one question and returns it.
func (f *fixture) ask(thread, cmd string) *checkpoint.Question {
	f.t.Helper()
	qs := f.prompt(thread, "$ "+cmd)
	if len(qs) != 1 {
		f.t.Fatalf("%d pending questions, want 1", len(qs))
	}
	return qs[0]
}

// metric returns the value of one series in /metrics ("" when absent).
func (f *fixture) metric(series string) string {
	f.t.Helper()
	res := f.do("GET", "/metrics", "", nil)
	for _, line := range strings.Split(string(res.body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

var (
	timeKeys = map[string]bool{"created_at": true, "updated_at": true, "at": true, "resolved_at": true, "deadline": true, "expires_at": true}
	runRE    = regexp.MustCompile(`run_k?[0-9a-f]{24}`)
)

// normalise makes a response deterministic: times, run ids and secrets
// become placeholders (run ids numbered in order of appearance).
func normalise(t *testing.T, body []byte) []byte {
	t.Helper()
	v := decodeAny(t, body)
	runs := map[string]string{}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			// In key order, so that run ids are numbered the same way
			// every time.
			for _, k := range slices.Sorted(maps.Keys(x)) {
				e := x[k]
				switch {
				case timeKeys[k] && e != nil:
					x[k] = "<time>"
				case k == "csrf_token" || k == "latency_ms":
					x[k] = "<" + k + ">"
				default:
					x[k] = walk(e)
				}
			}
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case string:
			return runRE.ReplaceAllStringFunc(x, func(id string) string {
				if _, ok := runs[id]; !ok {
					runs[id] = fmt.Sprintf("<run-%d>", len(runs)+1)
				}
				return runs[id]
			})
		}
		return v
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(walk(v)); err != nil {
		t.Fatal(err)
	}
	// Invisible characters (bidi controls, zero-width) as escapes, so
	// that the golden files read as they are.
	return []byte(invisibleRE.ReplaceAllStringFunc(buf.String(), func(s string) string {
		return fmt.Sprintf(`\u%04x`, []rune(s)[0])
	}))
}

var invisibleRE = regexp.MustCompile("[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")

// golden compares the normalised body with testdata/name.golden
// (rewritten with -update).
func golden(t *testing.T, name string, body []byte) {
	t.Helper()
	got := normalise(t, body)
	file := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test ./server -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./server -update rewrites it)\ngot:\n%s\nwant:\n%s", file, got, want)
	}
}

// orderFree sorts a list of events (a JSON array, or the "events" of an
// object) by type and blanks their seq, so that a golden file pins their
// shapes and not their order. The order is not the server's to promise:
// the host appends question_resolved after the answer's compare-and-set,
// and the store's notification of that answer can resume the run, which
// appends tool_result and run_finished, first (reported to the lead).
// Tests check the order that is promised (seq increasing) elsewhere.
func orderFree(t *testing.T, body []byte) []byte {
	t.Helper()
	v := decodeAny(t, body)
	list, _ := v.([]any)
	obj, isObj := v.(map[string]any)
	if isObj {
		list, _ = obj["events"].([]any)
	}
	typeOf := func(e any) string {
		m, _ := e.(map[string]any)
		if d, ok := m["data"].(map[string]any); ok && m["event"] != nil {
			m = d // a stream's {"event", "data": Event}
		}
		if m != nil {
			m["seq"] = "<seq>"
		}
		s, _ := m["type"].(string)
		return s
	}
	for _, e := range list {
		typeOf(e) // blanks the seq even of a list of one
	}
	slices.SortStableFunc(list, func(a, b any) int { return strings.Compare(typeOf(a), typeOf(b)) })
	if isObj {
		obj["events"] = list
		v = obj
	} else {
		v = list
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decodeAny decodes JSON with numbers kept as written.
func decodeAny(t *testing.T, body []byte) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, body)
	}
	return v
}
