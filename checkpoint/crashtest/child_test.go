package crashtest

import (
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
)

const childEnv = "TOLLGATE_CRASH_CHILD"

// childSpec tells the child what to run.
type childSpec struct {
	Store   string // "sqlite" or "postgres"
	Path    string // sqlite
	DSN     string // postgres
	Schema  string // postgres
	Ledger  string
	Round   int
	Threads int
}

func openStore(t testing.TB, spec childSpec) checkpoint.Store {
	t.Helper()
	var s checkpoint.Store
	var err error
	switch spec.Store {
	case "sqlite":
		s, err = sqlite.Open(t.Context(), spec.Path, &sqlite.Options{PollInterval: 20 * time.Millisecond})
	case "postgres":
		s, err = postgres.Open(t.Context(), spec.DSN, &postgres.Options{Schema: spec.Schema, MaxConns: 8, PollInterval: time.Second})
	default:
		t.Fatalf("store %q", spec.Store)
	}
	if err != nil {
		t.Fatalf("open %s: %v", spec.Store, err)
	}
	return s
}

// TestCrashChild is the child process of TestCrash: it starts or resumes
// every thread of its round and returns when all have ended, unless the
// parent kills it first.
func TestCrashChild(t *testing.T) {
	raw := os.Getenv(childEnv)
	if raw == "" {
		t.Skip("the child process of TestCrash")
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	store := openStore(t, spec)
	defer store.Close()
	f, err := os.OpenFile(spec.Ledger, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := &ledger{f: f}
	var wg sync.WaitGroup
	for _, thread := range threadNames(spec.Round, spec.Threads) {
		wg.Go(func() {
			if err := runThread(t.Context(), store, l, thread); err != nil {
				t.Errorf("%s: %v", thread, err)
			}
		})
	}
	wg.Wait()
}
