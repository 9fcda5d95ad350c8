package pgtest_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestServer(t *testing.T) {
	dsn := pgtest.Start(t)
	schema := pgtest.Schema(t, dsn)
	if err := pgtest.Exec(t.Context(), dsn, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), pgtest.WithParams(dsn, "synchronous_commit", "off"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var version, sync string
	if err := conn.QueryRow(t.Context(), "SELECT version(), current_setting('synchronous_commit')").Scan(&version, &sync); err != nil {
		t.Fatal(err)
	}
	if sync != "off" {
		t.Errorf("synchronous_commit = %q, want off (from the URL)", sync)
	}
	t.Log(version)
}
