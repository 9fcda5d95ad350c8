package replicatest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

// lease is what the replicas get as --lease when the command has the
// flag: how long a dead replica's runs stay held.
const lease = 5 * time.Second

// The tollgate command the tests run, built once from this checkout (a
// link of a large binary: tens of seconds on a busy machine) into a
// directory TestMain removes.
var (
	binDir   string
	binOnce  sync.Once
	bin      string
	binErr   error
	binBuilt time.Duration
)

// buildTollgate returns the command built from this checkout.
func buildTollgate(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if b := os.Getenv("TOLLGATE_REPLICA_BIN"); b != "" {
			bin = b // another build's (an older one, to compare)
			return
		}
		wd, err := os.Getwd()
		if err != nil {
			binErr = err
			return
		}
		root := wd
		for {
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				break
			}
			parent := filepath.Dir(root)
			if parent == root {
				binErr = fmt.Errorf("no go.mod above %s", wd)
				return
			}
			root = parent
		}
		start := time.Now()
		out := filepath.Join(binDir, "tollgate")
		build := exec.Command("go", "build", "-o", out, "./cmd/tollgate")
		build.Dir = root
		if msg, err := build.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/tollgate: %v\n%s", err, msg)
			return
		}
		bin, binBuilt = out, time.Since(start)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	if binBuilt > 0 {
		t.Logf("tollgate built from this checkout in %v, for every test", binBuilt.Round(time.Millisecond))
	} else {
		t.Logf("tollgate: %s (TOLLGATE_REPLICA_BIN)", bin)
	}
	return bin
}

// newDatabase returns the URL of a database of the test's own, dropped
// when it ends. A database, not a schema: `tollgate serve --store URL`
// always uses the schema "tollgate" (the URL cannot name another).
func newDatabase(t *testing.T) string {
	t.Helper()
	dsn := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b [4]byte
	rand.Read(b[:])
	name := fmt.Sprintf("replicatest_%d_%s", os.Getpid(), hex.EncodeToString(b[:]))
	if err := pgtest.Exec(ctx, dsn, "CREATE DATABASE "+name); err != nil {
		msg := fmt.Sprintf("CREATE DATABASE on %s: %v (the replicas need a database of their own: "+
			"the store URL cannot name a schema)", pgtest.EnvURL, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := pgtest.Exec(ctx, dsn, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// policyYAML asks a person about every job's command: "echo" (and
// "sleep") for the jobs to be answered (10 minutes), "printf" for those
// left to time out (20 s).
const policyYAML = `version: 1
default: block
rules:
  - name: job
    tool: bash
    command: [echo, sleep]
    action: ask
    timeout: 10m
    impact: appends a line to tools.log
  - name: job-left
    tool: bash
    command: [printf]
    action: ask
    timeout: 20s
    impact: appends a line to tools.log; nobody answers
  - name: job-deadline
    tool: bash
    command: [date]
    action: ask
    timeout: 8s
    impact: appends a line to tools.log; nobody answers, and a replica is killed meanwhile
tests:
  - cmd: echo job-3 $EPOCHREALTIME >> tools.log && sleep 0.5
    want: ask
    rule: job
  - cmd: printf 'job-4 %s\n' $EPOCHREALTIME >> tools.log
    want: ask
    rule: job-left
  - cmd: date +job-5-%s >> tools.log
    want: ask
    rule: job-deadline
  - cmd: rm tools.log
    want: block
`

// logFile is the tool's log, in the replicas' working directory.
const logFile = "tools.log"

// jobCommand is the bash command of job n: it appends "job-n" and the
// time it ran (bash's $EPOCHREALTIME, seconds with microseconds) to the
// log, then takes half a second, so that a kill can catch some running.
func jobCommand(n int, left bool) string {
	if left {
		return fmt.Sprintf(`printf 'job-%d %%s\n' $EPOCHREALTIME >> %s`, n, logFile)
	}
	return fmt.Sprintf(`echo job-%d $EPOCHREALTIME >> %s && sleep 0.5`, n, logFile)
}

// fleet is the replicas of a test and what they share.
type fleet struct {
	t        *testing.T
	bin      string
	store    string // what the replicas are given (it may go through a proxy)
	direct   string // the database itself
	policy   string
	work     string // the bash tool's directory, the same for every replica
	logs     string
	model    *fakeModel
	hasLease bool
	replicas []*replica
}

func newFleet(t *testing.T, n int, model *fakeModel) *fleet {
	t.Helper()
	f := &fleet{t: t, bin: buildTollgate(t), store: newDatabase(t), model: model}
	f.direct = f.store
	dir := t.TempDir()
	f.policy = filepath.Join(dir, "policy.yaml")
	f.work = filepath.Join(dir, "work")
	f.logs = filepath.Join(dir, "logs")
	for _, d := range []string{f.work, f.logs} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(f.policy, []byte(policyYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(f.bin, "policy", "test", f.policy).CombinedOutput(); err != nil {
		t.Fatalf("tollgate policy test: %v\n%s", err, out)
	}
	help, _ := exec.Command(f.bin, "serve", "--help").CombinedOutput()
	f.hasLease = bytes.Contains(help, []byte("--lease"))
	t.Logf("tollgate serve --lease: %v", f.hasLease)
	for i := 1; i <= n; i++ {
		f.replicas = append(f.replicas, &replica{f: f, n: i, addr: freeAddr(t)})
	}
	// Registered after the database's cleanup, so run before it: the
	// replicas are gone when the database is dropped.
	t.Cleanup(func() {
		for _, r := range f.replicas {
			r.kill()
		}
		if t.Failed() {
			f.printLogs()
		}
	})
	return f
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// printLogs prints the tail of every replica's output.
func (f *fleet) printLogs() {
	files, _ := filepath.Glob(filepath.Join(f.logs, "*.log"))
	for _, file := range files {
		b, _ := os.ReadFile(file)
		var lines []string
		for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			if !strings.Contains(l, `msg="http request"`) || !strings.Contains(l, "status=2") {
				lines = append(lines, l) // requests that went well are left out
			}
		}
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		f.t.Logf("--- %s (last %d lines but successful requests) ---\n%s", filepath.Base(file), len(lines), strings.Join(lines, "\n"))
	}
}

// up returns the replicas running now.
func (f *fleet) up() []*replica {
	var up []*replica
	for _, r := range f.replicas {
		if r.running() {
			up = append(up, r)
		}
	}
	return up
}

// replica is one `tollgate serve` process, started again on the same
// address after a stop or a kill.
type replica struct {
	f    *fleet
	n    int // 1-based
	addr string

	// policy, when set, is this replica's --policy instead of the
	// fleet's; args are more flags of its serve.
	policy string
	args   []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has exited
	starts int
}

func (r *replica) String() string { return fmt.Sprintf("replica %d", r.n) }

func (r *replica) base() string { return "http://" + r.addr }

func (r *replica) running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// start starts the process and waits until it is ready.
func (r *replica) start() error {
	r.mu.Lock()
	policy := r.f.policy
	if r.policy != "" {
		policy = r.policy
	}
	args := []string{"serve", "--store", r.f.store, "--addr", r.addr, "--dev", "--model", "openai:fake",
		"--policy", policy, "--dir", r.f.work}
	if r.f.hasLease {
		args = append(args, "--lease", lease.String())
	}
	args = append(args, r.args...)
	cmd := exec.Command(r.f.bin, args...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TOLLGATE_") && !strings.HasPrefix(kv, "OPENAI_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "OPENAI_API_KEY=x", "OPENAI_BASE_URL="+r.f.model.baseURL(r.n))
	out, err := os.Create(filepath.Join(r.f.logs, fmt.Sprintf("replica%d.%d.log", r.n, r.starts)))
	if err != nil {
		r.mu.Unlock()
		return err
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		r.mu.Unlock()
		return fmt.Errorf("%v: start: %w", r, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		out.Close()
		close(done)
	}()
	r.cmd, r.done = cmd, done
	r.starts++
	r.mu.Unlock()

	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("%v exited at start: %v (its log: %s)", r, cmd.ProcessState, out.Name())
		default:
		}
		resp, err := apiClient.Get(r.base() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%v not ready after 60s", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (r *replica) kill() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// stop sends SIGTERM and waits for the process to exit (30 s at most,
// then it is killed and stop says so).
func (r *replica) stop() error {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return nil
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		if !cmd.ProcessState.Success() {
			return fmt.Errorf("%v: SIGTERM: exited %v", r, cmd.ProcessState)
		}
		return nil
	case <-time.After(30 * time.Second):
		r.kill()
		return fmt.Errorf("%v did not stop within 30s of SIGTERM", r)
	}
}

// apiClient is the test's client: no proxy, bounded requests.
var apiClient = &http.Client{
	Timeout:   20 * time.Second,
	Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext},
}

// errRefused marks a request no replica process took (nothing listens).
var errRefused = errors.New("connection refused")

// call sends one API request to the replica and decodes a JSON answer into
// out (when not nil and the status is 2xx). A connection refused wraps
// errRefused; any other transport error means the request may or may not
// have been taken.
func (r *replica) call(ctx context.Context, method, path string, body any, out any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base()+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return 0, nil, fmt.Errorf("%v: %w", r, errRefused)
		}
		return 0, nil, fmt.Errorf("%v: %w", r, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%v: reading the response: %w", r, err)
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, b, fmt.Errorf("%v %s %s: %w: %s", r, method, path, err, b)
		}
	}
	return resp.StatusCode, b, nil
}

// get reads a JSON resource from the first replica that answers, waiting
// up to a minute for one (every replica may be down for a moment: the
// test kills and restarts them).
func (f *fleet) get(ctx context.Context, path string, out any) error {
	var last error
	for giveUp := time.Now().Add(time.Minute); time.Now().Before(giveUp); {
		for _, r := range f.up() {
			code, body, err := r.call(ctx, http.MethodGet, path, nil, out)
			if err == nil && code == http.StatusOK {
				return nil
			}
			if err == nil {
				err = fmt.Errorf("%v GET %s: %d %s", r, path, code, body)
			}
			last = err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(200 * time.Millisecond)
	}
	if last == nil {
		last = errors.New("no replica is running")
	}
	return last
}

// The API's shapes, as far as the test reads them.

type apiQuestion struct {
	ThreadID   string          `json:"thread_id"`
	ID         string          `json:"id"`
	CallID     string          `json:"call_id"`
	Status     string          `json:"status"`
	Digest     string          `json:"digest"`
	CreatedAt  apiTime         `json:"created_at"`
	Deadline   apiTime         `json:"deadline"`
	Answer     json.RawMessage `json:"answer"`
	AnsweredBy string          `json:"answered_by"`
	ResolvedAt apiTime         `json:"resolved_at"`
}

// decision is the answer's decision ("" when there is none).
func (q *apiQuestion) decision() string {
	var a struct {
		Decision string `json:"decision"`
	}
	json.Unmarshal(q.Answer, &a)
	return a.Decision
}

type apiQuestions struct {
	Questions  []apiQuestion `json:"questions"`
	NextCursor string        `json:"next_cursor"`
}

type apiEvent struct {
	Seq      int64           `json:"seq"`
	ThreadID string          `json:"thread_id"`
	RunID    string          `json:"run_id"`
	Type     string          `json:"type"`
	Data     json.RawMessage `json:"data"`
	At       apiTime         `json:"at"`
}

type apiEvents struct {
	Events    []apiEvent `json:"events"`
	NextAfter int64      `json:"next_after"`
}

type apiMessage struct {
	Role   string `json:"role"`
	Text   string `json:"text"`
	Result *struct {
		CallID  string         `json:"call_id"`
		Content string         `json:"content"`
		IsError bool           `json:"is_error"`
		Details map[string]any `json:"details"`
	} `json:"result"`
}

type apiThread struct {
	ID       string       `json:"id"`
	Status   string       `json:"status"`
	RunState string       `json:"run_state"`
	RunError string       `json:"run_error"`
	Messages []apiMessage `json:"messages"`
}

type apiThreads struct {
	Threads    []apiThread `json:"threads"`
	NextCursor string      `json:"next_cursor"`
}

// apiTime is an API time: RFC 3339, or null.
type apiTime struct{ time.Time }

func (t *apiTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		t.Time = time.Time{}
		return nil
	}
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return err
	}
	t.Time, err = time.Parse(time.RFC3339Nano, s)
	return err
}

// allQuestions lists every question of the store (status=all), page by page.
func (f *fleet) allQuestions(ctx context.Context) ([]apiQuestion, error) {
	var all []apiQuestion
	cursor := ""
	for {
		var page apiQuestions
		path := "/v1/questions?status=all&order=oldest&limit=200"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		if err := f.get(ctx, path, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Questions...)
		if page.NextCursor == "" {
			return all, nil
		}
		cursor = page.NextCursor
	}
}

// questionsByThread is every question of the store by its thread (the
// tests ask one a thread).
func (f *fleet) questionsByThread(ctx context.Context) (map[string]apiQuestion, error) {
	qs, err := f.allQuestions(ctx)
	if err != nil {
		return nil, err
	}
	found := map[string]apiQuestion{}
	for _, q := range qs {
		found[q.ThreadID] = q
	}
	return found, nil
}

// runningThreads lists the threads whose status is running.
func (f *fleet) runningThreads(ctx context.Context) ([]apiThread, error) {
	var ids []apiThread
	cursor := ""
	for {
		var page apiThreads
		path := "/v1/threads?status=running&limit=200"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		if err := f.get(ctx, path, &page); err != nil {
			return nil, err
		}
		ids = append(ids, page.Threads...)
		if page.NextCursor == "" {
			return ids, nil
		}
		cursor = page.NextCursor
	}
}

// threadEvents reads a thread's whole audit log.
func (f *fleet) threadEvents(ctx context.Context, thread string) ([]apiEvent, error) {
	var all []apiEvent
	after := int64(0)
	for {
		var page apiEvents
		if err := f.get(ctx, fmt.Sprintf("/v1/threads/%s/events?after=%d&limit=1000", url.PathEscape(thread), after), &page); err != nil {
			return nil, err
		}
		all = append(all, page.Events...)
		if len(page.Events) == 0 || page.NextAfter == after {
			return all, nil
		}
		after = page.NextAfter
	}
}
