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
	// before. The writer is alone in its transaction, so this is race-free,
	// also with several batches in one transaction (each statement sees the
	// ones before it).
	nextChange = `(SELECT coalesce(max(change_seq), 0) + 1 FROM questions)`

	qCreateThread = `INSERT INTO threads (id, version, status, run_id, created_at, updated_at, message_count, message_bytes)
VALUES (?, 1, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`
	// qAppendThread is the compare-and-set of a ThreadWrite: it moves the
	// message count on, and the messages after it are inserted at the
	// positions before the count it returns. messages IS NULL: a thread
	// that still holds what schema 6 could not split (not a JSON array) is
	// not appended to.
	qAppendThread = `UPDATE threads SET version = version + 1, status = ?, run_id = ?, updated_at = ?,
	message_count = message_count + ?, message_bytes = message_bytes + ?
WHERE id = ? AND version = ? AND messages IS NULL RETURNING version, created_at, message_count`
	// qAppendSameStatus is qAppendThread for a write that leaves the
	// thread's status as it is, tried first: a statement that sets status
	// rewrites the thread's entry of threads_by_status even when the value
	// is the same (SQLite updates every index of a column the SET names), a
	// page in the WAL for nothing; in a cycle two thread writes of three
	// keep the status (running). No row: the status differs (or the
	// compare-and-set fails), and qAppendThread decides.
	qAppendSameStatus = `UPDATE threads SET version = version + 1, run_id = ?, updated_at = ?,
	message_count = message_count + ?, message_bytes = message_bytes + ?
WHERE id = ? AND version = ? AND status = ? AND messages IS NULL RETURNING version, created_at, message_count`
	// qReplaceThread is SaveThread's: every message is written again.
	qReplaceThread = `UPDATE threads SET version = version + 1, status = ?, run_id = ?, updated_at = ?,
	messages = NULL, message_count = ?, message_bytes = ?
WHERE id = ? AND version = ? RETURNING version, created_at, message_count`
	qThreadState    = `SELECT version, messages IS NOT NULL FROM threads WHERE id = ?`
	qDeleteMessages = `DELETE FROM messages WHERE thread_id = ?`
	qInsertMessage  = `INSERT INTO messages (thread_id, position, body) VALUES (?, ?, ?)`
	// qLoadThread reads a thread and its messages in one statement (one
	// snapshot), a row per message in order of position (the primary key:
	// no sort). A LEFT JOIN, so that a thread without messages is one row
	// with a NULL body. The thread's columns come on the first row only
	// (position 0, or no message; a NULL position is not > 0): on the
	// others they are NULL, which the driver does not convert, nor the
	// scan (positions are 0 to message_count-1). (group_concat
	// with ORDER BY would make it one row, but SQLite sorts the messages for
	// it in a temporary b-tree: three times slower at 4 MB.)
	qLoadThread = `SELECT iif(m.position > 0, NULL, t.version), iif(m.position > 0, NULL, t.status), iif(m.position > 0, NULL, t.run_id),
	iif(m.position > 0, NULL, t.created_at), iif(m.position > 0, NULL, t.updated_at), iif(m.position > 0, NULL, t.messages),
	iif(m.position > 0, NULL, t.message_count), iif(m.position > 0, NULL, t.message_bytes), m.body
FROM threads t LEFT JOIN messages m ON m.thread_id = t.id
WHERE t.id = ? ORDER BY m.position`
	// qClaimToolCall writes "executing": a claim that inserts nothing if
	// the call has a record (no row affected), in the same statement.
	qClaimToolCall = `INSERT INTO tool_calls (thread_id, run_id, call_id, tool, args, state, result, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (thread_id, run_id, call_id) DO NOTHING`
	qPutToolCall = `INSERT INTO tool_calls (thread_id, run_id, call_id, tool, args, state, result, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (thread_id, run_id, call_id) DO UPDATE SET
	tool = excluded.tool, args = excluded.args, state = excluded.state, result = excluded.result, updated_at = excluded.updated_at`
	toolCallCols   = `call_id, tool, args, state, result, updated_at`
	qListToolCalls = `SELECT ` + toolCallCols + ` FROM tool_calls WHERE thread_id = ? AND run_id = ? ORDER BY call_id`
	// qGetToolCalls reads up to toolCallChunk calls by id, each a lookup
	// of the primary key; fewer ids repeat the last one.
	qGetToolCalls = `SELECT ` + toolCallCols + ` FROM tool_calls WHERE thread_id = ? AND run_id = ? AND call_id IN (?, ?, ?, ?, ?, ?, ?, ?)`
	toolCallChunk = 8

	qCreateQuestion = `INSERT INTO questions (thread_id, id, run_id, call_id, tool, kind, payload, digest, status, answered_by, reason, created_at, deadline, change_seq)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '', '', ?, ?, ` + nextChange + `)
ON CONFLICT (thread_id, id) DO NOTHING RETURNING change_seq`
	qGetQuestion     = `SELECT ` + questionCols + ` FROM questions WHERE thread_id = ? AND id = ?`
	qResolveQuestion = `UPDATE questions SET status = ?, answer = ?, answered_by = ?, reason = ?, resolved_at = ?, change_seq = ` + nextChange + `
WHERE thread_id = ? AND id = ? AND status = 'pending' RETURNING change_seq`
	// qAppendEvent: the event's seq (INTEGER PRIMARY KEY, the rowid) is
	// the statement's last insert id.
	qAppendEvent      = `INSERT INTO events (thread_id, run_id, type, data, at) VALUES (?, ?, ?, ?, ?)`
	qListEvents       = `SELECT seq, thread_id, run_id, type, data, at FROM events WHERE seq > ? ORDER BY seq LIMIT ?`
	qListThreadEvents = `SELECT seq, thread_id, run_id, type, data, at FROM events WHERE thread_id = ? AND seq > ? ORDER BY seq LIMIT ?`

	// A group's transaction, and the savepoint of each batch in it (see
	// writer.group).
	qBegin      = `BEGIN IMMEDIATE`
	qCommit     = `COMMIT`
	qRollback   = `ROLLBACK`
	qSavepoint  = `SAVEPOINT batch`
	qRelease    = `RELEASE batch`
	qRollbackTo = `ROLLBACK TO batch`
)

// wq names a write statement: its index in writeQueries, and in a write
// transaction's cache of them ([wtx]).
type wq int

const (
	wCreateThread wq = iota
	wAppendThread
	wAppendSameStatus
	wReplaceThread
	wThreadState
	wDeleteMessages
	wInsertMessage
	wClaimToolCall
	wPutToolCall
	wCreateQuestion
	wGetQuestion
	wResolveQuestion
	wAppendEvent
	wBegin
	wCommit
	wRollback
	wSavepoint
	wRelease
	wRollbackTo
	nWrite
)

var (
	writeQueries = [nWrite]string{
		wCreateThread: qCreateThread, wAppendThread: qAppendThread, wAppendSameStatus: qAppendSameStatus, wReplaceThread: qReplaceThread,
		wThreadState: qThreadState, wDeleteMessages: qDeleteMessages, wInsertMessage: qInsertMessage,
		wClaimToolCall: qClaimToolCall, wPutToolCall: qPutToolCall,
		wCreateQuestion: qCreateQuestion, wGetQuestion: qGetQuestion, wResolveQuestion: qResolveQuestion,
		wAppendEvent: qAppendEvent,
		wBegin:       qBegin, wCommit: qCommit, wRollback: qRollback,
		wSavepoint: qSavepoint, wRelease: qRelease, wRollbackTo: qRollbackTo,
	}
	// readQueries are prepared through database/sql; the cycle's reads
	// (hotReads) below it, on each reader connection (readconn.go).
	readQueries = []string{qListEvents, qListThreadEvents}
)

// statements are the readers' (the writer's: wconn).
type statements struct {
	r map[string]*sql.Stmt
}

func (s *Store) prepare(ctx context.Context) error {
	s.stmts = statements{r: map[string]*sql.Stmt{}}
	if !s.readOnly { // else never used: every write fails first
		conn, err := s.w.Conn(ctx)
		if err != nil {
			return fmt.Errorf("sqlite: prepare: %w", err)
		}
		err = conn.Raw(func(dc any) error {
			_, err := s.writerConn(dc)
			return err
		})
		conn.Close()
		if err != nil {
			return err
		}
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

// read returns the prepared read statement for query.
func (s *Store) read(query string) *sql.Stmt { return s.stmts.r[query] }

func (st statements) close() {
	for _, s := range st.r {
		s.Close()
	}
}
