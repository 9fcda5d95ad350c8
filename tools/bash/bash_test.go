package bash_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/provider/scripted"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

func runOne(t *testing.T, tool *agent.Tool, cmd string) agent.ToolResult {
	t.Helper()
	model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "bash", bash.Args{Cmd: cmd})}}, scripted.Turn{Text: "ok"})
	a, err := agent.New(agent.Config{Provider: model, Tools: []*agent.Tool{tool}, Checkpointer: memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Prompt(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	msgs, _ := a.Messages(context.Background())
	return *msgs[2].Result
}

func TestTimeoutKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tool := bash.New(&bash.Options{Dir: dir, Timeout: 200 * time.Millisecond})
	start := time.Now()
	// The background child would write the marker after 1s if it survived.
	r := runOne(t, tool, "(sleep 1; touch marker) & sleep 30")
	if !r.IsError || !strings.Contains(r.Content, "timed out after 200ms") {
		t.Fatalf("result %+v", r)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "marker")); err == nil {
		t.Fatal("a child of the timed-out command survived")
	}
}

func TestWorkingDirAndStderr(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runOne(t, bash.New(&bash.Options{Dir: dir}), "pwd; echo oops >&2; false")
	if r.IsError || !strings.Contains(r.Content, `"exit_code":1`) || !strings.Contains(r.Content, dir) || !strings.Contains(r.Content, `"stderr":"oops\n"`) {
		t.Fatalf("result %+v", r)
	}
}
