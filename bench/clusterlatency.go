//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/cluster"
)

// latencySeries is one way of answering: how many answers at once, on
// which replica.
type latencySeries struct {
	Name       string `json:"name"`
	AtOnce     int    `json:"at_once"`
	AnsweredOn string `json:"answered_on"`
	Samples    int    `json:"samples"`
	// FromReturn: host.Answer returned on the answering replica (the
	// answer and its job committed) → the tool's function entered on A.
	FromReturn durStats `json:"answer_returned_to_tool"`
	// FromCall: host.Answer called → the tool entered.
	FromCall durStats `json:"answer_called_to_tool"`
	// AnswerCall: host.Answer's own time (checks, the commit of the
	// answer with its job).
	AnswerCall durStats `json:"answer_call"`
	// ToFetch: host.Answer returned → A's River fetched the job that
	// resumes the run (river_job.attempted_at, the database's clock on
	// this machine); FetchToTool: from there to the tool.
	ToFetch     durStats `json:"answer_returned_to_job_fetched"`
	FetchToTool durStats `json:"job_fetched_to_tool"`
	// Early: the tool started before host.Answer returned (counted as 0).
	Early int `json:"tool_before_answer_returned"`
	// Fetches not found (a job worked by no replica?) and tools that ran
	// on another replica than A.
	NoFetch int `json:"jobs_without_attempt"`
	NotOnA  int `json:"tool_not_on_a"`
	// SlowFetch: jobs fetched more than 50 ms after their answer
	// returned (what a notification would not explain: River's fetch
	// poll, every 200 ms).
	SlowFetch int `json:"jobs_fetched_after_50ms"`
}

type latencyResult struct {
	Schema string           `json:"schema"`
	Conns  int              `json:"pg_conns"`
	Warmup int              `json:"warmup"`
	Rounds int              `json:"rounds"`
	Series []*latencySeries `json:"series"`
	// RawSeq: single-row insert transactions, one at a time, in rounds
	// alternating with the latency rounds; RawCommit is the median
	// round's time per commit (1/rate).
	RawSeq        []rawResult   `json:"raw_sequential"`
	RawSeqPerS    float64       `json:"raw_sequential_commits_per_s"`
	RawCommit     time.Duration `json:"raw_commit_ns"`
	LoadBefore    string        `json:"load_before"`
	LoadAfter     string        `json:"load_after"`
	ClusterA      cluster.Stats `json:"cluster_a"`
	Warnings      int           `json:"warnings"`
	FirstWarnings []string      `json:"first_warnings,omitempty"`
}

type latencySample struct {
	thread                 string
	called, returned, tool time.Time
	replica                int
}

// measureLatency builds replica A (started: it works the jobs) and
// replica B (a cluster and host never started: it takes answers, and its
// answers commit with their jobs, but it works none), parks runs on A and
// answers them on B, one at a time and several at once, and on A itself.
func measureLatency(ctx context.Context, b *backend, dsn string, o clusterOptions, progress func(string, ...any)) (*latencyResult, error) {
	const schema = "tgc_latency"
	res := &latencyResult{Schema: schema, Conns: o.latencyConns, Warmup: o.latencyWarm, Rounds: o.rounds, LoadBefore: loadAvg()}
	w := newClusterWorld()
	rc := replicaConfig{dsn: dsn, schema: schema, conns: o.latencyConns, timeout: o.timeout, start: true}
	a, err := newInReplica(ctx, w, 1, rc)
	if err != nil {
		return nil, fmt.Errorf("replica A: %w", err)
	}
	defer a.close()
	rc.start = false
	rb, err := newInReplica(ctx, w, 2, rc)
	if err != nil {
		return nil, fmt.Errorf("replica B: %w", err)
	}
	defer rb.close()
	type way struct {
		s  *latencySeries
		on *inReplica
	}
	ways := []way{{&latencySeries{Name: "1 at a time, on B", AtOnce: 1, AnsweredOn: "B"}, rb}}
	if o.burst > 1 {
		ways = append(ways, way{&latencySeries{Name: fmt.Sprintf("%d at once, on B", o.burst), AtOnce: o.burst, AnsweredOn: "B"}, rb})
	}
	ways = append(ways, way{&latencySeries{Name: "1 at a time, on A itself", AtOnce: 1, AnsweredOn: "A"}, a})
	prompt := cyclePrompt(o.argBytes)
	tag := "lat-" + randomHex(4)
	for i, wy := range ways {
		if _, err := latencyRound(ctx, w, a, wy.on, wy.s.AtOnce, o.latencyWarm, fmt.Sprintf("%sw%d", tag, i), prompt); err != nil {
			return nil, fmt.Errorf("warm-up, %s: %w", wy.s.Name, err)
		}
	}
	samples := make([][]latencySample, len(ways))
	rawRound := func() error {
		r, err := b.raw(ctx, 1, o.rawTime)
		if err != nil {
			return err
		}
		res.RawSeq = append(res.RawSeq, r)
		return nil
	}
	if o.cpuProfile != "" {
		path := cpuProfilePath(o.cpuProfile, "latency")
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}
	for r := range o.rounds {
		if r%2 == 0 {
			if err := rawRound(); err != nil {
				return nil, err
			}
		}
		for i, wy := range ways {
			per := (o.latencyN + o.rounds - 1) / o.rounds
			per = (per + wy.s.AtOnce - 1) / wy.s.AtOnce * wy.s.AtOnce
			ss, err := latencyRound(ctx, w, a, wy.on, wy.s.AtOnce, per, fmt.Sprintf("%sr%d-%d", tag, r, i), prompt)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", wy.s.Name, err)
			}
			samples[i] = append(samples[i], ss...)
			var d []time.Duration
			for _, s := range ss {
				d = append(d, max(0, s.tool.Sub(s.returned)))
			}
			st := statsOf(d)
			progress("latency, round %d/%d, %s: answer returned → tool p50 %s, p99 %s, max %s (%d answers)", r+1, o.rounds, wy.s.Name, ms(st.P50), ms(st.P99), ms(st.Max), len(ss))
		}
		if r%2 == 1 {
			if err := rawRound(); err != nil {
				return nil, err
			}
		}
		if len(res.RawSeq) > 0 {
			progress("latency: raw %.0f tx/s sequential; load average %s", res.RawSeq[len(res.RawSeq)-1].PerSecond, loadAvg())
		}
	}
	for i, wy := range ways {
		fetched, err := driveJobAttempts(ctx, a, schema, samples[i])
		if err != nil {
			return nil, err
		}
		summarizeLatency(wy.s, samples[i], fetched)
		res.Series = append(res.Series, wy.s)
	}
	var rates []float64
	for _, r := range res.RawSeq {
		rates = append(rates, r.PerSecond)
	}
	res.RawSeqPerS = median(rates)
	if res.RawSeqPerS > 0 {
		res.RawCommit = time.Duration(float64(time.Second) / res.RawSeqPerS)
	}
	res.ClusterA = a.c.Stats()
	res.Warnings, res.FirstWarnings = w.log.snapshot()
	res.LoadAfter = loadAvg()
	return res, nil
}

// parkRuns prompts a run on each thread on replica r and waits until
// each has asked its question and parked (r drives nothing, so every
// lease was let go).
func parkRuns(ctx context.Context, w *clusterWorld, r *inReplica, threads []string, prompt string) ([]*checkpoint.Question, []*clusterWaiter, error) {
	waiters := make([]*clusterWaiter, len(threads))
	for i, id := range threads {
		waiters[i] = w.wait(id)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	var next sync.Mutex
	k := 0
	for range min(4, len(threads)) {
		wg.Go(func() {
			for {
				next.Lock()
				i := k
				k++
				next.Unlock()
				if i >= len(threads) {
					return
				}
				if _, _, err := r.h.Prompt(ctx, threads[i], prompt, nil); err != nil {
					errs <- fmt.Errorf("prompt %s: %w", threads[i], err)
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return nil, nil, err
	default:
	}
	qs := make([]*checkpoint.Question, len(threads))
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for i, cw := range waiters {
		select {
		case qs[i] = <-cw.question:
		case <-timer.C:
			return nil, nil, fmt.Errorf("%s: no question after %s (%s)", threads[i], waitLimit, describeThread(ctx, r.store, threads[i], r))
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	return qs, waiters, waitQuiet(ctx, r)
}

// latencyRound parks count runs on A, then answers them on the replica
// on, at at a time; each group's runs finish (and A lets go of them)
// before the next group is answered.
func latencyRound(ctx context.Context, w *clusterWorld, a, on *inReplica, at, count int, tag, prompt string) ([]latencySample, error) {
	threads := make([]string, count)
	for i := range threads {
		threads[i] = fmt.Sprintf("%s-%d", tag, i)
	}
	defer func() {
		for _, id := range threads {
			w.done(id)
		}
	}()
	qs, waiters, err := parkRuns(ctx, w, a, threads, prompt)
	if err != nil {
		return nil, err
	}
	samples := make([]latencySample, count)
	for g := 0; g < count; g += at {
		end := min(g+at, count)
		gate := make(chan struct{})
		errs := make(chan error, end-g)
		var wg sync.WaitGroup
		for i := g; i < end; i++ {
			wg.Go(func() {
				<-gate
				s := &samples[i]
				s.thread = threads[i]
				s.called = time.Now()
				_, err := on.h.Answer(ctx, threads[i], qs[i].ID, approveAnswer(qs[i]), "bench")
				s.returned = time.Now()
				if err != nil {
					errs <- fmt.Errorf("answer %s/%s on replica %d: %w", threads[i], qs[i].ID, on.n, err)
				}
			})
		}
		close(gate)
		wg.Wait()
		select {
		case err := <-errs:
			return nil, err
		default:
		}
		timer := time.NewTimer(waitLimit)
		for i := g; i < end; i++ {
			select {
			case fin := <-waiters[i].finished:
				if fin.Err != nil {
					timer.Stop()
					return nil, fmt.Errorf("%s: the run ended with %v", threads[i], fin.Err)
				}
			case <-timer.C:
				return nil, fmt.Errorf("%s: the run did not finish within %s of its answer (%s)", threads[i], waitLimit, describeThread(ctx, a.store, threads[i], a, on))
			case <-ctx.Done():
				timer.Stop()
				return nil, ctx.Err()
			}
			select {
			case t := <-waiters[i].tool:
				samples[i].tool, samples[i].replica = t.at, t.replica
			default:
				timer.Stop()
				return nil, fmt.Errorf("%s: the run finished but the tool never ran", threads[i])
			}
			if len(waiters[i].tool) > 0 {
				timer.Stop()
				return nil, fmt.Errorf("%s: the tool ran twice", threads[i])
			}
		}
		timer.Stop()
		if err := waitQuiet(ctx, a); err != nil {
			return nil, err
		}
	}
	return samples, nil
}

// driveJobAttempts reads, from River's table, when the job each answer
// committed was first fetched (attempted_at; the database's clock, which
// on loopback is this machine's).
func driveJobAttempts(ctx context.Context, r *inReplica, schema string, samples []latencySample) (map[string]time.Time, error) {
	ids := make([]string, len(samples))
	for i, s := range samples {
		ids[i] = s.thread
	}
	rows, err := r.store.Pool().Query(ctx, `SELECT args->>'thread_id', min(attempted_at) FROM `+pgx.Identifier{schema, "river_job"}.Sanitize()+`
		WHERE kind = 'tollgate_drive' AND args->>'thread_id' = ANY($1) GROUP BY 1`, ids)
	if err != nil {
		return nil, fmt.Errorf("reading River's jobs: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var id string
		var at pgtype.Timestamptz
		if err := rows.Scan(&id, &at); err != nil {
			return nil, err
		}
		if at.Valid {
			out[id] = at.Time
		}
	}
	return out, rows.Err()
}

func summarizeLatency(s *latencySeries, samples []latencySample, fetched map[string]time.Time) {
	var fromRet, fromCall, call, toFetch, fetchTool []time.Duration
	for _, x := range samples {
		d := x.tool.Sub(x.returned)
		if d < 0 {
			d = 0
			s.Early++
		}
		fromRet = append(fromRet, d)
		fromCall = append(fromCall, x.tool.Sub(x.called))
		call = append(call, x.returned.Sub(x.called))
		if x.replica != 1 {
			s.NotOnA++
		}
		if f, ok := fetched[x.thread]; ok {
			toFetch = append(toFetch, max(0, f.Sub(x.returned)))
			if f.Sub(x.returned) > 50*time.Millisecond {
				s.SlowFetch++
			}
			fetchTool = append(fetchTool, max(0, x.tool.Sub(f)))
		} else {
			s.NoFetch++
		}
	}
	s.Samples = len(samples)
	s.FromReturn, s.FromCall, s.AnswerCall = statsOf(fromRet), statsOf(fromCall), statsOf(call)
	s.ToFetch, s.FetchToTool = statsOf(toFetch), statsOf(fetchTool)
}

func (l *latencyResult) print(w io.Writer) {
	fmt.Fprintf(w, "\nLatency: runs parked on replica A, answered on replica B (host.Answer on a host never started: its store's hook commits\n"+
		"the answer with the job that resumes the run), the tool entered on A. In-process replicas, each with its own store (pool of %d,\n"+
		"listener), cluster and host; %d samples of each kind pooled over %d rounds, after %d warm-up answers; load average %s → %s.\n",
		l.Conns, l.Series[0].Samples, l.Rounds, l.Warmup, l.LoadBefore, l.LoadAfter)
	fmt.Fprintf(w, "raw limit, same run: single-row insert transactions one at a time, %.0f tx/s (%s a commit) [rounds:", l.RawSeqPerS, ms(l.RawCommit))
	for _, r := range l.RawSeq {
		fmt.Fprintf(w, " %.0f", r.PerSecond)
	}
	fmt.Fprintln(w, "]")
	fmt.Fprintf(w, "%-30s %-36s %-36s %-36s %-36s\n", "p50 / p90 / p99 / max", "answer returned → tool", "answer called → tool", "answer returned → job fetched", "job fetched → tool")
	for _, s := range l.Series {
		fmt.Fprintf(w, "%-30s %-36s %-36s %-36s %-36s\n", fmt.Sprintf("%s (%d)", s.Name, s.Samples), s.FromReturn, s.FromCall, s.ToFetch, s.FetchToTool)
	}
	for _, s := range l.Series {
		if s.Early+s.NoFetch+s.NotOnA+s.SlowFetch > 0 {
			fmt.Fprintf(w, "  %s: %d jobs fetched more than 50 ms after their answer; %d tools started before Answer returned (counted as 0), %d jobs never attempted, %d tools not on A\n",
				s.Name, s.SlowFetch, s.Early, s.NoFetch, s.NotOnA)
		}
	}
	fmt.Fprintf(w, "host.Answer itself: ")
	for i, s := range l.Series {
		if i > 0 {
			fmt.Fprint(w, "; ")
		}
		fmt.Fprintf(w, "%s p50 %s p99 %s", s.Name, ms(s.AnswerCall.P50), ms(s.AnswerCall.P99))
	}
	fmt.Fprintf(w, "\nreplica A's cluster: %+v; warnings logged by the replicas: %d\n", l.ClusterA, l.Warnings)
	for _, m := range l.FirstWarnings {
		fmt.Fprintf(w, "  %s\n", m)
	}
}
