package sqlite_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/migrationtest"
)

// schema5 is the schema a tollgate made before messages were rows.
var schema5 = []string{"0001_init.sql", "0002_microseconds.sql", "0003_question_tool.sql", "0004_queue_indexes.sql", "0005_thread_listing.sql"}

// schema5File makes a database file of schema 5 at path, as the store of
// schema 5 made it, and writes each thread into it as that store did: the
// whole array in threads.messages (NULL for none).
func schema5File(t *testing.T, path string, threads map[string]string) {
	t.Helper()
	oldSchemaFile(t, path, "", schema5...)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for id, msgs := range threads {
		var m any // NULL, as encJSON stored an empty Messages
		if msgs != "" {
			m = msgs
		}
		if _, err := db.Exec(`INSERT INTO threads (id, version, status, run_id, messages, created_at, updated_at)
VALUES (?, 3, 'idle', 'run-1', ?, 1000, 2000)`, id, m); err != nil {
			t.Fatal(err)
		}
	}
}

// A file of schema 5 (a thread's messages one JSON array in one column) is
// migrated on Open to one row per message: each message as it was written,
// byte for byte, and appends after the migrated ones. Nothing is kept
// twice: the old column is NULL. A value that was not an array (an older
// store kept whatever JSON it was given) is returned as it was, refuses an
// append, and is replaced by SaveThread.
func TestMigrateMessages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tollgate.db")
	threads := map[string]string{}
	for _, c := range migrationtest.MessageCases {
		threads[c.ID] = c.Stored
	}
	notArrays := map[string]string{
		"legacy-string": `"just a string"`,
		"legacy-object": "{\"a\" :\t1}",
		"legacy-broken": `[{"unterminated":`,
	}
	for id, m := range notArrays {
		threads[id] = m
	}
	threads["json-null"] = "null" // what an encoder makes of no messages
	schema5File(t, path, threads)

	s, db := openMigrated(t, path)
	// Each element as it was written, before anything is appended.
	for _, c := range migrationtest.MessageCases {
		var want []json.RawMessage
		if c.Stored != "" {
			if err := json.Unmarshal([]byte(c.Want), &want); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := db.Query(`SELECT position, body FROM messages WHERE thread_id = ? ORDER BY position`, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got []json.RawMessage
		for rows.Next() {
			var pos int
			var body string
			if err := rows.Scan(&pos, &body); err != nil {
				t.Fatal(err)
			}
			if pos != len(got) {
				t.Errorf("%s: position %d, want %d", c.ID, pos, len(got))
			}
			got = append(got, json.RawMessage(body))
		}
		rows.Close()
		if !slices.EqualFunc(got, want, func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
			t.Errorf("%s: rows %q, want %q", c.ID, got, want)
		}
		var count, size int64
		if err := db.QueryRow(`SELECT message_count, message_bytes FROM threads WHERE id = ?`, c.ID).Scan(&count, &size); err != nil {
			t.Fatal(err)
		}
		var wantSize int64
		for _, m := range want {
			wantSize += int64(len(m))
		}
		if count != int64(len(want)) || size != wantSize {
			t.Errorf("%s: message_count %d, message_bytes %d, want %d, %d", c.ID, count, size, len(want), wantSize)
		}
	}
	var twice int
	if err := db.QueryRow(`SELECT count(*) FROM threads WHERE messages IS NOT NULL`).Scan(&twice); err != nil {
		t.Fatal(err)
	}
	if twice != len(notArrays) {
		t.Errorf("%d threads keep their old column, want the %d that are not arrays", twice, len(notArrays))
	}

	migrationtest.CheckMessages(t, s, migrationtest.MessageCases)

	if th, err := s.LoadThread(t.Context(), "json-null"); err != nil || string(th.Messages) != "[]" {
		t.Errorf("json-null: %s, %v; want []", th.Messages, err)
	}
	for id, m := range notArrays {
		th, err := s.LoadThread(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if string(th.Messages) != m || th.Version != 3 || th.RunID != "run-1" {
			t.Errorf("%s: %s (version %d, run %q), want %s as it was", id, th.Messages, th.Version, th.RunID, m)
		}
		w := &checkpoint.ThreadWrite{ID: id, Version: th.Version, Status: th.Status, RunID: th.RunID, Append: []json.RawMessage{json.RawMessage(`"more"`)}}
		_, err = s.Commit(t.Context(), &checkpoint.Batch{Thread: w})
		if err == nil || errors.Is(err, checkpoint.ErrConflict) {
			t.Errorf("%s: append to messages that are not an array: %v, want a refusal", id, err)
		}
		t.Log(err)
		th.Messages = json.RawMessage(`["replaced"]`)
		if err := s.SaveThread(t.Context(), th); err != nil {
			t.Fatal(err)
		}
		w.Version = th.Version
		if _, err := s.Commit(t.Context(), &checkpoint.Batch{Thread: w}); err != nil {
			t.Fatalf("%s: append after SaveThread: %v", id, err)
		}
		if th, err := s.LoadThread(t.Context(), id); err != nil || string(th.Messages) != `["replaced","more"]` {
			t.Errorf("%s: after SaveThread and an append: %s, %v", id, th.Messages, err)
		}
	}
}
