//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// cycleOptions are the flags of the cycle command.
type cycleOptions struct {
	stores      []string
	loops       []int
	n, warmup   int
	d           time.Duration
	rounds      int
	rawTime     time.Duration
	threadTurns int
	resultBytes int
	parked      int
	stored      int
	argBytes    int
	pgConns     int
	wrap        bool
	keep        bool
	jsonOut     bool
	jsonFile    string
	quiet       bool
	short       bool
	cpuProfile  string
	memProfile  string
}

func parseLoops(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-loops %q: want positive numbers, comma-separated", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseCycleFlags reads the cycle command's flags; printFile is -print's
// report, read before the other flags are checked.
func parseCycleFlags(args []string, stderr io.Writer) (o cycleOptions, printFile string, err error) {
	fs := flag.NewFlagSet("cycle", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var stores stringList
	fs.Var(&stores, "store", "`store`: memory, sqlite (a temporary file), sqlite:PATH or postgres://... (repeat, or comma-separate all but a URL)")
	loops := fs.String("loops", "1,8,64", "concurrent loops, comma-separated: one measurement per number")
	fs.IntVar(&o.n, "n", 1000, "cycles per round (all loops together), after the warm-up")
	fs.DurationVar(&o.d, "d", 0, "run each round for this long instead of -n cycles")
	fs.IntVar(&o.warmup, "warmup", 0, "cycles before each round's measurement (0: a tenth of -n, at least 2 per loop)")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds, each a cycle round beside raw rounds, alternating which goes first; figures are the medians")
	fs.DurationVar(&o.rawTime, "raw-time", time.Second, "length of each raw-transaction round")
	fs.IntVar(&o.threadTurns, "thread-turns", 0, "also run one thread of this many tool-call turns and report per-step time and bytes")
	fs.IntVar(&o.resultBytes, "result-bytes", 4096, "size of each -thread-turns tool result")
	fs.IntVar(&o.parked, "parked", 0, "also park this many runs on one host and report memory and goroutines")
	fs.IntVar(&o.stored, "stored", 0, "pending questions stored (on threads of their own, a third with a deadline a day away) before each cycle round: what a host's deadline loop reads past")
	fs.IntVar(&o.argBytes, "arg-bytes", 1024, "size of the cycle's tool call arguments")
	fs.IntVar(&o.pgConns, "pg-conns", 0, "PostgreSQL pool size of the store and of the raw transactions (0: the number of loops, at least 4)")
	fs.BoolVar(&o.wrap, "count-calls", true, "count store calls through a wrapping Store (writes and reads per cycle, by method)")
	fs.BoolVar(&o.keep, "keep", false, "PostgreSQL: keep the benchmark's schemas")
	fs.BoolVar(&o.jsonOut, "json", false, "print JSON instead of tables")
	fs.StringVar(&o.jsonFile, "json-file", "", "also write the JSON to `file`")
	printFlag := fs.String("print", "", "print the tables of a report written with -json-file, and measure nothing")
	fs.BoolVar(&o.quiet, "q", false, "no progress lines on stderr")
	fs.BoolVar(&o.short, "short", false, "a few cycles, rounds and turns, to check the benchmark works (seconds)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the last cycle round of each store and loop count to `file`")
	fs.StringVar(&o.memProfile, "memprofile", "", "write an allocation profile after that round to `file`, and one before it to file.base (go tool pprof -base file.base ...)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./bench cycle -store memory|sqlite:PATH|postgres://... [-loops 1,8,64] [-n N | -d DUR] [-thread-turns T] [-parked K] [-short] [-json]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, "", err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return o, "", fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *printFlag != "" {
		return o, *printFlag, nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.short {
		if !set["n"] {
			o.n = 24
		}
		if !set["rounds"] {
			o.rounds = 2
		}
		if !set["raw-time"] {
			o.rawTime = 100 * time.Millisecond
		}
		if !set["loops"] {
			*loops = "1,4"
		}
		if !set["thread-turns"] {
			o.threadTurns = 20
		}
		if !set["parked"] {
			o.parked = 20
		}
	}
	if o.loops, err = parseLoops(*loops); err != nil {
		return o, "", err
	}
	if len(stores) == 0 {
		stores = stringList{"memory"}
	}
	if o.stores, err = parseStores(stores); err != nil {
		return o, "", err
	}
	if o.n < 1 && o.d <= 0 || o.rounds < 1 {
		return o, "", fmt.Errorf("want -n or -d, and -rounds of at least 1")
	}
	if o.d > 0 {
		o.n = 0
	}
	return o, "", nil
}

func cycleCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, printFile, err := parseCycleFlags(args, stderr)
	if err != nil {
		return err
	}
	if printFile != "" {
		return printReportFile(printFile, stdout)
	}
	if o.memProfile != "" {
		runtime.MemProfileRate = 4096
	}
	progress := func(format string, a ...any) {
		if !o.quiet {
			fmt.Fprintf(stderr, format+"\n", a...)
		}
	}
	rep := &report{Machine: machine(), Options: reportOptions{
		N: o.n, Duration: o.d.String(), Rounds: o.rounds, RawTime: o.rawTime.String(), ArgBytes: o.argBytes,
		ThreadTurns: o.threadTurns, ResultBytes: o.resultBytes, Parked: o.parked, Stored: o.stored, CountCalls: o.wrap,
	}}
	profiles := len(o.stores)*len(o.loops) > 1
	for _, spec := range o.stores {
		b, err := openBackend(ctx, spec, o.keep)
		if err != nil {
			return err
		}
		err = func() error {
			defer b.close()
			for _, l := range o.loops {
				res, err := measureLoops(ctx, b, l, o, profiles, progress)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", b.label, plural(l, "loop"), err)
				}
				rep.Results = append(rep.Results, res)
			}
			if o.threadTurns > 0 {
				progress("%s: one thread of %d tool-call turns", b.label, o.threadTurns)
				tr, err := threadTurns(ctx, b, o.threadTurns, o.resultBytes, o.wrap)
				if err != nil {
					return fmt.Errorf("%s: %w", b.label, err)
				}
				rep.Turns = append(rep.Turns, tr)
			}
			if o.parked > 0 {
				progress("%s: parking %d runs", b.label, o.parked)
				pr, err := parked(ctx, b, o.parked, 8, o.wrap)
				if err != nil {
					return fmt.Errorf("%s: %w", b.label, err)
				}
				rep.Parked = append(rep.Parked, pr)
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	rep.Machine.LoadAfter = loadAvg()
	return emitReport(stdout, rep, o.jsonFile, o.jsonOut)
}

// profilePath names the profile of one store and loop count when a run
// has several.
func profilePath(base, kind string, loops int, several bool) string {
	if base == "" || !several {
		return base
	}
	ext := filepath.Ext(base)
	return fmt.Sprintf("%s-%s-%d%s", strings.TrimSuffix(base, ext), kind, loops, ext)
}

// measureLoops runs the rounds of one store and loop count: each round a
// cycle round and raw rounds (sequential, and at the same concurrency),
// which goes first alternating.
func measureLoops(ctx context.Context, b *backend, loops int, o cycleOptions, profiles bool, progress func(string, ...any)) (*loopResult, error) {
	warm := o.warmup
	if warm <= 0 {
		warm = max(2*loops, o.n/10)
	}
	rc := roundConfig{loops: loops, n: o.n, warmup: warm, d: o.d, conns: pgConns(loops, o.pgConns), wrap: o.wrap, prompt: cyclePrompt(o.argBytes), stored: o.stored}
	res := &loopResult{Store: b.label, Kind: b.kind, Loops: loops, Conns: rc.conns}
	if b.kind != "postgres" {
		res.Conns = 0
	}
	rawRound := func() error {
		if b.kind == "memory" {
			return nil
		}
		seq, err := b.raw(ctx, 1, o.rawTime)
		if err != nil {
			return err
		}
		res.RawSeq = append(res.RawSeq, seq)
		conc := seq
		if loops > 1 {
			if conc, err = b.raw(ctx, loops, o.rawTime); err != nil {
				return err
			}
		}
		res.RawConc = append(res.RawConc, conc)
		return nil
	}
	for r := range o.rounds {
		if r%2 == 0 {
			if err := rawRound(); err != nil {
				return nil, err
			}
		}
		last := r == o.rounds-1
		rc.cpuProfile, rc.memProfile = "", ""
		if last {
			rc.cpuProfile = profilePath(o.cpuProfile, b.kind, loops, profiles)
			rc.memProfile = profilePath(o.memProfile, b.kind, loops, profiles)
		}
		cr, err := runCycleRound(ctx, b, rc)
		if err != nil {
			return nil, err
		}
		res.Rounds = append(res.Rounds, cr)
		if r%2 == 1 {
			if err := rawRound(); err != nil {
				return nil, err
			}
		}
		line := fmt.Sprintf("%s, %s, round %d/%d: %.0f cycles/s", b.label, plural(loops, "loop"), r+1, o.rounds, cr.PerSecond)
		if len(res.RawConc) > r {
			line += fmt.Sprintf("; raw %.0f tx/s sequential, %.0f tx/s from %s", res.RawSeq[r].PerSecond, res.RawConc[r].PerSecond, plural(loops, "loop"))
		}
		progress("%s", line)
	}
	res.summarize()
	return res, nil
}

// loopResult is one store at one loop count: its rounds and their medians.
type loopResult struct {
	Store string `json:"store"`
	Kind  string `json:"kind"`
	Loops int    `json:"loops"`
	// Conns is the PostgreSQL pool size (store and raw).
	Conns   int           `json:"pg_conns,omitempty"`
	Rounds  []*cycleRound `json:"rounds"`
	RawSeq  []rawResult   `json:"raw_sequential,omitempty"`
	RawConc []rawResult   `json:"raw_concurrent,omitempty"`

	// Medians over the rounds.
	CyclesPerS    float64 `json:"cycles_per_s"`
	CyclesPerSMin float64 `json:"cycles_per_s_min"`
	CyclesPerSMax float64 `json:"cycles_per_s_max"`
	WritesPerCyc  float64 `json:"writes_per_cycle"`
	ReadsPerCyc   float64 `json:"reads_per_cycle"`
	// CommitsPerCyc: database transactions that commit writes, per
	// cycle: the store's WriteStats().Transactions when it has the method
	// (group commit shares them), else one per write call (each is its own
	// transaction), else (PostgreSQL without the counting wrapper) the
	// transaction ids assigned. Memory: 0.
	CommitsPerCyc float64 `json:"commits_per_cycle"`
	CommitsFrom   string  `json:"commits_from"`
	// PostgreSQL, per cycle: every commit (read-only ones too), and the
	// transaction ids assigned (write transactions and their
	// subtransactions, a cross-check from the server).
	XactPerCyc    float64 `json:"xact_commit_per_cycle,omitempty"`
	XIDsPerCyc    float64 `json:"xids_per_cycle,omitempty"`
	WALSyncPerCyc float64 `json:"wal_syncs_per_cycle,omitempty"`
	WALBytesCyc   float64 `json:"wal_bytes_per_cycle,omitempty"`
	// PostgreSQL, per cycle, measured phase: statements the store sent and
	// round trips (a statement alone, a batch, a prepare), from its pgx
	// tracer.
	StmtsPerCyc   float64 `json:"statements_per_cycle,omitempty"`
	TripsPerCyc   float64 `json:"round_trips_per_cycle,omitempty"`
	CommitsPerWAL float64 `json:"commits_per_wal_sync,omitempty"`
	RawPerWAL     float64 `json:"raw_commits_per_wal_sync,omitempty"`

	RawSeqPerS  float64 `json:"raw_sequential_commits_per_s,omitempty"`
	RawConcPerS float64 `json:"raw_concurrent_commits_per_s,omitempty"`
	// Ratio: cycles/s × commits per cycle ÷ raw commits/s at the same
	// number of loops, each round with its own raw rounds; the median.
	Ratio float64 `json:"ratio,omitempty"`

	// Medians of the rounds' percentiles.
	latencies
	CPUPerCyc       time.Duration `json:"cpu_per_cycle_ns"`
	ServerCPUPerCyc time.Duration `json:"server_cpu_per_cycle_ns,omitempty"`
	UserPerCyc      time.Duration `json:"user_cpu_per_cycle_ns"`
	SysPerCyc       time.Duration `json:"sys_cpu_per_cycle_ns"`
	AllocsPerCyc    float64       `json:"allocs_per_cycle"`
	// SQLite with WriteStats: batches per transaction.
	WritesPerTx float64 `json:"batches_per_transaction,omitempty"`
	// WritesRatio: cycles/s × writes per cycle ÷ raw commits/s: above 1
	// when group commit shares transactions.
	WritesRatio float64            `json:"writes_ratio,omitempty"`
	Early       int                `json:"tool_before_answer_returned"`
	ByMethod    map[string]float64 `json:"by_method_per_cycle,omitempty"`
}

func (l *loopResult) summarize() {
	var rate, writes, reads, commits, xact, xids, walSync, walBytes, perWAL, stmts, trips, ratio, wratio, perTx, cpu, user, sys, srv, allocs []float64
	var a50, a99, c50, c99 []float64
	methods := map[string][]float64{}
	for i, r := range l.Rounds {
		n := float64(r.Cycles)
		rate = append(rate, r.PerSecond)
		writes = append(writes, float64(r.Writes)/n)
		reads = append(reads, float64(r.Reads)/n)
		var c float64
		switch {
		case l.Kind == "memory":
		case r.HasWriteStats:
			c = float64(r.Transactions) / n
			if r.Transactions > 0 {
				perTx = append(perTx, float64(r.Batches)/float64(r.Transactions))
			}
			l.CommitsFrom = "WriteStats().Transactions"
		case r.Writes > 0:
			c = float64(r.Writes) / n
			l.CommitsFrom = "store write calls, one transaction each (the store has no WriteStats)"
		case l.Kind == "postgres":
			// Without the counting wrapper: transaction ids, which count
			// subtransactions too.
			c = float64(r.WriteTx) / float64(r.ServerCycles)
			l.CommitsFrom = "transaction ids assigned (subtransactions count too)"
		}
		if l.Kind == "postgres" {
			sc := float64(r.ServerCycles)
			xact = append(xact, float64(r.XactCommit)/sc)
			xids = append(xids, float64(r.WriteTx)/sc)
			walSync = append(walSync, float64(r.WALSyncs)/sc)
			walBytes = append(walBytes, float64(r.WALBytes)/sc)
			if r.WALSyncs > 0 {
				perWAL = append(perWAL, c/(float64(r.WALSyncs)/sc))
			}
		}
		commits = append(commits, c)
		if i < len(l.RawConc) && l.RawConc[i].PerSecond > 0 {
			ratio = append(ratio, r.PerSecond*c/l.RawConc[i].PerSecond)
			wratio = append(wratio, r.PerSecond*float64(r.Writes)/n/l.RawConc[i].PerSecond)
		}
		stmts = append(stmts, float64(r.Statements)/n)
		trips = append(trips, float64(r.RoundTrips)/n)
		cpu = append(cpu, float64(r.CPU)/n)
		user = append(user, float64(r.UserCPU)/n)
		sys = append(sys, float64(r.SysCPU)/n)
		if r.HasSrvCPU {
			srv = append(srv, float64(r.ServerCPU)/n)
		}
		allocs = append(allocs, float64(r.Mallocs)/n)
		a50 = append(a50, float64(r.AnswerToToolP50))
		a99 = append(a99, float64(r.AnswerToToolP99))
		c50 = append(c50, float64(r.CycleP50))
		c99 = append(c99, float64(r.CycleP99))
		l.Early += r.Early
		for k, v := range r.ByMethod {
			methods[k] = append(methods[k], float64(v)/n)
		}
	}
	l.CyclesPerS = median(rate)
	l.CyclesPerSMin, l.CyclesPerSMax = minMax(rate)
	l.WritesPerCyc, l.ReadsPerCyc, l.CommitsPerCyc = median(writes), median(reads), median(commits)
	l.XactPerCyc, l.XIDsPerCyc, l.WALSyncPerCyc, l.WALBytesCyc, l.CommitsPerWAL = median(xact), median(xids), median(walSync), median(walBytes), median(perWAL)
	l.StmtsPerCyc, l.TripsPerCyc = median(stmts), median(trips)
	var rs, rc, rawPerWAL []float64
	for i := range l.RawSeq {
		rs = append(rs, l.RawSeq[i].PerSecond)
		rc = append(rc, l.RawConc[i].PerSecond)
		if s := l.RawConc[i].WALSyncs; s > 0 {
			rawPerWAL = append(rawPerWAL, float64(l.RawConc[i].Commits+l.RawConc[i].WarmCommits)/float64(s))
		}
	}
	l.RawSeqPerS, l.RawConcPerS, l.RawPerWAL = median(rs), median(rc), median(rawPerWAL)
	l.Ratio, l.WritesRatio, l.WritesPerTx = median(ratio), median(wratio), median(perTx)
	l.CPUPerCyc, l.ServerCPUPerCyc = time.Duration(median(cpu)), time.Duration(median(srv))
	l.UserPerCyc, l.SysPerCyc = time.Duration(median(user)), time.Duration(median(sys))
	l.AllocsPerCyc = median(allocs)
	l.AnswerToToolP50, l.AnswerToToolP99 = time.Duration(median(a50)), time.Duration(median(a99))
	l.CycleP50, l.CycleP99 = time.Duration(median(c50)), time.Duration(median(c99))
	if len(methods) > 0 {
		l.ByMethod = map[string]float64{}
		for k, v := range methods {
			l.ByMethod[k] = median(v)
		}
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func minMax(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}
