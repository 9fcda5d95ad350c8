package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

// TestMain lets a test start this test binary as the tollgate command, so
// that a real `tollgate serve` process can be killed and started again.
func TestMain(m *testing.M) {
	bash.MaybeRunHelper()
	if os.Getenv("TOLLGATE_TEST_AS_CLI") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// serveProc is a `tollgate serve` child process.
type serveProc struct {
	cmd  *exec.Cmd
	base string
	logs *lockedWriter
}

func startServe(t *testing.T, args ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "TOLLGATE_TEST_AS_CLI=1", "TOLLGATE_TOKENS=", "TOLLGATE_TOKENS_FILE=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedWriter{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd, logs: logs}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	found := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`open (http://[0-9.:]+)/`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case p.base = <-found:
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not start; its log:\n%s", logs.String())
	}
	return p
}

// lockedWriter collects a child's stderr; the exec package writes it from
// its own goroutine.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func (p *serveProc) do(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	return apiCall(t, "", method, p.base+path, body)
}

// apiCall makes one JSON request to a service's API, with a bearer token
// unless token is "".
func apiCall(t *testing.T, token, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *serveProc) pendingQuestion(t *testing.T, thread string) map[string]any {
	t.Helper()
	code, out := p.do(t, "GET", "/v1/questions?status=pending&thread="+thread, "")
	if code != 200 {
		t.Fatalf("list questions: %d %v", code, out)
	}
	qs, _ := out["questions"].([]any)
	if len(qs) == 0 {
		return nil
	}
	return qs[0].(map[string]any)
}

// A `tollgate serve` on SQLite with pending questions, a deadline about to
// pass and a tool mid-execution is SIGKILLed and started again: the
// questions are still pending, the deadline fires once, the tool is not
// run twice, and answering resumes the runs.
func TestServeRestartAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills tollgate serve processes")
	}
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	policyFile := filepath.Join(dir, "policy.yaml")
	os.WriteFile(policyFile, []byte(`version: 1
default: ask
timeout: 10m
rules:
  - name: slow-ok
    tool: bash
    command: [echo, sleep]
    action: allow
    allow_writes: true
  - name: quick-deadline
    tool: bash
    command: [touch]
    action: ask
    timeout: 5s
`), 0o644)
	args := []string{"--store", "sqlite:" + filepath.Join(dir, "t.db"), "--policy", policyFile, "--dir", work}
	a := startServe(t, args...)

	post := func(p *serveProc, thread, text string) {
		t.Helper()
		if code, out := p.do(t, "POST", "/v1/threads/"+thread+"/messages", fmt.Sprintf(`{"text": %q}`, text)); code != 202 {
			t.Fatalf("post to %s: %d %v", thread, code, out)
		}
	}
	post(a, "waits", "$ rm -r /tmp/tollgate-restart-test-nothing")
	post(a, "deadline", "$ touch soon")
	post(a, "slow", "$ echo start >> marker; sleep 3; echo end >> marker")
	marker := filepath.Join(work, "marker")
	waitFor(t, "the slow tool to start", 20*time.Second, func() bool {
		b, _ := os.ReadFile(marker)
		return strings.Contains(string(b), "start")
	})
	waitFor(t, "both questions to be pending", 20*time.Second, func() bool {
		return a.pendingQuestion(t, "waits") != nil && a.pendingQuestion(t, "deadline") != nil
	})
	deadlineQ := a.pendingQuestion(t, "deadline")
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.cmd.Wait()

	b := startServe(t, args...)
	if q := b.pendingQuestion(t, "waits"); q == nil {
		t.Fatal("the pending question did not survive the kill")
	}
	// The deadline passes (or passed) with b running: timed out once, and
	// never "pending" for more than a moment after it.
	dl, _ := time.Parse(time.RFC3339Nano, deadlineQ["deadline"].(string))
	waitFor(t, "the deadline to fire", time.Until(dl)+5*time.Second, func() bool {
		_, q := b.do(t, "GET", "/v1/questions/deadline/"+deadlineQ["id"].(string), "")
		return q["status"] == "timed_out"
	})
	if late := time.Since(dl); late > 2*time.Second {
		t.Errorf("the deadline fired %s late", late)
	}
	waitFor(t, "the slow run to end", 20*time.Second, func() bool {
		_, th := b.do(t, "GET", "/v1/threads/slow", "")
		return th["status"] == "idle"
	})
	_, th := b.do(t, "GET", "/v1/threads/slow", "")
	msgs, _ := json.Marshal(th["messages"])
	if !strings.Contains(string(msgs), "outcome of this call is unknown") {
		t.Errorf("the killed tool's result does not say its outcome is unknown: %s", msgs)
	}
	time.Sleep(4 * time.Second) // time enough for a second run of the tool to write
	if data, _ := os.ReadFile(marker); strings.Count(string(data), "start") != 1 {
		t.Errorf("the tool ran %d times, want once:\n%s", strings.Count(string(data), "start"), data)
	}

	q := b.pendingQuestion(t, "waits")
	if code, out := b.do(t, "POST", "/v1/questions/waits/"+q["id"].(string)+"/answer",
		fmt.Sprintf(`{"decision": "approve", "digest": %q}`, q["digest"])); code != 200 {
		t.Fatalf("answer: %d %v", code, out)
	}
	waitFor(t, "the answered run to end", 20*time.Second, func() bool {
		_, th := b.do(t, "GET", "/v1/threads/waits", "")
		return th["status"] == "idle"
	})
	_, th = b.do(t, "GET", "/v1/threads/deadline", "")
	if msgs, _ := json.Marshal(th["messages"]); th["status"] != "idle" || !strings.Contains(string(msgs), "timed out") {
		t.Errorf("the timed-out run did not end with the timeout: %v %s", th["status"], msgs)
	}
	code, ev := b.do(t, "GET", "/v1/threads/deadline/events?limit=200", "")
	if code != 200 {
		t.Fatalf("events: %d %v", code, ev)
	}
	fired := 0
	for _, e := range ev["events"].([]any) {
		e := e.(map[string]any)
		if d, _ := e["data"].(map[string]any); e["type"] == "question_resolved" && d["status"] == "timed_out" {
			fired++
		}
	}
	if fired != 1 {
		t.Errorf("the deadline was recorded %d times, want once", fired)
	}
	// A clean stop says how many runs wait.
	b.cmd.Process.Signal(syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve exited with %v after SIGTERM; log:\n%s", err, b.logs.String())
		}
	case <-ctx.Done():
		t.Fatal("serve did not stop on SIGTERM")
	}
}

// With --policy-reload manual the policy file is read again on SIGHUP, and
// what the page tells every reviewer follows: the bash tool runs
// unconfined (from the start), the reload loosened the policy (from the
// SIGHUP on).
func TestServeNoticesAndManualReload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a tollgate serve process")
	}
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte("version: 1\ndefault: ask\nrules: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, "--store", "sqlite:"+filepath.Join(dir, "t.db"), "--policy", policyFile, "--dir", work,
		"--sandbox", "unconfined", "--policy-reload", "manual")
	notices := func() map[string]string {
		code, out := p.do(t, "GET", "/v1/session", "")
		if code != 200 {
			t.Fatalf("GET /v1/session: %d %v", code, out)
		}
		m := map[string]string{}
		ns, _ := out["notices"].([]any)
		for _, n := range ns {
			n := n.(map[string]any)
			m[n["code"].(string)] = n["message"].(string)
		}
		return m
	}
	if n := notices(); !strings.Contains(n["unconfined"], "UNCONFINED") || !strings.Contains(n["unconfined"], "approve its own calls") || len(n) != 1 {
		t.Fatalf("notices at the start: %v", n)
	}
	if err := os.WriteFile(policyFile, []byte("version: 1\ndefault: allow\nrules: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the loosened policy's notice", 20*time.Second, func() bool { return notices()["policy_loosened"] != "" })
	if n := notices()["policy_loosened"]; !strings.Contains(n, policyFile) || !strings.Contains(n, "the default is allow, was ask") {
		t.Errorf("notice %q", n)
	}
	if p.cmd.ProcessState != nil {
		t.Fatal("SIGHUP stopped serve")
	}
}

// With --policy-reload manual and the built-in policies (no file watched)
// a SIGHUP, sent to reload, does not end serve.
func TestServeManualReloadBuiltinSurvivesHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a tollgate serve process")
	}
	dir := t.TempDir()
	p := startServe(t, "--store", "sqlite:"+filepath.Join(dir, "t.db"), "--dir", t.TempDir(), "--policy-reload", "manual")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the SIGHUP logged", 20*time.Second, func() bool { return strings.Contains(p.logs.String(), "SIGHUP: each policy file is read again") })
	if code, out := p.do(t, "GET", "/v1/session", ""); code != 200 {
		t.Fatalf("serve after SIGHUP: %d %v\n%s", code, out, p.logs.String())
	}
}

// A run asked while serve's bash tool worked in one directory, approved
// after serve was started again with another --dir, does not run there:
// the reviewer saw the first directory (the question's details say it).
// The run ends with the call denied, saying both directories.
func TestServeAnswerBindsItsDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tollgate serve processes")
	}
	dir := t.TempDir()
	workA, workB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{workA, workB} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	store := "sqlite:" + filepath.Join(dir, "t.db")
	a := startServe(t, "--store", store, "--dir", workA)
	if code, out := a.do(t, "POST", "/v1/threads/moved/messages", `{"text": "$ touch made-here"}`); code != 202 {
		t.Fatalf("post: %d %v", code, out)
	}
	waitFor(t, "the question", 20*time.Second, func() bool { return a.pendingQuestion(t, "moved") != nil })
	q := a.pendingQuestion(t, "moved")
	if p, _ := q["payload"].(map[string]any); p == nil || p["details"].(map[string]any)["dir"] != workA {
		t.Fatalf("the question does not say where the call runs: %v", q)
	}
	a.cmd.Process.Signal(syscall.SIGTERM)
	a.cmd.Wait()

	b := startServe(t, "--store", store, "--dir", workB)
	if code, out := b.do(t, "POST", "/v1/questions/moved/"+q["id"].(string)+"/answer",
		fmt.Sprintf(`{"decision": "approve", "digest": %q}`, q["digest"])); code != 200 {
		t.Fatalf("answer: %d %v", code, out)
	}
	waitFor(t, "the run to end", 20*time.Second, func() bool {
		_, th := b.do(t, "GET", "/v1/threads/moved", "")
		return th["status"] == "idle"
	})
	for _, d := range []string{workA, workB} {
		if _, err := os.Stat(filepath.Join(d, "made-here")); err == nil {
			t.Errorf("the approved call ran in %s", d)
		}
	}
	_, th := b.do(t, "GET", "/v1/threads/moved", "")
	msgs, _ := json.Marshal(th["messages"])
	if !strings.Contains(string(msgs), "approved to run in "+workA) || !strings.Contains(string(msgs), workB) {
		t.Errorf("the call's result does not say where it was approved and where it would run: %s", msgs)
	}
}
