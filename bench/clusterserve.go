//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
)

// procMem is one replica process's memory at one moment: from
// /proc/PID/status (VmRSS is RssAnon + RssFile + RssShmem; RssFile is
// the binary's pages mapped from the file, shared with any other process
// running it), and from its /metrics (the Go runtime's own figures).
type procMem struct {
	Replica    int           `json:"replica"`
	PID        int           `json:"pid"`
	RSSKB      int64         `json:"vm_rss_kb"`
	HWMKB      int64         `json:"vm_hwm_kb"`
	AnonKB     int64         `json:"rss_anon_kb"`
	FileKB     int64         `json:"rss_file_kb"`
	HeapInuse  float64       `json:"go_heap_inuse_bytes"`
	GoSys      float64       `json:"go_sys_bytes"`
	Goroutines float64       `json:"go_goroutines"`
	CPU        time.Duration `json:"cpu_ns"`
	Settle     float64       `json:"settle_seconds"`
}

// moduleRoot is the directory of the go.mod above the working directory.
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}

// clusterPolicy asks about every call, with a deadline the whole run
// does not reach: the seeded questions share the template's deadline,
// and none must time out while the replicas are measured.
const clusterPolicy = `version: 1
default: ask
timeout: 6h
rules: []
tests:
  - cmd: touch seeded.txt
    want: ask
`

// templateCommand is what each parked run asks to run.
const templateCommand = "touch seeded.txt"

type serveReplica struct {
	n       int
	addr    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	waitErr error
}

type serveFleet struct {
	bin, dsn, dir, policy, work, logs string
	binLabel                          string // where bin came from
	client                            *http.Client
	replicas                          []*serveReplica
}

// newServeFleet readies replicas of tollgate serve on dsn for a part of
// the benchmark, their files in a directory of their own: the policy
// (clusterPolicy), the bash tool's directory, their logs, and the
// binary: bin, or built from this checkout. close stops them and removes
// the directory.
func newServeFleet(ctx context.Context, dsn, bin, part string, progress func(string, ...any)) (f *serveFleet, err error) {
	dir, err := os.MkdirTemp("", "tollgate-bench-"+part+"-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	f = &serveFleet{dsn: dsn, dir: dir, policy: filepath.Join(dir, "policy.yaml"), work: filepath.Join(dir, "work"), logs: filepath.Join(dir, "logs"),
		client: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	for _, d := range []string{f.work, f.logs} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(f.policy, []byte(clusterPolicy), 0o644); err != nil {
		return nil, err
	}
	f.bin, f.binLabel = bin, bin
	if f.bin == "" {
		root, err := moduleRoot()
		if err != nil {
			return nil, err
		}
		f.bin = filepath.Join(dir, "tollgate")
		progress("%s: building tollgate from %s", part, root)
		build := exec.CommandContext(ctx, "go", "build", "-o", f.bin, "./cmd/tollgate")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build ./cmd/tollgate: %v\n%s", err, out)
		}
		f.binLabel = "built from " + root
	}
	return f, nil
}

func freeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// start runs tollgate serve as replica n and waits for its /healthz.
func (f *serveFleet) start(ctx context.Context, n int) (*serveReplica, error) {
	addr, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	r := &serveReplica{n: n, addr: addr, logPath: filepath.Join(f.logs, fmt.Sprintf("replica-%d-%d.log", n, time.Now().UnixNano())), exited: make(chan struct{})}
	logf, err := os.Create(r.logPath)
	if err != nil {
		return nil, err
	}
	r.cmd = exec.Command(f.bin, "serve", "--store", f.dsn, "--addr", addr, "--dev", "--policy", f.policy, "--dir", f.work)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() {
		r.waitErr = r.cmd.Wait()
		logf.Close()
		close(r.exited)
	}()
	f.replicas = append(f.replicas, r)
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := f.client.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r, nil
			}
		}
		select {
		case <-r.exited:
			return nil, fmt.Errorf("replica %d exited (%v) before it served: %s", n, r.waitErr, tail(r.logPath))
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("replica %d does not answer /healthz after 90s: %s", n, tail(r.logPath))
		}
	}
}

// stop ends the replica with SIGTERM (as an orchestrator does), and
// SIGKILL if it has not exited in 30s.
func (r *serveReplica) stop() {
	select {
	case <-r.exited:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
}

// close stops the replicas and removes the fleet's directory.
func (f *serveFleet) close() {
	f.stopAll()
	os.RemoveAll(f.dir)
}

func (f *serveFleet) stopAll() {
	var wg sync.WaitGroup
	for _, r := range f.replicas {
		wg.Go(r.stop)
	}
	wg.Wait()
	f.replicas = nil
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return "\n" + string(b)
}

// statusKB reads "Name: N kB" lines of /proc/PID/status.
func statusKB(pid int, names ...string) map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		for _, name := range names {
			if rest, ok := strings.CutPrefix(line, name+":"); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					out[name], _ = strconv.ParseInt(f[0], 10, 64)
				}
			}
		}
	}
	return out
}

// processCPU is a process's user+system time (/proc/PID/stat).
func processCPU(pid int) time.Duration {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(st)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}

// metrics reads some of the Go runtime's figures from the replica's
// /metrics.
func (f *serveFleet) metrics(r *serveReplica) map[string]float64 {
	out := map[string]float64{}
	resp, err := f.client.Get("http://" + r.addr + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "go_memstats_heap_inuse_bytes", "go_memstats_sys_bytes", "go_goroutines":
			out[name], _ = strconv.ParseFloat(val, 64)
		}
	}
	return out
}

func (f *serveFleet) measure(r *serveReplica) procMem {
	pid := r.cmd.Process.Pid
	m := f.metrics(r)
	kb := statusKB(pid, "VmRSS", "VmHWM", "RssAnon", "RssFile")
	return procMem{Replica: r.n, PID: pid, RSSKB: kb["VmRSS"], HWMKB: kb["VmHWM"], AnonKB: kb["RssAnon"], FileKB: kb["RssFile"],
		HeapInuse: m["go_memstats_heap_inuse_bytes"], GoSys: m["go_memstats_sys_bytes"], Goroutines: m["go_goroutines"], CPU: processCPU(pid)}
}

// settle waits until every replica is quiet — less than 20 ms of CPU in
// each of two consecutive seconds — or limit has passed, and returns how
// long each took.
func settleReplicas(ctx context.Context, rs []*serveReplica, limit time.Duration) ([]float64, error) {
	start := time.Now()
	out := make([]float64, len(rs))
	quietFor := make([]int, len(rs))
	last := make([]time.Duration, len(rs))
	for i, r := range rs {
		last[i] = processCPU(r.cmd.Process.Pid)
		out[i] = -1
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
		done := true
		for i, r := range rs {
			select {
			case <-r.exited:
				return nil, fmt.Errorf("replica %d exited (%v): %s", r.n, r.waitErr, tail(r.logPath))
			default:
			}
			c := processCPU(r.cmd.Process.Pid)
			if c-last[i] < 20*time.Millisecond {
				quietFor[i]++
			} else {
				quietFor[i] = 0
			}
			last[i] = c
			if quietFor[i] >= 2 && out[i] < 0 {
				out[i] = time.Since(start).Seconds()
			}
			done = done && out[i] >= 0
		}
		if done || time.Since(start) > limit {
			return out, nil
		}
	}
}

// runTemplate is a parked run's rows as one real prompt left them.
type runTemplate struct {
	thread    string
	runID     string
	messages  []json.RawMessage
	question  *checkpoint.Question
	events    []*checkpoint.Event
	toolCalls []*checkpoint.ToolCall
}

// readTemplate reads what the run parked on thread left in the store.
func readTemplate(ctx context.Context, store *postgres.Store, thread string) (*runTemplate, error) {
	th, err := store.LoadThread(ctx, thread)
	if err != nil {
		return nil, err
	}
	t := &runTemplate{thread: thread, runID: th.RunID}
	if err := json.Unmarshal(th.Messages, &t.messages); err != nil {
		return nil, fmt.Errorf("the template's messages: %w", err)
	}
	qs, _, err := store.ListQuestions(ctx, checkpoint.QuestionFilter{ThreadID: thread, Status: checkpoint.QuestionPending})
	if err != nil {
		return nil, err
	}
	if len(qs) != 1 {
		return nil, fmt.Errorf("the template run has %d pending questions, want 1", len(qs))
	}
	t.question = qs[0]
	if t.events, err = store.ListEvents(ctx, thread, 0, 1000); err != nil {
		return nil, err
	}
	if t.toolCalls, err = store.ListToolCalls(ctx, thread, th.RunID); err != nil {
		return nil, err
	}
	return t, nil
}

// batch is the template's rows for another thread and run: one Commit
// writes what a parked run's commits wrote (its thread, running, with the
// prompt and the model's message; its tool calls; its pending question,
// with the deadline; its audit entries). Times are the template's: every
// seeded question has the template's deadline.
func (t *runTemplate) batch(thread, runID string) *checkpoint.Batch {
	// The question's digest binds its thread: the seeded one has its own.
	digest := t.digest(thread)
	rep := strings.NewReplacer(t.runID, runID, `"`+t.thread+`"`, `"`+thread+`"`, t.question.Digest, digest)
	re := func(b json.RawMessage) json.RawMessage {
		if b == nil {
			return nil
		}
		return json.RawMessage(rep.Replace(string(b)))
	}
	b := &checkpoint.Batch{Thread: &checkpoint.ThreadWrite{ID: thread, Status: checkpoint.ThreadRunning, RunID: runID}}
	for _, m := range t.messages {
		b.Thread.Append = append(b.Thread.Append, re(m))
	}
	for _, tc := range t.toolCalls {
		c := *tc
		c.ThreadID, c.RunID, c.Args, c.Result = thread, runID, re(tc.Args), re(tc.Result)
		b.ToolCalls = append(b.ToolCalls, &c)
	}
	q := *t.question
	q.ThreadID, q.RunID, q.Payload, q.Digest = thread, runID, re(q.Payload), digest
	b.Question = &q
	for _, e := range t.events {
		b.Events = append(b.Events, &checkpoint.Event{ThreadID: thread, RunID: runID, Type: e.Type, Data: re(e.Data), At: e.At})
	}
	return b
}

func (f *serveFleet) post(addr, path string, body any) (int, []byte, error) {
	js, _ := json.Marshal(body)
	resp, err := f.client.Post("http://"+addr+path, "application/json", bytes.NewReader(js))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, nil
}

// digest is the digest of the template's question asked in thread.
func (t *runTemplate) digest(thread string) string {
	var p struct {
		Args json.RawMessage `json:"args"`
	}
	_ = json.Unmarshal(t.question.Payload, &p)
	return agent.CallDigest(thread, t.question.CallID, t.question.Tool, p.Args)
}

func answerBody(q *checkpoint.Question) map[string]string {
	return map[string]string{"decision": "approve", "digest": q.Digest}
}

// answerIn is the approval of the template's question seeded in thread.
func (t *runTemplate) answerIn(thread string) map[string]string {
	return map[string]string{"decision": "approve", "digest": t.digest(thread)}
}

// threadsIdle counts the threads among ids whose run has ended.
func threadsIdle(ctx context.Context, store *postgres.Store, ids []string) (idle, results int64, err error) {
	err = store.Pool().QueryRow(ctx, `SELECT
		(SELECT count(*) FROM tollgate.threads WHERE id = ANY($1) AND status = 'idle'),
		(SELECT count(*) FROM tollgate.events WHERE thread_id = ANY($1) AND type = 'tool_result')`, ids).Scan(&idle, &results)
	return idle, results, err
}

func waitIdle(ctx context.Context, store *postgres.Store, ids []string, limit time.Duration) (int64, int64, error) {
	deadline := time.Now().Add(limit)
	for {
		idle, results, err := threadsIdle(ctx, store, ids)
		if err != nil {
			return 0, 0, err
		}
		if idle == int64(len(ids)) {
			return idle, results, nil
		}
		if time.Now().After(deadline) {
			return idle, results, fmt.Errorf("%d of %d answered runs finished after %s", idle, len(ids), limit)
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
