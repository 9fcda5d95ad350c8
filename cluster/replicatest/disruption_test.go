package replicatest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-ai/tollgate/internal/pgtest"
	"github.com/tollgate-ai/tollgate/policy"
)

// The tests of this file each disrupt a fleet of replicas in one way
// (issue 22): River's leader killed before deadlines, the database away
// for a second, replicas given different policies. They check what must
// hold and print what they measure; they assert no time.

// startAll starts the fleet's replicas.
func (f *fleet) startAll(t *testing.T) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(f.replicas))
	for i, r := range f.replicas {
		wg.Go(func() { errs[i] = r.start() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// postJobs posts "job N" to thread job-N for each job, on replica
// (N-1) mod the fleet's size.
func (f *fleet) postJobs(ctx context.Context, t *testing.T, jobs []*job) {
	t.Helper()
	err := parallel(8, jobs, func(j *job) error {
		r := f.replicas[j.replica-1]
		code, body, err := r.call(ctx, http.MethodPost, "/v1/threads/"+j.thread+"/messages", map[string]string{"text": fmt.Sprintf("job %d", j.n)}, nil)
		if err == nil && code != http.StatusAccepted {
			err = fmt.Errorf("%v: post %s: %d %s", r, j.thread, code, body)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// newJobs are n jobs, spread over the fleet's replicas.
func (f *fleet) newJobs(n int, p plan) []*job {
	jobs := make([]*job, n)
	for i := range jobs {
		jobs[i] = &job{n: i + 1, thread: fmt.Sprintf("job-%d", i+1), replica: i%len(f.replicas) + 1, plan: p}
	}
	return jobs
}

// waitQuestions waits until every job's question exists and returns them.
func (f *fleet) waitQuestions(ctx context.Context, t *testing.T, jobs []*job) map[string]apiQuestion {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		found, err := f.questionsByThread(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) >= len(jobs) {
			return found
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d questions after a minute", len(found), len(jobs))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitIdle waits (up to limit) until no thread is running, and fails the
// test with those still running.
func (f *fleet) waitIdle(ctx context.Context, t *testing.T, limit time.Duration) {
	t.Helper()
	giveUp := time.Now().Add(limit)
	for {
		threads, err := f.runningThreads(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(threads) == 0 {
			return
		}
		if time.Now().After(giveUp) {
			var s []string
			for _, th := range threads {
				s = append(s, th.ID+" ("+th.RunState+" "+th.RunError+")")
			}
			t.Fatalf("%d threads still running after %v: %s", len(threads), limit, strings.Join(s[:min(len(s), 20)], ", "))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// riverLeader is the replica River's leader runs in (nil: none, or one
// the test does not know), read from the database: River's client id is
// the replica's name, which holds its process id.
func (f *fleet) riverLeader(ctx context.Context, db *pgx.Conn) *replica {
	var id string
	if err := db.QueryRow(ctx, `SELECT leader_id FROM tollgate.river_leader`).Scan(&id); err != nil {
		return nil
	}
	for _, r := range f.up() {
		r.mu.Lock()
		pid := r.cmd.Process.Pid
		r.mu.Unlock()
		if strings.Contains(id, "-"+strconv.Itoa(pid)+"-") {
			return r
		}
	}
	return nil
}

func dbConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	db, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return db
}

// TestDeadlinesWithTheLeaderKilled asks questions nobody answers, with
// deadlines 8 s away, then SIGKILLs the replica that is River's leader
// and keeps its leadership from passing to another replica (as a killed
// leader's row holds it for 10–15 s; here until the test ends). Every
// deadline must fire, once: River's leader alone makes scheduled jobs
// available, and deadlines were such jobs (issue 22 item 5: 7–21 s late
// in the trial; never, here). It prints how late they fired.
func TestDeadlinesWithTheLeaderKilled(t *testing.T) {
	n := envInt(t, "TOLLGATE_DEADLINE_THREADS", 12)
	model := newFakeModel(t, func(n int) string { return fmt.Sprintf("date +job-%d-%%s >> %s", n, logFile) }, 0)
	f := newFleet(t, 3, model)
	f.startAll(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	db := dbConn(t, f.direct)
	var leader *replica
	for giveUp := time.Now().Add(30 * time.Second); leader == nil; time.Sleep(100 * time.Millisecond) {
		if leader = f.riverLeader(ctx, db); leader == nil && time.Now().After(giveUp) {
			t.Fatal("no replica became River's leader in 30 s")
		}
	}
	jobs := f.newJobs(n, leave)
	f.postJobs(ctx, t, jobs)
	asked := f.waitQuestions(ctx, t, jobs)
	first := time.Time{}
	for _, q := range asked {
		if first.IsZero() || q.Deadline.Before(first) {
			first = q.Deadline.Time
		}
	}
	killed := time.Now()
	leader.kill()
	held := "held"
	if os.Getenv("TOLLGATE_DEADLINE_HOLD") == "0" {
		held = "not held: it expires as a killed leader's does, 10–15 s after"
	} else if _, err := db.Exec(ctx, `UPDATE tollgate.river_leader SET expires_at = now() + interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v, River's leader, killed %v before the first deadline; its leadership %s", leader, first.Sub(killed).Round(time.Millisecond), held)
	f.waitIdle(ctx, t, time.Minute+time.Until(first))
	var late []time.Duration
	for _, j := range jobs {
		var q apiQuestion
		if err := f.get(ctx, "/v1/questions/"+j.thread+"/"+j.questionID(), &q); err != nil {
			t.Fatal(err)
		}
		events, err := f.threadEvents(ctx, j.thread)
		if err != nil {
			t.Fatal(err)
		}
		resolutions := 0
		for _, e := range events {
			if e.Type == "question_resolved" {
				resolutions++
			}
		}
		if q.Status != "timed_out" || q.AnsweredBy != "timeout" || resolutions != 1 {
			t.Errorf("%s: question %s by %q, %d question_resolved entries: want timed out once", j.thread, q.Status, q.AnsweredBy, resolutions)
			continue
		}
		late = append(late, q.ResolvedAt.Sub(q.Deadline.Time))
	}
	if lines, bad, _ := readLog(filepath.Join(f.work, logFile)); len(lines)+len(bad) > 0 {
		t.Errorf("commands nobody approved ran: %d lines in the log", len(lines)+len(bad))
	}
	t.Logf("deadlines fired after their time, River's leader killed (%d): %s", len(late), quantiles(late))
}

// TestOutage cuts the replicas' connections to the database for a second
// (a proxy between them drops every connection and refuses new ones)
// while the commands they were approved run (each takes half a second),
// and checks that every command that ran has its result — not "outcome
// unknown" — and that no run stopped with an error (issue 22 item 6: 15
// unknown and 23 stopped of 60 in the trial). Commands whose claim the
// outage cut off before they ran are printed.
func TestOutage(t *testing.T) {
	perReplica := envInt(t, "TOLLGATE_OUTAGE_THREADS", 20)
	model := newFakeModel(t, func(n int) string { return jobCommand(n, false) }, 0)
	f := newFleet(t, 3, model)
	proxy, through := pgtest.NewProxy(t, f.store)
	f.store = through
	f.startAll(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	jobs := f.newJobs(3*perReplica, approve)
	f.postJobs(ctx, t, jobs)
	f.waitQuestions(ctx, t, jobs)

	// The answers, 8 at once through random replicas; the cut once a
	// third of the commands have started, for a second.
	var mu sync.Mutex
	var cutAt time.Time
	cut := make(chan struct{})
	go func() {
		for {
			lines, _, _ := readLog(filepath.Join(f.work, logFile))
			if len(lines) >= len(jobs)/3 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		mu.Lock()
		cutAt = time.Now()
		mu.Unlock()
		proxy.Cut()
		time.Sleep(time.Second)
		proxy.Restore()
		close(cut)
	}()
	pick := func(n int) int { return int(time.Now().UnixNano() % int64(n)) }
	began := time.Now()
	if err := parallel(8, jobs, func(j *job) error { return answer(ctx, f, j, pick) }); err != nil {
		t.Fatal(err)
	}
	<-cut
	f.waitIdle(ctx, t, 3*time.Minute)
	rep := check(ctx, t, f, jobs, time.Time{})
	ran := map[string]bool{}
	lines, _, _ := readLog(filepath.Join(f.work, logFile))
	for _, l := range lines {
		ran[fmt.Sprintf("job-%d", l.n)] = true
	}
	unknownRan, unknownNotRun := 0, 0
	for _, s := range rep.cutOff {
		name, _, _ := strings.Cut(s, " ")
		if ran[name] {
			unknownRan++
		} else {
			unknownNotRun++
		}
	}
	mu.Lock()
	after := cutAt.Sub(began).Round(time.Millisecond)
	mu.Unlock()
	t.Logf("database cut for 1 s, %v after the answers began; %d commands ran, %d of them reported \"outcome unknown\" (and %d that never ran); %d runs stopped with an error",
		after, len(lines), unknownRan, unknownNotRun, len(rep.failedRuns))
	// A model's answer whose write the outage cut off is asked for again
	// (nothing of it had run): counted, not failed.
	t.Logf("model calls made again: %d", len(rep.dupForbidden))
	if unknownRan > 0 {
		t.Errorf("%d commands that ran to their end were reported \"outcome unknown\": their results were not kept across the outage", unknownRan)
	}
	rep.fail(t, rep.kinds(false), false)
}

// readyz reads a replica's /readyz.
func (r *replica) readyz(ctx context.Context) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base()+"/readyz", nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestReplicasWithTwoPolicies starts two replicas with different policy
// files (one comment apart) and checks that each says so on /readyz, that
// a decision's audit entry names the policy that made it, and that a
// replica started with --require-same-policy beside them refuses to
// start, saying why (issue 22 item 7: a blocking replica blocked calls a
// person had approved, a lenient one allowed 10 of 10, unseen).
func TestReplicasWithTwoPolicies(t *testing.T) {
	model := newFakeModel(t, func(n int) string { return jobCommand(n, false) }, 0)
	f := newFleet(t, 2, model)
	other := filepath.Join(filepath.Dir(f.policy), "other.yaml")
	otherSrc := policyYAML + "# the same rules, another file\n"
	if err := os.WriteFile(other, []byte(otherSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	f.replicas[1].policy = other
	f.startAll(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mine, theirs := policy.Digest([]byte(policyYAML)), policy.Digest([]byte(otherSrc))
	for i, r := range f.replicas {
		want := []string{theirs, mine}[i]
		for giveUp := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			code, body, err := r.readyz(ctx)
			if err == nil && code == http.StatusOK && strings.Contains(body, "warning:") && strings.Contains(body, want) {
				t.Logf("%v /readyz: %s", r, strings.TrimSpace(body))
				break
			}
			if time.Now().After(giveUp) {
				t.Fatalf("%v /readyz after 30 s: %d %q %v: want a warning naming the other replica's policy %s", r, code, body, err, want)
			}
		}
	}

	// A decision names its policy: the question of a job asked on
	// replica 1 (policy "mine").
	jobs := f.newJobs(1, approve)
	f.postJobs(ctx, t, jobs)
	f.waitQuestions(ctx, t, jobs)
	events, err := f.threadEvents(ctx, jobs[0].thread)
	if err != nil {
		t.Fatal(err)
	}
	named := false
	for _, e := range events {
		if e.Type == "question_asked" {
			named = strings.Contains(string(e.Data), `"policy_digest":"`+mine+`"`)
		}
	}
	if !named {
		t.Errorf("the question_asked entry does not name replica 1's policy %s: %v", mine, events)
	}

	// A third replica that requires one policy.
	third := &replica{f: f, n: 3, addr: freeAddr(t), policy: other, args: []string{"--require-same-policy"}}
	f.replicas = append(f.replicas, third)
	err = third.start()
	if err == nil {
		t.Fatal("a replica with --require-same-policy started beside one with another policy")
	}
	logs, _ := filepath.Glob(filepath.Join(f.logs, "replica3.*.log"))
	var said []byte
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		said = append(said, b...)
	}
	if !strings.Contains(string(said), "different policies") || !strings.Contains(string(said), mine) {
		t.Errorf("the refusing replica's output does not say why (different policies, naming %s): %s", mine, said)
	}
}
