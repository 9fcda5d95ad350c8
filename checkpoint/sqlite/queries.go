package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// The store's statements, prepared once on Open: modernc.org/sqlite keeps
// no statement cache, and parsing costs about as much as the write itself
// when commits do not wait for the disk.
const (
	questionCols = `seq, thread_id, id, run_id, call_id, tool, kind, payload, digest, status, answer, answered_by, reason, created_at, deadline, resolved_at`

	// nextChange is the change_seq of a question write: one more than any
	// before. The writer is alone in its transaction, so this is race-free.
	nextChange = `(SELECT coalesce(max(change_seq), 0) + 1 FROM questions)`

	qCreateThread = `INSERT INTO threads (id, version, status, run_id, messages, created_at, updated_at)
VALUES (?, 1, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`
	qSaveThread = `UPDATE threads SET version = version + 1, status = ?, run_id = ?, messages = ?, updated_at = ?
WHERE id = ? AND version = ? RETURNING version, created_at`
	qThreadVersion = `SELECT version FROM threads WHERE id = ?`
	qLoadThread    = `SELECT version, status, run_id, messages, created_at, updated_at FROM threads WHERE id = ?`
	// qClaimToolCall writes "executing": a claim that inserts nothing if
	// the call has a record (no row affected), in the same statement.
	qClaimToolCall = `INSERT INTO tool_calls (thread_id, run_id, call_id, tool, args, state, result, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (thread_id, run_id, call_id) DO NOTHING`
	qPutToolCall = `INSERT INTO tool_calls (thread_id, run_id, call_id, tool, args, state, result, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (thread_id, run_id, call_id) DO UPDATE SET
	tool = excluded.tool, args = excluded.args, state = excluded.state, result = excluded.result, updated_at = excluded.updated_at`
	qListToolCalls  = `SELECT call_id, tool, args, state, result, updated_at FROM tool_calls WHERE thread_id = ? AND run_id = ? ORDER BY call_id`
	qCreateQuestion = `INSERT INTO questions (thread_id, id, run_id, call_id, tool, kind, payload, digest, status, answered_by, reason, created_at, deadline, change_seq)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '', '', ?, ?, ` + nextChange + `)
ON CONFLICT (thread_id, id) DO NOTHING RETURNING change_seq`
	qGetQuestion     = `SELECT ` + questionCols + ` FROM questions WHERE thread_id = ? AND id = ?`
	qResolveQuestion = `UPDATE questions SET status = ?, answer = ?, answered_by = ?, reason = ?, resolved_at = ?, change_seq = ` + nextChange + `
WHERE thread_id = ? AND id = ? AND status = 'pending' RETURNING change_seq`
	qAppendEvent      = `INSERT INTO events (thread_id, run_id, type, data, at) VALUES (?, ?, ?, ?, ?) RETURNING seq`
	qListEvents       = `SELECT seq, thread_id, run_id, type, data, at FROM events WHERE seq > ? ORDER BY seq LIMIT ?`
	qListThreadEvents = `SELECT seq, thread_id, run_id, type, data, at FROM events WHERE thread_id = ? AND seq > ? ORDER BY seq LIMIT ?`
)

var (
	writeQueries = []string{qCreateThread, qSaveThread, qThreadVersion, qClaimToolCall, qPutToolCall, qCreateQuestion, qGetQuestion, qResolveQuestion, qAppendEvent}
	readQueries  = []string{qLoadThread, qListToolCalls, qGetQuestion, qListEvents, qListThreadEvents}
)

type statements struct {
	w, r map[string]*sql.Stmt
}

func (s *Store) prepare(ctx context.Context) error {
	s.stmts = statements{w: map[string]*sql.Stmt{}, r: map[string]*sql.Stmt{}}
	for _, q := range writeQueries {
		if s.readOnly {
			break // never used: every write fails first
		}
		st, err := s.w.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("sqlite: prepare: %w", err)
		}
		s.stmts.w[q] = st
	}
	for _, q := range readQueries {
		st, err := s.r.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("sqlite: prepare: %w", err)
		}
		s.stmts.r[q] = st
	}
	return nil
}

// in returns the prepared write statement for query, in tx.
func (s *Store) in(ctx context.Context, tx *sql.Tx, query string) *sql.Stmt {
	return tx.StmtContext(ctx, s.stmts.w[query])
}

// read returns the prepared read statement for query.
func (s *Store) read(query string) *sql.Stmt { return s.stmts.r[query] }

func (st statements) close() {
	for _, m := range []map[string]*sql.Stmt{st.w, st.r} {
		for _, s := range m {
			s.Close()
		}
	}
}
