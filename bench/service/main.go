// Command service measures tollgate serve's host and API with many parked
// runs on SQLite: resident memory, store queries while idle, the first page
// of the reviewers' queue, and the time from an answer's HTTP response to
// the tool starting — each beside the raw limit measured in the same run.
//
//	go run ./bench/service -parked 10000,100000
//
// Parked runs are seeded straight into the store in the exact shape a run
// leaves when it parks (a running thread whose last message holds the call,
// a pending approval question with its digest), then found by the host at
// start-up like runs left by a previous process. The figures go to
// bench/README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/provider/scripted"
	"github.com/tollgate-ai/tollgate/server"
)

func main() {
	parkedList := flag.String("parked", "10000,100000", "numbers of parked runs to measure, comma-separated")
	idle := flag.Duration("idle", 10*time.Second, "how long to count store queries while nothing happens")
	answers := flag.Int("answers", 200, "answers timed from HTTP response to tool start")
	queuePages := flag.Int("pages", 200, "requests of the queue's first page")
	flag.Parse()
	for _, f := range strings.Split(*parkedList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			fmt.Fprintln(os.Stderr, "bad -parked:", err)
			os.Exit(2)
		}
		if err := measure(n, *idle, *answers, *queuePages); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
	}
}

type shellArgs struct {
	Cmd string `json:"cmd"`
}

// countingStore counts the store calls made through it.
type countingStore struct {
	checkpoint.Store
	calls atomic.Int64
}

func (s *countingStore) LoadThread(ctx context.Context, id string) (*checkpoint.Thread, error) {
	s.calls.Add(1)
	return s.Store.LoadThread(ctx, id)
}
func (s *countingStore) GetQuestion(ctx context.Context, t, id string) (*checkpoint.Question, error) {
	s.calls.Add(1)
	return s.Store.GetQuestion(ctx, t, id)
}
func (s *countingStore) ListQuestions(ctx context.Context, f checkpoint.QuestionFilter) ([]*checkpoint.Question, string, error) {
	s.calls.Add(1)
	return s.Store.ListQuestions(ctx, f)
}
func (s *countingStore) ListThreads(ctx context.Context, f checkpoint.ThreadFilter) ([]*checkpoint.Thread, string, error) {
	s.calls.Add(1)
	return s.Store.ListThreads(ctx, f)
}
func (s *countingStore) ListEvents(ctx context.Context, t string, after int64, limit int) ([]*checkpoint.Event, error) {
	s.calls.Add(1)
	return s.Store.ListEvents(ctx, t, after, limit)
}
func (s *countingStore) ListToolCalls(ctx context.Context, t, r string, callIDs ...string) ([]*checkpoint.ToolCall, error) {
	s.calls.Add(1)
	return s.Store.ListToolCalls(ctx, t, r, callIDs...)
}
func (s *countingStore) CountQuestions(ctx context.Context, f checkpoint.QuestionFilter) (int64, error) {
	s.calls.Add(1)
	return s.Store.CountQuestions(ctx, f)
}

func measure(n int, idle time.Duration, answers, pages int) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "tollgate-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	raw, err := sqlite.Open(ctx, filepath.Join(dir, "tollgate.db"), &sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		return err
	}
	defer raw.Close()
	t0 := time.Now()
	if err := seed(ctx, raw, n); err != nil {
		return err
	}
	fmt.Printf("== %d parked runs (seeded in %s)\n", n, time.Since(t0).Round(time.Millisecond))
	runtime.GC()
	debug.FreeOSMemory()
	rssBase := rssKB()

	store := &countingStore{Store: raw}
	var started sync.Map // thread id -> time the tool started
	tool := agent.NewTool("bash", "Run a command.", func(ctx context.Context, a shellArgs) (string, error) {
		if c := agent.ToolCallFrom(ctx); c != nil {
			started.Store(c.ThreadID, time.Now())
		}
		return "ok", nil
	}, nil)
	askAll := func(ctx context.Context, c *hitl.PolicyContext) hitl.ApprovalDecision {
		return hitl.AskUser(hitl.AskOptions{Timeout: 24 * time.Hour})
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := host.New(host.Config{Store: store, Logger: quiet, Agent: agent.Config{
		Provider: scripted.Demo{}, Tools: []*agent.Tool{tool}, Logger: quiet,
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(store, "", nil), askAll)},
	}})
	if err != nil {
		return err
	}
	t1 := time.Now()
	if err := h.Start(ctx); err != nil {
		return err
	}
	fmt.Printf("host start-up (finds every parked run): %s, parked %d\n", time.Since(t1).Round(time.Millisecond), h.Stats().Parked)
	srv, err := server.New(server.Config{Host: h, Logger: quiet, DevMode: true, ListenAddr: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

	time.Sleep(time.Second) // let start-up settle
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(200 * time.Millisecond)
	rss := rssKB()
	fmt.Printf("resident memory: %.1f MB with the host and server (%.1f MB before them: the store and Go runtime), %d goroutines\n",
		float64(rss)/1024, float64(rssBase)/1024, runtime.NumGoroutine())

	before := store.calls.Load()
	time.Sleep(idle)
	calls := store.calls.Load() - before
	fmt.Printf("store calls while idle: %.2f/s over %s (plus the SQLite store's own poll for other processes' writes: 1 query/s)\n",
		float64(calls)/idle.Seconds(), idle)

	rawRT, page, err := pageTimes(client, base, pages)
	if err != nil {
		return err
	}
	fmt.Printf("queue first page (50 of %d, deadline order): p50 %s p99 %s; raw limit GET /healthz p50 %s p99 %s\n",
		n, pct(page, 50), pct(page, 99), pct(rawRT, 50), pct(rawRT, 99))

	// Answers: from the moment the answer's response is read to the tool
	// starting in the resumed run.
	lat, fromSend, err := answerTimes(ctx, raw, client, base, &started, min(answers, n))
	if err != nil {
		return err
	}
	fmt.Printf("answer response -> tool started (%d answers): p50 %s p99 %s (0: the tool started before the response was read); answer request sent -> tool started: p50 %s p99 %s\n",
		len(lat), pct(lat, 50), pct(lat, 99), pct(fromSend, 50), pct(fromSend, 99))

	srv.Close()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	h.Shutdown(sctx)
	return nil
}

// pageTimes times pages fetches of the queue's first page and as many
// of GET /healthz, the raw limit, interleaved.
func pageTimes(client *http.Client, base string, pages int) (rawRT, page []time.Duration, err error) {
	get := func(path string) (time.Duration, error) {
		t := time.Now()
		resp, err := client.Get(base + path)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return time.Since(t), nil
	}
	for i := range pages {
		// Interleaved, so both see the same machine.
		paths := []string{"/healthz", "/v1/questions?status=pending&order=deadline&limit=50"}
		if i%2 == 1 {
			paths[0], paths[1] = paths[1], paths[0]
		}
		for _, p := range paths {
			d, err := get(p)
			if err != nil {
				return nil, nil, err
			}
			if p == "/healthz" {
				rawRT = append(rawRT, d)
			} else {
				page = append(page, d)
			}
		}
	}
	return rawRT, page, nil
}

// answerTimes approves the questions of the first answers seeded runs
// and times each until its tool started (started: by thread).
func answerTimes(ctx context.Context, raw checkpoint.Store, client *http.Client, base string, started *sync.Map, answers int) (lat, fromSend []time.Duration, err error) {
	for i := range answers {
		thread := threadID(i)
		q, err := raw.GetQuestion(ctx, thread, hitl.QuestionID(callID(i)))
		if err != nil {
			return nil, nil, err
		}
		body := fmt.Sprintf(`{"decision":"approve","digest":%q}`, q.Digest)
		sent := time.Now()
		resp, err := client.Post(base+"/v1/questions/"+thread+"/"+q.ID+"/answer", "application/json", strings.NewReader(body))
		if err != nil {
			return nil, nil, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answered := time.Now()
		if resp.StatusCode != 200 {
			return nil, nil, fmt.Errorf("answer %s: %s", q.ID, resp.Status)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			if v, ok := started.Load(thread); ok {
				lat = append(lat, max(v.(time.Time).Sub(answered), 0))
				fromSend = append(fromSend, v.(time.Time).Sub(sent))
				break
			}
			if time.Now().After(deadline) {
				return nil, nil, fmt.Errorf("tool of %s never started", thread)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	return lat, fromSend, nil
}

func threadID(i int) string { return fmt.Sprintf("bench-%06d", i) }
func callID(i int) string   { return fmt.Sprintf("call_%06d", i) }

// seed writes n parked runs in the shape a parked run leaves: the thread
// running with the user's message and the assistant's call, and the
// pending approval question a hitl middleware stores for it.
func seed(ctx context.Context, s checkpoint.Store, n int) error {
	now := time.Now()
	for i := range n {
		args := json.RawMessage(fmt.Sprintf(`{"cmd":"rm -r /tmp/scratch-%d"}`, i))
		call := agent.ToolCall{ID: callID(i), Name: "bash", Arguments: args}
		runID := fmt.Sprintf("run_%06d", i)
		msgs := []agent.Message{
			{Role: agent.RoleUser, Text: "$ rm -r /tmp/scratch", RunID: runID, CreatedAt: now},
			{Role: agent.RoleAssistant, Text: "Running 1 command(s).", ToolCalls: []agent.ToolCall{call}, StopReason: agent.StopToolUse, RunID: runID, CreatedAt: now},
		}
		rawMsgs, _ := json.Marshal(msgs)
		th := &checkpoint.Thread{ID: threadID(i), Status: checkpoint.ThreadRunning, RunID: runID, Messages: rawMsgs}
		if err := s.CreateThread(ctx, th); err != nil {
			return err
		}
		payload, _ := json.Marshal(hitl.Payload{Kind: hitl.KindApprove, ToolName: "bash",
			Args:    map[string]any{"cmd": fmt.Sprintf("rm -r /tmp/scratch-%d", i)},
			Details: map[string]any{"matched_rule": "ask", "impact": "changes files"}})
		q := &checkpoint.Question{ThreadID: th.ID, ID: hitl.QuestionID(call.ID), RunID: runID, CallID: call.ID, Tool: "bash",
			Kind: hitl.KindApprove, Payload: payload, Digest: agent.CallDigest(th.ID, call.ID, "bash", args), CreatedAt: now}
		if i%3 == 0 {
			q.Deadline = now.Add(24*time.Hour + time.Duration(i)*time.Millisecond)
		}
		if _, _, err := s.CreateQuestion(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)*p/100, len(s)-1)
	return s[i].Round(time.Microsecond)
}

// rssKB is the process's resident set size from /proc (Linux).
func rssKB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n
			}
		}
	}
	return 0
}
