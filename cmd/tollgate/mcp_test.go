package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/mcptest"
	"github.com/tollgate-ai/tollgate/provider/scripted"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

// The tools of the stdio test program that the agent gets, in the order
// it lists them: all but bad_schema, whose input schema is malformed.
var mcptestTools = []string{"crash", "delete_repo", "echo", "env", "fail", "freeze", "hang", "slow", "structured", "write_note"}

// leftOutLine is the warning about the test program's bad_schema tool.
var leftOutLine = regexp.MustCompile(`(?m)^tollgate: MCP server t: tool "bad_schema" is left out: its input schema is malformed: \S`)

// mcpConfigFile writes a --mcp-config file with one server running the
// stdio test program with env, and returns its path.
func mcpConfigFile(t *testing.T, name string, env map[string]string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{
		name: map[string]any{"command": mcptest.BuildStdioServer(t), "env": env},
	}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startedPIDs reads the pids the stdio test program wrote to its start log.
func startedPIDs(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the MCP server did not start: %v", err)
	}
	var pids []int
	for _, line := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(line); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// checkGone fails the test if a process that tollgate started is still
// there (nor a zombie: tollgate waited for it).
func checkGone(t *testing.T, pids []int) {
	t.Helper()
	if len(pids) == 0 {
		t.Fatal("no MCP server process was started")
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("the MCP server process %d is still there after tollgate exited (kill 0: %v)", pid, err)
		}
	}
}

// tollgate run with a server from --mcp and one from --mcp-config: the
// tool left out is said once, in the user's terms, the start line counts
// the tools of each, and both processes are gone when the run has ended.
func TestMCPRun(t *testing.T) {
	bin := mcptest.BuildStdioServer(t)
	startLog := filepath.Join(t.TempDir(), "starts")
	cfg := mcpConfigFile(t, "cfg", map[string]string{mcptest.EnvStartLog: startLog})
	code, out, errOut := runCLI(t, "", "run", "--dir", t.TempDir(), "--allow-all", "--mcp-config", cfg, "--mcp", "t="+bin, "$ true")
	if code != 0 || !strings.Contains(out, "`true`: ran, exit 0") {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "tollgate: 20 MCP tools: 10 from cfg, 10 from t\n") {
		t.Errorf("no start line counting the MCP tools:\n%s", errOut)
	}
	if n := len(leftOutLine.FindAllString(errOut, -1)); n != 1 {
		t.Errorf("the warning about t's bad_schema is there %d times, want once:\n%s", n, errOut)
	}
	if !strings.Contains(errOut, `tollgate: MCP server cfg: tool "bad_schema" is left out`) || strings.Count(errOut, "bad_schema") != 2 {
		t.Errorf("want one warning about bad_schema for each server:\n%s", errOut)
	}
	checkGone(t, startedPIDs(t, startLog))
}

// A bad --mcp or --mcp-config is a usage error, said before anything
// starts; a server that does not start fails the run, named.
func TestMCPFlagErrors(t *testing.T) {
	bin := mcptest.BuildStdioServer(t)
	dir := t.TempDir()
	unknownKey := filepath.Join(dir, "unknown.json")
	os.WriteFile(unknownKey, []byte(`{"mcpServers": {"gh": {"command": "gh-mcp", "colour": "red"}}}`), 0o600)
	dup := filepath.Join(dir, "dup.json")
	os.WriteFile(dup, []byte(`{"mcpServers": {"t": {"command": "`+bin+`"}}}`), 0o600)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--mcp", "nameless"}, 2, `tollgate: mcpgate: "nameless": write NAME=COMMAND [ARGS...] or NAME=URL`},
		{[]string{"--mcp", "a__b=" + bin}, 2, `server name "a__b"`},
		{[]string{"--mcp", "t=" + bin + " $HOME"}, 2, "$ would not expand"},
		{[]string{"--mcp-config", unknownKey}, 2, `server gh: unknown key "colour"`},
		{[]string{"--mcp-config", filepath.Join(dir, "missing.json")}, 2, "mcpgate: reading the config"},
		{[]string{"--mcp-config", dup, "--mcp", "t=" + bin}, 2, "two servers are named t"},
		{[]string{"--mcp", "t=" + filepath.Join(dir, "no-such-server")}, 1, "tollgate: mcpgate: starting server t ("},
		{[]string{"--mcp-config", mcpConfigFile(t, "t", map[string]string{mcptest.EnvExitAfterStart: "1"})}, 1, "tollgate: mcpgate: starting server t ("},
	}
	for _, c := range cases {
		code, out, errOut := runCLI(t, "", append(append([]string{"run", "--dir", dir}, c.args...), "$ true")...)
		if code != c.code || strings.Contains(out, "ran") || !strings.Contains(errOut, c.want) {
			t.Errorf("run %q: exit %d, want %d; stderr lacks %q:\n%s%s", c.args, code, c.code, c.want, out, errOut)
		}
	}
	// serve says the same, before it listens.
	code, out, errOut := runCLI(t, "", "serve", "--addr", "127.0.0.1:0", "--store", "memory", "--mcp-config", unknownKey)
	if code != 2 || !strings.Contains(errOut, `tollgate serve: mcpgate: `) || !strings.Contains(errOut, `unknown key "colour"`) || out != "" {
		t.Errorf("serve with an unknown key: exit %d:\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "", "serve", "--addr", "127.0.0.1:0", "--store", "memory", "--mcp", "t="+filepath.Join(dir, "no-such-server"))
	if code != 1 || !strings.Contains(errOut, "tollgate serve: mcpgate: starting server t (") || strings.Contains(out, "open http") {
		t.Errorf("serve with a server that does not start: exit %d:\n%s%s", code, out, errOut)
	}
}

// The agent run and serve make has bash and the MCP tools, with their
// servers' schemas; an MCP tool's call is asked by the default policy like
// any call no rule allows, and once approved reaches the server.
func TestMCPToolsInTheAgent(t *testing.T) {
	ctx := context.Background()
	ledger := filepath.Join(t.TempDir(), "ledger")
	f := mcpFlags{configFile: mcpConfigFile(t, "t", map[string]string{mcptest.EnvLedger: ledger})}
	configs, err := f.configs()
	if err != nil {
		t.Fatal(err)
	}
	var warnings []string
	servers, err := connectMCP(ctx, configs, slog.New(slog.DiscardHandler), func(s string) { warnings = append(warnings, s) })
	if err != nil {
		t.Fatal(err)
	}
	defer servers.Close()
	if len(warnings) != 1 || !leftOutLine.MatchString(warnings[0]) {
		t.Errorf("warnings %q, want one about bad_schema", warnings)
	}

	// serve's default policy (run without --policy asks every call).
	lp, err := loadPolicy(ctx, "", slog.New(slog.DiscardHandler), policyWatch{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	approval, name := lp.approval, lp.name
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "mcp__t__echo", map[string]any{"text": "hi"})}},
		scripted.Turn{Text: "done"},
	)
	store := memory.New()
	cfg, err := withMCP(bashAgent(store, model, agent.Model{ID: "m", Provider: "scripted"}, &bash.Options{Dir: t.TempDir()}, approval, nil), servers)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range cfg.Tools {
		names = append(names, tool.Name())
	}
	want := []string{"bash"}
	for _, n := range mcptestTools {
		want = append(want, "mcp__t__"+n)
	}
	if !slices.Equal(names, want) {
		t.Fatalf("the agent's tools are %q, want %q", names, want)
	}
	echo := cfg.Tools[1+slices.Index(mcptestTools, "echo")]
	var schema struct {
		Type       string         `json:"type"`
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	if err := json.Unmarshal(echo.Schema(), &schema); err != nil || schema.Type != "object" || schema.Properties["text"] == nil || !slices.Equal(schema.Required, []string{"text"}) {
		t.Errorf("mcp__t__echo's schema is not the server's {text}: %s (%v)", echo.Schema(), err)
	}
	if a := echo.Annotations(); a["mcp_server"] != "t" || a["read_only"] != true {
		t.Errorf("mcp__t__echo's annotations: %v", a)
	}

	// A native tool of the same name: start-up stops.
	native := agent.NewRawTool("mcp__t__echo", "a native tool", func(context.Context, map[string]any) (agent.ToolResult, error) {
		return agent.ToolResult{}, nil
	}, nil)
	if _, err := withMCP(agent.Config{Tools: []*agent.Tool{native}}, servers); err == nil || !strings.Contains(err.Error(), "mcp__t__echo") {
		t.Errorf("a native tool named mcp__t__echo: %v, want an error naming it", err)
	}

	// The default policy asks a call of a tool no rule covers.
	d := approval(ctx, &hitl.PolicyContext{ThreadID: "x", CallID: "c", Tool: "mcp__t__echo", RawArgs: json.RawMessage(`{"text":"hi"}`), Args: map[string]any{"text": "hi"}, Annotations: echo.Annotations()})
	if d.Action() != "ask" {
		t.Errorf("policy %s on mcp__t__echo: %s, want ask", name, d)
	}

	// A run on the agent: the call waits for a person, then runs.
	h, err := host.New(host.Config{Store: store, Agent: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(ctx)
	if _, _, err := h.Prompt(ctx, "t1", "say hi", nil); err != nil {
		t.Fatal(err)
	}
	var q *checkpoint.Question
	waitFor(t, "the question about mcp__t__echo", 10*time.Second, func() bool {
		q, _ = store.GetQuestion(ctx, "t1", "hitl_c1")
		return q != nil && q.Status == checkpoint.QuestionPending
	})
	if q.Tool != "mcp__t__echo" {
		t.Errorf("the question is about %q", q.Tool)
	}
	if calls := mcptest.ReadLedger(t, ledger); len(calls) != 0 {
		t.Fatalf("the server got a call before it was approved: %v", calls)
	}
	if _, err := h.Answer(ctx, "t1", "hitl_c1", json.RawMessage(`{"decision":"approve"}`), "alice"); err != nil {
		t.Fatal(err)
	}
	var th *checkpoint.Thread
	waitFor(t, "the run to end", 10*time.Second, func() bool {
		th, _ = store.LoadThread(ctx, "t1")
		return th != nil && th.Status == checkpoint.ThreadIdle && strings.Contains(string(th.Messages), "done")
	})
	if !strings.Contains(string(th.Messages), `echo: hi`) {
		t.Errorf("the tool result is not the server's:\n%s", th.Messages)
	}
	// echo records nothing (it is read-only); the ledger stays empty, and
	// the result above came from the server.
}

// tollgate serve with --mcp says at start how many MCP tools it has from
// which server, and closes the servers when it stops.
func TestMCPServe(t *testing.T) {
	t.Setenv("TOLLGATE_TOKENS", "")
	t.Setenv("TOLLGATE_TOKENS_FILE", "")
	startLog := filepath.Join(t.TempDir(), "starts")
	cfg := mcpConfigFile(t, "cfg", map[string]string{mcptest.EnvStartLog: startLog})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut lockedWriter
	done := make(chan int, 1)
	go func() {
		done <- runMain(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--store", "memory", "--dir", t.TempDir(),
			"--mcp", "t=" + mcptest.BuildStdioServer(t), "--mcp-config", cfg}, strings.NewReader(""), &out, &errOut)
	}()
	waitFor(t, "serve to start", 30*time.Second, func() bool {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d:\n%s\n%s", code, out.String(), errOut.String())
		default:
		}
		return strings.Contains(out.String(), "open http://")
	})
	if !strings.Contains(out.String(), "tollgate: 20 MCP tools: 10 from cfg, 10 from t\n") {
		t.Errorf("serve's start does not count its MCP tools:\n%s", out.String())
	}
	if !leftOutLine.MatchString(logMessages(errOut.String())) || strings.Count(errOut.String(), `tool \"bad_schema\" is left out`) != 2 {
		t.Errorf("want a warning about bad_schema for each server in serve's log:\n%s", errOut.String())
	}
	pids := startedPIDs(t, startLog)
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d:\n%s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	checkGone(t, pids)
}

// logMessages is the msg of each line of a slog text log, unquoted.
func logMessages(log string) string {
	var b strings.Builder
	re := regexp.MustCompile(`msg=("(?:[^"\\]|\\.)*"|\S+)`)
	for _, m := range re.FindAllStringSubmatch(log, -1) {
		msg := m[1]
		if s, err := strconv.Unquote(msg); err == nil {
			msg = s
		}
		b.WriteString(msg + "\n")
	}
	return b.String()
}
