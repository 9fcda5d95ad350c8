package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/migrationtest"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

// oldSchema makes a schema at version n, as a tollgate of that version
// left it, and returns a pool on it.
func oldSchema(t *testing.T, n int) (dsn, schema string, pool *pgxpool.Pool) {
	t.Helper()
	dsn = pgtest.Start(t)
	schema = pgtest.Schema(t, dsn)
	migs, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	pool, err = pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := (&Store{pool: pool, schema: schema}).migrate(t.Context(), migs[:n], false); err != nil {
		t.Fatal(err)
	}
	return dsn, schema, pool
}

// A schema of version 1 gets the tool column, filled from each question's
// payload ("tool_name", when it is a string). The backfill is not a change
// of the questions: change_seq stays, and the triggers work afterwards.
func TestMigrateQuestionTool(t *testing.T) {
	dsn, schema, pool := oldSchema(t, 1)
	cases := migrationtest.ToolCases
	for _, c := range cases {
		var payload any
		if c.Payload != "" {
			payload = c.Payload
		}
		if _, err := pool.Exec(t.Context(), `INSERT INTO questions (thread_id, id, run_id, call_id, kind, payload, digest, status, answered_by, reason, created_at)
VALUES ('t', $1, 'run-1', '', 'approve', $2, '', 'pending', '', '', now())`, c.ID, payload); err != nil {
			t.Fatal(err)
		}
	}
	var before int64
	if err := pool.QueryRow(t.Context(), `SELECT sum(change_seq) FROM questions`).Scan(&before); err != nil {
		t.Fatal(err)
	}

	s, err := Open(t.Context(), dsn, &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	migrationtest.CheckTools(t, s, "t", cases)
	var after int64
	if err := pool.QueryRow(t.Context(), `SELECT sum(change_seq) FROM questions`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("the migration changed change_seq (sum %d, was %d)", after, before)
	}
	// The triggers are back: they number a new question.
	if _, _, err := s.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: "new", Tool: "bash"}); err != nil {
		t.Fatalf("CreateQuestion after the migration: %v", err)
	}
}
