//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/tollgate-ai/tollgate/internal/sandboxbench"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

const sandboxUsage = `usage: go run ./bench sandbox [-n N] [-rounds R] [-tollgate PATH|none] [-cgo=false] [-heap MB] [-gap D]

How long the bash tool takes to run true, to its exit, under each sandbox
profile, beside bash -c true started directly (the raw limit: what any
command costs), the kinds taking turns, N starts each a round:

  tollgate-sandbox   the helper binary (cmd/tollgate-sandbox, built as the
                     README builds it: CGO_ENABLED=0, -ldflags="-s -w")
  tollgate-sandbox (cgo)  the same built with cgo on: dynamically linked
  tollgate           tollgate itself re-executed as the helper, as when no
                     helper binary is next to it (built as the README
                     builds it; -tollgate none leaves it out)

Unconfined commands start the same binary as their supervisor.

-heap MB holds MB of live, touched heap in the measuring process first, as
a long-running server holds its own: a helper started in a new user
namespace is forked (Go cannot vfork it), and a fork copies the page
tables of the process that starts it.

-gap D pauses D before each start (outside the timing), as the starts of
a model's tool calls are apart: from its second confined command on, the
bash tool starts the next command's helper ahead (a spare, tools/bash),
and back to back that start competes with the command measured.
`

func sandboxCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench sandbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, sandboxUsage); fs.PrintDefaults() }
	n := fs.Int("n", 100, "starts of each kind a round")
	rounds := fs.Int("rounds", 3, "rounds")
	tollgate := fs.String("tollgate", "", "the tollgate binary (default: built from ./cmd/tollgate; none: leave it out)")
	cgo := fs.Bool("cgo", true, "measure a helper built with cgo (dynamically linked) too")
	heapMB := fs.Int("heap", 0, "MB of live heap the measuring process holds (a server's)")
	gap := fs.Duration("gap", 0, "pause before each start, outside the timing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	bash.UseSpareHelpers(true) // as tollgate serve and run: this process never confines itself
	if err := bash.Check().Enforceable(bash.ReadOnly); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "tollgate-bench-sandbox-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintln(stderr, "building tollgate-sandbox...")
	helper, err := sandboxbench.Build(ctx, dir, false)
	if err != nil {
		return err
	}
	helpers := []sandboxbench.Named{{Name: "tollgate-sandbox", Path: helper}}
	if *cgo {
		cdir := filepath.Join(dir, "cgo")
		if err := os.Mkdir(cdir, 0o700); err != nil {
			return err
		}
		h, err := sandboxbench.Build(ctx, cdir, true)
		if err != nil {
			return err
		}
		helpers = append(helpers, sandboxbench.Named{Name: "tollgate-sandbox (cgo)", Path: h})
	}
	switch *tollgate {
	case "none":
	case "":
		*tollgate = filepath.Join(dir, "tollgate")
		fmt.Fprintln(stderr, "building tollgate...")
		build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", *tollgate, "./cmd/tollgate")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		build.Stderr = stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building tollgate: %w", err)
		}
		fallthrough
	default:
		helpers = append(helpers, sandboxbench.Named{Name: "tollgate", Path: *tollgate})
	}
	defer bash.SetHelper("")
	kinds := sandboxbench.Kinds(helpers)
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		return err
	}
	heap := make([][]byte, *heapMB)
	for i := range heap {
		heap[i] = make([]byte, 1<<20)
		for j := 0; j < len(heap[i]); j += os.Getpagesize() {
			heap[i][j] = 1
		}
	}
	defer runtime.KeepAlive(heap)
	m := machine()
	samples := make([][]time.Duration, len(kinds))
	for r := range *rounds {
		for k, kind := range kinds {
			if err := kind.Use(); err != nil {
				return fmt.Errorf("%s: %w", kind.Name, err)
			}
			for range *n {
				time.Sleep(*gap)
				d, err := kind.Start(ctx, work)
				if err != nil {
					return fmt.Errorf("%s: %w", kind.Name, err)
				}
				samples[k] = append(samples[k], d)
			}
			fmt.Fprintf(stderr, "round %d/%d, %s: p50 %s\n", r+1, *rounds, kind.Name, ms(pct(samples[k], 50)))
		}
	}
	r := bash.Check()
	fmt.Fprintf(stdout, "tollgate bench sandbox — %d starts of true each in %d rounds, %d MB of live heap, %s apart; %s, %d CPUs, %s, kernel %s, Landlock ABI %d; load average %s at the start, %s at the end\n",
		*n**rounds, *rounds, *heapMB, *gap, m.CPU, m.NumCPU, m.Go, m.Kernel, r.ABI, m.LoadBefore, loadAvg())
	fmt.Fprintf(stdout, "%-58s %9s %9s %9s %12s\n", "", "p50", "p90", "p99", "p50 - raw")
	for k, kind := range kinds {
		s := statsOf(samples[k])
		fmt.Fprintf(stdout, "%-58s %9s %9s %9s %12s\n", kind.Name, ms(s.P50), ms(s.P90), ms(s.P99), ms(s.P50-pct(samples[0], 50)))
	}
	return nil
}
