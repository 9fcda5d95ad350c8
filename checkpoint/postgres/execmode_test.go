package postgres

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

// The connection string may choose pgx's query exec mode (pgx reads
// default_query_exec_mode from it; a deployment behind PgBouncer in
// transaction pooling sets exec or simple_protocol). In those modes pgx
// does not know a parameter's type and picks one from the Go value: a
// []byte is a bytea, sent as "\x7b..." (hex), so JSON handed to pgx as
// []byte (messages, a call's arguments, a question's payload, an event's
// data) reaches the server as its hex text. Before issue 26 these were
// strings, sent as they are. Every mode must store what was given, byte
// for byte.
func TestJSONParamsEveryExecMode(t *testing.T) {
	base := pgtest.WithParams(pgtest.Start(t), "synchronous_commit", "off")
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			dsn := pgtest.WithParams(base, "default_query_exec_mode", mode)
			s, err := Open(t.Context(), dsn, &Options{Schema: pgtest.Schema(t, base)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := t.Context()
			msg := json.RawMessage(`{"s": "é \u0000 <&> '\\x41'"}`)
			th := &checkpoint.Thread{ID: "t", Status: checkpoint.ThreadRunning, RunID: "r", Messages: json.RawMessage("[" + string(msg) + "]")}
			if err := s.CreateThread(ctx, th); err != nil {
				t.Fatalf("CreateThread: %v", err)
			}
			args := json.RawMessage(`{"cmd" : "rm -rf /"}`)
			payload := json.RawMessage(`{"tool_name":"shell",  "x":1}`)
			data := json.RawMessage(`[1, 2]`)
			q := &checkpoint.Question{ThreadID: "t", ID: "q", RunID: "r", CallID: "c", Tool: "shell", Kind: "approval", Payload: payload, Digest: "d"}
			b := &checkpoint.Batch{
				Thread:    &checkpoint.ThreadWrite{ID: "t", Version: th.Version, Status: checkpoint.ThreadRunning, RunID: "r", Append: []json.RawMessage{msg}},
				ToolCalls: []*checkpoint.ToolCall{{ThreadID: "t", RunID: "r", CallID: "c", Tool: "shell", Args: args, State: checkpoint.ToolCallDone, Result: args}},
				Question:  q,
				Events:    []*checkpoint.Event{{ThreadID: "t", RunID: "r", Type: "x", Data: data, At: time.Now()}},
			}
			if _, err := s.Commit(ctx, b); err != nil {
				t.Fatalf("Commit: %v", err)
			}
			got, err := s.LoadThread(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			if want := "[" + string(msg) + "," + string(msg) + "]"; string(got.Messages) != want {
				t.Errorf("messages = %s, want %s", got.Messages, want)
			}
			gq, err := s.GetQuestion(ctx, "t", "q")
			if err != nil {
				t.Fatal(err)
			}
			if string(gq.Payload) != string(payload) {
				t.Errorf("payload = %s, want %s", gq.Payload, payload)
			}
			var stored string
			if err := s.pool.QueryRow(ctx, `SELECT args::text FROM tool_calls WHERE call_id = 'c'`).Scan(&stored); err != nil || stored != string(args) {
				t.Errorf("args = %s (%v), want %s", stored, err, args)
			}
			evs, err := s.ListEvents(ctx, "t", 0, 0)
			if err != nil || len(evs) != 1 || string(evs[0].Data) != string(data) {
				t.Errorf("events = %v (%v), want data %s", evs, err, data)
			}
		})
	}
}
