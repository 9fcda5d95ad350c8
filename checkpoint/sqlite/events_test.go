package sqlite_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
)

// appendEvents appends n events to thread "t" through the store and
// returns their numbers.
func appendEvents(t *testing.T, s *sqlite.Store, n int) []int64 {
	t.Helper()
	var seqs []int64
	for i := range n {
		seq, err := s.AppendEvent(t.Context(), &checkpoint.Event{ThreadID: "t", RunID: "r", Type: "note", Data: []byte(fmt.Sprintf(`{"i":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

// The audit log is append-only for every writer of the file (schema 11),
// which is what numbers events without AUTOINCREMENT safely: SQLite gives
// a new row max(seq)+1, so a number would be given twice if the newest
// row could leave the table (a DELETE, a REPLACE, which deletes without
// firing delete triggers) or if a row could name its seq (a jump to the
// largest rowid makes SQLite pick random free numbers). Each is refused;
// the next event is numbered above every number given before, and no
// sqlite_sequence row is written for events.
func TestEventsAppendOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tollgate.db")
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seqs := appendEvents(t, s, 3)
	newest := seqs[2]

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	refused := func(what, stmt string) {
		t.Helper()
		_, err := db.Exec(stmt)
		if err == nil || !strings.Contains(err.Error(), "tollgate: ") && !strings.Contains(err.Error(), "events_numbered_from_1") {
			t.Errorf("%s: %v, want it refused", what, err)
		}
	}
	row := func(seq string) string {
		return `(` + seq + `, 't', 'r', 'forged', '{}', 0)`
	}
	const cols = `INSERT INTO events (seq, thread_id, run_id, type, data, at) VALUES `
	refused("deleting the newest event", fmt.Sprintf(`DELETE FROM events WHERE seq = %d`, newest))
	refused("deleting every event", `DELETE FROM events`)
	refused("renumbering an event", fmt.Sprintf(`UPDATE events SET seq = seq + 10 WHERE seq = %d`, newest))
	refused("rewriting an event", `UPDATE events SET data = '{"i":9}'`)
	refused("replacing the newest event", `INSERT OR REPLACE INTO events (seq, thread_id, run_id, type, data, at) VALUES `+row(fmt.Sprint(newest)))
	refused("an upsert on the newest event", cols+row(fmt.Sprint(newest))+` ON CONFLICT (seq) DO UPDATE SET data = excluded.data`)
	refused("an event numbered above the newest", cols+row(fmt.Sprint(newest+1)))
	refused("an event numbered at the largest rowid", cols+row("9223372036854775807"))
	refused("an event numbered -1", cols+row("-1"))
	refused("replacing at -1", `REPLACE INTO events (seq, thread_id, run_id, type, data, at) VALUES `+row("-1"))
	refused("an event numbered 0", cols+row("0"))
	refused("an event numbered through rowid", `INSERT INTO events (rowid, thread_id, run_id, type, data, at) VALUES `+row(fmt.Sprint(newest+1)))
	refused("replacing the newest event through oid", `REPLACE INTO events (oid, thread_id, run_id, type, data, at) VALUES `+row(fmt.Sprint(newest)))

	// A hand that writes an event as the store does is in the log.
	var handSeq int64
	if err := db.QueryRow(`INSERT INTO events (thread_id, run_id, type, data, at) VALUES ('t', 'r', 'by-hand', NULL, 0) RETURNING seq`).Scan(&handSeq); err != nil {
		t.Fatal(err)
	}
	if handSeq != newest+1 {
		t.Errorf("an event inserted by hand got seq %d, want %d", handSeq, newest+1)
	}
	if next := appendEvents(t, s, 1)[0]; next != handSeq+1 {
		t.Errorf("next event seq %d, want %d", next, handSeq+1)
	}
	evs, err := s.ListEvents(t.Context(), "t", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 5 || string(evs[2].Data) != `{"i":2}` || evs[3].Type != "by-hand" {
		t.Errorf("the log after the refusals: %d events, %+v", len(evs), evs)
	}
	var counters int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_sequence WHERE name = 'events'`).Scan(&counters); err != nil {
		t.Fatal(err)
	}
	if counters != 0 {
		t.Errorf("sqlite_sequence has a row for events: AUTOINCREMENT is still on")
	}
}

// schema10SQL makes a database of schema 10, events numbered by
// AUTOINCREMENT, as that tollgate made it.
func schema10SQL(t *testing.T) string {
	t.Helper()
	names := []string{"0001_init.sql", "0002_microseconds.sql", "0003_question_tool.sql", "0004_queue_indexes.sql", "0005_thread_listing.sql",
		"0006_messages.sql", "0007_audited_resolutions.sql", "0008_notify_outbox.sql", "0009_learned_rules.sql", "0010_learned_rules_approval.sql"}
	var versions []string
	for i, name := range names {
		versions = append(versions, fmt.Sprintf("(%d, '%s', 0)", i+1, name))
	}
	return migrationSQL(t, names...) + `
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT;
INSERT INTO schema_version VALUES ` + strings.Join(versions, ", ") + `;`
}

// Schema 11 rebuilds the events table without AUTOINCREMENT: every event
// keeps its number and its bytes, the audit triggers of schemas 7 and 9
// still hold, and the next event is numbered above every number given
// before, also when a hand had taken events off the end of the log (then
// the highest number given is kept by an events_missing row, so that a
// follower past it, such as the notifier's cursor, misses nothing new).
func TestMigrateEventsKeepsNumbers(t *testing.T) {
	for _, c := range []struct {
		name    string
		removed string // statements run on the schema 10 file after its events
		next    int64  // the next event's number after the migration
		missing string // the events_missing row's data, "" for none
	}{
		{name: "whole log", next: 6},
		{name: "newest removed", removed: `DELETE FROM events WHERE seq >= 4`, next: 6, missing: `{"after":3,"through":5}`},
		{name: "notifier ahead", removed: `DELETE FROM events WHERE seq >= 4; DELETE FROM sqlite_sequence; INSERT INTO notify_cursor VALUES (1, 4)`,
			next: 5, missing: `{"after":3,"through":4}`},
		{name: "empty log", removed: `DELETE FROM events`, next: 6, missing: `{"after":0,"through":5}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tollgate.db")
			var events []string
			for i := 1; i <= 5; i++ {
				events = append(events, fmt.Sprintf(`('t', 'r', 'note', '{"i": %d}', %d)`, i, i*1000))
			}
			execSQL(t, path, schema10SQL(t)+`
INSERT INTO events (thread_id, run_id, type, data, at) VALUES `+strings.Join(events, ", ")+`;
INSERT INTO questions (seq, thread_id, id, run_id, call_id, kind, payload, digest, status, answered_by, reason, created_at, change_seq)
VALUES (1, 't', 'q', 'r', 'c', 'approve', NULL, '', 'pending', '', '', 0, 1);
`+c.removed)
			s, err := sqlite.Open(t.Context(), path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			evs, err := s.ListEvents(t.Context(), "", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range evs {
				got = append(got, fmt.Sprintf("%d %s %s %d", e.Seq, e.Type, e.Data, e.At.UnixMicro()))
			}
			var want []string
			kept := 5
			if c.removed != "" {
				kept = 3
				if c.name == "empty log" {
					kept = 0
				}
			}
			for i := 1; i <= kept; i++ {
				want = append(want, fmt.Sprintf(`%d note {"i": %d} %d`, i, i, i*1000))
			}
			if c.missing != "" {
				if n := len(evs); n == 0 || evs[n-1].Type != "events_missing" || string(evs[n-1].Data) != c.missing || evs[n-1].Seq != c.next-1 {
					t.Errorf("the last event %v, want events_missing %s at %d", got, c.missing, c.next-1)
				} else {
					got = got[:n-1]
				}
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("events after the migration:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if next := appendEvents(t, s, 1)[0]; next != c.next {
				t.Errorf("next event seq %d, want %d", next, c.next)
			}

			// Schema 7's trigger reads the rebuilt table: a resolution is
			// refused without its event, and the store's goes through.
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(`UPDATE questions SET status = 'answered', answered_by = 'alice' WHERE id = 'q'`); err == nil || !strings.Contains(err.Error(), "tollgate: ") {
				t.Errorf("a forged resolution after the migration: %v, want it refused", err)
			}
			if _, err := s.ResolveQuestion(t.Context(), "t", "q", checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte(`{"decision":"approve"}`), By: "bob"}); err != nil {
				t.Fatalf("resolution by the store after the migration: %v", err)
			}
			if _, err := db.Exec(`DELETE FROM events`); err == nil {
				t.Error("DELETE FROM events after the migration: allowed")
			}
		})
	}
}

// The numbers Commit returns for a batch's events are the numbers stored,
// also when a trigger of the file inserts rows of its own for each event
// (the store reads an event's seq as the insert's rowid: a trigger's
// inserts must not be taken for it).
func TestEventSeqsAreTheStoredOnes(t *testing.T) {
	s := storeWithSQL(t, `CREATE TABLE shadow (n INTEGER PRIMARY KEY, seq INTEGER);
CREATE TRIGGER shadowed AFTER INSERT ON events BEGIN INSERT INTO shadow (n, seq) VALUES (1000 + NEW.seq * 7, NEW.seq); END;`)
	b := &checkpoint.Batch{}
	for i := range 3 {
		b.Events = append(b.Events, &checkpoint.Event{ThreadID: "t", RunID: "r", Type: "note", Data: []byte(fmt.Sprintf(`{"i":%d}`, i))})
	}
	c, err := s.Commit(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.ListEvents(t.Context(), "t", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	var stored []int64
	for _, e := range evs {
		stored = append(stored, e.Seq)
	}
	if fmt.Sprint(c.EventSeqs) != "[3 4 5]" || fmt.Sprint(stored) != "[3 4 5]" {
		t.Errorf("Commit returned %v, stored %v; want [3 4 5] both", c.EventSeqs, stored)
	}
	for i, e := range b.Events {
		if e.Seq != c.EventSeqs[i] {
			t.Errorf("event %d: Seq %d, Commit returned %d", i, e.Seq, c.EventSeqs[i])
		}
	}
}

// storeWithSQL is a new store holding two events, whose file then ran
// stmt through a connection of its own (a trigger a tool that found the
// file might add).
func storeWithSQL(t *testing.T, stmt string) *sqlite.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tollgate.db")
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	appendEvents(t, s, 2)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(stmt); err != nil {
		t.Fatal(err)
	}
	return s
}
