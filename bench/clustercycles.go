//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-ai/tollgate/cluster"
)

// clusterCycleRound is one round of cycles on fresh replicas.
type clusterCycleRound struct {
	Replicas  int     `json:"replicas"`
	Cycles    int     `json:"cycles"`
	Warmup    int     `json:"warmup"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"cycles_per_s"`
	// Process CPU (every replica is in this process) and the database
	// server's, measured phase.
	CPU       time.Duration `json:"cpu_ns"`
	ServerCPU time.Duration `json:"server_cpu_ns,omitempty"`
	HasSrvCPU bool          `json:"has_server_cpu"`
	// By replica: prompts and answers it took, tools it ran.
	Prompts  []int64 `json:"prompts_by_replica"`
	Answers  []int64 `json:"answers_by_replica"`
	ToolRuns []int64 `json:"tool_runs_by_replica"`
	// Cycles whose tool ran on another replica than the one prompted.
	Moved        int             `json:"tool_on_another_replica"`
	Clusters     []cluster.Stats `json:"clusters"`
	Early        int             `json:"tool_before_answer_returned"`
	AnswerToTool durStats        `json:"answer_to_tool"`
	Cycle        durStats        `json:"cycle"`
	Dropped      int64           `json:"events_dropped"`
	// PostgreSQL's counters over the whole round (the replicas' opening to
	// their closing: warm-up included), for ServerCycles cycles: every
	// commit of the database (read-only ones too), WAL flushes and bytes
	// (cluster-wide).
	ServerCycles int64 `json:"server_cycles"`
	XactCommit   int64 `json:"xact_commit"`
	WALSyncs     int64 `json:"wal_syncs"`
	WALBytes     int64 `json:"wal_bytes"`
	// Statements: where the server's time went in the measured phase,
	// from pg_stat_statements when the server has it loaded (this
	// database's statements only), the dearest first.
	Statements []stmtStat `json:"statements,omitempty"`
}

// stmtStat is one statement of pg_stat_statements over a round.
type stmtStat struct {
	Query  string  `json:"query"`
	Calls  int64   `json:"calls"`
	TimeMS float64 `json:"total_exec_ms"`
}

// clusterCycles is one number of loops on one number of replicas.
type clusterCycles struct {
	Loops    int `json:"loops"`
	Replicas int `json:"replicas"`
	// Alone: one host without a cluster (no River, no leases), the
	// single-process host: what cluster mode costs.
	Alone   bool                 `json:"host_alone,omitempty"`
	Conns   int                  `json:"pg_conns_per_replica"`
	Rounds  []*clusterCycleRound `json:"rounds"`
	RawSeq  []rawResult          `json:"raw_sequential"`
	RawConc []rawResult          `json:"raw_concurrent"`

	CyclesPerS    float64 `json:"cycles_per_s"`
	CyclesPerSMin float64 `json:"cycles_per_s_min"`
	CyclesPerSMax float64 `json:"cycles_per_s_max"`
	// VsOne: cycles/s ÷ the one-replica cycles/s of the same round, the
	// median over rounds.
	VsOne       float64       `json:"vs_one_replica,omitempty"`
	RawSeqPerS  float64       `json:"raw_sequential_commits_per_s"`
	RawConcPerS float64       `json:"raw_concurrent_commits_per_s"`
	A2TP50      time.Duration `json:"answer_to_tool_p50_ns"`
	A2TP99      time.Duration `json:"answer_to_tool_p99_ns"`
	CycleP50    time.Duration `json:"cycle_p50_ns"`
	CycleP99    time.Duration `json:"cycle_p99_ns"`
	CPUPerCyc   time.Duration `json:"cpu_per_cycle_ns"`
	SrvPerCyc   time.Duration `json:"server_cpu_per_cycle_ns,omitempty"`
	MovedShare  float64       `json:"tool_on_another_replica_share"`
	XactPerCyc  float64       `json:"xact_commit_per_cycle"`
	WALSyncCyc  float64       `json:"wal_syncs_per_cycle"`
	WALBytesCyc float64       `json:"wal_bytes_per_cycle"`
	Warnings    int           `json:"warnings"`
	FirstWarns  []string      `json:"first_warnings,omitempty"`
}

// measureClusterCycles runs, for each number of loops, rounds of cycles
// on one replica and on o.replicas replicas on the same schema, taking
// turns at going first, beside raw rounds.
func measureClusterCycles(ctx context.Context, b *backend, dsn string, o clusterOptions, progress func(string, ...any)) ([]*clusterCycles, error) {
	const schema = "tgc_cycles"
	var out []*clusterCycles
	for _, loops := range o.loops {
		conns := pgConns(loops, o.pgConns)
		one := &clusterCycles{Loops: loops, Replicas: 1, Conns: conns}
		many := &clusterCycles{Loops: loops, Replicas: o.replicas, Conns: conns}
		configs := []*clusterCycles{one, many}
		if o.alone {
			configs = append([]*clusterCycles{{Loops: loops, Replicas: 1, Alone: true, Conns: conns}}, configs...)
		}
		w := newClusterWorld()
		w.statements = statementsAvailable(ctx, b)
		rawRound := func() error {
			seq, err := b.raw(ctx, 1, o.rawTime)
			if err != nil {
				return err
			}
			conc := seq
			if loops > 1 {
				if conc, err = b.raw(ctx, loops, o.rawTime); err != nil {
					return err
				}
			}
			for _, c := range configs {
				c.RawSeq, c.RawConc = append(c.RawSeq, seq), append(c.RawConc, conc)
			}
			progress("cycles, %s: raw %.0f tx/s sequential, %.0f tx/s from %s; load average %s", plural(loops, "loop"), seq.PerSecond, conc.PerSecond, plural(loops, "loop"), loadAvg())
			return nil
		}
		for r := range o.rounds {
			if r%2 == 0 {
				if err := rawRound(); err != nil {
					return nil, err
				}
			}
			// Each configuration goes first in turn.
			for i := range configs {
				c := configs[(i+r)%len(configs)]
				profile := ""
				if r == o.rounds-1 {
					profile = cpuProfilePath(o.cpuProfile, "cycles", loops, c.short())
				}
				rc := replicaConfig{dsn: dsn, schema: schema, conns: conns, timeout: o.timeout, start: true, alone: c.Alone}
				cr, err := runClusterCycleRound(ctx, b, w, rc, c.Replicas, loops, o, profile)
				if err != nil {
					return nil, fmt.Errorf("%s on %s, round %d: %w", plural(loops, "loop"), c.label(), r+1, err)
				}
				c.Rounds = append(c.Rounds, cr)
				progress("cycles, %s on %s, round %d/%d: %.0f cycles/s, answer→tool p50 %s p99 %s", plural(loops, "loop"), c.label(), r+1, o.rounds, cr.PerSecond, ms(cr.AnswerToTool.P50), ms(cr.AnswerToTool.P99))
			}
			if r%2 == 1 {
				if err := rawRound(); err != nil {
					return nil, err
				}
			}
		}
		n, first := w.log.snapshot()
		for _, c := range configs {
			c.Warnings, c.FirstWarns = n, first
			c.summarize(one)
		}
		out = append(out, configs...)
	}
	return out, nil
}

func (c *clusterCycles) label() string {
	if c.Alone {
		return "a host alone"
	}
	return plural(c.Replicas, "replica")
}

// short names the configuration in file names.
func (c *clusterCycles) short() string {
	if c.Alone {
		return "alone"
	}
	return strconv.Itoa(c.Replicas)
}

func (c *clusterCycles) summarize(one *clusterCycles) {
	var rate, vs, a50, a99, c50, c99, cpu, srv, moved, rs, rc, xact, walSync, walBytes []float64
	for i, r := range c.Rounds {
		n := float64(r.Cycles)
		if sc := float64(r.ServerCycles); sc > 0 {
			xact = append(xact, float64(r.XactCommit)/sc)
			walSync = append(walSync, float64(r.WALSyncs)/sc)
			walBytes = append(walBytes, float64(r.WALBytes)/sc)
		}
		rate = append(rate, r.PerSecond)
		if i < len(one.Rounds) && one.Rounds[i].PerSecond > 0 {
			vs = append(vs, r.PerSecond/one.Rounds[i].PerSecond)
		}
		a50, a99 = append(a50, float64(r.AnswerToTool.P50)), append(a99, float64(r.AnswerToTool.P99))
		c50, c99 = append(c50, float64(r.Cycle.P50)), append(c99, float64(r.Cycle.P99))
		cpu = append(cpu, float64(r.CPU)/n)
		if r.HasSrvCPU {
			srv = append(srv, float64(r.ServerCPU)/n)
		}
		moved = append(moved, float64(r.Moved)/n)
	}
	for i := range c.RawSeq {
		rs, rc = append(rs, c.RawSeq[i].PerSecond), append(rc, c.RawConc[i].PerSecond)
	}
	c.CyclesPerS = median(rate)
	c.CyclesPerSMin, c.CyclesPerSMax = minMax(rate)
	c.VsOne = median(vs)
	c.RawSeqPerS, c.RawConcPerS = median(rs), median(rc)
	c.A2TP50, c.A2TP99 = time.Duration(median(a50)), time.Duration(median(a99))
	c.CycleP50, c.CycleP99 = time.Duration(median(c50)), time.Duration(median(c99))
	c.CPUPerCyc, c.SrvPerCyc = time.Duration(median(cpu)), time.Duration(median(srv))
	c.MovedShare = median(moved)
	c.XactPerCyc, c.WALSyncCyc, c.WALBytesCyc = median(xact), median(walSync), median(walBytes)
}

type clusterCycleSample struct {
	answerToTool, cycle time.Duration
	early, moved        bool
}

// runClusterCycleRound starts k replicas on the schema, warms up, runs the
// measured cycles from loops goroutines (each cycle prompted on a random
// replica and answered on a random replica), and stops them.
func runClusterCycleRound(ctx context.Context, b *backend, w *clusterWorld, rc replicaConfig, k, loops int, o clusterOptions, cpuProfile string) (*clusterCycleRound, error) {
	pgBefore, err := b.counters(ctx)
	if err != nil {
		return nil, err
	}
	var rs []*inReplica
	closeAll := func() {
		for _, r := range rs {
			r.close()
		}
		rs = nil
	}
	defer closeAll()
	for i := range k {
		r, err := newInReplica(ctx, w, i+1, rc)
		if err != nil {
			return nil, fmt.Errorf("replica %d: %w", i+1, err)
		}
		rs = append(rs, r)
	}
	cc := &clusterCycler{w: w, rs: rs, prompt: cyclePrompt(o.argBytes),
		prompts: make([]atomic.Int64, k), answers: make([]atomic.Int64, k), tools: make([]atomic.Int64, k)}
	tag := fmt.Sprintf("cyc%d-%s", k, randomHex(4))
	warm := max(2*loops, o.n/10)
	if _, err := cc.run(ctx, loops, warm, tag+"w"); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if err := waitQuiet(ctx, rs...); err != nil {
		return nil, err
	}
	for i := range k {
		cc.prompts[i].Store(0)
		cc.answers[i].Store(0)
		cc.tools[i].Store(0)
	}
	if w.statements {
		resetStatements(ctx, b)
	}
	srvBefore := b.serverCPU(ctx)
	var samples []clusterCycleSample
	sec, err := measureSection(cpuProfile, func() (err error) {
		samples, err = cc.run(ctx, loops, o.n, tag)
		return err
	}, func() error { return waitQuiet(ctx, rs...) })
	if err != nil {
		return nil, err
	}
	cr := &clusterCycleRound{Replicas: k, Cycles: len(samples), Warmup: warm, Seconds: sec.elapsed.Seconds(), PerSecond: float64(len(samples)) / sec.elapsed.Seconds(),
		CPU: sec.user + sec.sys}
	if w.statements {
		cr.Statements = readStatements(ctx, b, 20, "total_exec_time")
	}
	if d, ok := cpuDelta(srvBefore, b.serverCPU(ctx)); ok {
		cr.ServerCPU, cr.HasSrvCPU = d, true
	}
	var a2t, cyc []time.Duration
	for _, s := range samples {
		a2t, cyc = append(a2t, s.answerToTool), append(cyc, s.cycle)
		if s.early {
			cr.Early++
		}
		if s.moved {
			cr.Moved++
		}
	}
	cr.AnswerToTool, cr.Cycle = statsOf(a2t), statsOf(cyc)
	for i, r := range rs {
		cr.Prompts = append(cr.Prompts, cc.prompts[i].Load())
		cr.Answers = append(cr.Answers, cc.answers[i].Load())
		cr.ToolRuns = append(cr.ToolRuns, cc.tools[i].Load())
		if r.c != nil {
			cr.Clusters = append(cr.Clusters, r.c.Stats())
		}
		cr.Dropped += r.h.Dropped()
	}
	closeAll()
	// A session's statistics reach pg_stat_database when it ends.
	waitAppGone(ctx, b, appName+"-replica")
	pgAfter, err := b.counters(ctx)
	if err != nil {
		return nil, err
	}
	cr.ServerCycles = int64(warm + len(samples))
	cr.XactCommit = pgAfter.XactCommit - pgBefore.XactCommit
	cr.WALSyncs = pgAfter.WALSync - pgBefore.WALSync
	cr.WALBytes = pgAfter.WALLSN - pgBefore.WALLSN
	return cr, nil
}

// clusterCycler runs approval cycles across in-process replicas and
// counts, by replica, the prompts, the answers and the tool runs.
type clusterCycler struct {
	w                       *clusterWorld
	rs                      []*inReplica
	prompt                  string
	prompts, answers, tools []atomic.Int64
}

// cycle runs one cycle on thread: prompted on a random replica, answered
// on a random replica.
func (c *clusterCycler) cycle(ctx context.Context, thread string) (clusterCycleSample, error) {
	cw := c.w.wait(thread)
	defer c.w.done(thread)
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	p := rand.IntN(len(c.rs))
	c.prompts[p].Add(1)
	t0 := time.Now()
	if _, _, err := c.rs[p].h.Prompt(ctx, thread, c.prompt, nil); err != nil {
		return clusterCycleSample{}, fmt.Errorf("prompt %s on replica %d: %w", thread, p+1, err)
	}
	select {
	case qv := <-cw.question:
		a := rand.IntN(len(c.rs))
		c.answers[a].Add(1)
		if _, err := c.rs[a].h.Answer(ctx, thread, qv.ID, approveAnswer(qv), "bench"); err != nil {
			return clusterCycleSample{}, fmt.Errorf("answer %s/%s on replica %d: %w", thread, qv.ID, a+1, err)
		}
	case <-timer.C:
		return clusterCycleSample{}, fmt.Errorf("%s: no question after %s (%s)", thread, waitLimit, describeThread(ctx, c.rs[0].store, thread, c.rs...))
	case <-ctx.Done():
		return clusterCycleSample{}, ctx.Err()
	}
	t1 := time.Now()
	select {
	case fin := <-cw.finished:
		if fin.Err != nil || fin.Message == nil {
			return clusterCycleSample{}, fmt.Errorf("%s: the run ended with %v", thread, fin.Err)
		}
	case <-timer.C:
		return clusterCycleSample{}, fmt.Errorf("%s: the run did not finish within %s of its prompt (%s)", thread, waitLimit, describeThread(ctx, c.rs[0].store, thread, c.rs...))
	case <-ctx.Done():
		return clusterCycleSample{}, ctx.Err()
	}
	t2 := time.Now()
	var ts toolStart
	select {
	case ts = <-cw.tool:
	default:
		return clusterCycleSample{}, fmt.Errorf("%s: the run finished but the tool never ran", thread)
	}
	if len(cw.tool) > 0 {
		return clusterCycleSample{}, fmt.Errorf("%s: the tool ran twice", thread)
	}
	c.tools[ts.replica-1].Add(1)
	s := clusterCycleSample{answerToTool: ts.at.Sub(t1), cycle: t2.Sub(t0), moved: ts.replica != p+1}
	if s.answerToTool < 0 {
		s.answerToTool, s.early = 0, true
	}
	return s, nil
}

// run runs total cycles from loops goroutines, on threads named after
// tag, and stops at the first error.
func (c *clusterCycler) run(ctx context.Context, loops, total int, tag string) ([]clusterCycleSample, error) {
	stop := func(n int64) bool { return n > int64(total) }
	return runLoops(ctx, loops, stop, func(ctx context.Context, n int64) (clusterCycleSample, error) {
		return c.cycle(ctx, fmt.Sprintf("%s-%d", tag, n))
	})
}

func printClusterCycles(w io.Writer, cs []*clusterCycles) {
	fmt.Fprintf(w, "\nCycles: prompt on a random replica → question → answer (host.Answer) on a random replica → tool → final answer.\n"+
		"In-process replicas (one Go process, so one runtime and one garbage collector for all), each with its own store, cluster\n"+
		"and host, on one schema; one replica and %d (and a host alone, without a cluster: the single-process host) take turns\n"+
		"at going first in each round, beside raw single-row insert transactions on the same database (sequential | at the same\n"+
		"number of loops). Medians of the rounds; vs one: cycles/s ÷ one replica's of the same round.\n", cs[len(cs)-1].Replicas)
	fmt.Fprintf(w, "%5s %-13s %6s  %-22s %9s  %-24s %-20s %-20s %9s %9s %8s\n", "loops", "replicas", "conns", "cycles/s [rounds]", "vs one", "raw tx/s seq | same loops", "answer→tool p50/p99", "cycle p50/p99", "CPU/cycle", "server", "moved")
	for _, c := range cs {
		vs := "—"
		if c.Replicas > 1 || c.Alone {
			vs = fmt.Sprintf("%.2fx", c.VsOne)
		}
		who := strconv.Itoa(c.Replicas)
		if c.Alone {
			who = "host alone"
		}
		srv := "—"
		if c.SrvPerCyc > 0 {
			srv = ms(c.SrvPerCyc)
		}
		fmt.Fprintf(w, "%5d %-13s %6d  %-22s %9s  %-24s %-20s %-20s %9s %9s %7.0f%%\n", c.Loops, who, c.Conns,
			fmt.Sprintf("%.0f [%.0f-%.0f]", c.CyclesPerS, c.CyclesPerSMin, c.CyclesPerSMax), vs,
			fmt.Sprintf("%.0f | %.0f", c.RawSeqPerS, c.RawConcPerS),
			ms(c.A2TP50)+" / "+ms(c.A2TP99), ms(c.CycleP50)+" / "+ms(c.CycleP99), ms(c.CPUPerCyc), srv, 100*c.MovedShare)
	}
	fmt.Fprintln(w, "moved: cycles whose tool ran on another replica than the one that took the prompt.")
	fmt.Fprintf(w, "per cycle, from the server (the replicas' opening to their closing, warm-up included):\n")
	for _, c := range cs {
		fmt.Fprintf(w, "  %s on %s: %.1f commits (xact_commit, read-only ones too), %.2f WAL flushes, %s of WAL\n",
			plural(c.Loops, "loop"), c.label(), c.XactPerCyc, c.WALSyncCyc, sizeStr(c.WALBytesCyc))
	}
	for _, c := range cs {
		if len(c.Rounds) == 0 {
			continue
		}
		last := c.Rounds[len(c.Rounds)-1]
		var held int64
		for _, s := range last.Clusters {
			held += s.HeldElsewhere
		}
		fmt.Fprintf(w, "  %s on %s, last round: prompts %v, answers %v, tools run %v by replica; drive jobs that found the thread held elsewhere: %d",
			plural(c.Loops, "loop"), c.label(), last.Prompts, last.Answers, last.ToolRuns, held)
		if last.Early > 0 {
			fmt.Fprintf(w, "; %d tools started before Answer returned", last.Early)
		}
		fmt.Fprintln(w)
	}
	for _, c := range cs {
		if len(c.Rounds) == 0 || len(c.Rounds[len(c.Rounds)-1].Statements) == 0 {
			continue
		}
		last := c.Rounds[len(c.Rounds)-1]
		var total float64
		for _, st := range last.Statements {
			total += st.TimeMS
		}
		n := float64(last.Cycles)
		fmt.Fprintf(w, "  %s on %s, last round, pg_stat_statements (the %d dearest: %.2f ms of execution a cycle):\n", plural(c.Loops, "loop"), c.label(), len(last.Statements), total/n)
		for i, st := range last.Statements {
			if i >= 14 {
				break
			}
			fmt.Fprintf(w, "    %6.2f calls %6.3f ms  %s\n", float64(st.Calls)/n, st.TimeMS/n, st.Query)
		}
	}
	if n := cs[0].Warnings; n > 0 {
		fmt.Fprintf(w, "warnings logged by the replicas: %d\n", n)
		for _, m := range cs[0].FirstWarns {
			fmt.Fprintf(w, "  %s\n", m)
		}
	}
}

// waitAppGone waits until the sessions of that application name have
// ended, so that their statistics are in pg_stat_database.
func waitAppGone(ctx context.Context, b *backend, name string) {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		b.mu.Lock()
		var n int64
		err := b.monitor.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, name).Scan(&n)
		b.mu.Unlock()
		if err != nil || n == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
}

// statementsAvailable reports whether the server has pg_stat_statements
// loaded; the extension is created in the benchmark's database.
func statementsAvailable(ctx context.Context, b *backend) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.monitor.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return false
	}
	var n int64
	return b.monitor.QueryRow(ctx, `SELECT count(*) FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n) == nil
}

// resetStatements forgets this database's statements (only this
// database's: the server may be shared).
func resetStatements(ctx context.Context, b *backend) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, _ = b.monitor.Exec(ctx, `SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)`)
}

var (
	riverName = regexp.MustCompile(`^-- name: (\w+)`)
	spaces    = regexp.MustCompile(`\s+`)
)

// readStatements reads this database's n first statements by a column
// of pg_stat_statements, the greatest first: total_exec_time (the
// dearest) or calls.
func readStatements(ctx context.Context, b *backend, n int, by string) []stmtStat {
	b.mu.Lock()
	defer b.mu.Unlock()
	rows, err := b.monitor.Query(ctx, `SELECT query, calls, total_exec_time FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '%pg_stat_%'
		ORDER BY `+pgx.Identifier{by}.Sanitize()+` DESC LIMIT $1`, n)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []stmtStat
	for rows.Next() {
		var st stmtStat
		if rows.Scan(&st.Query, &st.Calls, &st.TimeMS) != nil {
			return out
		}
		if m := riverName.FindStringSubmatch(st.Query); m != nil {
			st.Query = "River's " + m[1]
		}
		st.Query = spaces.ReplaceAllString(strings.TrimSpace(st.Query), " ")
		if len(st.Query) > 100 {
			st.Query = st.Query[:100] + "..."
		}
		out = append(out, st)
	}
	return out
}
