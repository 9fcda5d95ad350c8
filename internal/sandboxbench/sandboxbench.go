// Package sandboxbench measures how long the bash tool takes to start
// `true` under each profile and each helper binary, beside the raw limit
// (bash -c true started directly), the kinds taking turns so that a busy
// machine weighs on all alike. It is used by the benchmarks of
// tools/bash and cmd/tollgate and by go run ./bench sandbox, never by
// tollgate itself.
package sandboxbench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

// Kind is one way of starting `true`.
type Kind struct {
	// Name is for a table, Key for a benchmark's metric.
	Name, Key string
	// Raw: bash -c true started directly (no helper, no supervisor).
	Raw bool
	// Helper is the binary started as the helper and the supervisor
	// (bash.SetHelper; "" is the process's own executable).
	Helper  string
	Profile bash.Profile
}

// Kinds are the raw limit and every profile under each helper binary of
// helpers, named by its key ("tollgate-sandbox", "tollgate", "self").
func Kinds(helpers []Named) []Kind {
	kinds := []Kind{{Name: "raw: bash -c true, started directly", Key: "raw", Raw: true}}
	for _, h := range helpers {
		for _, p := range bash.Profiles {
			name := fmt.Sprintf("%s, helper %s", p, h.Name)
			if p == bash.Unconfined {
				name = fmt.Sprintf("%s (supervised), helper %s", p, h.Name)
			}
			kinds = append(kinds, Kind{Name: name, Key: string(p) + "." + h.Name, Helper: h.Path, Profile: p})
		}
	}
	return kinds
}

// Named is a helper binary and what to call it.
type Named struct{ Name, Path string }

// Build builds cmd/tollgate-sandbox into dir as README's build does
// (static: CGO_ENABLED=0; stripped) and returns its path. With cgo, it
// builds it as a plain go build would where cgo is on: dynamically
// linked (go-landlock's psx then wraps libc's pthread_create).
func Build(ctx context.Context, dir string, cgo bool) (string, error) {
	out := filepath.Join(dir, bash.HelperName)
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "github.com/tollgate-ai/tollgate/cmd/tollgate-sandbox")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if cgo {
		build.Env = append(os.Environ(), "CGO_ENABLED=1")
	}
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/tollgate-sandbox: %v\n%s", err, b)
	}
	return out, nil
}

// Use makes k's helper the process's (outside any timing: SetHelper asks
// the binary its protocol).
func (k Kind) Use() error {
	if k.Raw {
		return nil
	}
	return bash.SetHelper(k.Helper)
}

// Start starts `true` once in dir as k (after Use) and returns how long
// it took, to its exit.
func (k Kind) Start(ctx context.Context, dir string) (time.Duration, error) {
	start := time.Now()
	if k.Raw {
		cmd := exec.CommandContext(ctx, "bash", "-c", "true")
		cmd.Dir = dir
		err := cmd.Run()
		return time.Since(start), err
	}
	r, err := bash.Run(ctx, &bash.Options{Dir: dir, Profile: k.Profile}, "true")
	d := time.Since(start)
	if err == nil && r.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", r.ExitCode, r.Stderr)
	}
	return d, err
}

// Bench runs every kind in turn, b.N rounds, in dir, and reports each
// one's median and 99th percentile (ms) and the load average.
func Bench(b *testing.B, kinds []Kind) {
	dir := b.TempDir()
	samples := make([][]time.Duration, len(kinds))
	for b.Loop() {
		for i, k := range kinds {
			if err := k.Use(); err != nil {
				b.Fatal(err)
			}
			d, err := k.Start(b.Context(), dir)
			if err != nil {
				b.Fatalf("%s: %v", k.Name, err)
			}
			samples[i] = append(samples[i], d)
		}
	}
	for i, k := range kinds {
		b.ReportMetric(float64(Pct(samples[i], 50).Microseconds())/1000, k.Key+"-p50-ms")
		b.ReportMetric(float64(Pct(samples[i], 99).Microseconds())/1000, k.Key+"-p99-ms")
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(load))
		if l, err := strconv.ParseFloat(f[0], 64); err == nil {
			b.ReportMetric(l, "load1")
		}
	}
}

// Pct is the p-th percentile of samples (sorted in place).
func Pct(samples []time.Duration, p int) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	slices.Sort(samples)
	return samples[min(len(samples)*p/100, len(samples)-1)]
}
