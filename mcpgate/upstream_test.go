package mcpgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/internal/exectest"
	"github.com/tollgate-ai/tollgate/internal/mcptest"
	"github.com/tollgate-ai/tollgate/mcpgate"
)

// upLog collects output another goroutine writes.
type upLog = mcptest.Buffer

// upOptions are Options whose log goes to a buffer, shown if the test
// fails, and whose restarts are quick.
func upOptions(t *testing.T) (*mcpgate.Options, *upLog) {
	t.Helper()
	buf := new(upLog)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("upstream log:\n%s", buf)
		}
	})
	return &mcpgate.Options{
		Logger:         slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		RestartBackoff: 10 * time.Millisecond,
	}, buf
}

// upServeHTTP serves the in-process test server over streamable HTTP; wrap,
// if set, wraps its handler.
func upServeHTTP(t *testing.T, l *mcptest.Ledger, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	srv := mcptest.NewServer(l, nil)
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

func upConnect(t *testing.T, cfg mcpgate.ServerConfig, opts *mcpgate.Options) *mcpgate.Upstream {
	t.Helper()
	u, err := mcpgate.Connect(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

func upCall(t *testing.T, u *mcpgate.Upstream, tool, args string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := u.Call(ctx, tool, []byte(args))
	if err != nil {
		t.Fatalf("Call %s: %v", tool, err)
	}
	if res.IsError {
		t.Fatalf("Call %s: error result %q", tool, mcpgate.ResultText(res))
	}
	return mcpgate.ResultText(res)
}

// upFiles are the files a stdio test server writes.
type upFiles struct {
	ledger, startLog string
}

// upStdio is a server config that runs the stdio test program with a
// ledger and a start log, plus env.
func upStdio(t *testing.T, env map[string]string) (mcpgate.ServerConfig, upFiles) {
	t.Helper()
	bin := mcptest.BuildStdioServer(t)
	dir := t.TempDir()
	f := upFiles{ledger: filepath.Join(dir, "ledger.jsonl"), startLog: filepath.Join(dir, "start.log")}
	cfg := mcpgate.ServerConfig{Name: "t", Command: bin, Env: map[string]string{
		mcptest.EnvLedger: f.ledger, mcptest.EnvStartLog: f.startLog}}
	for k, v := range env {
		cfg.Env[k] = v
	}
	t.Cleanup(func() { upKillLeftovers(t, f.startLog) })
	return cfg, f
}

// upStartPIDs are the pids of the program's starts, in order.
func upStartPIDs(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 2 || f[0] != "start" {
			t.Fatalf("start log line %q", line)
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("start log line %q", line)
		}
		pids = append(pids, pid)
	}
	return pids
}

func upAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// upKillLeftovers kills what a failed test left running of the processes
// it started (a frozen server, say), so that the run does not leave
// stopped processes behind.
func upKillLeftovers(t *testing.T, startLog string) {
	for _, pid := range upStartPIDs(t, startLog) {
		if upAlive(pid) {
			if !t.Failed() {
				t.Errorf("server process %d is still running at the end of the test", pid)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func upWaitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func upWantErr(t *testing.T, what string, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want one containing %q", what, fragments)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%s: error %q does not say %q", what, err, f)
		}
	}
}

func upToolNames(u *mcpgate.Upstream) []string {
	var names []string
	for _, tool := range u.AgentTools() {
		names = append(names, tool.Name())
	}
	slices.Sort(names)
	return names
}

// The in-process server's tools, with the MCP specification's defaults
// for the hints a tool leaves out; the tool whose schema does not compile
// is left out, with a problem that names it, and the rest stay.
func TestHTTPTools(t *testing.T) {
	t.Parallel()
	l := new(mcptest.Ledger)
	opts, _ := upOptions(t)
	u := upConnect(t, mcpgate.ServerConfig{Name: "t", URL: upServeHTTP(t, l, nil)}, opts)

	want := []string{"mcp__t__delete_repo", "mcp__t__echo", "mcp__t__fail", "mcp__t__slow", "mcp__t__structured", "mcp__t__write_note"}
	if got := upToolNames(u); !slices.Equal(got, want) {
		t.Errorf("tools %q, want %q", got, want)
	}
	if p := u.Problems(); len(p) != 1 || !strings.Contains(p[0], `"bad_schema"`) || !strings.Contains(p[0], "left out") || !strings.Contains(p[0], "server t") {
		t.Errorf("problems %q, want one naming bad_schema", p)
	}

	ann := map[string]map[string]any{}
	for _, tool := range u.AgentTools() {
		ann[tool.Name()] = tool.Annotations()
	}
	for _, c := range []struct {
		tool string
		want map[string]any
	}{
		// Read only: destructive means nothing, so false; open world by default.
		{"echo", map[string]any{"read_only": true, "destructive": false, "idempotent": false, "open_world": true, "title": "Echo", "stated": []string{"read_only"}, "description": "Returns its text."}},
		// Says it is not destructive; open world by default.
		{"write_note", map[string]any{"read_only": false, "destructive": false, "idempotent": false, "open_world": true, "stated": []string{"destructive"}, "description": "Writes a note (pretends to)."}},
		{"delete_repo", map[string]any{"read_only": false, "destructive": true, "idempotent": false, "open_world": true, "stated": []string{"destructive", "open_world"}, "description": "Deletes a repository (pretends to)."}},
		// No annotations at all: the spec's defaults, none stated.
		{"slow", map[string]any{"read_only": false, "destructive": true, "idempotent": false, "open_world": true, "stated": []string{}, "description": "Sleeps ms milliseconds, reporting progress."}},
	} {
		got := ann["mcp__t__"+c.tool]
		c.want["mcp_server"], c.want["mcp_tool"] = "t", c.tool
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: annotations %v, want %v", c.tool, got, c.want)
		}
	}

	if got := upCall(t, u, "echo", `{"text":"hi"}`); got != "echo: hi" {
		t.Errorf("echo: %q", got)
	}
	if got := upCall(t, u, "write_note", `{"path":"n.txt","text":"abc"}`); got != "wrote 3 bytes to n.txt" {
		t.Errorf("write_note: %q", got)
	}
	if got := upCall(t, u, "structured", `{"n":2}`); got != `{"n":2,"double":4}` {
		t.Errorf("structured: %q", got)
	}
	res, err := u.Call(context.Background(), "fail", nil)
	if err != nil || !res.IsError || mcpgate.ResultText(res) != "the tool failed on purpose" {
		t.Errorf("fail: %v %+v", err, res)
	}
	if _, err := u.Call(context.Background(), "no_such_tool", nil); err == nil {
		t.Error("a tool the server does not have was called")
	} else {
		upWantErr(t, "unknown tool", err, "no_such_tool", "server t")
	}
	if calls := l.Calls(); len(calls) != 1 || calls[0].Tool != "write_note" {
		t.Errorf("ledger %+v", calls)
	}
	if err := u.Err(); err != nil {
		t.Errorf("Err: %v", err)
	}
}

// Headers go with every request, ${VAR} read from the environment.
func TestHTTPHeaders(t *testing.T) {
	t.Setenv("MCPGATE_TEST_TOKEN", "tok-123")
	var mu sync.Mutex
	var seen []string
	url := upServeHTTP(t, nil, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Header.Get("Authorization"))
			mu.Unlock()
			if r.Header.Get("Authorization") != "Bearer tok-123" {
				http.Error(w, "who are you", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	opts, _ := upOptions(t)
	cfg := mcpgate.ServerConfig{Name: "t", URL: url, Headers: map[string]string{"Authorization": "Bearer ${MCPGATE_TEST_TOKEN}"}}
	u := upConnect(t, cfg, opts)
	if got := upCall(t, u, "echo", `{"text":"with a token"}`); got != "echo: with a token" {
		t.Errorf("echo: %q", got)
	}
	mu.Lock()
	if len(seen) < 2 {
		t.Errorf("%d requests", len(seen))
	}
	for _, a := range seen {
		if a != "Bearer tok-123" {
			t.Errorf("a request had Authorization %q", a)
		}
	}
	mu.Unlock()

	// Without the header the server refuses: Connect says so.
	_, err := mcpgate.Connect(context.Background(), mcpgate.ServerConfig{Name: "t", URL: url}, opts)
	upWantErr(t, "no token", err, "server t")

	// A variable that is not set is an error that names it, before any
	// request.
	cfg.Headers["Authorization"] = "Bearer ${MCPGATE_TEST_UNSET_TOKEN}"
	_, err = mcpgate.Connect(context.Background(), cfg, opts)
	upWantErr(t, "unset variable", err, "MCPGATE_TEST_UNSET_TOKEN", "not set")
}

// A stdio server gets the few variables programs need of tollgate's
// environment, not its keys, and the config's env; inherit_env passes it
// all.
func TestStdioEnv(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "secret")
	t.Setenv("MCPGATE_TEST_VALUE", "from tollgate's environment")
	opts, _ := upOptions(t)
	cfg, _ := upStdio(t, map[string]string{"FROM_CONFIG": "${MCPGATE_TEST_VALUE}", "PLAIN": "plain"})
	u := upConnect(t, cfg, opts)
	env := func(u *mcpgate.Upstream, name string) string {
		return upCall(t, u, "env", fmt.Sprintf(`{"name":%q}`, name))
	}
	for name, want := range map[string]string{
		"ANTHROPIC_API_KEY":  "",
		"MCPGATE_TEST_VALUE": "",
		"FROM_CONFIG":        "from tollgate's environment",
		"PLAIN":              "plain",
		"PATH":               os.Getenv("PATH"),
	} {
		if got := env(u, name); got != want {
			t.Errorf("%s: the server got %q, want %q", name, got, want)
		}
	}
	u.Close()

	cfg.InheritEnv = true
	u = upConnect(t, cfg, opts)
	for name, want := range map[string]string{"ANTHROPIC_API_KEY": "secret", "FROM_CONFIG": "from tollgate's environment"} {
		if got := env(u, name); got != want {
			t.Errorf("inherit_env: %s: the server got %q, want %q", name, got, want)
		}
	}
}

// A server that exits during a call: the outcome is unknown, the server
// is restarted, and the next call works.
func TestStdioCrash(t *testing.T) {
	t.Parallel()
	opts, _ := upOptions(t)
	cfg, files := upStdio(t, nil)
	u := upConnect(t, cfg, opts)

	_, err := u.Call(context.Background(), "crash", nil)
	if !errors.Is(err, mcpgate.ErrOutcomeUnknown) {
		t.Fatalf("crash: %v, want ErrOutcomeUnknown", err)
	}
	upWantErr(t, "crash", err, "server t stopped during the call of crash", "unknown", "restarted")
	if calls := mcptest.ReadLedger(t, files.ledger); len(calls) != 1 || calls[0].Tool != "crash" {
		t.Errorf("ledger %+v", calls)
	}

	// At once: the call waits for the restart.
	if got := upCall(t, u, "echo", `{"text":"again"}`); got != "echo: again" {
		t.Errorf("echo after the restart: %q", got)
	}
	pids := upStartPIDs(t, files.startLog)
	if len(pids) != 2 {
		t.Fatalf("%d starts, want 2", len(pids))
	}
	if upAlive(pids[0]) {
		t.Errorf("the crashed process %d is still there", pids[0])
	}
	if err := u.Err(); err != nil {
		t.Errorf("Err after the restart: %v", err)
	}
}

// A server that answers nothing, not even a ping: the call's outcome is
// unknown, the process is killed and restarted, and the next call works.
func TestStdioFreeze(t *testing.T) {
	t.Parallel()
	opts, log := upOptions(t)
	restarted := make(chan struct{}, 1)
	opts.ToolsChanged = func(server string) {
		if server == "t" {
			select {
			case restarted <- struct{}{}:
			default:
			}
		}
	}
	cfg, files := upStdio(t, nil)
	cfg.Timeout = mcpgate.Duration(500 * time.Millisecond)
	u := upConnect(t, cfg, opts)

	start := time.Now()
	res, err := u.Call(context.Background(), "freeze", nil)
	if !errors.Is(err, mcpgate.ErrOutcomeUnknown) {
		got := ""
		if res != nil {
			got = mcpgate.ResultText(res)
		}
		t.Fatalf("freeze: %v (result %q) after %v, want ErrOutcomeUnknown", err, got, time.Since(start))
	}
	upWantErr(t, "freeze", err, "server t did not answer the call of freeze within 500ms")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the call took %v with a timeout of 500ms", d)
	}
	if calls := mcptest.ReadLedger(t, files.ledger); len(calls) != 1 || calls[0].Tool != "freeze" {
		t.Errorf("ledger %+v", calls)
	}

	select {
	case <-restarted:
	case <-time.After(20 * time.Second):
		t.Fatal("the frozen server was not restarted")
	}
	t.Logf("restarted %v after the call", time.Since(start))
	if !strings.Contains(log.String(), "does not answer a ping") {
		t.Errorf("no failed ping in the log")
	}
	if got := upCall(t, u, "echo", `{"text":"thawed"}`); got != "echo: thawed" {
		t.Errorf("echo after the restart: %q", got)
	}
	pids := upStartPIDs(t, files.startLog)
	if len(pids) != 2 {
		t.Fatalf("%d starts, want 2", len(pids))
	}
	upWaitFor(t, 5*time.Second, fmt.Sprintf("the frozen process %d to end", pids[0]), func() bool { return !upAlive(pids[0]) })
}

// A server that exits as it starts: Connect fails, naming the server and
// quoting its stderr.
func TestStdioCannotStart(t *testing.T) {
	t.Parallel()
	opts, _ := upOptions(t)
	cfg, files := upStdio(t, map[string]string{mcptest.EnvExitAfterStart: "1"})
	start := time.Now()
	u, err := mcpgate.Connect(context.Background(), cfg, opts)
	if err == nil {
		u.Close()
		t.Fatal("connected to a server that cannot start")
	}
	upWantErr(t, "Connect", err, "starting server t ("+cfg.Command, "stderr", "exiting with status 4")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Connect took %v", d)
	}
	if pids := upStartPIDs(t, files.startLog); len(pids) != 1 {
		t.Errorf("%d starts, want 1 (Connect does not retry)", len(pids))
	}

	// A command that is not there.
	_, err = mcpgate.Connect(context.Background(), mcpgate.ServerConfig{Name: "gone", Command: filepath.Join(t.TempDir(), "no-such-server")}, opts)
	upWantErr(t, "missing command", err, "server gone (", "no-such-server")
}

// A server that starts once and then never again: after its crash it is
// restarted with backoff, a bounded number of times, then given up; its
// calls fail at once with why.
func TestRestartBound(t *testing.T) {
	t.Parallel()
	const maxRestarts = 3
	bin := mcptest.BuildStdioServer(t)
	dir := t.TempDir()
	counter := filepath.Join(dir, "starts")
	script := filepath.Join(dir, "server.sh")
	if err := exectest.WriteProgram(script, fmt.Appendf(nil, `#!/bin/sh
n=$(cat %[1]q 2>/dev/null || echo 0)
n=$((n + 1))
echo $n > %[1]q
if [ "$n" -eq 1 ]; then exec %[2]q; fi
echo "start $n: the server is broken now" >&2
exit 4
`, counter, bin)); err != nil {
		t.Fatal(err)
	}
	starts := func() int {
		b, _ := os.ReadFile(counter)
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	opts, _ := upOptions(t)
	opts.MaxRestarts = maxRestarts
	cfg, files := upStdio(t, nil)
	cfg.Command = script
	u := upConnect(t, cfg, opts)
	if got := upCall(t, u, "echo", `{"text":"once"}`); got != "echo: once" {
		t.Fatalf("echo: %q", got)
	}

	crashed := time.Now()
	if _, err := u.Call(context.Background(), "crash", nil); !errors.Is(err, mcpgate.ErrOutcomeUnknown) {
		t.Fatalf("crash: %v", err)
	}
	upWaitFor(t, 10*time.Second, "the server to be given up", func() bool {
		err := u.Err()
		return err != nil && strings.Contains(err.Error(), "stopped restarting")
	})
	gaveUp := time.Since(crashed)
	n := starts()
	t.Logf("%d starts; given up %v after the crash", n, gaveUp)
	if n < 2 || n > maxRestarts+1 {
		t.Errorf("%d starts, want 2 to %d", n, maxRestarts+1)
	}
	// Backoff: 10 ms, then 20, then 40.
	if gaveUp < 70*time.Millisecond {
		t.Errorf("given up %v after the crash: no backoff", gaveUp)
	}
	upWantErr(t, "Err", u.Err(), "server t", fmt.Sprintf("stopped restarting the MCP server t after %d failures in a row", maxRestarts+1), "the server is broken now")
	t.Logf("Err: %v", u.Err())

	begin := time.Now()
	_, err := u.Call(context.Background(), "echo", []byte(`{"text":"again"}`))
	upWantErr(t, "call after giving up", err, "stopped restarting", "echo")
	if d := time.Since(begin); d > time.Second {
		t.Errorf("the call took %v to fail", d)
	}
	time.Sleep(100 * time.Millisecond)
	if m := starts(); m != n {
		t.Errorf("started again after giving up: %d starts, then %d", n, m)
	}
	if pids := upStartPIDs(t, files.startLog); len(pids) != 1 {
		t.Errorf("the program started %d times, want once", len(pids))
	}
}

// Close ends a stdio server's process; calls after it fail.
func TestCloseEndsProcess(t *testing.T) {
	t.Parallel()
	opts, _ := upOptions(t)
	cfg, files := upStdio(t, nil)
	u := upConnect(t, cfg, opts)
	upCall(t, u, "echo", `{"text":"hi"}`)
	pids := upStartPIDs(t, files.startLog)
	if len(pids) != 1 || !upAlive(pids[0]) {
		t.Fatalf("pids %v", pids)
	}
	if err := u.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if upAlive(pids[0]) {
		t.Errorf("process %d still there after Close", pids[0])
	}
	if err := u.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	_, err := u.Call(context.Background(), "echo", []byte(`{"text":"hi"}`))
	upWantErr(t, "call after Close", err, "closed")
}

// ConnectAll connects every server; names must differ; one that fails
// fails the whole, saying which.
func TestConnectAll(t *testing.T) {
	t.Parallel()
	opts, _ := upOptions(t)
	url := upServeHTTP(t, nil, nil)
	s, err := mcpgate.ConnectAll(context.Background(), []mcpgate.ServerConfig{{Name: "a", URL: url}, {Name: "b", URL: url}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Tools()) != 12 || s.Get("b") == nil || s.Get("c") != nil || len(s.Problems()) != 2 {
		t.Errorf("%d tools, %d problems", len(s.Tools()), len(s.Problems()))
	}
	if got := s.Get("b").AgentTools()[0].Name(); !strings.HasPrefix(got, "mcp__b__") {
		t.Errorf("b's tool %s", got)
	}

	_, err = mcpgate.ConnectAll(context.Background(), []mcpgate.ServerConfig{{Name: "a", URL: url}, {Name: "a", URL: url}}, opts)
	upWantErr(t, "two named a", err, "two servers are named a")

	_, err = mcpgate.ConnectAll(context.Background(), []mcpgate.ServerConfig{{Name: "a", URL: url}, {Name: "down", URL: "http://127.0.0.1:1/mcp"}}, opts)
	upWantErr(t, "one down", err, "server down (http://127.0.0.1:1/mcp)")
}

// A call waiting for a restart ends when the Upstream is closed.
func TestCloseDuringRestart(t *testing.T) {
	t.Parallel()
	opts, _ := upOptions(t)
	opts.RestartBackoff = time.Minute
	cfg, _ := upStdio(t, nil)
	u := upConnect(t, cfg, opts)
	if _, err := u.Call(context.Background(), "crash", nil); !errors.Is(err, mcpgate.ErrOutcomeUnknown) {
		t.Fatalf("crash: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := u.Call(context.Background(), "echo", []byte(`{"text":"hi"}`))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // the call waits for the restart
	u.Close()
	select {
	case err := <-done:
		upWantErr(t, "call waiting at Close", err, "closed")
	case <-time.After(2 * time.Second):
		t.Fatal("a call waiting for a restart did not end with Close")
	}
}

// What a call's error says reaches MCP clients and threads: no URL query
// (it may hold a key), no command line, no stderr.
func TestCallErrorsHoldNoSecrets(t *testing.T) {
	srv := mcptest.NewServer(nil, nil)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	withUser := strings.Replace(ts.URL, "http://", "http://bob:SEKRET2@", 1)
	u, err := mcpgate.Connect(context.Background(), mcpgate.ServerConfig{Name: "k", URL: withUser + "/?api_key=SEKRET1"},
		&mcpgate.Options{Logger: slog.New(slog.DiscardHandler), MaxRestarts: 1, RestartBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	ts.Config.Close() // the server goes away at once: calls fail with the SDK's errors
	_, err = u.Call(context.Background(), "echo", json.RawMessage(`{"text":"x"}`))
	if err == nil {
		t.Fatal("a call to a server that is gone succeeded")
	}
	if strings.Contains(err.Error(), "SEKRET1") || strings.Contains(err.Error(), "SEKRET2") || strings.Contains(err.Error(), "bob") {
		t.Fatalf("the error repeats the URL's secrets: %v", err)
	}
}

// Calls made side by side reuse the server's connections: ten at a time,
// five times over, open about ten connections, not a new one for most
// calls of each round (http.DefaultTransport keeps two idle a host).
func TestUpstreamHTTPKeepsConnections(t *testing.T) {
	var mu sync.Mutex
	opened := 0
	srv := mcptest.NewServer(nil, nil)
	ts := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			opened++
			mu.Unlock()
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	opts, _ := upOptions(t)
	u := upConnect(t, mcpgate.ServerConfig{Name: "t", URL: ts.URL}, opts)
	const parallel, rounds = 10, 5
	for range rounds {
		var wg sync.WaitGroup
		for range parallel {
			wg.Go(func() { upCall(t, u, "echo", `{"text":"hi"}`) })
		}
		wg.Wait()
	}
	mu.Lock()
	defer mu.Unlock()
	// The session's own connections (its event stream, its first
	// requests) and one a call at most of the first round.
	if opened > 2*parallel {
		t.Fatalf("%d calls opened %d connections to the server", parallel*rounds, opened)
	}
}
