//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// clusterOptions are the flags of the cluster command.
type clusterOptions struct {
	dsn   string
	parts map[string]bool

	// latency
	latencyN     int
	burst        int
	latencyWarm  int
	latencyConns int
	// memory
	parked      int
	answers     int
	answerLoops int
	seedLoops   int
	bin         string
	settleMax   time.Duration
	idleTime    time.Duration
	// cycles
	loops    []int
	n        int
	replicas int
	pgConns  int
	alone    bool

	rounds     int
	rawTime    time.Duration
	timeout    time.Duration
	argBytes   int
	keep       bool
	jsonOut    bool
	jsonFile   string
	quiet      bool
	short      bool
	cpuProfile string
}

var clusterParts = []string{"latency", "memory", "cycles", "idle"}

// parseClusterFlags reads the cluster command's flags; printFile is
// -print's report, read before the other flags are checked.
func parseClusterFlags(args []string, stderr io.Writer) (o clusterOptions, printFile string, err error) {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dsn, "store", "", "the PostgreSQL server, `postgres://...` (required): the benchmark makes a database of its own on it, and drops it at the end")
	parts := fs.String("parts", strings.Join(clusterParts, ","), "what to measure, comma-separated: latency (answer on B → tool on A), memory (three tollgate serve replicas with -parked runs), cycles (three replicas against one), idle (the database's transactions a second with -replicas tollgate serve replicas nobody uses)")
	fs.IntVar(&o.latencyN, "latency", 500, "latency: answers measured per way of answering (over the rounds)")
	fs.IntVar(&o.burst, "burst", 8, "latency: answers given at once in the burst series (1: no burst series)")
	fs.IntVar(&o.latencyWarm, "latency-warmup", 0, "latency: answers before the measured ones (0: 20, or the burst)")
	fs.IntVar(&o.latencyConns, "latency-conns", 0, "latency: each replica's pool size (0: the larger of 4 and -burst)")
	fs.IntVar(&o.parked, "parked", 100000, "memory: parked runs seeded before the replicas start")
	fs.IntVar(&o.answers, "answer", 1000, "memory: parked runs answered (approved) through random replicas, after they settled")
	fs.IntVar(&o.answerLoops, "answer-loops", 8, "memory: answers sent at once")
	fs.IntVar(&o.seedLoops, "seed-loops", 16, "memory: goroutines committing the seeded runs")
	fs.StringVar(&o.bin, "bin", "", "memory: the tollgate `binary` to run (zero: built from ./cmd/tollgate of this checkout)")
	fs.DurationVar(&o.idleTime, "idle-time", time.Minute, "idle: how long the idle replicas' transactions are counted")
	fs.DurationVar(&o.settleMax, "settle", 2*time.Minute, "memory and idle: how long a replica may take to go quiet after starting or after the answers")
	loops := fs.String("loops", "8,32", "cycles: concurrent client loops, comma-separated: one measurement per number")
	fs.IntVar(&o.n, "n", 1000, "cycles: cycles per round (all loops together), after a warm-up")
	fs.IntVar(&o.replicas, "replicas", 3, "memory and cycles: replicas (cycles measures this many against one)")
	fs.BoolVar(&o.alone, "alone", true, "cycles: also measure a host alone, without a cluster (the single-process host), in the same rounds")
	fs.IntVar(&o.pgConns, "pg-conns", 0, "cycles: each replica's pool size and the raw transactions' (0: the number of loops, at least 4)")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds, alternating with raw rounds; latency samples are pooled over them, cycles/s is their median")
	fs.DurationVar(&o.rawTime, "raw-time", time.Second, "length of each raw-transaction round")
	fs.DurationVar(&o.timeout, "timeout", time.Hour, "the questions' time to answer (each has a deadline, as under tollgate serve's policies)")
	fs.IntVar(&o.argBytes, "arg-bytes", 1024, "size of the in-process cycles' tool call arguments")
	fs.BoolVar(&o.keep, "keep", false, "keep the benchmark's database")
	fs.BoolVar(&o.jsonOut, "json", false, "print JSON instead of tables")
	fs.StringVar(&o.jsonFile, "json-file", "", "also write the JSON to `file`")
	printFlag := fs.String("print", "", "print the tables of a report written with -json-file, and measure nothing")
	fs.BoolVar(&o.quiet, "q", false, "no progress lines on stderr")
	fs.BoolVar(&o.short, "short", false, "small counts, to check the benchmark works (a minute, most of it building tollgate)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write CPU profiles of the latency series and of the last cycles round of each loop count and replica count to `file` (file-PART-....ext)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./bench cluster -store postgres://... [-parts latency,memory,cycles] [-latency N] [-parked K -answer M] [-loops 8,32 -n N] [-idle-time D] [-short] [-json]\n\n")
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
		defaults := map[string]func(){
			"latency":   func() { o.latencyN = 24 },
			"burst":     func() { o.burst = 4 },
			"parked":    func() { o.parked = 300 },
			"answer":    func() { o.answers = 30 },
			"loops":     func() { *loops = "2,4" },
			"n":         func() { o.n = 24 },
			"rounds":    func() { o.rounds = 2 },
			"raw-time":  func() { o.rawTime = 100 * time.Millisecond },
			"settle":    func() { o.settleMax = 30 * time.Second },
			"idle-time": func() { o.idleTime = 5 * time.Second },
		}
		for name, f := range defaults {
			if !set[name] {
				f()
			}
		}
	}
	if !strings.HasPrefix(o.dsn, "postgres://") && !strings.HasPrefix(o.dsn, "postgresql://") {
		fs.Usage()
		return o, "", errors.New("want -store postgres://...: the replicas share one PostgreSQL database")
	}
	if o.parts, err = parseParts(*parts); err != nil {
		return o, "", err
	}
	if o.loops, err = parseLoops(*loops); err != nil {
		return o, "", err
	}
	if o.rounds < 1 || o.latencyN < 1 || o.burst < 1 || o.n < 1 || o.replicas < 2 || o.answers > o.parked {
		return o, "", errors.New("want -rounds, -latency, -burst and -n of at least 1, -replicas of at least 2, and -answer no more than -parked")
	}
	if o.latencyWarm <= 0 {
		o.latencyWarm = max(20, o.burst)
	}
	if o.latencyConns <= 0 {
		o.latencyConns = max(4, o.burst)
	}
	return o, "", nil
}

// parseParts reads -parts: known parts, comma-separated.
func parseParts(s string) (map[string]bool, error) {
	parts := map[string]bool{}
	for p := range strings.SplitSeq(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		known := false
		for _, k := range clusterParts {
			known = known || k == p
		}
		if !known {
			return nil, fmt.Errorf("-parts: unknown part %q (want %s)", p, strings.Join(clusterParts, ", "))
		}
		parts[p] = true
	}
	return parts, nil
}

func clusterCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, printFile, err := parseClusterFlags(args, stderr)
	if err != nil {
		return err
	}
	if printFile != "" {
		var rep clusterReport
		if err := readReport(printFile, &rep); err != nil {
			return err
		}
		rep.print(stdout)
		return nil
	}
	progress := func(format string, a ...any) {
		if !o.quiet {
			fmt.Fprintf(stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
		}
	}
	rep, err := runCluster(ctx, o, progress)
	if err != nil {
		return err
	}
	return emitReport(stdout, rep, o.jsonFile, o.jsonOut)
}

// clusterReport is what go run ./bench cluster measured.
type clusterReport struct {
	Machine  machineInfo          `json:"machine"`
	Options  clusterReportOptions `json:"options"`
	Server   string               `json:"server"`
	Database string               `json:"database"`
	Latency  *latencyResult       `json:"latency,omitempty"`
	Memory   *memoryResult        `json:"memory,omitempty"`
	Idle     *idleResult          `json:"idle,omitempty"`
	Cycles   []*clusterCycles     `json:"cycles,omitempty"`
}

type clusterReportOptions struct {
	Parts       []string `json:"parts"`
	Latency     int      `json:"latency"`
	Burst       int      `json:"burst"`
	Parked      int      `json:"parked"`
	Answers     int      `json:"answers"`
	AnswerLoops int      `json:"answer_loops"`
	SeedLoops   int      `json:"seed_loops"`
	Loops       []int    `json:"loops"`
	N           int      `json:"n"`
	Replicas    int      `json:"replicas"`
	Rounds      int      `json:"rounds"`
	RawTime     string   `json:"raw_time"`
	Timeout     string   `json:"timeout"`
	ArgBytes    int      `json:"arg_bytes"`
	Short       bool     `json:"short"`
}

// runCluster makes the benchmark's database, measures the parts asked
// for in it, and drops it.
func runCluster(ctx context.Context, o clusterOptions, progress func(string, ...any)) (*clusterReport, error) {
	rep := &clusterReport{Machine: machine(), Options: clusterReportOptions{
		Latency: o.latencyN, Burst: o.burst, Parked: o.parked, Answers: o.answers, AnswerLoops: o.answerLoops, SeedLoops: o.seedLoops,
		Loops: o.loops, N: o.n, Replicas: o.replicas, Rounds: o.rounds, RawTime: o.rawTime.String(), Timeout: o.timeout.String(),
		ArgBytes: o.argBytes, Short: o.short,
	}}
	for _, p := range clusterParts {
		if o.parts[p] {
			rep.Options.Parts = append(rep.Options.Parts, p)
		}
	}
	db, err := newClusterDatabase(ctx, o.dsn, o.keep)
	if err != nil {
		return nil, err
	}
	defer db.drop()
	rep.Database, rep.Server = db.label, db.version
	progress("database %s on %s; load average %s", db.label, db.version, loadAvg())
	b, err := openBackend(ctx, db.dsn, o.keep)
	if err != nil {
		return nil, err
	}
	defer b.close()
	if o.parts["latency"] {
		progress("latency: from an answer's commit on replica B to the tool starting on replica A")
		if rep.Latency, err = measureLatency(ctx, b, db.dsn, o, progress); err != nil {
			return nil, fmt.Errorf("latency: %w", err)
		}
	}
	if o.parts["cycles"] {
		if rep.Cycles, err = measureClusterCycles(ctx, b, db.dsn, o, progress); err != nil {
			return nil, fmt.Errorf("cycles: %w", err)
		}
	}
	if o.parts["idle"] {
		if rep.Idle, err = measureIdle(ctx, b, db.dsn, o, progress); err != nil {
			return nil, fmt.Errorf("idle: %w", err)
		}
	}
	if o.parts["memory"] {
		progress("memory: %d tollgate serve replicas with %d parked runs", o.replicas, o.parked)
		if rep.Memory, err = measureMemory(ctx, b, db.dsn, o, progress); err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
	}
	rep.Machine.LoadAfter = loadAvg()
	return rep, nil
}

// clusterDatabase is the benchmark's database: tollgate serve always
// keeps its tables in the schema "tollgate" of the URL's database (the
// URL cannot name another), so the replicas get a database of their own.
type clusterDatabase struct {
	dsn, label, version string
	drop                func()
}

func newClusterDatabase(ctx context.Context, dsn string, keep bool) (*clusterDatabase, error) {
	conn, err := pgx.Connect(ctx, withParam(dsn, "application_name", appName+"-setup"))
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	db := &clusterDatabase{drop: func() {}}
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version')`).Scan(&db.version); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	db.version = "PostgreSQL " + db.version
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("tgcluster_%d_%s", os.Getpid(), randomHex(3))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		// A role that may not create databases: the URL's own database,
		// when no tollgate store is in it.
		var exists bool
		if qerr := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'tollgate')`).Scan(&exists); qerr != nil {
			return nil, fmt.Errorf("postgres: %w", qerr)
		}
		if exists {
			return nil, fmt.Errorf("CREATE DATABASE: %w; and the URL's database already holds a tollgate store (schema \"tollgate\"), which tollgate serve would use: give a role that may create databases, or an empty database", err)
		}
		db.dsn = dsn
		db.label = u.Redacted() + " (its schema \"tollgate\", made and dropped here)"
		if !keep {
			db.drop = func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if c, err := pgx.Connect(ctx, dsn); err == nil {
					if _, err := c.Exec(ctx, `DROP SCHEMA IF EXISTS tollgate, tgc_latency, tgc_cycles CASCADE`); err != nil {
						fmt.Fprintf(os.Stderr, "bench: dropping the benchmark's schemas: %v\n", err)
					}
					c.Close(ctx)
				}
			}
		}
		return db, nil
	}
	u.Path = "/" + name
	db.dsn = u.String()
	db.label = name
	if keep {
		db.label += " (kept)"
		return db, nil
	}
	db.drop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: dropping database %s: %v\n", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "bench: dropping database %s: %v\n", name, err)
		}
	}
	return db, nil
}

// durStats are the percentiles of a set of durations.
type durStats struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

func statsOf(ds []time.Duration) durStats {
	return durStats{N: len(ds), P50: pct(ds, 50), P90: pct(ds, 90), P99: pct(ds, 99), Max: pct(ds, 100)}
}

func (s durStats) String() string {
	if s.N == 0 {
		return "—"
	}
	return fmt.Sprintf("%s / %s / %s / %s", ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max))
}

func (r *clusterReport) print(w io.Writer) {
	m := r.Machine
	fmt.Fprintf(w, "tollgate bench cluster — %s, %d CPUs (GOMAXPROCS %d), %s %s, kernel %s\n", m.CPU, m.NumCPU, m.GOMAXPROCS, m.Go, m.OS, m.Kernel)
	fmt.Fprintf(w, "%s, database %s; load average %s at the start, %s at the end; %s\n", r.Server, r.Database, m.LoadBefore, m.LoadAfter, m.Start)
	if l := r.Latency; l != nil {
		l.print(w)
	}
	if len(r.Cycles) > 0 {
		printClusterCycles(w, r.Cycles)
	}
	if mem := r.Memory; mem != nil {
		mem.print(w)
	}
	if r.Idle != nil {
		r.Idle.print(w)
	}
}

// cpuProfilePath names a CPU profile of one part of the run.
func cpuProfilePath(base string, parts ...any) string {
	if base == "" {
		return ""
	}
	ext := ""
	if i := strings.LastIndexByte(base, '.'); i > strings.LastIndexByte(base, '/') {
		ext = base[i:]
	}
	var sb strings.Builder
	sb.WriteString(strings.TrimSuffix(base, ext))
	for _, p := range parts {
		fmt.Fprintf(&sb, "-%v", p)
	}
	return sb.String() + ext
}
