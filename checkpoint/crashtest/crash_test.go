package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

const threadsPerRound = 6

// kills is how many times each store's child is killed:
// TOLLGATE_CRASH_KILLS, else 25 (5 with -short).
func kills() int {
	if n, err := strconv.Atoi(os.Getenv("TOLLGATE_CRASH_KILLS")); err == nil && n >= 0 {
		return n
	}
	if testing.Short() {
		return 5
	}
	return 25
}

// coverageFrom is the number of kills from which the test requires every
// phase and every kind of crash to have happened (below, a smoke run only
// logs what it saw).
const coverageFrom = 2 * int(numTargets)

func TestCrash(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		crash(t, childSpec{Store: "sqlite", Path: filepath.Join(t.TempDir(), "tollgate.db")}, kills())
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.Start(t)
		crash(t, childSpec{Store: "postgres", DSN: dsn, Schema: pgtest.Schema(t, dsn)}, kills())
	})
}

// Phases of a thread's transfer (the gated call) in which a kill can leave
// it, as the restarted child finds it.
const (
	phaseStarting  = "1 starting"         // no question yet
	phaseQuestion  = "2 question written" // pending
	phaseAnswered  = "3 answer written"   // resolved, transfer not started
	phaseExecuting = "4 tool executing"   // transfer executing
	phaseResult    = "5 result written"   // transfer's result written, run not ended
	phaseFinished  = "6 finished"         // (not counted)
)

// target is the moment a kill aims at. The kills cycle through them, in
// the order a round goes through them (so that most kills of a round find
// their moment), and every phase is reached whatever the machine's speed.
type target int

const (
	// atNote: as soon as a note has taken effect, while it is executing.
	atNote target = iota
	// atQuestion: as soon as a question of the round is pending, once the
	// child has started.
	atQuestion
	// atAnswer: a question is pending, once the child has started; the
	// parent answers it while the child is down, so the restart finds the
	// answer and no transfer.
	atAnswer
	// atExpiry: the late question is pending; the parent restarts the
	// child only after its deadline, and answers it late first: the
	// answer must be refused, and the restarted child records the
	// timeout.
	atExpiry
	// atTransfer: as soon as a transfer has taken effect (its ledger
	// line), while it is executing.
	atTransfer
	// atResult: as soon as a fetch has taken effect, which is after the
	// transfer's result and before the run's end.
	atResult
	// atRandom: a random moment in the first 200ms after the child
	// started.
	atRandom
	numTargets
)

func (tg target) String() string {
	return [...]string{"note", "question", "answer", "expiry", "transfer", "result", "random"}[tg]
}

// pairRound: every fifth round, from the third, runs two children at
// once on the same threads, so that two processes drive each run and race
// for each claim. They are not killed: they run the round to its end.
func pairRound(round int) bool { return round%5 == 2 }

type crasher struct {
	t     *testing.T
	spec  childSpec
	store checkpoint.Store
	rev   *reviewer
	// ledger and signals follow the files the children append to.
	ledger, signals *tail

	byPhase  map[string]int
	byTarget map[target]int
	// expiredWhileDown counts late questions whose deadline passed while
	// no child ran, and whose late answer was refused.
	expiredWhileDown int
	children         int // started, naming their database sessions
	// sessionWaits counts the kills after which a child's server sessions
	// outlived it (waitSessionsGone).
	sessionWaits int
}

type child struct {
	cmd    *exec.Cmd
	out    *bytes.Buffer
	exited chan error
	done   bool
	// appName is the application_name of the child's PostgreSQL sessions
	// (PGAPPNAME), by which its parent finds them after a SIGKILL.
	appName string
}

func crash(t *testing.T, spec childSpec, kills int) {
	dir := t.TempDir()
	spec.Ledger, spec.Signals = filepath.Join(dir, "ledger"), filepath.Join(dir, "signals")
	spec.Threads = threadsPerRound
	store := openStore(t, spec)
	defer store.Close()

	// The reviewer answers every pending question after a delay that
	// depends on its thread (see kind), whether a child is alive or not.
	rev := &reviewer{store: store, signals: spec.Signals, qs: map[string]*review{}}
	ctx, stopReviewing := context.WithCancel(t.Context())
	var reviewing sync.WaitGroup
	reviewing.Go(func() { rev.run(ctx, t) })
	defer func() { stopReviewing(); reviewing.Wait() }()

	c := &crasher{t: t, spec: spec, store: store, rev: rev, ledger: &tail{path: spec.Ledger}, signals: &tail{path: spec.Signals},
		byPhase: map[string]int{}, byTarget: map[target]int{}}
	start := time.Now()
	round, killed, runs, pairs := 0, 0, 0, 0
	for {
		if runs > 20*kills+100 {
			t.Fatalf("no end after %d child runs", runs)
		}
		spec.Round, spec.Pair = round, pairRound(round)
		c.spec = spec
		children := []*child{c.start(spec)}
		if spec.Pair {
			follower := spec
			follower.Follower = true
			children = append(children, c.start(follower))
			pairs++
		}
		runs++
		if killed < kills && !spec.Pair {
			if c.killAt(children, target(killed%int(numTargets))) {
				killed++
			}
		} else {
			c.waitAll(children)
		}
		if !roundDone(t, store, round) {
			continue
		}
		if killed >= kills && (round >= 2 || kills == 0) { // round 2 is the first pair
			break
		}
		round++
	}
	stopReviewing()
	reviewing.Wait()
	if c.sessionWaits > 0 {
		t.Logf("%s: after %d of %d kills the child's server sessions outlived it, and the next child waited for them", spec.Store, c.sessionWaits, killed)
	}

	st := check(t, store, spec, rev, round)
	st.races = readRaces(t, spec.Signals)
	var phases, targets []string
	for _, p := range slices.Sorted(maps.Keys(c.byPhase)) {
		phases = append(phases, fmt.Sprintf("%s: %d", p, c.byPhase[p]))
	}
	for tg := range numTargets {
		targets = append(targets, fmt.Sprintf("%s: %d", tg, c.byTarget[tg]))
	}
	t.Logf("%s: %d SIGKILLs over %d child runs (%d of them pairs) in %v; %d rounds × %d threads\n"+
		"  kills by target: %s\n"+
		"  kills that left a thread in each phase: %s\n"+
		"  transfer: %d approved and run once, %d outcome unknown after a kill (run %d times, never twice), %d denied, %d timed out (never run)\n"+
		"  note (not idempotent): %d run once, %d outcome unknown; fetch (idempotent): %d executions for %d calls\n"+
		"  deadlines: %d timed out, %d late answers refused on %d questions (%d of them while no child ran)\n"+
		"  questions the reviewer never saw pending (it was held up): %d\n"+
		"  pairs: races lost %v",
		spec.Store, killed, runs, pairs, time.Since(start).Round(time.Millisecond), round+1, threadsPerRound,
		strings.Join(targets, ", "), strings.Join(phases, ", "),
		st.transferRan, st.transferUnknown, st.transferUnknownRan, st.denied, st.timedOut,
		st.noteRan, st.noteUnknown, st.fetchRuns, st.fetchCalls,
		st.timedOut, st.lateRefusals, st.lateRefused, c.expiredWhileDown, st.unseen, st.races)

	if kills < coverageFrom {
		return
	}
	// Coverage: the crashes this test is about did happen.
	for _, p := range []string{phaseQuestion, phaseAnswered, phaseExecuting, phaseResult} {
		if c.byPhase[p] == 0 {
			t.Errorf("no kill left a thread in phase %q", p)
		}
	}
	for _, c := range []struct {
		what string
		n    int
	}{
		{"transfers with an unknown outcome (killed while executing)", st.transferUnknown},
		{"notes with an unknown outcome (killed while executing)", st.noteUnknown},
		{"questions timed out", st.timedOut},
		{"late answers refused", st.lateRefused},
		{"deadlines passed while no child ran", c.expiredWhileDown},
		{"claims lost by a child of a pair", st.races["lost-claim"]},
	} {
		if c.n == 0 {
			t.Errorf("no %s in %d kills", c.what, kills)
		}
	}
}

// start runs this test binary as a child, for one round.
func (c *crasher) start(spec childSpec) *child {
	c.t.Helper()
	raw, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	// Under the race detector a process sleeps 1s before it exits (to let
	// reports of racing goroutines in): not for children that are done.
	c.children++
	appName := fmt.Sprintf("tollgate-crashchild-%d-%d", os.Getpid(), c.children)
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw), "PGAPPNAME="+appName,
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	ch := &child{cmd: cmd, out: &bytes.Buffer{}, exited: make(chan error, 1), appName: appName}
	cmd.Stdout, cmd.Stderr = ch.out, ch.out
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { ch.exited <- cmd.Wait() }()
	return ch
}

// exited reports whether every child has exited, failing the test if one
// failed.
func (c *crasher) exited(children []*child) bool {
	all := true
	for _, ch := range children {
		if ch.done {
			continue
		}
		select {
		case err := <-ch.exited:
			ch.done = true
			if err != nil {
				c.t.Fatalf("child (round %d) failed: %v\n%s", c.spec.Round, err, ch.out)
			}
		default:
			all = false
		}
	}
	return all
}

func (c *crasher) waitAll(children []*child) {
	limit := time.Now().Add(2 * time.Minute)
	for !c.exited(children) {
		if time.Now().After(limit) {
			for _, ch := range children {
				ch.cmd.Process.Kill()
				c.t.Errorf("child output:\n%s", ch.out)
			}
			c.t.Fatalf("round %d: a child still runs after 2 minutes", c.spec.Round)
		}
		c.ledger.next() // keep up with the files
		c.signals.next()
		time.Sleep(5 * time.Millisecond)
	}
}

// waitSessionsGone waits until the PostgreSQL server has ended a killed
// child's sessions. A process dies at once, but a statement its server
// session was running goes on to its end: a commit sent just before the
// SIGKILL can land after the next child has read the thread, which then
// meets a version and a claim it did not expect ("claimed by another
// driver") and counts it a failure outside pair rounds. A restarted
// process in production meets such a late commit as a lost race, which
// the compare-and-set refuses; the harness waits so that each child sees
// a settled store, as its checks assume. The child's LISTEN connection
// names itself tollgate-listener whatever PGAPPNAME says: it writes
// nothing, and is not waited for.
func (c *crasher) waitSessionsGone(ch *child) {
	pg, ok := c.store.(interface{ Pool() *pgxpool.Pool })
	if !ok {
		return
	}
	limit := time.Now().Add(30 * time.Second)
	for looks := 0; ; looks++ {
		var n int
		err := pg.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, ch.appName).Scan(&n)
		if err != nil {
			c.t.Fatalf("reading the killed child's sessions: %v", err)
		}
		if n == 0 {
			return
		}
		if looks == 0 {
			c.sessionWaits++
		}
		if time.Now().After(limit) {
			c.t.Fatalf("round %d: %d sessions of the killed child %s still open after 30 s", c.spec.Round, n, ch.appName)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// killAt watches the round until tg's moment and kills every child then.
// It reports false if the children ended first.
func (c *crasher) killAt(children []*child, tg target) bool {
	prefix := fmt.Sprintf("r%d-", c.spec.Round)
	var started time.Time // when the child said it started
	randomly := time.Duration(rand.IntN(200)) * time.Millisecond
	var lateQ *checkpoint.Question
	for {
		if c.exited(children) {
			return false
		}
		hit := false
		for _, f := range c.ledger.next() {
			if len(f) == 3 && strings.HasPrefix(f[1], prefix) && (tg == atTransfer && f[0] == toolTransfer ||
				tg == atResult && f[0] == toolFetch || tg == atNote && f[0] == toolNote) {
				hit = true
			}
		}
		for _, f := range c.signals.next() {
			if len(f) == 2 && f[1] == "started" && started.IsZero() {
				started = time.Now()
			}
		}
		switch {
		case tg == atRandom:
			// From the child's start: under the race detector, starting
			// alone takes a good part of a second.
			hit = !started.IsZero() && time.Since(started) >= randomly
		case tg == atQuestion && !started.IsZero(), tg == atAnswer && !started.IsZero(), tg == atExpiry:
			qs, _, err := c.store.ListQuestions(context.Background(), checkpoint.QuestionFilter{Status: checkpoint.QuestionPending})
			if err != nil {
				c.t.Fatal(err)
			}
			for _, q := range qs {
				c.rev.observe(q)
				if strings.HasPrefix(q.ThreadID, prefix) && (tg != atExpiry || threadKind(q.ThreadID) == late) {
					hit, lateQ = true, q
					break
				}
			}
		}
		if hit {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	for _, ch := range children {
		if !ch.done {
			ch.cmd.Process.Kill()
			<-ch.exited
			ch.done = true
			c.waitSessionsGone(ch)
		}
	}
	c.byTarget[tg]++

	switch tg {
	case atAnswer:
		// Answered while the child is down (as a reviewer may be).
		for _, thread := range threadNames(c.spec.Round, threadsPerRound) {
			q, err := c.store.GetQuestion(context.Background(), thread, questionID)
			if err == nil && q.Status == checkpoint.QuestionPending && threadKind(thread) != late {
				c.rev.answer(context.Background(), c.t, q)
			}
		}
	case atExpiry:
		// The deadline passes while no child runs: nothing records the
		// timeout (the reviewer answers the late question only after its
		// deadline), and a late answer is refused. Unless the child
		// recorded the timeout just before it was killed.
		q, err := c.store.GetQuestion(context.Background(), lateQ.ThreadID, lateQ.ID)
		if err != nil {
			c.t.Fatal(err)
		}
		if q.Status != checkpoint.QuestionPending {
			break
		}
		time.Sleep(time.Until(q.Deadline) + 20*time.Millisecond)
		if err := c.rev.answer(context.Background(), c.t, q); errors.Is(err, checkpoint.ErrExpired) {
			c.expiredWhileDown++
		} else {
			c.t.Errorf("%s: answer %v after its deadline, with no child running: %v, want ErrExpired",
				q.ThreadID, time.Since(q.Deadline).Round(time.Millisecond), err)
		}
	}
	for _, p := range phasesNow(c.t, c.store, c.spec.Round) {
		c.byPhase[p]++
	}
	// After every kill, the audit log matches the state the kill left.
	// (A killed child's last transaction may still be committing in the
	// database, which finishes what the child sent: a mismatch is looked
	// at again for a moment before it counts.)
	c.rev.hold.Lock()
	for _, thread := range threadNames(c.spec.Round, threadsPerRound) {
		var mismatch string
		for try := 0; try < 20; try++ {
			if mismatch = auditMismatch(c.t, c.store, thread); mismatch == "" {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if mismatch != "" {
			c.t.Error(mismatch)
		}
	}
	c.rev.hold.Unlock()
	return true
}

// checkAudit checks that the thread's audit log records exactly what its
// state shows, as it must when every entry commits with the change it
// records: a run_started for the run, a question_asked for the question
// that exists, a question_resolved (with its status) for a resolved one,
// one tool_result for each call that has its result, and a run_finished
// (without error) when the run has ended; nothing else of these.
func checkAudit(t *testing.T, store checkpoint.Store, thread string) {
	t.Helper()
	if m := auditMismatch(t, store, thread); m != "" {
		t.Error(m)
	}
}

// auditMismatch is checkAudit's finding, "" when the log matches.
func auditMismatch(t *testing.T, store checkpoint.Store, thread string) string {
	t.Helper()
	s, err := load(t, store, thread)
	if errors.Is(err, checkpoint.ErrNotFound) {
		s = threadState{}
	} else if err != nil {
		t.Fatal(err)
	}
	evs, err := store.ListEvents(context.Background(), thread, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, e := range evs {
		var d struct {
			CallID string `json:"call_id"`
			Status string `json:"status"`
			Error  string `json:"error"`
		}
		_ = json.Unmarshal(e.Data, &d)
		switch e.Type {
		case "run_started", "question_asked":
			got = append(got, e.Type)
		case "question_resolved":
			got = append(got, e.Type+":"+d.Status)
		case "tool_result":
			got = append(got, e.Type+":"+d.CallID)
		case "run_finished":
			if d.Error == "" { // a process that stopped driving the run says so with an error
				got = append(got, e.Type)
			}
		}
	}
	if s.thread != nil {
		want = append(want, "run_started")
	}
	if q := s.question; q != nil {
		want = append(want, "question_asked")
		if q.Status != checkpoint.QuestionPending {
			want = append(want, "question_resolved:"+string(q.Status))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.calls)) {
		if s.calls[id].State == checkpoint.ToolCallDone {
			want = append(want, "tool_result:"+id)
		}
	}
	if s.thread != nil && s.thread.Status == checkpoint.ThreadIdle {
		want = append(want, "run_finished")
	}
	slices.Sort(got)
	slices.Sort(want)
	var round int
	fmt.Sscanf(thread, "r%d-", &round)
	if pairRound(round) {
		// Two children drive the run at once: a call that needs no claim
		// (a blocked one, an idempotent one found executing) can have its
		// result written by both, each write with its entry. (These
		// children drive the agent with no coordinator; one driver per
		// run is package cluster's lease, tested with real replicas in
		// cluster/replicatest.) The entries still match writes.
		got = slices.Compact(got)
	}
	if !slices.Equal(got, want) {
		return fmt.Sprintf("%s: the audit log does not match the state (%s):\n  log   %v\n  state %v", thread, s.describe(), got, want)
	}
	return ""
}

// tail reads the lines appended to a file since the last call, as fields.
type tail struct {
	path string
	off  int64
}

func (lt *tail) next() [][]string {
	f, err := os.Open(lt.path)
	if err != nil {
		return nil
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n, _ := f.ReadAt(buf, lt.off)
	buf = buf[:n]
	// Only whole lines: a line may be read while it is being written.
	end := bytes.LastIndexByte(buf, '\n')
	if end < 0 {
		return nil
	}
	lt.off += int64(end + 1)
	var out [][]string
	for line := range strings.Lines(string(buf[:end+1])) {
		out = append(out, strings.Fields(line))
	}
	return out
}

// reviewer answers questions, as a person would, and remembers what it
// saw: each question's creation time when first seen, and the answer it
// won. A store that loses a question (the child then asks it again, with a
// new creation time) or an answer shows at the end.
type reviewer struct {
	store   checkpoint.Store
	signals string // the signals file, where children of pairs say they ask

	mu sync.Mutex
	qs map[string]*review // by thread/question

	// hold is held (shared) across each answer's write, and taken alone
	// by an audit check, which reads the state and the log in several
	// reads and must see both as of one moment.
	hold sync.RWMutex
}

type review struct {
	created time.Time // CreatedAt when first seen
	due     time.Time
	won     *checkpoint.Question // the resolution ResolveQuestion returned
	refused int                  // late answers refused (ErrExpired)
}

// observe records q's creation time the first time it is seen, and when
// the reviewer means to answer it.
func (r *reviewer) observe(q *checkpoint.Question) *review {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := q.ThreadID + "/" + q.ID
	rv := r.qs[key]
	if rv == nil {
		rv = &review{created: q.CreatedAt}
		var round, i int
		fmt.Sscanf(q.ThreadID, "r%d-t%d", &round, &i)
		switch {
		case threadKind(q.ThreadID) == late:
			rv.due = q.Deadline.Add(time.Duration(10+rand.IntN(50)) * time.Millisecond)
		case pairRound(round):
			// Once both children of the pair wait on it (see run), so
			// that both race for the transfer's claim when it is
			// answered; in case one never does, after a while.
			rv.due = time.Now().Add(5 * time.Second)
		default:
			rv.due = time.Now().Add(time.Duration(rand.IntN(40)) * time.Millisecond)
		}
		r.qs[key] = rv
	}
	return rv
}

func (r *reviewer) get(thread, id string) *review {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.qs[thread+"/"+id]
}

// answer answers q as its thread's kind says, and records the outcome.
func (r *reviewer) answer(ctx context.Context, t *testing.T, q *checkpoint.Question) error {
	rv := r.observe(q)
	k := threadKind(q.ThreadID)
	// As hitl's channel answers: the answer and its audit entry in one
	// write. (hold keeps it out of an audit check's reads.)
	res := checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: k.answer(), By: "reviewer", At: time.Now()}
	r.hold.RLock()
	c, err := r.store.Commit(ctx, &checkpoint.Batch{
		Resolve: &checkpoint.Resolve{ThreadID: q.ThreadID, ID: q.ID, Resolution: res},
		Events:  []*checkpoint.Event{checkpoint.ResolutionEvent(q, res)},
	})
	r.hold.RUnlock()
	var got *checkpoint.Question
	if err == nil {
		got = c.Resolved
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		if rv.won != nil {
			t.Errorf("%s/%s: the reviewer won a second answer (the first at %v)", q.ThreadID, q.ID, rv.won.ResolvedAt)
		}
		rv.won = got
	case errors.Is(err, checkpoint.ErrExpired):
		if q.Deadline.IsZero() || time.Now().Before(q.Deadline) {
			t.Errorf("%s/%s: answer refused as late, deadline %v: %v", q.ThreadID, q.ID, q.Deadline, err)
		}
		rv.refused++
	case errors.Is(err, checkpoint.ErrConflict) || ctx.Err() != nil:
	default:
		t.Errorf("reviewer: answer %s/%s: %v", q.ThreadID, q.ID, err)
	}
	return err
}

func (r *reviewer) run(ctx context.Context, t *testing.T) {
	for ctx.Err() == nil {
		qs, _, err := r.store.ListQuestions(ctx, checkpoint.QuestionFilter{Status: checkpoint.QuestionPending})
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("reviewer: %v", err)
			}
			return
		}
		var asking map[string]int
		for _, q := range qs {
			rv := r.observe(q)
			var round, i int
			fmt.Sscanf(q.ThreadID, "r%d-t%d", &round, &i)
			if pairRound(round) && threadKind(q.ThreadID) != late {
				if asking == nil {
					asking = readAsking(t, r.signals)
				}
				if asking[q.ThreadID] == 2 {
					r.mu.Lock()
					if soon := time.Now().Add(time.Duration(rand.IntN(20)) * time.Millisecond); soon.Before(rv.due) {
						rv.due = soon
					}
					r.mu.Unlock()
				}
			}
			if !time.Now().Before(rv.due) {
				r.answer(ctx, t, q)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type threadState struct {
	thread   *checkpoint.Thread
	msgs     []agent.Message
	question *checkpoint.Question
	calls    map[string]*checkpoint.ToolCall
}

func load(t *testing.T, store checkpoint.Store, thread string) (threadState, error) {
	ctx := context.Background()
	var s threadState
	th, err := store.LoadThread(ctx, thread)
	if err != nil {
		return s, err
	}
	s.thread = th
	if len(th.Messages) > 0 {
		if err := json.Unmarshal(th.Messages, &s.msgs); err != nil {
			t.Fatalf("%s: messages: %v", thread, err)
		}
	}
	if q, err := store.GetQuestion(ctx, thread, questionID); err == nil {
		s.question = q
	} else if !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatal(err)
	}
	calls, err := store.ListToolCalls(ctx, thread, th.RunID)
	if err != nil {
		t.Fatal(err)
	}
	s.calls = map[string]*checkpoint.ToolCall{}
	for _, c := range calls {
		s.calls[c.CallID] = c
	}
	return s, nil
}

func (s threadState) finished() bool {
	if s.thread == nil || s.thread.Status != checkpoint.ThreadIdle || len(s.msgs) == 0 {
		return false
	}
	last := s.msgs[len(s.msgs)-1]
	return last.Role == agent.RoleAssistant && last.StopReason == agent.StopEndTurn
}

// describe sums up the thread's messages, for a failure's report.
func (s threadState) describe() string {
	if s.thread == nil {
		return "no thread"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "run %s, %s; messages:", s.thread.RunID, s.thread.Status)
	for _, m := range s.msgs {
		fmt.Fprintf(&b, " %s(%s", m.Role, m.RunID)
		if m.Result != nil {
			fmt.Fprintf(&b, " %s %q", m.Result.CallID, m.Result.Content)
		}
		b.WriteString(")")
	}
	return b.String()
}

func (s threadState) phase() string {
	c1 := s.calls["c1"]
	switch {
	case s.finished():
		return phaseFinished
	case s.question == nil:
		return phaseStarting
	case s.question.Status == checkpoint.QuestionPending:
		return phaseQuestion
	case c1 == nil:
		return phaseAnswered
	case c1.State == checkpoint.ToolCallExecuting:
		return phaseExecuting
	default:
		return phaseResult
	}
}

// phasesNow lists the phases the round's unfinished threads are in.
func phasesNow(t *testing.T, store checkpoint.Store, round int) []string {
	seen := map[string]bool{}
	for _, thread := range threadNames(round, threadsPerRound) {
		s, err := load(t, store, thread)
		if errors.Is(err, checkpoint.ErrNotFound) {
			seen[phaseStarting] = true
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if p := s.phase(); p != phaseFinished {
			seen[p] = true
		}
	}
	return slices.Collect(maps.Keys(seen))
}

func roundDone(t *testing.T, store checkpoint.Store, round int) bool {
	for _, thread := range threadNames(round, threadsPerRound) {
		s, err := load(t, store, thread)
		if err != nil || !s.finished() {
			return false
		}
	}
	return true
}

// execution is one ledger line: when a tool's side effect happened.
type execution struct {
	at time.Time
}

// wholeRecord is a ledger line as ledger.record writes it.
var wholeRecord = regexp.MustCompile(`^[a-z]+ \S+ [0-9]+$`)

// readLedger returns the executions by tool and idempotency key.
func readLedger(t *testing.T, path string) map[string]map[string][]execution {
	raw, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	out := map[string]map[string][]execution{}
	for line := range strings.Lines(string(raw)) {
		line = strings.TrimSuffix(line, "\n")
		// A SIGKILL can cut a write(2) where the line crosses a page of
		// the file (the kernel checks for a fatal signal between pages):
		// a torn record, then the next record on the same line. Its side
		// effect happened: counted, as an execution of the next record's
		// call when it is the start of that record (the restarted child
		// ran the call again), which the checks of at most once see.
		torn := false
		if !wholeRecord.MatchString(line) {
			for i := 1; i < len(line); i++ {
				if wholeRecord.MatchString(line[i:]) && strings.HasPrefix(line[i:], line[:i]) {
					line, torn = line[i:], true
					break
				}
			}
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("ledger line %q", line)
		}
		ns, _ := strconv.ParseInt(f[2], 10, 64)
		if out[f[0]] == nil {
			out[f[0]] = map[string][]execution{}
		}
		if torn {
			out[f[0]][f[1]] = append(out[f[0]][f[1]], execution{time.Unix(0, ns)})
		}
		out[f[0]][f[1]] = append(out[f[0]][f[1]], execution{time.Unix(0, ns)})
	}
	return out
}

// readRaces counts the races children of pairs lost, by kind.
func readRaces(t *testing.T, path string) map[string]int {
	out := map[string]int{}
	for _, f := range readSignals(t, path) {
		if strings.HasPrefix(f[1], "lost-") {
			out[f[1]]++
		}
	}
	return out
}

// readAsking returns, by thread, how many children of a pair (0 to 2)
// have said they ask its question.
func readAsking(t *testing.T, path string) map[string]int {
	roles := map[string]map[string]bool{}
	for _, f := range readSignals(t, path) {
		if strings.HasPrefix(f[1], "asking-") {
			if roles[f[0]] == nil {
				roles[f[0]] = map[string]bool{}
			}
			roles[f[0]][f[1]] = true
		}
	}
	out := map[string]int{}
	for thread, r := range roles {
		out[thread] = len(r)
	}
	return out
}

func readSignals(t *testing.T, path string) [][2]string {
	raw, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Error(err)
	}
	var out [][2]string
	for line := range strings.Lines(string(raw)) {
		if f := strings.Fields(line); len(f) == 2 {
			out = append(out, [2]string{f[0], f[1]})
		}
	}
	return out
}

type stats struct {
	transferRan, transferUnknown, transferUnknownRan, denied int
	noteRan, noteUnknown                                     int
	fetchRuns, fetchCalls                                    int
	timedOut, lateRefused, lateRefusals, unseen              int
	races                                                    map[string]int
}

// check verifies the invariants over every thread of rounds 0..last.
func check(t *testing.T, store checkpoint.Store, spec childSpec, rev *reviewer, last int) stats {
	var st stats
	ledger := readLedger(t, spec.Ledger)
	known := map[string]bool{}
	descr := map[string]string{}
	for round := 0; round <= last; round++ {
		for _, thread := range threadNames(round, threadsPerRound) {
			s, err := load(t, store, thread)
			if err != nil {
				t.Errorf("%s: %v", thread, err)
				continue
			}
			descr[thread] = s.describe()
			checkAudit(t, store, thread)
			// Every thread reaches its end.
			if !s.finished() {
				t.Errorf("%s: not finished: status %s, %d messages", thread, s.thread.Status, len(s.msgs))
				continue
			}
			// No question lost or asked twice.
			qs, _, err := store.ListQuestions(context.Background(), checkpoint.QuestionFilter{ThreadID: thread})
			if err != nil {
				t.Fatal(err)
			}
			if len(qs) != 1 || qs[0].ID != questionID {
				t.Errorf("%s: %d questions, want exactly %s", thread, len(qs), questionID)
				continue
			}
			for _, c := range []string{"c1", "c2", "c3"} {
				known[thread+"/"+s.thread.RunID+"/"+c] = true
			}
			q := qs[0]
			if !checkQuestion(t, q, rev.get(thread, q.ID)) {
				t.Logf("%s: %s", thread, s.describe())
				continue
			}
			switch rv := rev.get(thread, q.ID); {
			case rv == nil:
				st.unseen++
			case rv.refused > 0:
				st.lateRefused++
				st.lateRefusals += rv.refused
			}
			if q.Status == checkpoint.QuestionTimedOut {
				st.timedOut++
			}
			approved := q.Status == checkpoint.QuestionAnswered && string(q.Answer) == `{"approve":true}`

			results := map[string]*agent.ToolResult{}
			for _, m := range s.msgs {
				if m.Role == agent.RoleTool && m.Result != nil {
					if results[m.Result.CallID] != nil {
						t.Errorf("%s: two results for %s", thread, m.Result.CallID)
					}
					results[m.Result.CallID] = m.Result
				}
			}
			key := func(call string) string { return thread + "/" + s.thread.RunID + "/" + call }
			complete := true
			for _, c := range []string{"c1", "c2", "c3"} {
				if results[c] == nil {
					t.Errorf("%s: no result for %s", thread, c)
					complete = false
				}
			}
			if !complete {
				continue
			}
			unknown := func(r *agent.ToolResult) bool { return r.IsError && r.Details["outcome"] == "unknown" }

			// transfer: never without an approval, never twice, and the
			// result tells the truth.
			runs := ledger[toolTransfer][key("c1")]
			r := results["c1"]
			switch {
			case len(runs) > 1:
				t.Errorf("%s: transfer ran %d times", thread, len(runs))
			case len(runs) == 1 && !approved:
				t.Errorf("%s: transfer ran without an approval (question %s, answer %s)", thread, q.Status, q.Answer)
			case len(runs) == 1 && runs[0].at.Before(q.ResolvedAt):
				t.Errorf("%s: transfer ran at %v, before its approval at %v", thread, runs[0].at, q.ResolvedAt)
			case !approved:
				if q.Status != checkpoint.QuestionTimedOut {
					st.denied++
				}
				if !r.IsError {
					t.Errorf("%s: transfer not approved (%s) has result %+v", thread, q.Status, r)
				}
			case unknown(r):
				st.transferUnknown++
				st.transferUnknownRan += len(runs)
			case r.IsError || r.Content != "transferred" || len(runs) != 1:
				t.Errorf("%s: approved transfer: result %+v after %d runs", thread, r, len(runs))
			default:
				st.transferRan++
			}

			// note: never twice; a success means it ran once.
			runs, r = ledger[toolNote][key("c2")], results["c2"]
			switch {
			case len(runs) > 1:
				t.Errorf("%s: note ran %d times", thread, len(runs))
			case unknown(r):
				st.noteUnknown++
			case r.IsError || len(runs) != 1:
				t.Errorf("%s: note: result %+v after %d runs", thread, r, len(runs))
			default:
				st.noteRan++
			}

			// fetch: idempotent, so run again after a crash, always with
			// the same key; it ends with a real result.
			runs, r = ledger[toolFetch][key("c3")], results["c3"]
			st.fetchCalls++
			st.fetchRuns += len(runs)
			if r.IsError || r.Content != "fetched" || len(runs) == 0 {
				t.Errorf("%s: fetch: result %+v after %d runs", thread, r, len(runs))
			}
		}
	}
	// Nothing ran that no thread asked for (a call id from a lost run).
	for tool, byKey := range ledger {
		for k := range byKey {
			if !known[k] {
				thread, _, _ := strings.Cut(k, "/")
				t.Errorf("%s ran for %s, which no finished thread knows; thread %s", tool, k, descr[thread])
			}
		}
	}
	return st
}

// checkQuestion compares the stored question with what the reviewer saw
// of it and what its thread's kind expects.
func checkQuestion(t *testing.T, q *checkpoint.Question, rv *review) bool {
	t.Helper()
	ok := true
	fail := func(format string, args ...any) {
		t.Errorf("%s/%s: "+format, append([]any{q.ThreadID, q.ID}, args...)...)
		ok = false
	}
	// The reviewer sees every question unless it is starved of CPU for
	// longer than a late question is pending; only it answers.
	if rv == nil {
		if q.Status == checkpoint.QuestionAnswered {
			fail("answered by %q, but the reviewer never saw it", q.AnsweredBy)
		}
		return ok
	}
	// Asked once: a question the store lost is asked again, created anew.
	if !q.CreatedAt.Equal(rv.created) {
		fail("stored question created at %v, first seen created at %v: it was lost and asked again", q.CreatedAt, rv.created)
	}
	// The answer that won is the one stored.
	if rv.won != nil && (q.Status != checkpoint.QuestionAnswered || q.AnsweredBy != "reviewer" ||
		!bytes.Equal(q.Answer, rv.won.Answer) || !q.ResolvedAt.Equal(rv.won.ResolvedAt)) {
		fail("stored %s by %q at %v (%s); the reviewer's answer %s won at %v",
			q.Status, q.AnsweredBy, q.ResolvedAt, q.Answer, rv.won.Answer, rv.won.ResolvedAt)
	}
	if q.Status == checkpoint.QuestionAnswered && rv.won == nil {
		fail("answered by %q, but no answer of the reviewer won", q.AnsweredBy)
	}
	k := threadKind(q.ThreadID)
	if got := q.Deadline.Sub(q.CreatedAt); !q.Deadline.IsZero() && got != k.timeout() || q.Deadline.IsZero() != (k.timeout() == 0) {
		fail("deadline %v after creation, want %v", got, k.timeout())
	}
	switch want := k.answer(); {
	case k == late || k == inTime && q.Status == checkpoint.QuestionTimedOut:
		// An in-time question times out only if the reviewer was held up
		// for longer than inTimeTimeout.
		if q.Status != checkpoint.QuestionTimedOut || q.AnsweredBy != "timeout" || q.ResolvedAt.Before(q.Deadline) {
			fail("%s by %q at %v (deadline %v), want timed out", q.Status, q.AnsweredBy, q.ResolvedAt, q.Deadline)
		}
	case q.Status != checkpoint.QuestionAnswered || !bytes.Equal(q.Answer, want):
		fail("%s by %q, answer %s; want answered %s", q.Status, q.AnsweredBy, q.Answer, want)
	case !q.Deadline.IsZero() && !q.ResolvedAt.Before(q.Deadline):
		fail("answered at %v, not before its deadline %v", q.ResolvedAt, q.Deadline)
	}
	return ok
}

// A record a SIGKILL tore (CI: "fetch r34-t3/run_f4d486" then the
// restarted child's whole record on the same line) counts as an
// execution of the call it starts, so a check of at most once sees it.
func TestReadLedgerTornRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger")
	if err := os.WriteFile(path, []byte("transfer t1/r/c1 1\nfetch r34-t3/run_f4d486fetch r34-t3/run_f4d486cc/c3 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := readLedger(t, path)
	if n := len(l["fetch"]["r34-t3/run_f4d486cc/c3"]); n != 2 {
		t.Errorf("fetch ran %d times by the ledger, want 2 (the torn record and the whole one)", n)
	}
	if n := len(l["transfer"]["t1/r/c1"]); n != 1 {
		t.Errorf("transfer ran %d times by the ledger, want 1", n)
	}
}
