//go:build linux

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
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

func cycleCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cycle", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o cycleOptions
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
	printFile := fs.String("print", "", "print the tables of a report written with -json-file, and measure nothing")
	fs.BoolVar(&o.quiet, "q", false, "no progress lines on stderr")
	fs.BoolVar(&o.short, "short", false, "a few cycles, rounds and turns, to check the benchmark works (seconds)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the last cycle round of each store and loop count to `file`")
	fs.StringVar(&o.memProfile, "memprofile", "", "write an allocation profile after that round to `file`, and one before it to file.base (go tool pprof -base file.base ...)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./bench cycle -store memory|sqlite:PATH|postgres://... [-loops 1,8,64] [-n N | -d DUR] [-thread-turns T] [-parked K] [-short] [-json]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *printFile != "" {
		b, err := os.ReadFile(*printFile)
		if err != nil {
			return err
		}
		var rep report
		if err := json.Unmarshal(b, &rep); err != nil {
			return fmt.Errorf("%s: %w", *printFile, err)
		}
		for _, l := range rep.Results {
			l.summarize()
		}
		rep.print(stdout)
		return nil
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
	var err error
	if o.loops, err = parseLoops(*loops); err != nil {
		return err
	}
	if len(stores) == 0 {
		stores = stringList{"memory"}
	}
	if o.stores, err = parseStores(stores); err != nil {
		return err
	}
	if o.n < 1 && o.d <= 0 || o.rounds < 1 {
		return fmt.Errorf("want -n or -d, and -rounds of at least 1")
	}
	if o.d > 0 {
		o.n = 0
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
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	js = append(js, '\n')
	if o.jsonFile != "" {
		if err := os.WriteFile(o.jsonFile, js, 0o644); err != nil {
			return err
		}
	}
	if o.jsonOut {
		_, err := stdout.Write(js)
		return err
	}
	rep.print(stdout)
	return nil
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

type machineInfo struct {
	CPU        string `json:"cpu"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	OS         string `json:"os"`
	Kernel     string `json:"kernel,omitempty"`
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
	Start      string `json:"start"`
}

func machine() machineInfo {
	k, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return machineInfo{CPU: cpuModel(), NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(),
		OS: runtime.GOOS + "/" + runtime.GOARCH, Kernel: strings.TrimSpace(string(k)), LoadBefore: loadAvg(), Start: time.Now().Format(time.RFC3339)}
}

type reportOptions struct {
	N           int    `json:"n"`
	Duration    string `json:"d"`
	Rounds      int    `json:"rounds"`
	RawTime     string `json:"raw_time"`
	ArgBytes    int    `json:"arg_bytes"`
	ThreadTurns int    `json:"thread_turns"`
	ResultBytes int    `json:"result_bytes"`
	Parked      int    `json:"parked"`
	Stored      int    `json:"stored,omitempty"`
	CountCalls  bool   `json:"count_calls"`
}

type report struct {
	Machine machineInfo     `json:"machine"`
	Options reportOptions   `json:"options"`
	Results []*loopResult   `json:"cycle"`
	Turns   []*turnsResult  `json:"thread_turns,omitempty"`
	Parked  []*parkedResult `json:"parked,omitempty"`
}

func ms(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func sizeStr(n float64) string {
	switch {
	case n < 0:
		return "—"
	case n < 10*1024:
		return fmt.Sprintf("%.0f B", n)
	case n < 10*1024*1024:
		return fmt.Sprintf("%.1f KB", n/1024)
	}
	return fmt.Sprintf("%.1f MB", n/1024/1024)
}

func (r *report) print(w io.Writer) {
	m := r.Machine
	fmt.Fprintf(w, "tollgate bench cycle — %s, %d CPUs (GOMAXPROCS %d), %s %s, kernel %s\n", m.CPU, m.NumCPU, m.GOMAXPROCS, m.Go, m.OS, m.Kernel)
	fmt.Fprintf(w, "load average %s at the start, %s at the end; %s\n", m.LoadBefore, m.LoadAfter, m.Start)
	what := fmt.Sprintf("%d cycles", r.Options.N)
	if r.Options.N == 0 {
		what = r.Options.Duration
	}
	fmt.Fprintf(w, "cycle: a prompt on a new thread; scripted.Demo proposes one bash call (%d-byte arguments); the policy asks;\n"+
		"a host subscriber sees the question and approves (host.Answer); the tool runs; the model answers; the run ends.\n"+
		"Each figure is the median of %d rounds (%s each after a warm-up), each round beside raw single-row insert\n"+
		"transactions of %s on the same database (sequential and at the same number of loops), taking turns at going first.\n",
		r.Options.ArgBytes, r.Options.Rounds, what, r.Options.RawTime)
	if r.Options.Stored > 0 {
		fmt.Fprintf(w, "Before each round, %d pending questions were stored (a third with a deadline a day away).\n", r.Options.Stored)
	}
	var last string
	for _, l := range r.Results {
		if l.Store != last {
			last = l.Store
			fmt.Fprintf(w, "\n%s", l.Store)
			if l.CommitsFrom != "" {
				fmt.Fprintf(w, " — commits: %s", l.CommitsFrom)
			}
			fmt.Fprintln(w)
			fmt.Fprintf(w, "%5s  %-22s %7s %7s %8s  %-24s %6s  %-19s %-19s %9s %7s\n",
				"loops", "cycles/s [rounds]", "writes", "reads", "commits", "raw tx/s seq | same loops", "ratio", "answer→tool p50/p99", "cycle p50/p99", "CPU/cycle", "allocs")
		}
		rawS, ratio := "—", "—"
		if l.RawConcPerS > 0 {
			rawS = fmt.Sprintf("%.0f | %.0f", l.RawSeqPerS, l.RawConcPerS)
			ratio = fmt.Sprintf("%.2f", l.Ratio)
		}
		commits := "—"
		if l.Kind != "memory" {
			commits = fmt.Sprintf("%.2f", l.CommitsPerCyc)
		}
		fmt.Fprintf(w, "%5d  %-22s %7.2f %7.2f %8s  %-24s %6s  %-19s %-19s %9s %7.0f\n", l.Loops,
			fmt.Sprintf("%.0f [%.0f-%.0f]", l.CyclesPerS, l.CyclesPerSMin, l.CyclesPerSMax),
			l.WritesPerCyc, l.ReadsPerCyc, commits, rawS, ratio,
			ms(l.AnswerToToolP50)+" / "+ms(l.AnswerToToolP99), ms(l.CycleP50)+" / "+ms(l.CycleP99),
			ms(l.CPUPerCyc), l.AllocsPerCyc)
	}
	printedPG := false
	for _, l := range r.Results {
		if l.Kind != "postgres" {
			continue
		}
		if !printedPG {
			printedPG = true
			fmt.Fprintf(w, "\nPostgreSQL, per cycle, from the server (counted from the store's opening to its closing, warm-up included;\n"+
				"xact_commit: every commit, read-only ones too; xids: transaction ids assigned, write transactions and their subtransactions;\n"+
				"statements and round trips (a statement alone, a batch, a prepare): the store's, from its pgx tracer, measured cycles only)\n")
			fmt.Fprintf(w, "%5s %5s %12s %12s %12s %14s %18s %16s %11s %11s\n", "loops", "conns", "xact_commit", "xids", "WAL flushes", "WAL bytes", "commits/WAL flush", "server CPU/cycle", "statements", "round trips")
		}
		raw := ""
		if l.RawPerWAL > 0 {
			raw = fmt.Sprintf(" (raw %.1f)", l.RawPerWAL)
		}
		srv := "—"
		if l.ServerCPUPerCyc > 0 {
			srv = ms(l.ServerCPUPerCyc)
		}
		flushes, perFlush := "—", "—"
		if l.WALSyncPerCyc > 0 {
			flushes, perFlush = fmt.Sprintf("%.2f", l.WALSyncPerCyc), fmt.Sprintf("%.2f%s", l.CommitsPerWAL, raw)
		}
		fmt.Fprintf(w, "%5d %5d %12.2f %12.2f %12s %14s %18s %16s %11.2f %11.2f\n", l.Loops, l.Conns, l.XactPerCyc, l.XIDsPerCyc, flushes,
			sizeStr(l.WALBytesCyc), perFlush, srv, l.StmtsPerCyc, l.TripsPerCyc)
	}
	header := false
	for _, l := range r.Results {
		if len(l.ByMethod) == 0 && l.WritesPerTx == 0 && l.Early == 0 {
			continue
		}
		if !header {
			header = true
			fmt.Fprintf(w, "\nper cycle (median of rounds): store calls, writes | reads\n")
		}
		keys := make([]string, 0, len(l.ByMethod))
		for k := range l.ByMethod {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var ws, rs []string
		for _, k := range keys {
			s := fmt.Sprintf("%s %.3g", k, l.ByMethod[k])
			if writeMethods[k] {
				ws = append(ws, s)
			} else {
				rs = append(rs, s)
			}
		}
		fmt.Fprintf(w, "  %s, %s: %s | %s", l.Kind, plural(l.Loops, "loop"), strings.Join(ws, ", "), strings.Join(rs, ", "))
		if l.WritesPerTx > 0 {
			fmt.Fprintf(w, "; %.2f writes per transaction (group commit)", l.WritesPerTx)
		}
		if l.Early > 0 {
			fmt.Fprintf(w, "; %d tool starts came before Answer returned (counted as 0)", l.Early)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "\nwrites, reads: store calls per cycle; commits: database transactions that wrote, per cycle.")
	fmt.Fprintln(w, "ratio = cycles/s × commits per cycle ÷ raw commits/s at the same loops: the share of the database's commit rate the cycles use.")
	for _, t := range r.Turns {
		fmt.Fprintf(w, "\n%s: one thread of %d tool-call turns (%d-byte results) in %s; thread %s at the end; %s written in all\n",
			t.Store, t.Turns, t.ResultBytes, ms(t.Total), sizeStr(float64(t.ThreadBytes)), sizeStr(float64(t.TotalWritten)))
		fmt.Fprintf(w, "bytes written: %s", t.WrittenBy)
		if t.FileGrowth != 0 {
			fmt.Fprintf(w, "; the database file, WAL and shm grew %s", sizeStr(float64(t.FileGrowth)))
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "%6s %7s %12s %16s %16s %8s\n", "turn", "steps", "step time", "written/step", "new content/step", "ratio")
		for _, m := range t.Marks {
			ratio := "—"
			if m.Written >= 0 && m.Content > 0 {
				ratio = fmt.Sprintf("%.1f", m.Written/m.Content)
			}
			fmt.Fprintf(w, "%6d %7d %12s %16s %16s %8s\n", m.Turn, m.Steps, ms(m.StepTime), sizeStr(m.Written), sizeStr(m.Content), ratio)
		}
	}
	for _, p := range r.Parked {
		fmt.Fprintf(w, "\n%s: %d runs parked on one host in %.1fs: resident memory %.1f MB → %.1f MB (%.0f bytes per run), heap %.1f MB → %.1f MB, goroutines %d → %d\n",
			p.Store, p.Parked, p.Seconds, float64(p.RSSBeforeKB)/1024, float64(p.RSSAfterKB)/1024,
			float64(p.RSSAfterKB-p.RSSBeforeKB)*1024/float64(max(1, p.Parked)),
			float64(p.HeapBeforeKB)/1024, float64(p.HeapAfterKB)/1024, p.GoroutinesBefore, p.GoroutinesAfter)
	}
}
