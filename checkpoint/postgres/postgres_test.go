package postgres_test

import (
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/checkpointtest"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testDSN is the test server, without waiting for commits to reach the
// disk: the conformance tests check behaviour, not durability.
func testDSN(t *testing.T) string {
	return pgtest.WithParams(pgtest.Start(t), "synchronous_commit", "off")
}

func open(t *testing.T, dsn, schema string, opts *postgres.Options) *postgres.Store {
	t.Helper()
	o := postgres.Options{MaxConns: 4, PollInterval: 200 * time.Millisecond}
	if opts != nil {
		o = *opts
	}
	o.Schema = schema
	s, err := postgres.Open(t.Context(), dsn, &o)
	if err != nil {
		t.Fatalf("Open(schema %s): %v", schema, err)
	}
	return s
}

func TestConformance(t *testing.T) {
	dsn := testDSN(t)
	checkpointtest.Run(t, func(t *testing.T) checkpoint.Store {
		return open(t, dsn, pgtest.Schema(t, dsn), nil)
	})
}

// Two Stores on one schema stand for two replicas.
func TestConformanceShared(t *testing.T) {
	dsn := testDSN(t)
	checkpointtest.RunShared(t, func(t *testing.T) (checkpoint.Store, checkpoint.Store) {
		schema := pgtest.Schema(t, dsn)
		return open(t, dsn, schema, nil), open(t, dsn, schema, nil)
	})
}
