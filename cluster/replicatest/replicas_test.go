package replicatest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "replicatest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	pgtest.Main(m, func() { os.RemoveAll(dir) })
}

// What the test does to each job's question.
type plan int

const (
	approve plan = iota
	deny
	leave // left to time out
)

func (p plan) String() string { return [...]string{"approve", "deny", "leave"}[p] }

// job is one thread: "job-N", its prompt "job N", posted to one replica.
type job struct {
	n       int
	thread  string
	replica int // 1-based: where its prompt was posted
	plan    plan

	// Filled by the answering worker.
	answeredOn int       // the replica whose 200 recorded the answer; 0 when a lost response was confirmed by a 409
	answeredAt time.Time // when that response came back
	refused    int       // connection refused on the way
	answerErr  error     // the answer could not be given
}

func (j *job) questionID() string { return "hitl_" + callID(j.n) }

// How long the answers take at least, so that the kill and the restarts
// fall among them.
const answerPhase = 12 * time.Second

// After the kill of replica 1 (half of the answers sent): replica 2 is
// restarted (SIGTERM, then started again), and replica 1 started again.
const (
	restartAfterKill = 2 * time.Second
	reviveAfterKill  = 8 * time.Second // after --lease has passed: the others rescue first
	inFlightWindow   = 10 * time.Second
	// killLanding: calls of the killed replica received this long after
	// the kill was sent were made before it landed (well before the
	// replica is started again, reviveAfterKill).
	killLanding = time.Second
	// modelDelay is how long the fake model takes to answer: the window in
	// which the kill catches a call in flight.
	modelDelay = 150 * time.Millisecond
)

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func TestReplicas(t *testing.T) {
	nReplicas := envInt(t, "TOLLGATE_REPLICAS", 3)
	perReplica := envInt(t, "TOLLGATE_REPLICA_THREADS", 20)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TOLLGATE_REPLICA_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TOLLGATE_REPLICA_SEED=%q: %v", s, err)
		}
		seed = v
	}
	rng := rand.New(rand.NewPCG(seed, 14))
	t.Logf("replicas %d, threads per replica %d, seed %d (TOLLGATE_REPLICA_SEED)", nReplicas, perReplica, seed)

	// The plan: about 10% left to time out, 15% denied, the rest approved.
	jobs := make([]*job, nReplicas*perReplica)
	byN := map[int]*job{}
	perm := rng.Perm(len(jobs))
	nLeave := max(1, len(jobs)/10)
	nDeny := max(1, len(jobs)*15/100)
	for i := range jobs {
		j := &job{n: i + 1, thread: fmt.Sprintf("job-%d", i+1), replica: i%nReplicas + 1}
		switch p := perm[i]; {
		case p < nLeave:
			j.plan = leave
		case p < nLeave+nDeny:
			j.plan = deny
		}
		jobs[i] = j
		byN[j.n] = j
	}
	model := newFakeModel(t, func(n int) string {
		j := byN[n]
		return jobCommand(n, j != nil && j.plan == leave)
	}, modelDelay)
	// The kill waits for a call of replica 1's in flight (turn 2: a run
	// that was answered and ran its tool), so that the rescue has one to
	// make again.
	var armed atomic.Bool
	inFlight := make(chan struct{}, 1)
	model.onCall = func(replica, turn int) {
		if replica == 1 && turn == 2 && armed.Load() {
			select {
			case inFlight <- struct{}{}:
			default:
			}
		}
	}
	f := newFleet(t, nReplicas, model)
	for _, r := range f.replicas {
		if err := r.start(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	// 1. Every prompt, each to its replica.
	began := time.Now()
	err := parallel(8, jobs, func(j *job) error {
		r := f.replicas[j.replica-1]
		var resp struct {
			RunID string `json:"run_id"`
		}
		code, body, err := r.call(ctx, http.MethodPost, "/v1/threads/"+j.thread+"/messages", map[string]string{"text": fmt.Sprintf("job %d", j.n)}, &resp)
		if err != nil {
			return err
		}
		if code != http.StatusAccepted {
			return fmt.Errorf("%v: post %s: %d %s", r, j.thread, code, body)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d prompts posted in %v", len(jobs), time.Since(began).Round(time.Millisecond))

	// 2. Every thread's question. Those left to time out may have done so
	// already on a slow machine; the others must be pending.
	deadline := time.Now().Add(60*time.Second + time.Duration(len(jobs))*50*time.Millisecond)
	var lastDeadline time.Time
	for {
		found, err := f.questionsByThread(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var missing []string
		for _, j := range jobs {
			q, ok := found[j.thread]
			if !ok || j.plan != leave && q.Status != "pending" {
				missing = append(missing, fmt.Sprintf("%s (%q)", j.thread, q.Status))
			}
			if j.plan == leave && q.Deadline.After(lastDeadline) {
				lastDeadline = q.Deadline.Time
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, %d threads have no pending question: %s", time.Since(began).Round(time.Second), len(missing), strings.Join(missing[:min(len(missing), 20)], ", "))
		}
		time.Sleep(250 * time.Millisecond)
	}
	asked := time.Now()
	t.Logf("every thread asked after %v", asked.Sub(began).Round(time.Millisecond))

	// 3. The answers, by a few workers through random replicas, while
	// replica 1 is killed and replica 2 restarted.
	var toAnswer []*job
	for _, j := range jobs {
		if j.plan != leave {
			toAnswer = append(toAnswer, j)
		}
	}
	rng.Shuffle(len(toAnswer), func(a, b int) { toAnswer[a], toAnswer[b] = toAnswer[b], toAnswer[a] })
	for i, j := range toAnswer {
		j.answeredAt = asked.Add(time.Duration(i) * answerPhase / time.Duration(len(toAnswer))) // the earliest it is sent
	}
	var answered atomic.Int64
	var killedAt time.Time
	disrupted := make(chan error, 1)
	half := make(chan struct{})
	go func() {
		<-half
		armed.Store(true)
		select {
		case <-inFlight:
		case <-time.After(5 * time.Second):
		}
		disrupted <- disrupt(f, &killedAt)
	}()
	var rngMu sync.Mutex
	pick := func(n int) int {
		rngMu.Lock()
		defer rngMu.Unlock()
		return rng.IntN(n)
	}
	var halfOnce sync.Once
	err = parallel(4, toAnswer, func(j *job) error {
		time.Sleep(time.Until(j.answeredAt))
		err := answer(ctx, f, j, pick)
		j.answerErr = err
		if answered.Add(1) >= int64(len(toAnswer)/2) {
			halfOnce.Do(func() { close(half) })
		}
		return err
	})
	halfOnce.Do(func() { close(half) })
	if err != nil {
		t.Error(err)
	}
	if err := <-disrupted; err != nil {
		t.Fatal(err)
	}
	lastAnswer := time.Now()
	t.Logf("answers sent in %v; replica 1 killed %v after the first", lastAnswer.Sub(asked).Round(time.Millisecond), killedAt.Sub(asked).Round(time.Millisecond))

	// 4. Every thread idle, within 3 minutes of the last deadline.
	idleBy := lastDeadline.Add(3 * time.Minute)
	if idleBy.Before(time.Now().Add(3 * time.Minute)) {
		idleBy = time.Now().Add(3 * time.Minute)
	}
	// Runs that failed (an error the run stopped on) are not waited for
	// once they are all that is left for 10 s: nothing resumes them soon.
	var running []string
	var onlyFailed time.Time
	for {
		threads, err := f.runningThreads(ctx)
		if err != nil {
			t.Fatal(err)
		}
		running = running[:0]
		failed := 0
		for _, th := range threads {
			running = append(running, th.ID+" ("+th.RunState+")")
			if th.RunState == "failed" {
				failed++
			}
		}
		if failed == 0 || failed < len(threads) {
			onlyFailed = time.Time{}
		} else if onlyFailed.IsZero() {
			onlyFailed = time.Now()
		}
		if len(running) == 0 || time.Now().After(idleBy) || !onlyFailed.IsZero() && time.Since(onlyFailed) > 10*time.Second {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	finished := time.Now()
	if len(running) > 0 {
		slices.Sort(running)
		t.Errorf("%d threads still running at %v (waited until 3 minutes after the last deadline, or 10 s of only failed runs): %s",
			len(running), finished.Sub(began).Round(time.Second), strings.Join(running[:min(20, len(running))], ", "))
	}

	// 5. The checks.
	r := check(ctx, t, f, jobs, killedAt)
	r.print(t, f, jobs, began, lastAnswer, finished, killedAt)
}

// disrupt kills replica 1, restarts replica 2 (SIGTERM, wait, start) and
// starts replica 1 again.
func disrupt(f *fleet, killedAt *time.Time) error {
	*killedAt = time.Now()
	f.replicas[0].kill()
	if len(f.replicas) > 1 {
		time.Sleep(time.Until(killedAt.Add(restartAfterKill)))
		if err := f.replicas[1].stop(); err != nil {
			return err
		}
		if err := f.replicas[1].start(); err != nil {
			return err
		}
	}
	time.Sleep(time.Until(killedAt.Add(reviveAfterKill)))
	return f.replicas[0].start()
}

// answer answers j's question on random replicas until one takes it: a
// connection refused (a replica down) or a lost response (one killed
// while it answered) is tried on another. After a lost response, 409
// already_answered with this answer is the answer having been recorded.
func answer(ctx context.Context, f *fleet, j *job, pick func(int) int) error {
	body := map[string]string{"decision": "approve"}
	if j.plan == deny {
		body = map[string]string{"decision": "deny", "reason": fmt.Sprintf("not job %d", j.n)}
	}
	var q apiQuestion
	if err := f.get(ctx, "/v1/questions/"+j.thread+"/"+j.questionID(), &q); err != nil {
		return err
	}
	body["digest"] = q.Digest
	lost := false
	giveUp := time.Now().Add(2 * time.Minute)
	for {
		r := f.replicas[pick(len(f.replicas))]
		var got apiQuestion
		code, resp, err := r.call(ctx, http.MethodPost, "/v1/questions/"+j.thread+"/"+j.questionID()+"/answer", body, &got)
		switch {
		case errors.Is(err, errRefused):
			j.refused++
		case err != nil:
			lost = true
		case code == http.StatusOK:
			if got.decision() != body["decision"] {
				return fmt.Errorf("%s: %v answered %s, the question says %s", j.thread, r, body["decision"], got.decision())
			}
			j.answeredOn, j.answeredAt = r.n, time.Now()
			return nil
		case code == http.StatusConflict && lost:
			// The winner is beside the error (server/API.md: 409
			// already_answered carries the question).
			var e struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
				Question apiQuestion `json:"question"`
			}
			json.Unmarshal(resp, &e)
			if e.Error.Code == "already_answered" && e.Question.decision() == body["decision"] {
				j.answeredOn, j.answeredAt = 0, e.Question.ResolvedAt.Time
				return nil
			}
			return fmt.Errorf("%s: %v: %d %s", j.thread, r, code, resp)
		case code >= 500:
			// Shutting down (503), or its store out of reach (503; 500
			// before tollgate said so): another replica. With the store
			// away the answer may have been recorded, its reply lost: a
			// 409 with this answer is then ours.
			lost = true
		default:
			return fmt.Errorf("%s: answer %s on %v: %d %s", j.thread, body["decision"], r, code, resp)
		}
		if time.Now().After(giveUp) {
			return fmt.Errorf("%s: no replica took the answer in 2 minutes (last: %v)", j.thread, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// parallel runs fn on every item with n workers and returns the first error.
func parallel[T any](n int, items []T, fn func(T) error) error {
	ch := make(chan T)
	var wg sync.WaitGroup
	var first error
	var mu sync.Mutex
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				if err := fn(it); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, it := range items {
		ch <- it
	}
	close(ch)
	wg.Wait()
	return first
}

// logLine is a line of the tool's log: the job and when its command ran.
type logLine struct {
	n  int
	at time.Time
}

func readLog(path string) ([]logLine, []string, error) {
	file, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer file.Close()
	var lines []logLine
	var bad []string
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		// "job-N SECONDS.MICROSECONDS", read exactly (a float64 would
		// round the microseconds).
		var n int
		var stamp string
		_, err := fmt.Sscanf(sc.Text(), "job-%d %s", &n, &stamp)
		sec, frac, ok := strings.Cut(stamp, ".")
		s, err1 := strconv.ParseInt(sec, 10, 64)
		us, err2 := strconv.ParseInt(frac, 10, 64)
		if err != nil || !ok || len(frac) != 6 || err1 != nil || err2 != nil {
			bad = append(bad, sc.Text())
			continue
		}
		lines = append(lines, logLine{n: n, at: time.Unix(s, us*1000)})
	}
	return lines, bad, sc.Err()
}

// report is what the checks found: each list a kind of violation.
type report struct {
	unfinished     []string // a run not finished, or finished other than once
	lost           []string // a question missing, pending, resolved other than once or otherwise than the test did
	twice          []string // a tool run twice, or with more than one result
	unapproved     []string // a tool run without an approval
	deadlines      []string // a deadline that did not fire exactly once, or fired on a question it should not have
	dupForbidden   []string // a turn's model call made twice
	notRun         []string // an approved call neither run nor reported cut off
	badResult      []string // a denied or timed-out call whose result does not say so
	unexpectedCall []string // the fake model's complaints
	failedRuns     []string // a run that stopped on an error other than a shutdown's

	interrupted []string // a run cut off by a shutdown (and resumed)

	dupAllowed []string // a model call in flight on the killed replica, made again by the rescue
	cutOff     []string // approved calls whose result says the outcome is unknown (at most once)
	ran        int
	sameLat    []time.Duration // answer's resolution to the tool's start, the tool on the answering replica
	crossLat   []time.Duration // the same, the tool on another replica
	lateBy     []time.Duration // a timed-out question's resolution after its deadline
	calls      []modelCall
}

func check(ctx context.Context, t *testing.T, f *fleet, jobs []*job, killedAt time.Time) *report {
	rep := &report{}
	lines, bad, err := readLog(filepath.Join(f.work, logFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range bad {
		rep.unapproved = append(rep.unapproved, fmt.Sprintf("a line of the log no job wrote: %q", l))
	}
	logged := map[int][]logLine{}
	for _, l := range lines {
		logged[l.n] = append(logged[l.n], l)
	}
	rep.ran = len(lines)
	calls, unexpected := f.model.record()
	rep.calls, rep.unexpectedCall = calls, unexpected
	callsOf := map[[2]int][]modelCall{}
	for _, c := range calls {
		k := [2]int{c.Job, c.Turn}
		callsOf[k] = append(callsOf[k], c)
	}
	byN := map[int]*job{}
	for _, j := range jobs {
		byN[j.n] = j
	}
	for n := range logged {
		if byN[n] == nil {
			rep.unapproved = append(rep.unapproved, fmt.Sprintf("job-%d is no job of the test", n))
		}
	}

	// No question but the one of each job's call.
	qs, err := f.allQuestions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if j := byThread(jobs, q.ThreadID); j == nil || q.ID != j.questionID() {
			rep.lost = append(rep.lost, fmt.Sprintf("%s: a question the test did not expect: %s (%s)", q.ThreadID, q.ID, q.Status))
		}
	}

	var mu sync.Mutex
	err = parallel(8, jobs, func(j *job) error {
		var th apiThread
		if err := f.get(ctx, "/v1/threads/"+j.thread, &th); err != nil {
			return err
		}
		var q apiQuestion
		qErr := f.get(ctx, "/v1/questions/"+j.thread+"/"+j.questionID(), &q)
		events, err := f.threadEvents(ctx, j.thread)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		checkJob(rep, j, &th, &q, qErr, events, logged[j.n], callsOf, killedAt)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func byThread(jobs []*job, thread string) *job {
	var n int
	if _, err := fmt.Sscanf(thread, "job-%d", &n); err != nil || n < 1 || n > len(jobs) || jobs[n-1].thread != thread {
		return nil
	}
	return jobs[n-1]
}

func checkJob(rep *report, j *job, th *apiThread, q *apiQuestion, qErr error, events []apiEvent, logged []logLine,
	callsOf map[[2]int][]modelCall, killedAt time.Time) {
	name := j.thread
	// Every run finished, once.
	count := map[string]int{}
	var resolutions []apiEvent
	var results []map[string]any
	for _, e := range events {
		count[e.Type]++
		var data map[string]any
		json.Unmarshal(e.Data, &data)
		switch e.Type {
		case "question_resolved":
			if data["question_id"] == j.questionID() {
				resolutions = append(resolutions, e)
			}
		case "tool_result":
			if data["call_id"] == callID(j.n) {
				results = append(results, data)
			}
		case "run_finished":
			// A run stopped on an error writes its run_finished too: cut
			// off by a shutdown ("run stopped: ..."), it is resumed; any
			// other error is a driver that failed (another one had the
			// run, say).
			if msg, ok := data["error"].(string); ok {
				count["run_finished"]--
				if strings.HasPrefix(msg, "agent: run stopped") {
					rep.interrupted = append(rep.interrupted, fmt.Sprintf("%s: %s", name, msg))
				} else {
					rep.failedRuns = append(rep.failedRuns, fmt.Sprintf("%s: %s", name, msg))
				}
			}
		}
	}
	last := apiMessage{}
	if len(th.Messages) > 0 {
		last = th.Messages[len(th.Messages)-1]
	}
	if th.Status != "idle" || th.RunState == "failed" || last.Role != "assistant" || last.Text != fmt.Sprintf("done job %d", j.n) {
		rep.unfinished = append(rep.unfinished, fmt.Sprintf("%s: status %s, run %s %s, last message %s %q", name, th.Status, th.RunState, th.RunError, last.Role, last.Text))
	}
	if count["run_started"] != 1 || count["run_finished"] != 1 {
		rep.unfinished = append(rep.unfinished, fmt.Sprintf("%s: %d run_started, %d run_finished without an error", name, count["run_started"], count["run_finished"]))
	}

	// Its question resolved once, as the test meant.
	want := map[plan]string{approve: "answered", deny: "answered", leave: "timed_out"}[j.plan]
	switch {
	case qErr != nil:
		rep.lost = append(rep.lost, fmt.Sprintf("%s: %v", name, qErr))
	case q.Status != want:
		msg := fmt.Sprintf("%s (%v): question %s by %q", name, j.plan, q.Status, q.AnsweredBy)
		if q.Status == "timed_out" || j.plan == leave {
			rep.deadlines = append(rep.deadlines, msg)
		} else {
			rep.lost = append(rep.lost, msg)
		}
	case j.plan != leave && q.decision() != j.plan.String():
		rep.lost = append(rep.lost, fmt.Sprintf("%s: answered %s, the test said %v", name, q.decision(), j.plan))
	case j.plan == leave && q.AnsweredBy != "timeout":
		rep.deadlines = append(rep.deadlines, fmt.Sprintf("%s: timed out by %q", name, q.AnsweredBy))
	}
	if qErr == nil && q.Status == "timed_out" && !q.Deadline.IsZero() {
		rep.lateBy = append(rep.lateBy, q.ResolvedAt.Sub(q.Deadline.Time))
	}
	if len(resolutions) != 1 {
		msg := fmt.Sprintf("%s (%v): %d question_resolved entries", name, j.plan, len(resolutions))
		if j.plan == leave {
			rep.deadlines = append(rep.deadlines, msg)
		} else {
			rep.lost = append(rep.lost, msg)
		}
	}
	for _, e := range resolutions {
		var d map[string]any
		json.Unmarshal(e.Data, &d)
		if d["status"] != want || j.plan != leave && d["decision"] != j.plan.String() {
			rep.lost = append(rep.lost, fmt.Sprintf("%s: question_resolved %s", name, e.Data))
		}
	}

	// The tool: once at most, only when approved; its one result says
	// what happened.
	if len(logged) > 1 {
		rep.twice = append(rep.twice, fmt.Sprintf("%s: ran %d times", name, len(logged)))
	}
	if len(results) != 1 {
		rep.twice = append(rep.twice, fmt.Sprintf("%s: %d tool_result entries", name, len(results)))
	}
	approved := qErr == nil && q.Status == "answered" && q.decision() == "approve"
	if len(logged) > 0 && !approved {
		rep.unapproved = append(rep.unapproved, fmt.Sprintf("%s (%v): ran, question %s %s", name, j.plan, q.Status, q.decision()))
	}
	unknown := false
	for _, r := range results {
		reason, _ := r["reason"].(string)
		isErr, _ := r["is_error"].(bool)
		switch {
		case strings.Contains(reason, "outcome of this call is unknown"):
			unknown = true
		case j.plan == approve && isErr:
			rep.badResult = append(rep.badResult, fmt.Sprintf("%s: approved, result %v", name, r))
		case j.plan != approve && !isErr:
			rep.badResult = append(rep.badResult, fmt.Sprintf("%s (%v): result not an error: %v", name, j.plan, r))
		case j.plan == leave && !strings.Contains(reason, "timeout") && !strings.Contains(reason, "timed out"):
			rep.badResult = append(rep.badResult, fmt.Sprintf("%s: timed out, result %v", name, r))
		}
	}
	if unknown {
		rep.cutOff = append(rep.cutOff, fmt.Sprintf("%s (ran: %v)", name, len(logged) > 0))
	}
	if j.plan == approve && len(logged) == 0 && !unknown {
		rep.notRun = append(rep.notRun, fmt.Sprintf("%s: approved, not run, result %v", name, results))
	}

	// Each turn's model call once; a call in flight on the killed replica
	// may be made again by whoever carries the run on.
	for turn := 1; turn <= 2; turn++ {
		cs := callsOf[[2]int{j.n, turn}]
		if len(cs) == 0 {
			rep.unfinished = append(rep.unfinished, fmt.Sprintf("%s: no model call for turn %d", name, turn))
			continue
		}
		sort.Slice(cs, func(a, b int) bool { return cs[a].Start.Before(cs[b].Start) })
		for i, c := range cs[:len(cs)-1] {
			next := cs[i+1]
			desc := fmt.Sprintf("%s turn %d: replica %d at %s, again by replica %d at %s", name, turn, c.Replica,
				c.Start.Format("15:04:05.000"), next.Replica, next.Start.Format("15:04:05.000"))
			// A call the fake received up to a second after the kill was
			// sent before it: the kill is triggered by one call's arrival,
			// and another of the same moment may arrive just after (seen
			// in CI: two calls at the same millisecond as the kill).
			sentBeforeKill := c.Start.Before(killedAt.Add(killLanding))
			if c.Replica == 1 && !killedAt.IsZero() && sentBeforeKill && killedAt.Sub(c.Start) < inFlightWindow && next.Start.After(killedAt) && next.Start.After(c.Start) {
				rep.dupAllowed = append(rep.dupAllowed, desc)
			} else {
				rep.dupForbidden = append(rep.dupForbidden, desc)
			}
		}
	}

	// From the answer's resolution to the tool's start: on the replica
	// that answered, or on another (the one whose turn-2 call followed).
	if j.plan == approve && len(logged) == 1 && q.ResolvedAt.After(time.Time{}) {
		lat := logged[0].at.Sub(q.ResolvedAt.Time)
		if cs := callsOf[[2]int{j.n, 2}]; len(cs) > 0 && j.answeredOn != 0 {
			if cs[0].Replica == j.answeredOn {
				rep.sameLat = append(rep.sameLat, lat)
			} else {
				rep.crossLat = append(rep.crossLat, lat)
			}
		}
	}
}

func (rep *report) print(t *testing.T, f *fleet, jobs []*job, began, lastAnswer, finished, killedAt time.Time) {
	perReplica := map[int]int{}
	refused := 0
	counts := map[plan]int{}
	for _, j := range jobs {
		counts[j.plan]++
		if j.plan != leave && j.answerErr == nil {
			perReplica[j.answeredOn]++
		}
		if j.answerErr != nil {
			perReplica[-1]++
		}
		refused += j.refused
	}
	var per []string
	for n := -1; n <= len(f.replicas); n++ {
		if c := perReplica[n]; c > 0 {
			label := fmt.Sprintf("replica %d", n)
			switch n {
			case 0:
				label = "lost response, then 409 with the answer"
			case -1:
				label = "not given (an error)"
			}
			per = append(per, fmt.Sprintf("%s: %d", label, c))
		}
	}
	callsPer := map[int]int{}
	for _, c := range rep.calls {
		callsPer[c.Replica]++
	}
	rescued := map[string]bool{}
	for _, s := range append(append([]string(nil), rep.dupAllowed...), rep.cutOff...) {
		name, _, _ := strings.Cut(s, " ")
		rescued[name] = true
	}
	t.Logf("threads: %d on %d replicas (%d approved, %d denied, %d left to time out)", len(jobs), len(f.replicas), counts[approve], counts[deny], counts[leave])
	t.Logf("answers per replica: %s; connection refused and retried elsewhere: %d", strings.Join(per, ", "), refused)
	t.Logf("kills: 1 (replica 1, SIGKILL, %v after the first prompt); graceful restarts: %d", killedAt.Sub(began).Round(time.Millisecond), min(1, len(f.replicas)-1))
	t.Logf("time to finish: %v from the first prompt, %v after the last answer", finished.Sub(began).Round(time.Millisecond), finished.Sub(lastAnswer).Round(time.Millisecond))
	t.Logf("model calls: %d (by replica: %v); tools run: %d", len(rep.calls), callsPer, rep.ran)
	t.Logf("rescues: %d runs (%d model calls in flight at the kill made again, %d tools cut off and reported unknown, not run again)", len(rescued), len(rep.dupAllowed), len(rep.cutOff))
	t.Logf("runs cut off by the graceful restart, then resumed: %d", len(rep.interrupted))
	t.Logf("duplicated model calls: %d allowed (in flight on the killed replica), %d forbidden", len(rep.dupAllowed), len(rep.dupForbidden))
	t.Logf("rescues the replicas logged: %s", rescueLog(f))
	t.Logf("deadlines fired after their time by: %s", quantiles(rep.lateBy))
	t.Logf("answer to tool start, tool on the answering replica: %s", quantiles(rep.sameLat))
	t.Logf("answer to tool start, tool on another replica:     %s", quantiles(rep.crossLat))
	for _, s := range rep.dupAllowed {
		t.Logf("  allowed: %s", s)
	}
	for _, s := range rep.cutOff {
		t.Logf("  cut off: %s", s)
	}
	rep.fail(t, rep.kinds(true), true)
}

// violation is a kind of thing the checks found wrong (key, its short
// name), and where.
type violation struct {
	key, what string
	list      []string
}

// kinds are the kinds of what the checks find wrong; with modelOnce, a
// turn's model call made twice is one (a model's answer whose write an
// outage cut off is asked for again, rightly).
func (rep *report) kinds(modelOnce bool) []violation {
	vs := []violation{
		{"unfinished", "runs not finished (or not exactly once)", rep.unfinished},
		{"lost", "questions lost (missing, unresolved, resolved not exactly once or not as answered)", rep.lost},
		{"twice", "tools run twice (or with several results)", rep.twice},
		{"unapproved", "tools run without approval", rep.unapproved},
		{"deadlines", "deadlines not fired exactly once", rep.deadlines},
		{"notRun", "approved tools neither run nor reported cut off", rep.notRun},
		{"badResult", "results that misreport the decision", rep.badResult},
		{"failedRuns", "runs that stopped on an error", rep.failedRuns},
		{"unexpectedCall", "requests the fake model could not place", rep.unexpectedCall},
	}
	if modelOnce {
		vs = append(vs, violation{"dupForbidden", "turns whose model call was made twice", rep.dupForbidden})
	}
	return vs
}

// fail fails the test with each kind of violation found (and logs every
// kind's count, with counts).
func (rep *report) fail(t *testing.T, vs []violation, counts bool) {
	t.Helper()
	for _, v := range vs {
		if counts {
			t.Logf("%s: %d", v.what, len(v.list))
		}
		if len(v.list) > 0 {
			slices.Sort(v.list)
			t.Errorf("%d %s:\n  %s", len(v.list), v.what, strings.Join(v.list[:min(len(v.list), 15)], "\n  "))
		}
	}
}

// rescueLog sums what the replicas' logs say they rescued (the cluster's
// "resuming the runs of a replica that stopped", runs=N): a figure only,
// read from a log message that may change.
func rescueLog(f *fleet) string {
	files, _ := filepath.Glob(filepath.Join(f.logs, "*.log"))
	var parts []string
	total := 0
	for _, file := range files {
		b, _ := os.ReadFile(file)
		n := 0
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "resuming the runs of a replica that stopped") {
				continue
			}
			_, after, _ := strings.Cut(line, " runs=")
			k, _ := strconv.Atoi(strings.Fields(after + " ")[0])
			n += k
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", strings.TrimSuffix(filepath.Base(file), ".log"), n))
			total += n
		}
	}
	if total == 0 {
		return "none"
	}
	return fmt.Sprintf("%d runs (%s)", total, strings.Join(parts, ", "))
}

// quantiles prints p50, p99 and the maximum of ds.
func quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none measured"
	}
	slices.Sort(ds)
	q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	return fmt.Sprintf("n=%d p50 %v p99 %v max %v", len(ds), q(0.5).Round(100*time.Microsecond), q(0.99).Round(100*time.Microsecond), ds[len(ds)-1].Round(100*time.Microsecond))
}
