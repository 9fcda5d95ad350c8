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

// currentSchema opens a store of the current schema, and a pool on its
// schema for statements as another client of the database.
func currentSchema(t *testing.T) (*Store, *pgxpool.Pool) {
	t.Helper()
	migs, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	dsn, schema, pool := oldSchema(t, len(migs))
	s, err := Open(t.Context(), dsn, &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, pool
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

// A schema of version 4 kept a thread's messages as one json array in
// threads.messages, written whole by every save: the migration moves each
// element into a row of its own, byte for byte, and appends go after them.
func TestMigrateMessages(t *testing.T) {
	dsn, schema, pool := oldSchema(t, 4)
	cases := migrationtest.MessageCases
	for _, c := range cases {
		var msgs any
		if c.Stored != "" {
			msgs = c.Stored
		}
		// As the store of schema 4 wrote it.
		if _, err := pool.Exec(t.Context(), `INSERT INTO threads (id, version, status, run_id, messages, created_at, updated_at)
VALUES ($1, 3, 'idle', 'run-1', $2, now(), now())`, c.ID, msgs); err != nil {
			t.Fatal(err)
		}
	}
	// Threads written by a caller of SaveThread with a Messages that was
	// not an array: kept, as the thread's one message.
	for id, stored := range map[string]string{"object": `{"not":"an array"}`, "json-null": `null`} {
		if _, err := pool.Exec(t.Context(), `INSERT INTO threads (id, version, status, run_id, messages, created_at, updated_at)
VALUES ($1, 1, 'idle', '', $2, now(), now())`, id, stored); err != nil {
			t.Fatal(err)
		}
	}
	// Events numbered by schema 1's sequence.
	for range 3 {
		if _, err := pool.Exec(t.Context(), `INSERT INTO events (thread_id, run_id, type, data, at) VALUES ('empty', 'run-1', 'old', '{}', now())`); err != nil {
			t.Fatal(err)
		}
	}

	s, err := Open(t.Context(), dsn, &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range cases {
		checkCounts(t, s, c.ID)
	}
	migrationtest.CheckMessages(t, s, cases)
	for id, want := range map[string]string{"object": `[{"not":"an array"}]`, "json-null": `[]`} {
		th, err := s.LoadThread(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if string(th.Messages) != want {
			t.Errorf("%s: Messages = %s, want %s", id, th.Messages, want)
		}
	}
	var column bool
	if err := pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'threads' AND column_name = 'messages')`, schema).Scan(&column); err != nil {
		t.Fatal(err)
	}
	if column {
		t.Error("threads.messages is still there")
	}

	// New events come after the old ones, in order.
	old, err := s.ListEvents(t.Context(), "", 0, 0)
	if err != nil || len(old) != 3 {
		t.Fatalf("old events: %d, %v", len(old), err)
	}
	seq, err := s.AppendEvent(t.Context(), &checkpoint.Event{ThreadID: "empty", Type: "new"})
	if err != nil {
		t.Fatal(err)
	}
	if seq <= old[2].Seq {
		t.Errorf("a new event's seq %d is not above the old ones (%d)", seq, old[2].Seq)
	}
	evs, err := s.ListEvents(t.Context(), "", old[2].Seq, 0)
	if err != nil || len(evs) != 1 || evs[0].Seq != seq {
		t.Errorf("events after the old ones: %v, %v; want the new one", evs, err)
	}
}
