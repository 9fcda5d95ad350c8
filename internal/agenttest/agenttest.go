// Package agenttest runs the real coding agents tollgate's hooks guard —
// Claude Code and Codex, from npm — against local fakes of their model
// APIs, so that tests drive the agents' own hook machinery offline: a
// scripted model proposes tool calls, the agent asks its hooks, obeys
// them, runs the calls, and sends the results back to the fake, which
// records them.
//
//	npm install --prefix /var/cache/tollgate-ci/claude-code @anthropic-ai/claude-code@2.1.328
//	npm install --prefix /var/cache/tollgate-ci/codex @openai/codex@0.169.0
//
// ($TOLLGATE_TEST_CLAUDE_CODE and $TOLLGATE_TEST_CODEX name other
// directories.) Without an agent the test is skipped; with CI=true it
// fails: CI must run it.
package agenttest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The agents' versions the tests are written against (.ci/run installs
// them).
const (
	ClaudeCodeVersion = "2.1.328"
	CodexVersion      = "0.169.0"
)

// Where the agents are installed (npm --prefix), unless the variables
// name another place.
const (
	EnvClaudeCode     = "TOLLGATE_TEST_CLAUDE_CODE"
	EnvCodex          = "TOLLGATE_TEST_CODEX"
	defaultClaudeCode = "/var/cache/tollgate-ci/claude-code"
	defaultCodex      = "/var/cache/tollgate-ci/codex"
)

// Call is a tool call the fake model makes.
type Call struct {
	Name  string
	Input map[string]any
}

// Result is a tool result the agent sent back to the fake model.
type Result struct {
	CallID  string
	Content string
	IsError bool
}

// binary finds an agent's executable, skipping (failing on CI) when it
// is not installed.
func binary(t testing.TB, env, def, pkg, version, rel string) string {
	t.Helper()
	dir := os.Getenv(env)
	if dir == "" {
		dir = def
	}
	bin := filepath.Join(dir, "node_modules", ".bin", rel)
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("agenttest: %s is not installed in %s (npm install --prefix %s %s@%s, or set %s): %v", pkg, dir, dir, pkg, version, env, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// ClaudeCode is the claude executable.
func ClaudeCode(t testing.TB) string {
	return binary(t, EnvClaudeCode, defaultClaudeCode, "@anthropic-ai/claude-code", ClaudeCodeVersion, "claude")
}

// Codex is the codex executable.
func Codex(t testing.TB) string {
	return binary(t, EnvCodex, defaultCodex, "@openai/codex", CodexVersion, "codex")
}

// Model is a fake model API: it answers the agent's n-th turn with
// Turns[n] (its tool calls, all at once), and ends the run with a text
// once the turns are used up. It records the tool results it receives.
type Model struct {
	URL   string
	Turns [][]Call

	mu      sync.Mutex
	results []Result
	srv     *httptest.Server
}

// Results are the tool results the agent sent, in order.
func (m *Model) Results() []Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Result(nil), m.results...)
}

// Result is the result of the call with that id; ok false when none came.
func (m *Model) Result(callID string) (Result, bool) {
	for _, r := range m.Results() {
		if r.CallID == callID {
			return r, true
		}
	}
	return Result{}, false
}

func (m *Model) record(r Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, old := range m.results {
		if old.CallID == r.CallID {
			return // the history again, in a later turn
		}
	}
	m.results = append(m.results, r)
}

func (m *Model) turn(n int) []Call {
	if n < len(m.Turns) {
		return m.Turns[n]
	}
	return nil
}

// CallID is the id the fake gives the i-th call of turn n.
func CallID(n, i int) string { return fmt.Sprintf("toolu_t%d_%d", n, i) }

// NewAnthropic starts a fake of the Anthropic Messages API (streaming
// server-sent events, as Claude Code asks for them).
func NewAnthropic(t testing.TB, turns ...[]Call) *Model {
	return newModel(t, turns, (*Model).anthropic)
}

func newModel(t testing.TB, turns [][]Call, serve func(*Model, http.ResponseWriter, *http.Request)) *Model {
	m := &Model{Turns: turns}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serve(m, w, r) }))
	m.URL = m.srv.URL
	t.Cleanup(m.srv.Close)
	return m
}

func (m *Model) anthropic(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
		return
	}
	if strings.HasSuffix(r.URL.Path, "/count_tokens") {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"input_tokens": 10}`))
		return
	}
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	turn := 0
	for _, msg := range req.Messages {
		if msg.Role == "assistant" {
			turn++
		}
		var blocks []struct {
			Type      string          `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			IsError   bool            `json:"is_error"`
		}
		if json.Unmarshal(msg.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				m.record(Result{CallID: b.ToolUseID, Content: contentText(b.Content), IsError: b.IsError})
			}
		}
	}
	var blocks []map[string]any
	stop := "end_turn"
	if calls := m.turn(turn); len(calls) > 0 && len(req.Tools) > 0 {
		for i, c := range calls {
			blocks = append(blocks, map[string]any{"type": "tool_use", "id": CallID(turn, i), "name": c.Name, "input": c.Input})
		}
		stop = "tool_use"
	} else {
		blocks = append(blocks, map[string]any{"type": "text", "text": "done"})
	}
	usage := map[string]int{"input_tokens": 1, "output_tokens": 1}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "msg_fake", "type": "message", "role": "assistant", "model": req.Model,
			"content": blocks, "stop_reason": stop, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(name string, v map[string]any) {
		v["type"] = name
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	ev("message_start", map[string]any{"message": map[string]any{"id": fmt.Sprintf("msg_%d", turn), "type": "message", "role": "assistant",
		"model": req.Model, "content": []any{}, "stop_reason": nil, "usage": usage}})
	for i, b := range blocks {
		if b["type"] == "tool_use" {
			ev("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			in, _ := json.Marshal(b["input"])
			ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		} else {
			ev("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		}
		ev("content_block_stop", map[string]any{"index": i})
	}
	ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop}, "usage": map[string]int{"output_tokens": 5}})
	ev("message_stop", map[string]any{})
}

// contentText is a tool_result's content as text (a string, or text
// blocks).
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks)
	var b strings.Builder
	for _, x := range blocks {
		b.WriteString(x.Text)
	}
	return b.String()
}

// NewResponses starts a fake of the OpenAI Responses API (streaming), as
// Codex calls it. Its tool calls are function calls; Codex's shell tool
// is exec_command {"cmd": ...}.
func NewResponses(t testing.TB, turns ...[]Call) *Model {
	return newModel(t, turns, (*Model).responses)
}

func (m *Model) responses(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if !strings.HasSuffix(r.URL.Path, "/responses") {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Input []struct {
			Type   string          `json:"type"`
			CallID string          `json:"call_id"`
			Output json.RawMessage `json:"output"`
		} `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// A turn of the model is a run of function calls in the history.
	turn, inCalls := 0, false
	for _, it := range req.Input {
		switch it.Type {
		case "function_call":
			if !inCalls {
				turn++
			}
			inCalls = true
		case "function_call_output":
			inCalls = false
			m.record(Result{CallID: it.CallID, Content: contentText(it.Output)})
		default:
			inCalls = false
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(v map[string]any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], b)
	}
	id := fmt.Sprintf("resp_%d", turn)
	ev(map[string]any{"type": "response.created", "response": map[string]any{"id": id}})
	var items []map[string]any
	if calls := m.turn(turn); len(calls) > 0 {
		for i, c := range calls {
			args, _ := json.Marshal(c.Input)
			items = append(items, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d_%d", turn, i), "call_id": CallID(turn, i), "name": c.Name, "arguments": string(args)})
		}
	} else {
		items = append(items, map[string]any{"type": "message", "id": "msg_" + id, "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "done"}}})
	}
	for i, it := range items {
		ev(map[string]any{"type": "response.output_item.added", "output_index": i, "item": it})
		ev(map[string]any{"type": "response.output_item.done", "output_index": i, "item": it})
	}
	ev(map[string]any{"type": "response.completed", "response": map[string]any{"id": id,
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}})
}

// Run is one run of an agent to its end.
type Run struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	done   chan struct{}
	err    error
	Output string
}

// Wait waits for the run to end (at most limit) and returns its output.
func (r *Run) Wait(t testing.TB, limit time.Duration) string {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(limit):
		_ = r.cmd.Process.Kill()
		<-r.done
		t.Fatalf("agenttest: the agent did not finish within %s; its output:\n%s", limit, r.out.String())
	}
	r.Output = r.out.String()
	if r.err != nil {
		t.Logf("agenttest: the agent exited with %v; its output:\n%s", r.err, r.Output)
	}
	return r.Output
}

func start(t testing.TB, cmd *exec.Cmd) *Run {
	t.Helper()
	r := &Run{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &r.out, &r.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("agenttest: starting %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-r.done
	})
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	return r
}

// StartClaude runs claude -p in dir (whose .claude/settings.json holds
// the hooks) against the fake model, with home as its home directory, the
// environment of this process plus env. The context's end kills it.
func StartClaude(t testing.TB, ctx context.Context, m *Model, dir, home string, env ...string) *Run {
	t.Helper()
	cmd := exec.CommandContext(ctx, ClaudeCode(t), "-p", "do it", "--output-format", "json")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+home, "ANTHROPIC_BASE_URL="+m.URL, "ANTHROPIC_API_KEY=sk-fake",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1")
	cmd.Env = append(cmd.Env, env...)
	return start(t, cmd)
}

// CodexHome writes a $CODEX_HOME for the fake model: config.toml naming
// it as the model provider (wire_api responses); hooks.json is the
// caller's to write.
func CodexHome(t testing.TB, m *Model) string {
	t.Helper()
	home := t.TempDir()
	cfg := fmt.Sprintf(`model = "gpt-fake"
model_provider = "fake"
[model_providers.fake]
name = "fake"
base_url = "%s/v1"
wire_api = "responses"
`, m.URL)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

// StartCodex runs codex exec in dir with $CODEX_HOME home (its hooks
// trusted for this run: --dangerously-bypass-hook-trust), in Codex's
// workspace-write sandbox.
func StartCodex(t testing.TB, ctx context.Context, dir, home string, env ...string) *Run {
	t.Helper()
	cmd := exec.CommandContext(ctx, Codex(t), "exec", "--dangerously-bypass-hook-trust", "--skip-git-repo-check",
		"--sandbox", "workspace-write", "do it")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader("")
	cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "OPENAI_API_KEY=sk-fake")
	cmd.Env = append(cmd.Env, env...)
	return start(t, cmd)
}
