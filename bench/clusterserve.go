//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/cluster"
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

type tableSize struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	Rows  int64  `json:"rows"`
}

type memoryResult struct {
	Binary   string `json:"binary"`
	Replicas int    `json:"replicas"`
	Parked   int    `json:"parked"`
	// Idle: one replica on the empty store, settled; IdleAfterCycle: the
	// same after one approval cycle (the template run).
	Idle           procMem `json:"idle"`
	IdleAfterCycle procMem `json:"idle_after_one_cycle"`
	// The seeding: one Commit per run, from SeedLoops goroutines, on a
	// store with a cluster built on it (never started), so that each
	// commits as a replica's would; raw single-row inserts from as many
	// loops just before and after. DeadlineJobs: the deadline jobs the
	// seeding left scheduled (none since questions need none; one a
	// question before).
	SeedLoops     int       `json:"seed_loops"`
	SeedSeconds   float64   `json:"seed_seconds"`
	SeedPerS      float64   `json:"seeded_per_s"`
	RawSeed       rawResult `json:"raw_before_seed"`
	RawSeedAfter  rawResult `json:"raw_after_seed"`
	DeadlineJobs  int64     `json:"deadline_jobs"`
	DBBytesBefore int64     `json:"database_bytes_before"`
	DBBytes       int64     `json:"database_bytes"`
	// The schema tollgate serve uses (tables, their indexes and TOAST),
	// before and after seeding.
	SchemaBytesBefore int64       `json:"schema_bytes_before"`
	SchemaBytes       int64       `json:"schema_bytes"`
	Tables            []tableSize `json:"tables"`
	// The replicas after starting on the seeded store and settling, then
	// after the answers finished and they settled again.
	Start     []procMem `json:"start"`
	Reconcile string    `json:"reconcile"`
	// The answers: through the HTTP API of random replicas, AnswerLoops at
	// once; every answered run then finished (the thread idle), with a
	// tool result each.
	Answered      int      `json:"answered"`
	AnswerLoops   int      `json:"answer_loops"`
	AnswerSeconds float64  `json:"answer_seconds"`
	FinishSeconds float64  `json:"finish_seconds"`
	Finished      int64    `json:"finished"`
	ToolResults   int64    `json:"tool_results"`
	AnswersBy     []int64  `json:"answers_by_replica"`
	AnswerRequest durStats `json:"answer_request"`
	// Healthz: GET /healthz round trips on the replicas just before the
	// answers, the HTTP request's own cost.
	Healthz durStats `json:"healthz"`
	// Queue: the reviewers' first page, GET /v1/questions (pending, the
	// most urgent first, 50, with the total), on random replicas, every
	// seeded run pending.
	Queue      durStats  `json:"queue_first_page"`
	After      []procMem `json:"after"`
	LoadBefore string    `json:"load_before"`
	LoadSeeded string    `json:"load_seeded"`
	LoadAfter  string    `json:"load_after"`
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

func databaseSize(ctx context.Context, store *postgres.Store) (int64, []tableSize, error) {
	var size int64
	if err := store.Pool().QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&size); err != nil {
		return 0, nil, err
	}
	rows, err := store.Pool().Query(ctx, `SELECT c.relname, pg_total_relation_size(c.oid), c.reltuples::bigint FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'tollgate' AND c.relkind = 'r'
		ORDER BY pg_total_relation_size(c.oid) DESC`)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	var ts []tableSize
	for rows.Next() {
		var t tableSize
		if err := rows.Scan(&t.Name, &t.Bytes, &t.Rows); err != nil {
			return 0, nil, err
		}
		ts = append(ts, t)
	}
	return size, ts, rows.Err()
}

// measureMemory runs tollgate serve replicas as processes: one on the
// empty store (the comparison, and the template run), then o.replicas on
// the store seeded with o.parked parked runs, before and after answering
// o.answers of them through random replicas.
func measureMemory(ctx context.Context, b *backend, dsn string, o clusterOptions, progress func(string, ...any)) (*memoryResult, error) {
	res := &memoryResult{Replicas: o.replicas, Parked: o.parked, SeedLoops: o.seedLoops, AnswerLoops: o.answerLoops, LoadBefore: loadAvg()}
	f, err := newServeFleet(ctx, dsn, o.bin, "memory", progress)
	if err != nil {
		return nil, err
	}
	defer f.close()
	res.Binary = f.binLabel

	// One replica on the empty store.
	r0, err := f.start(ctx, 0)
	if err != nil {
		return nil, err
	}
	st, err := settleReplicas(ctx, []*serveReplica{r0}, o.settleMax)
	if err != nil {
		return nil, err
	}
	res.Idle = f.measure(r0)
	res.Idle.Settle = st[0]
	progress("memory: one replica, 0 parked runs: VmRSS %s (RssAnon %s), VmHWM %s", kbStr(res.Idle.RSSKB), kbStr(res.Idle.AnonKB), kbStr(res.Idle.HWMKB))
	store, err := postgres.Open(ctx, withParam(dsn, "application_name", appName+"-seed"), &postgres.Options{Schema: "tollgate", MustExist: true, MaxConns: int32(max(4, o.seedLoops))})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	// The template: one real prompt through the replica's API.
	tplThread := "clusterbench-template-" + randomHex(4)
	if code, body, err := f.post(r0.addr, "/v1/threads/"+tplThread+"/messages", map[string]string{"text": "$ " + templateCommand}); err != nil || code != http.StatusOK && code != http.StatusCreated && code != http.StatusAccepted {
		return nil, fmt.Errorf("posting the template prompt: %d %s %v", code, body, err)
	}
	var tpl *runTemplate
	for deadline := time.Now().Add(30 * time.Second); ; {
		tpl, err = readTemplate(ctx, store, tplThread)
		if err == nil && len(tpl.events) > 0 && tpl.events[len(tpl.events)-1].Type == "run_parked" {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the template run did not park: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(string(tpl.question.Payload), templateCommand) {
		return nil, fmt.Errorf("the template question is not about %q: %s", templateCommand, tpl.question.Payload)
	}
	// Answered, so that it is one cycle through the replica, and the
	// template's command is known to run here.
	if code, body, err := f.post(r0.addr, "/v1/questions/"+tplThread+"/"+tpl.question.ID+"/answer", answerBody(tpl.question)); err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("answering the template: %d %s %v", code, body, err)
	}
	if _, results, err := waitIdle(ctx, store, []string{tplThread}, time.Minute); err != nil || results != 1 {
		return nil, fmt.Errorf("the template run after its answer: %d tool results, %v", results, err)
	}
	if st, err = settleReplicas(ctx, []*serveReplica{r0}, o.settleMax); err != nil {
		return nil, err
	}
	res.IdleAfterCycle = f.measure(r0)
	res.IdleAfterCycle.Settle = st[0]
	r0.stop()
	f.replicas = nil

	// The seeding.
	var tables []tableSize
	if res.DBBytesBefore, tables, err = databaseSize(ctx, store); err != nil {
		return nil, err
	}
	for _, t := range tables {
		res.SchemaBytesBefore += t.Bytes
	}
	if res.RawSeed, err = b.raw(ctx, o.seedLoops, o.rawTime); err != nil {
		return nil, err
	}
	if _, err := cluster.New(ctx, cluster.Config{Store: store, Logger: quiet}); err != nil {
		return nil, err
	}
	progress("memory: seeding %d parked runs from %d goroutines (raw %.0f tx/s from %d)", o.parked, o.seedLoops, res.RawSeed.PerSecond, o.seedLoops)
	ids := make([]string, o.parked)
	for i := range ids {
		ids[i] = fmt.Sprintf("seed-%07d", i)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, o.seedLoops)
	start := time.Now()
	for range o.seedLoops {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ids) {
					return
				}
				if _, err := store.Commit(ctx, tpl.batch(ids[i], "run_"+randomHex(12))); err != nil {
					errs <- fmt.Errorf("seeding %s: %w", ids[i], err)
					next.Store(int64(len(ids)))
					return
				}
				if i > 0 && i%(max(1, len(ids)/10)) == 0 {
					progress("memory: %d seeded in %.1fs", i, time.Since(start).Seconds())
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	res.SeedSeconds = time.Since(start).Seconds()
	res.SeedPerS = float64(o.parked) / res.SeedSeconds
	if res.RawSeedAfter, err = b.raw(ctx, o.seedLoops, o.rawTime); err != nil {
		return nil, err
	}
	if _, err := store.Pool().Exec(ctx, `ANALYZE`); err != nil {
		return nil, err
	}
	if res.DBBytes, res.Tables, err = databaseSize(ctx, store); err != nil {
		return nil, err
	}
	for _, t := range res.Tables {
		res.SchemaBytes += t.Bytes
	}
	if err := store.Pool().QueryRow(ctx, `SELECT count(*) FROM tollgate.river_job WHERE kind = 'tollgate_deadline' AND state = 'scheduled'`).Scan(&res.DeadlineJobs); err != nil {
		return nil, err
	}
	res.LoadSeeded = loadAvg()
	progress("memory: seeded %d in %.1fs (%.0f/s); database %s; load average %s", o.parked, res.SeedSeconds, res.SeedPerS, sizeStr(float64(res.DBBytes)), res.LoadSeeded)

	// The replicas on the seeded store.
	started := time.Now()
	for i := range o.replicas {
		if _, err := f.start(ctx, i+1); err != nil {
			return nil, err
		}
	}
	if st, err = settleReplicas(ctx, f.replicas, o.settleMax); err != nil {
		return nil, err
	}
	res.Reconcile = reconcileSeen(ctx, store, started)
	for i, r := range f.replicas {
		m := f.measure(r)
		m.Settle = st[i]
		res.Start = append(res.Start, m)
		progress("memory: replica %d, %d parked runs in the store: VmRSS %s (RssAnon %s), VmHWM %s, settled in %.0fs", r.n, o.parked, kbStr(m.RSSKB), kbStr(m.AnonKB), kbStr(m.HWMKB), st[i])
	}

	// The answers, after the HTTP round trip's own cost.
	var hz []time.Duration
	for i := range 200 {
		r := f.replicas[i%len(f.replicas)]
		t0 := time.Now()
		resp, err := f.client.Get("http://" + r.addr + "/healthz")
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		hz = append(hz, time.Since(t0))
	}
	res.Healthz = statsOf(hz)
	var qt []time.Duration
	for i := range 60 {
		r := f.replicas[rand.IntN(len(f.replicas))]
		t0 := time.Now()
		resp, err := f.client.Get("http://" + r.addr + "/v1/questions?status=pending&limit=50")
		if err != nil {
			return nil, err
		}
		var page struct {
			Questions []json.RawMessage `json:"questions"`
			Total     int64             `json:"total"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || len(page.Questions) != min(50, o.parked) || page.Total < int64(o.parked) {
			return nil, fmt.Errorf("the queue's first page on replica %d: %d questions of %d, %v", r.n, len(page.Questions), page.Total, err)
		}
		if i >= 10 { // the first ones warm the replicas' statements up
			qt = append(qt, time.Since(t0))
		}
	}
	res.Queue = statsOf(qt)
	chosen := make([]string, 0, o.answers)
	for _, i := range rand.Perm(len(ids))[:o.answers] {
		chosen = append(chosen, ids[i])
	}
	res.AnswersBy = make([]int64, len(f.replicas))
	var reqTimes []time.Duration
	var mu sync.Mutex
	next.Store(0)
	start = time.Now()
	for range o.answerLoops {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(chosen) {
					return
				}
				k := rand.IntN(len(f.replicas))
				r := f.replicas[k]
				t0 := time.Now()
				code, body, err := f.post(r.addr, "/v1/questions/"+chosen[i]+"/"+tpl.question.ID+"/answer", tpl.answerIn(chosen[i]))
				d := time.Since(t0)
				if err != nil || code != http.StatusOK {
					errs <- fmt.Errorf("answering %s on replica %d: %d %s %v", chosen[i], r.n, code, body, err)
					next.Store(int64(len(chosen)))
					return
				}
				mu.Lock()
				res.AnswersBy[k]++
				reqTimes = append(reqTimes, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	res.AnswerSeconds = time.Since(start).Seconds()
	res.AnswerRequest = statsOf(reqTimes)
	res.Answered = len(chosen)
	res.Finished, res.ToolResults, err = waitIdle(ctx, store, chosen, 10*time.Minute)
	res.FinishSeconds = time.Since(start).Seconds()
	if err != nil {
		return nil, err
	}
	progress("memory: %d answered in %.1fs, all finished in %.1fs", len(chosen), res.AnswerSeconds, res.FinishSeconds)
	if st, err = settleReplicas(ctx, f.replicas, o.settleMax); err != nil {
		return nil, err
	}
	for i, r := range f.replicas {
		m := f.measure(r)
		m.Settle = st[i]
		res.After = append(res.After, m)
		progress("memory: replica %d after the answers: VmRSS %s (RssAnon %s), VmHWM %s", r.n, kbStr(m.RSSKB), kbStr(m.AnonKB), kbStr(m.HWMKB))
	}
	f.stopAll()
	res.LoadAfter = loadAvg()
	return res, nil
}

// reconcileSeen says whether a start-up reconcile of the cluster ran
// since the replicas started, and how long it took. (River's periodic
// job is unique by the minute: one due in the same minute as an earlier
// one, such as the comparison replica's, is not run again.)
func reconcileSeen(ctx context.Context, store *postgres.Store, since time.Time) string {
	var created, attempted, finalized pgtype.Timestamptz
	var by []string
	err := store.Pool().QueryRow(ctx, `SELECT created_at, attempted_at, finalized_at, coalesce(attempted_by, '{}') FROM tollgate.river_job
		WHERE kind = 'tollgate_reconcile' ORDER BY id DESC LIMIT 1`).Scan(&created, &attempted, &finalized, &by)
	switch {
	case err != nil:
		return "no reconcile job found (" + err.Error() + ")"
	case created.Time.Before(since):
		return fmt.Sprintf("no start-up reconcile ran after the replicas started: River's periodic job is unique by the minute, and the last one was inserted at %s, before them", created.Time.Format(time.TimeOnly))
	case !attempted.Valid || !finalized.Valid:
		return "the start-up reconcile did not finish while the replicas settled"
	}
	return fmt.Sprintf("the start-up reconcile took %s on %s", ms(finalized.Time.Sub(attempted.Time)), strings.Join(by, ","))
}

func kbStr(kb int64) string { return fmt.Sprintf("%.1f MB", float64(kb)/1024) }

func (m *memoryResult) print(w io.Writer) {
	fmt.Fprintf(w, "\nMemory: tollgate serve replicas as processes (%s), --dev, the demo model, a policy that asks about every call.\n", m.Binary)
	fmt.Fprintf(w, "load average %s at the start, %s after seeding, %s at the end\n", m.LoadBefore, m.LoadSeeded, m.LoadAfter)
	fmt.Fprintf(w, "%-44s %10s %10s %10s %10s %10s %8s %8s\n", "", "VmRSS", "VmHWM", "RssAnon", "RssFile", "Go heap", "gorout.", "settled")
	row := func(label string, p procMem) {
		fmt.Fprintf(w, "%-44s %10s %10s %10s %10s %10s %8.0f %7.0fs\n", label, kbStr(p.RSSKB), kbStr(p.HWMKB), kbStr(p.AnonKB), kbStr(p.FileKB),
			sizeStr(p.HeapInuse), p.Goroutines, p.Settle)
	}
	row("one replica, empty store (the comparison)", m.Idle)
	row("  the same, after one approval cycle", m.IdleAfterCycle)
	for _, p := range m.Start {
		row(fmt.Sprintf("replica %d of %d, %d parked runs", p.Replica, m.Replicas, m.Parked), p)
	}
	for _, p := range m.After {
		row(fmt.Sprintf("replica %d after %d answered", p.Replica, m.Answered), p)
	}
	fmt.Fprintf(w, "%s\n", m.Reconcile)
	fmt.Fprintf(w, "seeding: %d parked runs, one Commit each (thread, messages, question, audit entries) from %d goroutines,\n"+
		"in %.1fs = %.0f runs/s; raw single-row inserts from %d loops: %.0f tx/s before, %.0f tx/s after; %d deadline jobs scheduled\n",
		m.Parked, m.SeedLoops, m.SeedSeconds, m.SeedPerS, m.SeedLoops, m.RawSeed.PerSecond, m.RawSeedAfter.PerSecond, m.DeadlineJobs)
	per := float64(m.SchemaBytes-m.SchemaBytesBefore) / float64(max(1, m.Parked))
	fmt.Fprintf(w, "database: %s, of which the schema tollgate %s (%s before seeding; %s a parked run):", sizeStr(float64(m.DBBytes)),
		sizeStr(float64(m.SchemaBytes)), sizeStr(float64(m.SchemaBytesBefore)), sizeStr(per))
	for i, t := range m.Tables {
		if i >= 8 {
			break
		}
		fmt.Fprintf(w, " %s %s", t.Name, sizeStr(float64(t.Bytes)))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "the reviewers' first page, GET /v1/questions?status=pending&limit=50 (with the total of %d pending), on random replicas: p50/p90/p99/max %s\n",
		m.Parked, m.Queue)
	fmt.Fprintf(w, "answers: %d approved through random replicas (%v by replica), %d at once, in %.1fs; request p50/p90/p99/max %s\n"+
		"(GET /healthz, the raw limit: %s); every answered run finished %.1fs after the first answer (%d idle, %d tool results)\n",
		m.Answered, m.AnswersBy, m.AnswerLoops, m.AnswerSeconds, m.AnswerRequest, m.Healthz, m.FinishSeconds, m.Finished, m.ToolResults)
}
