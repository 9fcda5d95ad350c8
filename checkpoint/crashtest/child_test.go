package crashtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
)

const childEnv = "TOLLGATE_CRASH_CHILD"

// childSpec tells the child what to run.
type childSpec struct {
	Store  string // "sqlite" or "postgres"
	Path   string // sqlite
	DSN    string // postgres
	Schema string // postgres
	Ledger string
	// Signals is the file where children tell the parent things, one line
	// "subject what" each: "- started" once the store is open and the
	// threads start; in pairs, "thread asking-leader" (or -follower) when
	// about to ask (or look up) a thread's question, and "thread lost-..."
	// for a race lost to the other child (see lostRace).
	Signals string
	Round   int
	Threads int
	// Pair: two children run the round at once; a child that finds the
	// other driving a thread (see lostRace) leaves it to the other.
	// The second is the Follower: it starts no run.
	Pair, Follower bool
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
	sf, err := os.OpenFile(spec.Signals, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	signals := &ledger{f: sf}
	var asking func(string)
	if spec.Pair {
		role := "asking-leader"
		if spec.Follower {
			role = "asking-follower"
		}
		asking = func(thread string) {
			if err := signals.write(thread + " " + role + "\n"); err != nil {
				t.Error(err)
			}
		}
	}
	if err := signals.write("- started\n"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, thread := range threadNames(spec.Round, spec.Threads) {
		wg.Go(func() {
			err := runThread(t.Context(), store, l, thread, spec.Follower, asking)
			if err != nil && spec.Pair && lostRace(err) {
				if err := signals.write(fmt.Sprintf("%s %s\n", thread, raceName(err))); err != nil {
					t.Error(err)
				}
				return
			}
			if err != nil {
				t.Errorf("%s: %v", thread, err)
			}
		})
	}
	wg.Wait()
}

// raceName names the race a child lost, for the signals file: the other
// claimed a call, saved the thread, started or finished the run first.
func raceName(err error) string {
	switch {
	case errors.Is(err, agent.ErrCallClaimed):
		return "lost-claim"
	case errors.Is(err, checkpoint.ErrConflict):
		return "lost-save"
	case errors.Is(err, agent.ErrRunInProgress):
		return "lost-start"
	default:
		return "lost-finish"
	}
}
