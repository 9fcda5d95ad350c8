package hooks_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
)

// BenchmarkAllowed is one allowed call of a session through Handle: the
// service's own cost (go run ./bench hooks measures it end to end).
func BenchmarkAllowed(b *testing.B) {
	for _, kind := range []string{"memory", "sqlite"} {
		b.Run(kind, func(b *testing.B) {
			var store checkpoint.Store = memory.New()
			if kind == "sqlite" {
				s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "t.db"), nil)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				store = s
			}
			t := &testing.T{}
			f := startFixture(t, store)
			defer f.svc.Shutdown()
			defer f.host.Shutdown(context.Background())
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// A session of 50 calls: its thread stays small.
				r := f.svc.Handle(context.Background(), "claude-code", pre(fmt.Sprint("bench", i/50), fmt.Sprint("toolu_", i), "Bash", bash("ls")), nil)
				if r.Status != 200 {
					b.Fatal(string(r.Body))
				}
			}
		})
	}
}
