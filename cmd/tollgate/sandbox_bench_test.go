package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

// BenchmarkBashTrue is tools/bash's BenchmarkTrue in a binary that holds
// what tollgate holds: the sandbox helper re-executes it, so its start-up
// (package initialisation) is part of the cost of every confined command.
//
//	go test ./cmd/tollgate -run '^$' -bench BashTrue -benchtime 300x
func BenchmarkBashTrue(b *testing.B) {
	for _, p := range bash.Profiles {
		b.Run(string(p), func(b *testing.B) {
			if err := bash.Check().Enforceable(p); err != nil {
				b.Skip(err)
			}
			opts := &bash.Options{Dir: b.TempDir(), Profile: p}
			var times []time.Duration
			for b.Loop() {
				start := time.Now()
				if r, err := bash.Run(context.Background(), opts, "true"); err != nil || r.ExitCode != 0 {
					b.Fatalf("%+v %v", r, err)
				}
				times = append(times, time.Since(start))
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
			b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
