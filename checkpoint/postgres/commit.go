package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// A batch is one pipeline: its statements are sent together and run in
// one implicit transaction (pgx's SendBatch: one Sync at the end), so a
// Commit is one round trip and one WAL flush. A compare-and-set that
// loses raises (the cas function of schema 5), which rolls the whole
// transaction back in the server; only then, off the common path, a read
// says why.

// casLost is the SQLSTATE of a compare-and-set that lost.
const casLost = "TGCAS"

// Statements of a batch, in the order a batch runs them: the event
// writers' lock, the thread, the tool calls, the question, the
// resolution, the events. One order for every batch, so that two batches
// never wait for each other's locks in a cycle: a thread's row, then the
// questions' lock (the questions_order trigger), then a question's row.
const (
	// eventWritersLock comes first in every batch that writes events,
	// before its first write, so before the transaction has an id: see
	// events.go.
	eventWritersLock = `SELECT pg_advisory_xact_lock_shared($1, $2)`

	// createThread is CreateThread and a ThreadWrite of Version 0: the
	// thread and its messages, or nothing when the id exists.
	createThread = `WITH t AS (
	INSERT INTO threads (id, version, status, run_id, message_count, created_at, updated_at)
	VALUES ($1, 1, $2, $3, cardinality($4::text[]), $5, $6)
	ON CONFLICT (id) DO NOTHING
	RETURNING version, created_at
), m AS (
	INSERT INTO messages (thread_id, position, body)
	SELECT $1, b.n - 1, b.body::json FROM t, unnest($4::text[]) WITH ORDINALITY AS b(body, n)
)
SELECT t.version, t.created_at FROM cas((SELECT count(*) FROM t), 'thread create') LEFT JOIN t ON true`

	// appendThread is a ThreadWrite: a compare-and-set on the version
	// that writes the thread's row and inserts only the new messages, at
	// the positions after the stored ones. A concurrent writer waits for
	// the row and then finds another version: its messages are never
	// inserted.
	appendThread = `WITH t AS (
	UPDATE threads SET version = version + 1, status = $3, run_id = $4, updated_at = $5,
		message_count = message_count + cardinality($6::text[])
	WHERE id = $1 AND version = $2
	RETURNING version, created_at, message_count - cardinality($6::text[]) AS first
), m AS (
	INSERT INTO messages (thread_id, position, body)
	SELECT $1, t.first + b.n - 1, b.body::json FROM t, unnest($6::text[]) WITH ORDINALITY AS b(body, n)
)
SELECT t.version, t.created_at FROM cas((SELECT count(*) FROM t), 'thread save') LEFT JOIN t ON true`

	// saveThread, deleteMessages and insertMessages are SaveThread: the
	// compare-and-set, then every message replaced (three statements: a
	// statement's parts see one snapshot, so one could not delete the rows
	// another inserts).
	saveThread = `WITH t AS (
	UPDATE threads SET version = version + 1, status = $3, run_id = $4, updated_at = $5, message_count = $6
	WHERE id = $1 AND version = $2
	RETURNING version, created_at
)
SELECT t.version, t.created_at FROM cas((SELECT count(*) FROM t), 'thread save') LEFT JOIN t ON true`
	deleteMessages = `DELETE FROM messages WHERE thread_id = $1`
	insertMessages = `INSERT INTO messages (thread_id, position, body)
SELECT $1, b.n - 1, b.body::json FROM unnest($2::text[]) WITH ORDINALITY AS b(body, n)`

	// claimToolCall writes "executing": a claim, an INSERT that does
	// nothing if the call has a record. A concurrent claimant waits on the
	// unique index for the first's transaction and then inserts nothing.
	claimToolCall = `WITH w AS (
	INSERT INTO tool_calls (thread_id, run_id, call_id, tool, args, state, result, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
	ON CONFLICT (thread_id, run_id, call_id) DO NOTHING
	RETURNING 1
)
SELECT cas((SELECT count(*) FROM w), 'tool call claim')`
	putToolCall = `INSERT INTO tool_calls (thread_id, run_id, call_id, tool, args, state, result, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (thread_id, run_id, call_id) DO UPDATE SET
	tool = excluded.tool, args = excluded.args, state = excluded.state, result = excluded.result, updated_at = excluded.updated_at`

	// createQuestion: the row, its sequence numbers and the notification
	// (by trigger) commit together; a question that exists stops the
	// batch.
	createQuestion = `WITH w AS (
	INSERT INTO questions (thread_id, id, run_id, call_id, tool, kind, payload, digest, status, answered_by, reason, created_at, deadline)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', '', '', $9, $10)
	ON CONFLICT (thread_id, id) DO NOTHING
	RETURNING ` + questionCols + `
)
SELECT w.* FROM cas((SELECT count(*) FROM w), 'question create') LEFT JOIN w ON true`

	// resolveQuestion is the compare-and-set, with the rule of
	// [checkpoint.CheckResolution] in its WHERE clause: the update, its
	// change_seq and the notification commit together. When it matches
	// nothing, the stored question says why.
	resolveQuestion = `WITH w AS (
	UPDATE questions SET status = $3, answer = $4, answered_by = $5, reason = $6, resolved_at = $7
	WHERE thread_id = $1 AND id = $2 AND status = 'pending' AND CASE $3::text
		WHEN 'answered' THEN deadline IS NULL OR $7 < deadline
		WHEN 'timed_out' THEN deadline IS NOT NULL AND $7 >= deadline
		ELSE true END
	RETURNING ` + questionCols + `
)
SELECT w.* FROM cas((SELECT count(*) FROM w), 'question resolve') LEFT JOIN w ON true`

	// appendEvents numbers the batch's events from the transaction's id
	// (see events.go); one such statement a transaction.
	appendEvents = `INSERT INTO events (seq, thread_id, run_id, type, data, at)
SELECT (pg_current_xact_id()::text::bigint + b.base) * 65536 + e.n - 1, e.thread_id, e.run_id, e.type, e.data::json, e.at
FROM event_seq b, unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) WITH ORDINALITY AS e(thread_id, run_id, type, data, at, n)
RETURNING seq`
)

// maxBatchEvents is how many events a batch may hold: the low 16 bits of
// a seq number them.
const maxBatchEvents = 1 << 16

// commitOpts are what the single-record methods need beyond a Batch.
type commitOpts struct {
	// replace makes the thread write SaveThread's: its Append replaces
	// every stored message, and Version zero is a version like another.
	replace bool
}

// Commit writes b in one transaction: all of it or nothing.
func (s *Store) Commit(ctx context.Context, b *checkpoint.Batch) (*checkpoint.Committed, error) {
	c, err := s.commit(ctx, b, commitOpts{})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// step reads one statement's result.
type step struct {
	what string // for errors: "thread", "tool call \"c1\"", ...
	read func(br pgx.BatchResults) error
	// lost says why the write lost its compare-and-set, reading the
	// store after the rollback; nil for a write that cannot lose.
	lost func(ctx context.Context) (*checkpoint.Committed, error)
}

// commit is Commit, and the single-record methods as one-record batches.
// On a lost compare-and-set it returns the error, and with it what the
// single method returns too (the stored question of a question that
// exists, or of a resolution that lost).
func (s *Store) commit(ctx context.Context, b *checkpoint.Batch, o commitOpts) (*checkpoint.Committed, error) {
	if b == nil || b.Empty() {
		return &checkpoint.Committed{}, nil
	}
	now := s.clk.Now()
	if err := checkTimes("commit", now); err != nil {
		return nil, err
	}
	out := &checkpoint.Committed{}
	var batch pgx.Batch
	var steps []step
	queue := func(st step, sql string, args ...any) {
		batch.Queue(sql, args...)
		steps = append(steps, st)
	}
	ignore := func(br pgx.BatchResults) error { _, err := br.Exec(); return err }
	// onCommit sets what the caller's records get (versions, times,
	// sequence numbers) once the transaction committed.
	var onCommit []func()

	if len(b.Events) > 0 {
		if len(b.Events) > maxBatchEvents {
			return nil, fmt.Errorf("postgres: commit: %d events in one batch, at most %d", len(b.Events), maxBatchEvents)
		}
		queue(step{what: "events", read: ignore}, eventWritersLock, int32(lockClass), s.eventKey)
	}

	if w := b.Thread; w != nil {
		bodies, err := messageTexts(w.ID, w.Append)
		if err != nil {
			return nil, err
		}
		var version int64
		var created pgtype.Timestamptz
		read := func(br pgx.BatchResults) error { return br.QueryRow().Scan(&version, &created) }
		st := step{what: "thread " + strconv.Quote(w.ID), read: read, lost: func(ctx context.Context) (*checkpoint.Committed, error) {
			return nil, s.threadLost(ctx, w.ID, w.Version, w.Version == 0 && !o.replace)
		}}
		switch {
		case o.replace:
			queue(st, saveThread, w.ID, w.Version, string(w.Status), w.RunID, now, len(bodies))
			queue(step{what: st.what, read: ignore}, deleteMessages, w.ID)
			queue(step{what: st.what, read: ignore}, insertMessages, w.ID, bodies)
		case w.Version == 0:
			createdAt := w.CreatedAt
			if createdAt.IsZero() {
				createdAt = now
			}
			if err := checkTimes("create thread "+strconv.Quote(w.ID), createdAt); err != nil {
				return nil, err
			}
			queue(st, createThread, w.ID, string(w.Status), w.RunID, bodies, createdAt, now)
		default:
			queue(st, appendThread, w.ID, w.Version, string(w.Status), w.RunID, now, bodies)
		}
		onCommit = append(onCommit, func() { w.Version, w.CreatedAt, w.UpdatedAt = version, decTime(created), now })
	}

	for _, tc := range b.ToolCalls {
		what := fmt.Sprintf("tool call %q of run %q", tc.CallID, tc.RunID)
		args := []any{tc.ThreadID, tc.RunID, tc.CallID, tc.Tool, encJSON(tc.Args), string(tc.State), encJSON(tc.Result), now}
		if tc.State == checkpoint.ToolCallExecuting {
			queue(step{what: what, read: ignore, lost: func(context.Context) (*checkpoint.Committed, error) {
				return nil, fmt.Errorf("%s is already claimed: %w", what, checkpoint.ErrConflict)
			}}, claimToolCall, args...)
		} else {
			queue(step{what: what, read: ignore}, putToolCall, args...)
		}
	}

	if b.Question != nil {
		c := *b.Question
		c.Status = checkpoint.QuestionPending
		c.Answer, c.AnsweredBy, c.Reason, c.ResolvedAt = nil, "", "", time.Time{}
		if c.CreatedAt.IsZero() {
			c.CreatedAt = now
		}
		if err := checkTimes("create question "+strconv.Quote(c.ID), c.CreatedAt, c.Deadline); err != nil {
			return nil, err
		}
		queue(step{what: "question " + strconv.Quote(c.ID),
			read: func(br pgx.BatchResults) error {
				q, _, err := scanQuestion(br.QueryRow())
				out.Question, out.Created = q, true
				return err
			},
			lost: func(ctx context.Context) (*checkpoint.Committed, error) {
				// It exists: nothing of the batch is written, and that is
				// no error.
				stored, err := s.GetQuestion(ctx, c.ThreadID, c.ID)
				if err != nil {
					return nil, err
				}
				return &checkpoint.Committed{Question: stored}, nil
			}},
			createQuestion, c.ThreadID, c.ID, c.RunID, c.CallID, c.Tool, c.Kind, encJSON(c.Payload), c.Digest, c.CreatedAt, encTime(c.Deadline))
	}

	if rv := b.Resolve; rv != nil {
		r := rv.Resolution
		switch r.Status {
		case checkpoint.QuestionAnswered, checkpoint.QuestionTimedOut, checkpoint.QuestionAborted:
		default:
			return nil, fmt.Errorf("question %q: cannot resolve as %q", rv.ID, r.Status)
		}
		if r.At.IsZero() {
			r.At = now
		}
		if err := checkTimes("resolve question "+strconv.Quote(rv.ID), r.At); err != nil {
			return nil, err
		}
		queue(step{what: "resolution of question " + strconv.Quote(rv.ID),
			read: func(br pgx.BatchResults) error {
				q, _, err := scanQuestion(br.QueryRow())
				out.Resolved = q
				return err
			},
			lost: func(ctx context.Context) (*checkpoint.Committed, error) {
				q, err := s.GetQuestion(ctx, rv.ThreadID, rv.ID)
				if err != nil {
					return nil, err
				}
				// The stored deadline has microseconds; r.At may have
				// more. Compare as PostgreSQL did, so that the reason
				// matches the refusal.
				r := r
				r.At = r.At.Truncate(time.Microsecond)
				if err := checkpoint.CheckResolution(q, r); err != nil {
					return &checkpoint.Committed{Resolved: q}, err
				}
				// Pending and in time now, but not when the update ran:
				// lost a race.
				return &checkpoint.Committed{Resolved: q}, fmt.Errorf("question %q changed while being resolved: %w", rv.ID, checkpoint.ErrConflict)
			}},
			resolveQuestion, rv.ThreadID, rv.ID, string(r.Status), encJSON(r.Answer), r.By, r.Reason, r.At)
	}

	if n := len(b.Events); n > 0 {
		threads, runs, types := make([]string, n), make([]string, n), make([]string, n)
		data, ats := make([]*string, n), make([]time.Time, n)
		for i, e := range b.Events {
			at := e.At
			if at.IsZero() {
				at = now
			}
			if err := checkTimes("append event", at); err != nil {
				return nil, err
			}
			threads[i], runs[i], types[i], ats[i] = e.ThreadID, e.RunID, e.Type, at
			if len(e.Data) > 0 {
				d := string(e.Data)
				data[i] = &d
			}
		}
		var seqs []int64
		queue(step{what: "events", read: func(br pgx.BatchResults) error {
			rows, err := br.Query()
			if err != nil {
				return err
			}
			seqs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
			return err
		}}, appendEvents, threads, runs, types, data, ats)
		onCommit = append(onCommit, func() {
			// seq = the transaction's number + the index: in order once
			// sorted.
			slices.Sort(seqs)
			for i, e := range b.Events {
				e.Seq, e.At = seqs[i], ats[i]
			}
			out.EventSeqs = seqs
		})
	}

	for _, tc := range b.ToolCalls {
		onCommit = append(onCommit, func() { tc.UpdatedAt = now })
	}

	if c, err := s.send(ctx, &batch, steps); err != nil || c != nil {
		return c, err
	}
	for _, f := range onCommit {
		f()
	}
	return out, nil
}

// send runs the batch and reads its results, in order: nil, nil when the
// transaction committed; else the error and, when a compare-and-set lost,
// what the losing write says about the stored state.
func (s *Store) send(ctx context.Context, batch *pgx.Batch, steps []step) (*checkpoint.Committed, error) {
	br := s.pool.SendBatch(ctx, batch)
	failed := -1
	var err error
	for i, st := range steps {
		if err = st.read(br); err != nil {
			failed = i
			break
		}
	}
	// Close reads to the end of the pipeline: the implicit transaction's
	// commit. Until it returns nil, nothing is known to be written.
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		return nil, nil
	}
	var pgErr *pgconn.PgError
	if failed >= 0 && errors.As(err, &pgErr) && pgErr.Code == casLost && steps[failed].lost != nil {
		// The transaction is rolled back; the store says why.
		c, lerr := steps[failed].lost(ctx)
		if lerr == nil && c == nil {
			lerr = fmt.Errorf("postgres: commit: %s lost its compare-and-set", steps[failed].what)
		}
		return c, lerr
	}
	if failed >= 0 {
		return nil, fmt.Errorf("postgres: commit: %s: %w", steps[failed].what, err)
	}
	return nil, fmt.Errorf("postgres: commit: %w", err)
}

// threadLost says why a thread's compare-and-set lost. Threads are never
// deleted: it either never existed or moved on.
func (s *Store) threadLost(ctx context.Context, id string, version int64, create bool) error {
	if create {
		return fmt.Errorf("thread %q exists: %w", id, checkpoint.ErrConflict)
	}
	var stored int64
	switch err := s.pool.QueryRow(ctx, `SELECT version FROM threads WHERE id = $1`, id).Scan(&stored); {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("thread %q: %w", id, checkpoint.ErrNotFound)
	case err != nil:
		return fmt.Errorf("postgres: save thread %q: %w", id, err)
	default:
		return fmt.Errorf("thread %q: version %d, stored %d: %w", id, version, stored, checkpoint.ErrConflict)
	}
}

// messageTexts are the messages to insert, one JSON value each, as text.
func messageTexts(thread string, msgs []json.RawMessage) ([]string, error) {
	out := make([]string, len(msgs)) // never nil: an empty array, not NULL
	for i, m := range msgs {
		if len(bytes.TrimSpace(m)) == 0 {
			return nil, fmt.Errorf("postgres: thread %q: message %d is empty, want one JSON value", thread, i)
		}
		out[i] = string(m)
	}
	return out, nil
}

// splitMessages is [checkpoint.SplitMessages], naming the thread.
func splitMessages(thread string, msgs json.RawMessage) ([]json.RawMessage, error) {
	out, err := checkpoint.SplitMessages(msgs)
	if err != nil {
		return nil, fmt.Errorf("postgres: thread %q: %w", thread, err)
	}
	return out, nil
}
