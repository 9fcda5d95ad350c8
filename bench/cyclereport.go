//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"
)

// emitReport writes rep as JSON to jsonFile (if named), then prints it
// to stdout: as JSON with jsonOut, else its tables.
func emitReport(stdout io.Writer, rep interface{ print(io.Writer) }, jsonFile string, jsonOut bool) error {
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	js = append(js, '\n')
	if jsonFile != "" {
		if err := os.WriteFile(jsonFile, js, 0o644); err != nil {
			return err
		}
	}
	if jsonOut {
		_, err := stdout.Write(js)
		return err
	}
	rep.print(stdout)
	return nil
}

// readReport reads a report written with -json-file into rep.
func readReport(file string, rep any) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, rep); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// printReportFile prints the tables of a report written with -json-file.
func printReportFile(file string, stdout io.Writer) error {
	var rep report
	if err := readReport(file, &rep); err != nil {
		return err
	}
	for _, l := range rep.Results {
		l.summarize()
	}
	rep.print(stdout)
	return nil
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
	r.printCycles(w)
	r.printPostgres(w)
	r.printCalls(w)
	fmt.Fprintln(w, "\nwrites, reads: store calls per cycle; commits: database transactions that wrote, per cycle.")
	fmt.Fprintln(w, "ratio = cycles/s × commits per cycle ÷ raw commits/s at the same loops: the share of the database's commit rate the cycles use.")
	r.printTurns(w)
	for _, p := range r.Parked {
		fmt.Fprintf(w, "\n%s: %d runs parked on one host in %.1fs: resident memory %.1f MB → %.1f MB (%.0f bytes per run), heap %.1f MB → %.1f MB, goroutines %d → %d\n",
			p.Store, p.Parked, p.Seconds, float64(p.RSSBeforeKB)/1024, float64(p.RSSAfterKB)/1024,
			float64(p.RSSAfterKB-p.RSSBeforeKB)*1024/float64(max(1, p.Parked)),
			float64(p.HeapBeforeKB)/1024, float64(p.HeapAfterKB)/1024, p.GoroutinesBefore, p.GoroutinesAfter)
	}
}

// printCycles prints the run's header and a table of the cycle figures
// per store.
func (r *report) printCycles(w io.Writer) {
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
}

// printPostgres prints PostgreSQL's own figures per cycle, if a store
// was one.
func (r *report) printPostgres(w io.Writer) {
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
}

// printCalls prints the store calls per cycle by method, where counted.
func (r *report) printCalls(w io.Writer) {
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
}

// printTurns prints the long threads' figures.
func (r *report) printTurns(w io.Writer) {
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
}
