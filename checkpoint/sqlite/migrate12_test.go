package sqlite_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// schema11 is the schema before schema 12 laid threads, messages and
// tool_calls out again.
var schema11 = []string{"0001_init.sql", "0002_microseconds.sql", "0003_question_tool.sql", "0004_queue_indexes.sql",
	"0005_thread_listing.sql", "0006_messages.sql", "0007_audited_resolutions.sql", "0008_notify_outbox.sql",
	"0009_learned_rules.sql", "0010_learned_rules_approval.sql", "0011_events_append_only.sql"}

// A file of schema 11 opens, migrates to schema 12, and keeps every row
// of the tables it lays out again as it was: the threads (one whose
// messages schema 6 could not split among them), their messages in order,
// byte for byte, and the tool calls with their arguments and results. A
// write after the migration appends after them.
func TestMigrateRowLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tollgate.db")
	var versions []string
	for i, name := range schema11 {
		versions = append(versions, fmt.Sprintf("(%d, '%s', 0)", i+1, name))
	}
	big := `{"role":"assistant","text":"` + strings.Repeat("x", 3000) + `"}` // an overflow page in schema 11
	execSQL(t, path, migrationSQL(t, schema11...)+`
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT;
INSERT INTO schema_version VALUES `+strings.Join(versions, ", ")+`;
INSERT INTO threads (id, version, status, run_id, created_at, updated_at, messages, message_count, message_bytes) VALUES
	('t1', 4, 'waiting_approval', 'run-1', 1000, 2000, NULL, 3, `+fmt.Sprint(len(`{"role":"user","text":"hi"}`)+len(big)+len(`"plain"`))+`),
	('t2', 1, 'idle', 'run-2', 1500, 1500, NULL, 0, 0),
	('legacy', 3, 'idle', 'run-0', 500, 600, '{"not":"an array"}', 0, 0);
INSERT INTO messages (thread_id, position, body) VALUES
	('t1', 0, '{"role":"user","text":"hi"}'), ('t1', 1, '`+big+`'), ('t1', 2, '"plain"');
INSERT INTO tool_calls (thread_id, run_id, call_id, tool, args, state, result, updated_at) VALUES
	('t1', 'run-1', 'c1', 'bash', '`+big+`', 'executing', NULL, 3000),
	('t1', 'run-1', 'c2', 'read', '{"path":"/x"}', 'done', '{"ok":true}', 4000),
	('t2', 'run-2', 'c1', 'bash', NULL, 'done', 'plain result', 5000);`)

	s, db := openMigrated(t, path)
	var version int
	if err := db.QueryRow(`SELECT max(version) FROM schema_version`).Scan(&version); err != nil || version != latestSchema(t) {
		t.Fatalf("schema version %d, %v; want %d", version, err, latestSchema(t))
	}
	for table, withoutRowid := range map[string]bool{"threads": true, "messages": false, "tool_calls": false} {
		var ddl string
		if err := db.QueryRow(`SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?`, table).Scan(&ddl); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(ddl, "WITHOUT ROWID") != withoutRowid {
			t.Errorf("%s after the migration: %s", table, ddl)
		}
	}

	th, err := s.LoadThread(t.Context(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"role":"user","text":"hi"},` + big + `,"plain"]`; string(th.Messages) != want || th.Version != 4 ||
		th.Status != "waiting_approval" || th.RunID != "run-1" || th.CreatedAt.UnixMicro() != 1000 || th.UpdatedAt.UnixMicro() != 2000 {
		t.Errorf("t1 after the migration: %+v, messages %.80s", th, th.Messages)
	}
	if th, err := s.LoadThread(t.Context(), "t2"); err != nil || string(th.Messages) != "[]" || th.Version != 1 {
		t.Errorf("t2 after the migration: %+v, %v", th, err)
	}
	if th, err := s.LoadThread(t.Context(), "legacy"); err != nil || string(th.Messages) != `{"not":"an array"}` || th.Version != 3 {
		t.Errorf("legacy after the migration: %+v, %v", th, err)
	}

	calls, err := s.ListToolCalls(t.Context(), "t1", "run-1")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range calls {
		got[c.CallID] = fmt.Sprintf("%s %s %s %s %d", c.Tool, c.Args, c.State, c.Result, c.UpdatedAt.UnixMicro())
	}
	want := map[string]string{"c1": "bash " + big + " executing  3000", "c2": `read {"path":"/x"} done {"ok":true} 4000`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("t1's calls after the migration:\n%v\nwant\n%v", got, want)
	}
	calls, err = s.ListToolCalls(t.Context(), "t2", "run-2", "c1")
	if err != nil || len(calls) != 1 || string(calls[0].Result) != "plain result" || calls[0].Args != nil {
		t.Errorf("t2's call after the migration: %v, %v", calls, err)
	}

	// Writes after it: a message appended at position 3, the claimed
	// call's result, a claim that exists refused.
	w := &checkpoint.ThreadWrite{ID: "t1", Version: 4, Status: "running", RunID: "run-1", Append: []json.RawMessage{json.RawMessage(`"after"`)}}
	done := &checkpoint.ToolCall{ThreadID: "t1", RunID: "run-1", CallID: "c1", Tool: "bash", Args: json.RawMessage(big), State: checkpoint.ToolCallDone, Result: json.RawMessage(`"ok"`)}
	if _, err := s.Commit(t.Context(), &checkpoint.Batch{Thread: w, ToolCalls: []*checkpoint.ToolCall{done}}); err != nil {
		t.Fatal(err)
	}
	if th, err := s.LoadThread(t.Context(), "t1"); err != nil || string(th.Messages) != `[{"role":"user","text":"hi"},`+big+`,"plain","after"]` {
		t.Errorf("t1 after an append: %.80s, %v", th.Messages, err)
	}
	claim := &checkpoint.ToolCall{ThreadID: "t1", RunID: "run-1", CallID: "c2", Tool: "read", State: checkpoint.ToolCallExecuting}
	if err := s.PutToolCall(t.Context(), claim); err == nil {
		t.Error("a claim of a call with a record after the migration: allowed")
	}
	if calls, err := s.ListToolCalls(t.Context(), "t1", "run-1", "c1"); err != nil || len(calls) != 1 || string(calls[0].Result) != `"ok"` {
		t.Errorf("c1 after its result: %v, %v", calls, err)
	}
}
