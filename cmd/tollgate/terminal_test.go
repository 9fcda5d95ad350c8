package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
	"github.com/tollgate-ai/tollgate/internal/exectest"
)

// ptyRun is a `tollgate run` process on a pseudo-terminal, as a person
// at a keyboard would have it.
type ptyRun struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	mark int // expect searches the output after the last match
	done chan struct{}
	code int
}

func startPTY(t *testing.T, env []string, args ...string) *ptyRun {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"run"}, args...)...)
	cmd.Env = append(append(os.Environ(), "TOLLGATE_TEST_AS_CLI=1", "EDITOR=", "TOLLGATE_USER=kim"), env...)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	p := &ptyRun{t: t, cmd: cmd, tty: tty, done: make(chan struct{})}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.code = ee.ExitCode()
		default:
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
		tty.Close()
	})
	return p
}

// expect waits until the output after the last match matches re.
func (p *ptyRun) expect(re string) []string {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(30 * time.Second)
	for {
		p.mu.Lock()
		s := p.out.String()
		rest := s[p.mark:]
		if loc := rx.FindStringSubmatchIndex(rest); loc != nil {
			m := make([]string, 0, len(loc)/2)
			for i := 0; i < len(loc); i += 2 {
				if loc[i] >= 0 {
					m = append(m, rest[loc[i]:loc[i+1]])
				} else {
					m = append(m, "")
				}
			}
			p.mark += loc[1]
			p.mu.Unlock()
			return m
		}
		p.mu.Unlock()
		select {
		case <-p.done:
			// The process ended: what it printed is all there is.
			time.Sleep(50 * time.Millisecond)
			p.mu.Lock()
			s = p.out.String()
			p.mu.Unlock()
			if rx.MatchString(s[p.mark:]) {
				continue
			}
			p.t.Fatalf("the run exited (%d) without printing %q; its screen:\n%s", p.code, re, s)
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no %q on the screen after 30s; it shows:\n%s", re, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *ptyRun) send(s string) {
	p.t.Helper()
	if _, err := p.tty.WriteString(s); err != nil {
		p.t.Fatal(err)
	}
}

// exit waits for the process to end and returns its exit code.
func (p *ptyRun) exit() int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(30 * time.Second):
		p.t.Fatalf("the run did not exit; its screen:\n%s", p.screen())
		return -1
	}
}

func (p *ptyRun) screen() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// lastMessage reads the thread's last message from the SQLite file.
func lastMessage(t *testing.T, dbPath, thread string) agent.Message {
	t.Helper()
	msgs := threadMessages(t, dbPath, thread)
	return msgs[len(msgs)-1]
}

// threadMessages reads the thread's messages from the SQLite file.
func threadMessages(t *testing.T, dbPath, thread string) []agent.Message {
	t.Helper()
	st, err := sqlite.Open(context.Background(), dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	th, err := st.LoadThread(context.Background(), thread)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []agent.Message
	if err := json.Unmarshal(th.Messages, &msgs); err != nil || len(msgs) == 0 {
		t.Fatalf("thread %s: %v %d messages", thread, err, len(msgs))
	}
	return msgs
}

// TestRunInATerminal drives tollgate run in a pseudo-terminal as a person
// would: every way a question at the prompt can end.
func TestRunInATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tollgate processes")
	}
	newRun := func(t *testing.T) (dir, db string) {
		dir = t.TempDir()
		return dir, filepath.Join(dir, "t.db")
	}

	t.Run("Approve", func(t *testing.T) {
		dir, db := newRun(t)
		p := startPTY(t, nil, "--store", "sqlite:"+db, "--thread", "t1", "--dir", dir, "$ echo hello >> out.txt")
		// The command as the text it is: >> is not escaped.
		p.expect(`approval needed: bash`)
		p.expect(`cmd: echo hello >> out.txt`)
		p.expect(`\(4m5\ds left\) \[a\]pprove, \[d\]eny, \[e\]dit\?`)
		p.send("a\r")
		p.expect(`← bash \(call call_\d+_\d+\): approved by kim`)
		p.expect(`exit 0`)
		p.expect("`echo hello >> out.txt`: ran, exit 0")
		if code := p.exit(); code != 0 {
			t.Fatalf("exit %d:\n%s", code, p.screen())
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(b) != "hello\n" {
			t.Fatalf("out.txt holds %q", b)
		}
	})

	t.Run("KeysTypedBeforeTheQuestionAreNotAnAnswer", func(t *testing.T) {
		dir, db := newRun(t)
		p := startPTY(t, nil, "--store", "sqlite:"+db, "--thread", "t1", "--dir", dir, "$ echo typed-ahead >> out.txt")
		// Typed at once, before the question can be on the screen.
		p.send("a\r")
		p.expect(`cmd: echo typed-ahead >> out.txt`)
		p.expect(`\[a\]pprove`)
		time.Sleep(1500 * time.Millisecond)
		if strings.Contains(p.screen(), "approved by") {
			t.Fatalf("keys typed before the question approved it:\n%s", p.screen())
		}
		p.send("d\r")
		p.expect(`reason:`)
		p.send("not seen\r")
		p.expect("denied: not seen")
		if code := p.exit(); code != 0 {
			t.Fatalf("exit %d:\n%s", code, p.screen())
		}
		if _, err := os.Stat(filepath.Join(dir, "out.txt")); err == nil {
			t.Fatal("the command ran")
		}
	})

	t.Run("DenyWithReason", func(t *testing.T) {
		dir, db := newRun(t)
		p := startPTY(t, nil, "--store", "sqlite:"+db, "--thread", "t1", "--dir", dir, "$ rm -r /tmp/scratch")
		p.expect(`\[a\]pprove`)
		// Typing is echoed by the prompt itself, with backspace working.
		p.send("x\x7fd\r")
		p.expect(`reason:`)
		p.send("not today\r")
		p.expect(`← bash \(call call_\d+_\d+\): denied by kim \(not today\)`)
		p.expect("`rm -r /tmp/scratch`: denied: not today")
		if code := p.exit(); code != 0 {
			t.Fatalf("exit %d:\n%s", code, p.screen())
		}
	})

	t.Run("EditInEditorInvalidThenValid", func(t *testing.T) {
		dir, db := newRun(t)
		// A fake $EDITOR: the first edit is invalid for the tool's schema,
		// the second is good.
		editor := filepath.Join(dir, "editor.sh")
		script := `#!/bin/sh
n=$(cat "$0.count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$0.count"
if [ $n = 1 ]; then echo '{"cmd": 5}' > "$1"; else echo '{"cmd": "echo edited >> out.txt"}' > "$1"; fi
`
		if err := exectest.WriteProgram(editor, []byte(script)); err != nil {
			t.Fatal(err)
		}
		p := startPTY(t, []string{"EDITOR=" + editor}, "--store", "sqlite:"+db, "--thread", "t1", "--dir", dir, "$ echo original >> out.txt")
		p.expect(`\[a\]pprove`)
		p.send("e\r")
		p.expect(`refused: .*/cmd: want string, got integer`)
		p.expect(`\[a\]pprove`)
		p.send("e\r")
		p.expect(`← bash \(call call_\d+_\d+\): edited by kim; ran: .*echo edited >> out.txt`)
		p.expect("`echo edited >> out.txt` \\(edited from `echo original >> out.txt`\\): ran, exit 0")
		if code := p.exit(); code != 0 {
			t.Fatalf("exit %d:\n%s", code, p.screen())
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(b) != "edited\n" {
			t.Fatalf("out.txt holds %q", b)
		}
	})

	t.Run("EditorQuitWithoutChangeSendsNothing", func(t *testing.T) {
		dir, db := newRun(t)
		p := startPTY(t, []string{"EDITOR=true"}, "--store", "sqlite:"+db, "--thread", "t1", "--dir", dir, "$ echo kept >> out.txt")
		p.expect(`\[a\]pprove`)
		p.send("e\r")
		p.expect(`no change: nothing sent`)
		p.expect(`\[a\]pprove`)
		p.send("d\r")
		p.expect(`reason:`)
		p.send("changed my mind\r")
		p.expect("denied: changed my mind")
		if code := p.exit(); code != 0 {
			t.Fatalf("exit %d:\n%s", code, p.screen())
		}
		if _, err := os.Stat(filepath.Join(dir, "out.txt")); err == nil {
			t.Fatal("quitting the editor ran the command")
		}
	})

	t.Run("CtrlCWhileAToolRuns", func(t *testing.T) {
		dir, db := newRun(t)
		p := startPTY(t, nil, "--store", "sqlite:"+db, "--thread", "t1", "--dir", dir, "--allow-all", "$ sleep 20; echo late >> out.txt")
		p.expect(`→ bash`)
		p.send("\x03")
		p.expect(`aborting the run`)
		if code := p.exit(); code != 130 {
			t.Fatalf("exit %d, want 130:\n%s", code, p.screen())
		}
		if m := lastMessage(t, db, "t1"); m.StopReason != agent.StopAborted {
			t.Fatalf("the thread's last message is %+v, want stop_reason aborted", m)
		}
	})

	t.Run("CtrlBackslashStopsResumable", func(t *testing.T) {
		dir, db := newRun(t)
		p := startPTY(t, nil, "--store", "sqlite:"+db, "--thread", "t1", "--dir", dir, "$ echo x")
		p.expect(`\[a\]pprove`)
		p.send("\x1c") // Ctrl-\: SIGQUIT
		p.expect(`stopped by SIGQUIT`)
		if code := p.exit(); code != 143 {
			t.Fatalf("exit %d, want 143:\n%s", code, p.screen())
		}
	})

	t.Run("AnsweredElsewhere", func(t *testing.T) {
		dir, db := newRun(t)
		p := startPTY(t, nil, "--store", "sqlite:"+db, "--thread", "t1", "--dir", dir, "$ echo one\n$ echo two")
		p.expect(`approval needed: bash \(1 of 2\)`)
		p.expect(`cmd: echo one`)
		p.expect(`\[a\]pprove`)
		p.send("half-typ")
		if code, _, errOut := runCLI(t, "", "questions", "answer", "--store", "sqlite:"+db, "--thread", "t1", "--by", "alice", "hitl_call_1_1", "deny", "from", "the", "page"); code != 0 {
			t.Fatalf("answer: %d %s", code, errOut)
		}
		p.expect(`hitl_call_1_1 was answered elsewhere: denied by alice \(from the page\)`)
		// The next question of the turn, in call order; what was typed
		// for the closed prompt does not carry over.
		p.expect(`approval needed: bash \(2 of 2\)`)
		p.expect(`cmd: echo two`)
		// Keys pressed at once were meant for the closed prompt: not taken.
		p.send("a\r")
		time.Sleep(1200 * time.Millisecond)
		if strings.Contains(p.screen(), "approved by") {
			t.Fatalf("an Enter right after the prompt changed answered the new question:\n%s", p.screen())
		}
		p.send("a\r")
		p.expect("`echo one`: denied: from the page")
		if code := p.exit(); code != 0 {
			t.Fatalf("exit %d:\n%s", code, p.screen())
		}
	})

	t.Run("DeadlineOnScreen", func(t *testing.T) {
		dir, db := newRun(t)
		p := startPTY(t, nil, "--store", "sqlite:"+db, "--thread", "t1", "--dir", dir, "--approval-timeout", "3s", "$ echo late")
		// The countdown goes down second by second.
		p.expect(`\(2s left\) \[a\]pprove`)
		p.expect(`\([01]s left\) \[a\]pprove`)
		p.expect(`hitl_call_1_1: timed out, no answer within 3s`)
		p.expect(`← bash \(call call_\d+_\d+\): timed out`)
		p.expect("`echo late`: timed out waiting for approval")
		if code := p.exit(); code != 0 {
			t.Fatalf("exit %d:\n%s", code, p.screen())
		}
	})

	t.Run("CtrlCAborts", func(t *testing.T) {
		dir, db := newRun(t)
		p := startPTY(t, nil, "--store", "sqlite:"+db, "--thread", "t1", "--dir", dir, "$ echo one\n$ echo two")
		p.expect(`\(1 of 2\)`)
		p.expect(`\[a\]pprove`)
		p.send("\x03") // Ctrl-C, as the terminal sends it
		p.expect(`aborting the run`)
		p.expect(`assistant \(aborted\)`)
		if code := p.exit(); code != 130 {
			t.Fatalf("exit %d, want 130:\n%s", code, p.screen())
		}
		if m := lastMessage(t, db, "t1"); m.StopReason != agent.StopAborted {
			t.Fatalf("the thread's last message is %+v, want stop_reason aborted", m)
		}
		// SPEC "Abort": a synthetic deny for every unresolved call.
		denied := map[string]bool{}
		for _, m := range threadMessages(t, db, "t1") {
			if m.Result != nil && m.Result.IsError {
				denied[m.Result.CallID] = true
			}
		}
		if !denied["call_1_1"] || !denied["call_1_2"] {
			t.Fatalf("both unresolved calls must get a deny result, got %v", denied)
		}
	})

	t.Run("SIGTERMThenResume", func(t *testing.T) {
		dir, db := newRun(t)
		p := startPTY(t, nil, "--store", "sqlite:"+db, "--thread", "t1", "--dir", dir, "$ echo resumed >> out.txt")
		p.expect(`\[a\]pprove`)
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		p.expect(`stopped by SIGTERM; the run is left unfinished: go on with`)
		p.expect(`--thread t1 --resume`)
		if code := p.exit(); code != 143 {
			t.Fatalf("exit %d, want 143:\n%s", code, p.screen())
		}
		if _, err := os.Stat(filepath.Join(dir, "out.txt")); err == nil {
			t.Fatal("the command ran before it was approved")
		}
		p = startPTY(t, nil, "--store", "sqlite:"+db, "--thread", "t1", "--dir", dir, "--resume")
		p.expect(`cmd: echo resumed >> out.txt`)
		// Keys typed before the prompt is drawn are dropped on purpose
		// (KeysTypedBeforeTheQuestionAreNotAnAnswer): answer the prompt.
		p.expect(`\[a\]pprove`)
		p.send("a\r")
		p.expect("`echo resumed >> out.txt`: ran, exit 0")
		if code := p.exit(); code != 0 {
			t.Fatalf("exit %d:\n%s", code, p.screen())
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(b) != "resumed\n" {
			t.Fatalf("out.txt holds %q", b)
		}
	})
}

// A question nobody can answer — no more input, a memory store no other
// process sees, no deadline — stops the run instead of waiting forever.
func TestRunNobodyCanAnswer(t *testing.T) {
	code, out, errOut := runCLI(t, "", "run", "--approval-timeout", "0", "--dir", t.TempDir(), "$ echo x")
	if code != 1 || !strings.Contains(errOut, "nobody can answer hitl_call_1_1") {
		t.Fatalf("exit %d, want 1:\n%s\n%s", code, out, errOut)
	}
}

// TestRunWithoutATerminal: stdin is not a terminal (CI). The questions
// are printed with their ids; the run waits for an answer from elsewhere,
// or exits 3 under --no-wait and goes on later.
func TestRunWithoutATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tollgate processes")
	}
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "t.db")
	cli := func(args ...string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "TOLLGATE_TEST_AS_CLI=1")
		cmd.Dir = dir
		return cmd
	}

	out, err := cli("run", "--store", db, "--thread", "t1", "--dir", dir, "--no-wait", "$ echo one >> out.txt").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("--no-wait: %v, want exit 3:\n%s", err, out)
	}
	for _, want := range []string{"waiting: hitl_call_1_1  bash: echo one >> out.txt", "answer with: tollgate questions answer --store " + db + " --thread t1 hitl_call_1_1"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--no-wait output lacks %q:\n%s", want, out)
		}
	}

	// Waiting: a run resumed with stdin at its end waits for the answer
	// from elsewhere, then goes on.
	var buf lockedWriter
	wait := cli("run", "--store", db, "--thread", "t1", "--dir", dir, "--resume")
	wait.Stdout, wait.Stderr = &buf, &buf
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(buf.String(), "waiting: hitl_call_1_1") {
		if time.Now().After(deadline) {
			t.Fatalf("the waiting run printed:\n%s", buf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out, err := cli("questions", "answer", "--store", db, "--thread", "t1", "--by", "ci", "hitl_call_1_1", "approve").CombinedOutput(); err != nil {
		t.Fatalf("answer: %v %s", err, out)
	}
	done := make(chan error, 1)
	go func() { done <- wait.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the run: %v\n%s", err, buf.String())
		}
	case <-time.After(30 * time.Second):
		wait.Process.Kill()
		t.Fatalf("the run did not go on after the answer:\n%s", buf.String())
	}
	for _, want := range []string{"hitl_call_1_1 was answered elsewhere: approved by ci", "`echo one >> out.txt`: ran, exit 0"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, buf.String())
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(b) != "one\n" {
		t.Fatalf("out.txt holds %q", b)
	}
}
