package mcptest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// syncBuffer collects output another goroutine writes.
type syncBuffer = Buffer

type stdioServer struct {
	cmd      *exec.Cmd
	cs       *mcp.ClientSession
	stderr   *syncBuffer
	ledger   string
	startLog string
}

// startStdio starts the stdio server program with a ledger and a start log
// in a fresh directory, and connects a client to it.
func startStdio(t *testing.T, opts *mcp.ClientOptions, env ...string) *stdioServer {
	t.Helper()
	bin := BuildStdioServer(t)
	dir := t.TempDir()
	s := &stdioServer{
		cmd:      exec.Command(bin),
		stderr:   new(syncBuffer),
		ledger:   filepath.Join(dir, "ledger.jsonl"),
		startLog: filepath.Join(dir, "start.log"),
	}
	s.cmd.Env = append(os.Environ(), EnvLedger+"="+s.ledger, EnvStartLog+"="+s.startLog)
	s.cmd.Env = append(s.cmd.Env, env...)
	s.cmd.Stderr = s.stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "mcptest-client", Version: "1.0"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: s.cmd, TerminateDuration: 100 * time.Millisecond}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, s.stderr)
	}
	s.cs = cs
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("server stderr:\n%s", s.stderr)
		}
	})
	return s
}

func startLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("start log: %v", err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func TestStdio(t *testing.T) {
	p := newProgressRecorder()
	s := startStdio(t, &mcp.ClientOptions{ProgressNotificationHandler: p.handle})
	cs := s.cs

	tools := listTools(t, cs)
	want := "bad_schema crash delete_repo echo env fail freeze hang slow structured write_note"
	if got := strings.Join(sortedNames(tools), " "); got != want {
		t.Fatalf("tools %s, want %s", got, want)
	}
	checkAnnotations(t, tools)
	if compile(tools["bad_schema"].InputSchema) == nil {
		t.Error("the compiler accepts bad_schema's schema")
	}

	wantText(t, call(t, cs, "echo", map[string]any{"text": "hi"}), "echo: hi")
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo"}); err == nil && !res.IsError {
		t.Errorf("echo without text accepted: %q", resultText(t, res))
	}
	wantText(t, call(t, cs, "write_note", map[string]any{"path": "n.txt", "text": "abc"}), "wrote 3 bytes to n.txt")
	// Written before the tool returned.
	calls := ReadLedger(t, s.ledger)
	if len(calls) != 1 || calls[0].Tool != "write_note" || calls[0].Args["path"] != "n.txt" || calls[0].Args["text"] != "abc" || calls[0].At.IsZero() {
		t.Fatalf("ledger %+v", calls)
	}
	slowWithProgress(t, cs, p)
	if calls := ReadLedger(t, s.ledger); len(calls) != 2 || calls[1].Tool != "slow" || calls[1].Args["ms"] != 120.0 {
		t.Errorf("ledger %+v", calls)
	}

	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d", code)
	}
	if got, want := startLines(t, s.startLog), fmt.Sprintf("start %d", s.cmd.Process.Pid); len(got) != 1 || got[0] != want {
		t.Errorf("start log %q, want %q", got, want)
	}
}

func TestStdioCrash(t *testing.T) {
	s := startStdio(t, nil)
	_, err := s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "crash"})
	if err == nil {
		t.Fatal("crash returned a result")
	}
	t.Logf("CallTool: %v", err)
	if calls := ReadLedger(t, s.ledger); len(calls) != 1 || calls[0].Tool != "crash" {
		t.Errorf("ledger %+v", calls)
	}
	s.cs.Close()
	if code := s.cmd.ProcessState.ExitCode(); code != CrashStatus {
		t.Errorf("exit status %d, want %d", code, CrashStatus)
	}
}

func TestStdioHang(t *testing.T) {
	s := startStdio(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "hang"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CallTool: %v, want deadline exceeded", err)
	}
	// Stdin closed, the program stays until it is signalled.
	start := time.Now()
	s.cs.Close()
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("the hung server exited %v after stdin closed", d)
	}
	ws, _ := s.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("process ended %v, want killed by SIGTERM", s.cmd.ProcessState)
	}
	if calls := ReadLedger(t, s.ledger); len(calls) != 0 {
		t.Errorf("ledger %+v", calls)
	}
}

func TestStdioExitAfterStart(t *testing.T) {
	bin := BuildStdioServer(t)
	dir := t.TempDir()
	startLog := filepath.Join(dir, "start.log")
	env := append(os.Environ(), EnvStartLog+"="+startLog, EnvExitAfterStart+"=1")

	cmd := exec.Command(bin)
	cmd.Env = env
	var ee *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &ee) || ee.ExitCode() != ExitAfterStartStatus {
		t.Fatalf("run: %v, want exit status %d", err, ExitAfterStartStatus)
	}

	cmd2 := exec.Command(bin)
	cmd2.Env = env
	c := mcp.NewClient(&mcp.Implementation{Name: "mcptest-client", Version: "1.0"}, nil)
	if cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd2}, nil); err == nil {
		cs.Close()
		t.Fatal("connected to a server that cannot start")
	}

	got := startLines(t, startLog)
	want := []string{fmt.Sprintf("start %d", cmd.Process.Pid), fmt.Sprintf("start %d", cmd2.Process.Pid)}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("start log %q, want %q", got, want)
	}
}

func TestReadLedgerMissing(t *testing.T) {
	if calls := ReadLedger(t, filepath.Join(t.TempDir(), "none")); calls != nil {
		t.Errorf("calls %v", calls)
	}
}
