// Package storetest gives tests a checkpoint store of the kind named by
// TOLLGATE_TEST_STORE: "memory" (the default) or "sqlite" (a file in the
// test's temporary directory). CI runs the agent, hitl and interrupt tests
// once per kind, so behaviour proven on memory is proven on a durable
// store too.
package storetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
)

// Kind is the store kind the tests use.
func Kind() string {
	if k := os.Getenv("TOLLGATE_TEST_STORE"); k != "" {
		return k
	}
	return "memory"
}

// New returns a fresh store, closed when the test ends.
func New(t testing.TB) checkpoint.Store {
	t.Helper()
	switch k := Kind(); k {
	case "memory":
		return memory.New()
	case "sqlite":
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "tollgate.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	default:
		t.Fatalf("TOLLGATE_TEST_STORE=%q: want memory or sqlite", k)
		return nil
	}
}
