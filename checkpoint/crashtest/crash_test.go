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
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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

// Phases a thread can be in when its process is killed.
const (
	phaseStarting  = "1 starting"         // no question yet
	phaseQuestion  = "2 question written" // pending
	phaseAnswered  = "3 answer written"   // answered, transfer not started
	phaseExecuting = "4 tool executing"   // transfer (or another call) executing
	phaseResult    = "5 result written"   // transfer done, run not ended
	phaseFinished  = "6 finished"         // (not counted)
)

func crash(t *testing.T, spec childSpec, kills int) {
	spec.Ledger = filepath.Join(t.TempDir(), "ledger")
	spec.Threads = threadsPerRound
	store := openStore(t, spec)
	defer store.Close()

	// The reviewer: answers every pending question after a random delay,
	// whether the child is alive or not.
	ctx, stopAnswering := context.WithCancel(t.Context())
	var answering sync.WaitGroup
	answering.Go(func() { answerAll(ctx, t, store) })
	defer func() { stopAnswering(); answering.Wait() }()

	start := time.Now()
	round, killed, runs := 0, 0, 0
	byPhase := map[string]int{}
	for {
		if runs > 20*kills+100 {
			t.Fatalf("no end after %d child runs", runs)
		}
		spec.Round = round
		cmd, out, exited := startChild(t, spec)
		runs++
		if killed < kills {
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("child (round %d) failed: %v\n%s", round, err, out)
				}
			case <-time.After(time.Duration(rand.IntN(250)) * time.Millisecond):
				cmd.Process.Kill()
				<-exited
				killed++
				for _, p := range phasesNow(t, store, spec.Round) {
					byPhase[p]++
				}
			}
		} else {
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("child (round %d) failed: %v\n%s", round, err, out)
				}
			case <-time.After(2 * time.Minute):
				cmd.Process.Kill()
				t.Fatalf("child (round %d) still running after 2 minutes\n%s", round, out)
			}
		}
		if !roundDone(t, store, round) {
			continue
		}
		if killed >= kills {
			break
		}
		round++
	}
	stopAnswering()
	answering.Wait()

	st := check(t, store, spec, round)
	var phases []string
	for _, p := range slices.Sorted(maps.Keys(byPhase)) {
		phases = append(phases, fmt.Sprintf("%s: %d", p, byPhase[p]))
	}
	t.Logf("%s: %d SIGKILLs over %d child processes in %v; %d rounds × %d threads\n"+
		"  kills that found a thread in each phase: %s\n"+
		"  transfer: %d approved and run once, %d outcome unknown after a kill (run %d times, never twice), %d denied (never run)\n"+
		"  note (not idempotent): %d run once, %d outcome unknown; fetch (idempotent): %d executions for %d calls",
		spec.Store, killed, runs, time.Since(start).Round(time.Millisecond), round+1, threadsPerRound,
		strings.Join(phases, ", "),
		st.transferRan, st.transferUnknown, st.transferUnknownRan, st.denied,
		st.noteRan, st.noteUnknown, st.fetchRuns, st.fetchCalls)
}

// startChild runs this test binary as the child, for one round.
func startChild(t *testing.T, spec childSpec) (*exec.Cmd, *bytes.Buffer, chan error) {
	t.Helper()
	raw, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return cmd, out, exited
}

func answerAll(ctx context.Context, t *testing.T, store checkpoint.Store) {
	due := map[string]time.Time{}
	for ctx.Err() == nil {
		qs, _, err := store.ListQuestions(ctx, checkpoint.QuestionFilter{Status: checkpoint.QuestionPending})
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("reviewer: %v", err)
			}
			return
		}
		for _, q := range qs {
			key := q.ThreadID + "/" + q.ID
			at, ok := due[key]
			if !ok {
				due[key] = time.Now().Add(time.Duration(rand.IntN(60)) * time.Millisecond)
				continue
			}
			if time.Now().Before(at) {
				continue
			}
			_, err := store.ResolveQuestion(ctx, q.ThreadID, q.ID, checkpoint.Resolution{
				Status: checkpoint.QuestionAnswered,
				Answer: json.RawMessage(fmt.Sprintf(`{"approve":%v}`, !denied(q.ThreadID))),
				By:     "reviewer",
			})
			if err != nil && !errors.Is(err, checkpoint.ErrConflict) && ctx.Err() == nil {
				t.Errorf("reviewer: answer %s: %v", key, err)
			}
		}
		time.Sleep(3 * time.Millisecond)
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
		for _, c := range s.calls {
			if c.State == checkpoint.ToolCallExecuting {
				return phaseExecuting
			}
		}
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

// readLedger returns the executions by tool and idempotency key.
func readLedger(t *testing.T, path string) map[string]map[string][]execution {
	raw, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	out := map[string]map[string][]execution{}
	for line := range strings.Lines(string(raw)) {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("ledger line %q", line)
		}
		ns, _ := strconv.ParseInt(f[2], 10, 64)
		if out[f[0]] == nil {
			out[f[0]] = map[string][]execution{}
		}
		out[f[0]][f[1]] = append(out[f[0]][f[1]], execution{time.Unix(0, ns)})
	}
	return out
}

type stats struct {
	transferRan, transferUnknown, transferUnknownRan, denied int
	noteRan, noteUnknown                                     int
	fetchRuns, fetchCalls                                    int
}

// check verifies the invariants over every thread of rounds 0..last.
func check(t *testing.T, store checkpoint.Store, spec childSpec, last int) stats {
	var st stats
	ledger := readLedger(t, spec.Ledger)
	known := map[string]bool{}
	for round := 0; round <= last; round++ {
		for _, thread := range threadNames(round, threadsPerRound) {
			s, err := load(t, store, thread)
			if err != nil {
				t.Errorf("%s: %v", thread, err)
				continue
			}
			// Every thread reaches its end.
			if !s.finished() {
				t.Errorf("%s: not finished: status %s, %d messages", thread, s.thread.Status, len(s.msgs))
				continue
			}
			// No question lost or asked twice; every one was answered by the reviewer.
			qs, _, err := store.ListQuestions(context.Background(), checkpoint.QuestionFilter{ThreadID: thread})
			if err != nil {
				t.Fatal(err)
			}
			if len(qs) != 1 || qs[0].ID != questionID {
				t.Errorf("%s: %d questions, want exactly %s", thread, len(qs), questionID)
				continue
			}
			q := qs[0]
			approved := q.Status == checkpoint.QuestionAnswered && string(q.Answer) == `{"approve":true}`
			if q.Status != checkpoint.QuestionAnswered || q.AnsweredBy != "reviewer" || approved == denied(thread) {
				t.Errorf("%s: question %s by %q, answer %s", thread, q.Status, q.AnsweredBy, q.Answer)
			}
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
			for _, c := range []string{"c1", "c2", "c3"} {
				known[key(c)] = true
				if results[c] == nil {
					t.Errorf("%s: no result for %s", thread, c)
				}
			}
			if t.Failed() {
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
				st.denied++
				if !r.IsError {
					t.Errorf("%s: denied transfer has result %+v", thread, r)
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
				t.Errorf("%s ran for %s, which no finished thread knows", tool, k)
			}
		}
	}
	return st
}
