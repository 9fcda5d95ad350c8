package bash_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

// BenchmarkTrue is the cost of one command, `true`, per profile: what the
// sandbox helper (a re-executed binary, namespaces, Landlock) adds to a
// plain bash -c. It reports the median and the 99th percentile.
//
//	go test ./tools/bash -run '^$' -bench True -benchtime 500x
func BenchmarkTrue(b *testing.B) {
	for _, p := range bash.Profiles {
		b.Run(string(p), func(b *testing.B) {
			if err := bash.Check().Enforceable(p); err != nil {
				b.Skip(err)
			}
			opts := &bash.Options{Dir: b.TempDir(), Profile: p}
			times := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				r, err := bash.Run(context.Background(), opts, "true")
				times = append(times, time.Since(start))
				if err != nil || r.ExitCode != 0 {
					b.Fatalf("%+v %v", r, err)
				}
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
			b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
