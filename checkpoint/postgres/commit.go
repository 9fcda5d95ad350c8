package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/messages"
)

// A batch is one pipeline: its statements are sent together (pgx's
// SendBatch, one Sync at the end) and run in one transaction, so a Commit
// is one round trip and one WAL flush. A compare-and-set that loses raises
// (the cas function of schema 5): the server skips the rest of the
// pipeline and the transaction is rolled back; only then, off the common
// path, a read says why. A batch that writes a question runs BEGIN to
// COMMIT, and after COMMIT, in the same pipeline, come its notifications,
// in a transaction of their own (see notifyQuestion): a failed batch skips
// them too, so nobody hears of what did not commit. Any other batch is the
// pipeline's implicit transaction, committed at the Sync.

// casLost is the SQLSTATE of a compare-and-set that lost.
const casLost = "TGCAS"

// Statements of a batch, in the order a batch runs them: the numbered
// writers' lock, the thread, the tool calls, the question, the
// resolution, the events. One order for every batch, so that two batches
// do not wait for each other's rows in a cycle: a thread's row, then a
// question's.
var (
	// begin: the compare-and-sets are written for READ COMMITTED (an
	// UPDATE that waited for a row re-checks it), whatever the session's
	// default. (An implicit transaction has the session's: READ
	// COMMITTED unless the connection string says otherwise.)
	begin = `BEGIN ISOLATION LEVEL READ COMMITTED`

	// writersLock comes first in every batch that numbers rows (events,
	// questions), before its first write, so before the transaction has
	// an id: see events.go.
	writersLock = `SELECT pg_advisory_xact_lock_shared($1, $2)`

	// saveThread, deleteMessages and insertMessages are SaveThread: the
	// compare-and-set, then every message replaced (three statements: a
	// statement's parts see one snapshot, so one could not delete the rows
	// another inserts).
	saveThread = `WITH t AS (
	UPDATE threads SET version = version + 1, status = $3, run_id = $4, updated_at = $5, message_count = $6, message_bytes = $7
	WHERE id = $1 AND version = $2
	RETURNING version, created_at
)
` + checked("t", "thread save", "t.version, t.created_at")
	deleteMessages = `DELETE FROM messages WHERE thread_id = $1`

	// claimToolCall writes "executing": a claim, an INSERT that does
	// nothing if the call has a record. A concurrent claimant waits on the
	// unique index for the first's transaction and then inserts nothing.
	claimToolCall = `WITH w AS (
	INSERT INTO tool_calls (thread_id, run_id, call_id, tool, args, state, result, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
	ON CONFLICT (thread_id, run_id, call_id) DO NOTHING
	RETURNING 1
)
` + checked("w", "tool call claim", "")
	putToolCall = `INSERT INTO tool_calls (thread_id, run_id, call_id, tool, args, state, result, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (thread_id, run_id, call_id) DO UPDATE SET
	tool = excluded.tool, args = excluded.args, state = excluded.state, result = excluded.result, updated_at = excluded.updated_at`
)

var (
	// createQuestion: the row and its numbers (from the transaction's id,
	// as events'; index 0), or nothing when the question exists, which
	// stops the batch.
	createQuestion = `WITH w AS (
	INSERT INTO questions (seq, change_seq, thread_id, id, run_id, call_id, tool, kind, payload, digest, status, answered_by, reason, created_at, deadline)
	SELECT n.seq, n.seq, $1, $2, $3, $4, $5, $6, $7, $8, 'pending', '', '', $9, $10
	FROM (SELECT (pg_current_xact_id()::text::bigint + base) * 65536 AS seq FROM seq_base) n
	ON CONFLICT (thread_id, id) DO NOTHING
	RETURNING ` + questionCols + `, change_seq
)
` + checked("w", "question create", "w.*, "+notice("question_created"))

	// resolveQuestion is the compare-and-set, with the rule of
	// [checkpoint.CheckResolution] in its WHERE clause, and the change's
	// number (index 1: a batch creates one question and resolves one).
	// When it matches nothing, the stored question says why.
	resolveQuestion = `WITH w AS (
	UPDATE questions SET status = $3, answer = $4, answered_by = $5, reason = $6, resolved_at = $7,
		change_seq = (pg_current_xact_id()::text::bigint + (SELECT base FROM seq_base)) * 65536 + 1
	WHERE thread_id = $1 AND id = $2 AND status = 'pending' AND CASE $3::text
		WHEN 'answered' THEN deadline IS NULL OR $7 < deadline
		WHEN 'timed_out' THEN deadline IS NOT NULL AND $7 >= deadline
		ELSE true END
	RETURNING ` + questionCols + `, change_seq
)
` + checked("w", "question resolve", "w.*, "+notice("question_resolved"))
)

const (
	// notifyQuestion tells listeners (channel "tollgate.<schema>") of a
	// question the batch created or resolved, with the payload its
	// statement made (notice). It runs after COMMIT, in a transaction of
	// its own: PostgreSQL serializes the commits of transactions that
	// NOTIFY (a lock held across the commit's WAL flush, so that the
	// queue is in commit order), and this one writes no WAL, so has
	// nothing to wait for. (It must not read the question: a read may
	// prune the page the write left, which writes WAL, and then its commit
	// waits for a flush of its own.) A listener hears of the question once
	// it is committed, a moment later than at the commit. (Should the
	// server die between COMMIT and this statement, its listeners lose
	// their connections and re-list: a Resync.)
	notifyQuestion = `SELECT pg_notify($1, current_setting($2))`
	// notifyNotice sends a TxHook's notification, the same way.
	notifyNotice = `SELECT pg_notify($1, $2)`
)

// createdSetting and resolvedSetting name the settings in which the
// question statements keep their notifications (notice), as parameters
// of notifyQuestion (made once: a string made a parameter is a copy).
var (
	createdSetting  any = "tollgate." + string(checkpoint.QuestionCreated)
	resolvedSetting any = "tollgate." + string(checkpoint.QuestionResolved)
)

// checked is the SELECT of cols, and one more column (NULL), from the
// write of the CTE named cte: a compare-and-set, which raises (cas,
// SQLSTATE TGCAS) when the write changed no row, so that the statement,
// and with it the batch, fails. cas is called only then (a CASE branch):
// on the common path the statement calls no function (a PL/pgSQL call
// cost a thread append a sixth of its time).
func checked(cte, what, cols string) string {
	if cols != "" {
		cols += ", "
	}
	return "SELECT " + cols + "CASE WHEN c.n = 0 THEN cas(0, '" + what + "') END FROM (SELECT count(*) AS n FROM " + cte + ") c LEFT JOIN " + cte + " ON true"
}

// notice is the column of a question's statement that keeps, in the
// session's setting "tollgate.<kind>", the payload of its notification:
// {"k": kind, "t": thread, "q": question, "s": change_seq}, or a resync
// when over NOTIFY's 8000 bytes. A setting, not a transaction's: it
// outlives the COMMIT for notifyQuestion (and a batch that fails skips
// both).
func notice(kind string) string {
	p := `json_build_object('k', '` + kind + `', 't', w.thread_id, 'q', w.id, 's', w.change_seq)::text`
	return `set_config('tollgate.` + kind + `', CASE WHEN octet_length(` + p + `) > 7900
	THEN json_build_object('k', 'resync', 's', w.change_seq)::text ELSE ` + p + ` END, false)`
}

// messageCount is the number of the messages of a statement of n rows
// that takes them from parameter first on (see rowsFrom).
func messageCount(n, first int) string {
	if n > maxValues {
		return "cardinality($" + strconv.Itoa(first) + "::text[])"
	}
	return strconv.Itoa(n)
}

var (
	// createThread is CreateThread and a ThreadWrite of Version 0: the
	// thread and its n messages, or nothing when the id exists.
	createThread = newStatements(func(n int) string {
		sql := `WITH t AS (
	INSERT INTO threads (id, version, status, run_id, message_count, message_bytes, created_at, updated_at)
	VALUES ($1, 1, $2, $3, ` + messageCount(n, 7) + `, $6, $4, $5)
	ON CONFLICT (id) DO NOTHING
	RETURNING version, created_at
)`
		if n > 0 {
			sql += `, m AS (
	INSERT INTO messages (thread_id, position, body)
	SELECT $1, b.n, b.body::json FROM t, ` + rowsFrom(n, 7, messageColumns) + `
)`
		}
		return sql + `
` + checked("t", "thread create", "t.version, t.created_at")
	})

	// appendThread is a ThreadWrite: a compare-and-set on the version
	// that writes the thread's row and inserts only the n new messages,
	// at the positions after the stored ones. A concurrent writer waits
	// for the row and then finds another version: its messages are never
	// inserted.
	appendThread = newStatements(func(n int) string {
		sql := `WITH t AS (
	UPDATE threads SET version = version + 1, status = $3, run_id = $4, updated_at = $5,
		message_count = message_count + ` + messageCount(n, 7) + `, message_bytes = message_bytes + $6
	WHERE id = $1 AND version = $2
	RETURNING version, created_at, message_count - ` + messageCount(n, 7) + ` AS first
)`
		if n > 0 {
			sql += `, m AS (
	INSERT INTO messages (thread_id, position, body)
	SELECT $1, t.first + b.n, b.body::json FROM t, ` + rowsFrom(n, 7, messageColumns) + `
)`
		}
		return sql + `
` + checked("t", "thread save", "t.version, t.created_at")
	})

	// insertMessages: SaveThread's n messages, from the first position.
	insertMessages = newStatements(func(n int) string {
		return `INSERT INTO messages (thread_id, position, body)
SELECT $1, b.n, b.body::json FROM ` + rowsFrom(n, 2, messageColumns)
	})

	// appendEvents numbers the batch's n events from the transaction's
	// id (see events.go); one such statement a transaction.
	appendEvents = newStatements(func(n int) string {
		return `INSERT INTO events (seq, thread_id, run_id, type, data, at)
SELECT (pg_current_xact_id()::text::bigint + s.base) * 65536 + b.n, b.thread_id, b.run_id, b.type, b.data::json, b.at
FROM seq_base s, ` + rowsFrom(n, 1, eventColumns) + `
RETURNING seq`
	})
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
	// kind, and ids of id and run, name the statement for errors:
	// "events", "thread \"t1\"", "tool call \"c1\" of run \"r1\"" (see
	// what), put together only when one is needed.
	kind, id, run string
	ids           int
	// read reads the result into p. (Functions of the pipeline, not
	// closures: a closure a statement was a cycle's largest share of the
	// store's allocations.)
	read func(p *pipeline, br pgx.BatchResults) error
	// lost says why the write lost its compare-and-set, reading the
	// store after the rollback; nil for a write that cannot lose. what
	// is the step's what().
	lost func(ctx context.Context, p *pipeline, what string) (*checkpoint.Committed, error)
	// commit marks COMMIT: once it is read, the batch is written (what
	// follows are its notifications).
	commit bool
}

// what names the step's statement: its kind, then the id and the run,
// quoted, as many as ids says.
func (st *step) what() string {
	w := st.kind
	if st.ids > 0 {
		w += " " + strconv.Quote(st.id)
	}
	if st.ids > 1 {
		w += " of run " + strconv.Quote(st.run)
	}
	return w
}

// commit is Commit, and the single-record methods as one-record batches.
// On a lost compare-and-set it returns the error, and with it what the
// single method returns too (the stored question of a question that
// exists, or of a resolution that lost).
func (s *Store) commit(ctx context.Context, b *checkpoint.Batch, o commitOpts) (*checkpoint.Committed, error) {
	if b == nil || b.Empty() {
		return &checkpoint.Committed{}, nil
	}
	// A resolution commits with its audit entry (and schema 7's trigger
	// refuses one that does not, at the COMMIT): said here, before a
	// round trip.
	if _, err := checkpoint.ResolutionEventIndex(b); err != nil {
		return nil, err
	}
	now := s.clk.Now()
	if err := checkTimes("commit", now); err != nil {
		return nil, err
	}
	if len(b.Events) > maxBatchEvents {
		return nil, fmt.Errorf("postgres: commit: %d events in one batch, at most %d", len(b.Events), maxBatchEvents)
	}
	p := &pipeline{s: s, b: b, o: o, now: now, out: &checkpoint.Committed{}}
	p.steps, p.batch.QueuedQueries = p.stepBuf[:0], p.queuedPtrs[:0]
	// A batch that notifies commits with COMMIT, so that its
	// notifications follow in a transaction of their own, in the same
	// pipeline; any other is the pipeline's implicit transaction (two
	// statements fewer).
	//
	// A batch a hook wants runs in a transaction of pgx's instead (see
	// sendTx): BEGIN, the statements, the hook, COMMIT, then the
	// notifications.
	hook := s.txHook.Load()
	if hook != nil && !hook.Wants(b) {
		hook = nil
	}
	explicit := hook == nil && (b.Question != nil || b.Resolve != nil)
	if explicit {
		p.queue(step{kind: "begin", read: ignoreResult}, begin)
	}
	if len(b.Events) > 0 || b.Question != nil || b.Resolve != nil {
		p.queue(step{kind: "lock", read: ignoreResult}, writersLock, int32(lockClass), s.writersKey)
	}
	// The lease first of the writes: a replica that lost it writes
	// nothing, and one taking it over waits for this transaction.
	if f, ok := fenceFrom(ctx); ok {
		p.queue(step{kind: "lease of thread", id: f.ThreadID, ids: 1, read: ignoreResult, lost: fenceLost}, checkFence, f.ThreadID, f.Epoch)
	}
	if err := p.thread(o); err != nil {
		return nil, err
	}
	p.toolCalls()
	if err := p.resolve(); err != nil {
		return nil, err
	}
	// The question last of the compare-and-sets: a lost one is the
	// answer even when the question exists (checkpoint.Batch).
	if err := p.question(); err != nil {
		return nil, err
	}
	if err := p.events(); err != nil {
		return nil, err
	}
	if explicit {
		p.queue(step{kind: "commit", read: ignoreResult, commit: true}, "COMMIT")
	}
	var notes *pgx.Batch
	if hook != nil {
		notes = &pgx.Batch{}
	}
	var settings [2]any
	n := 0
	if b.Question != nil {
		settings[n], n = createdSetting, n+1
	}
	if b.Resolve != nil {
		settings[n], n = resolvedSetting, n+1
	}
	for _, setting := range settings[:n] {
		if hook != nil {
			notes.Queue(notifyQuestion, s.channelArg, setting)
			continue
		}
		p.queue(step{kind: "notification", read: ignoreResult}, notifyQuestion, s.channelArg, setting)
	}

	var c *checkpoint.Committed
	var err error
	if hook != nil {
		c, err = s.sendTx(ctx, p, notes, hook)
	} else {
		c, err = s.send(ctx, p)
	}
	if err != nil || c != nil {
		return c, unavailable(err)
	}
	p.committed()
	return p.out, nil
}

// send runs the batch and reads its results, in order: nil, nil when the
// transaction committed; else the error and, when a compare-and-set lost,
// what the losing write says about the stored state.
func (s *Store) send(ctx context.Context, p *pipeline) (*checkpoint.Committed, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: commit: %w", err)
	}
	br := conn.SendBatch(ctx, &p.batch)
	failed, committed := -1, false
	for i, st := range p.steps {
		if err = st.read(p, br); err != nil {
			failed = i
			break
		}
		committed = committed || st.commit
	}
	// Close reads to the end of the pipeline.
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil && conn.Conn().PgConn().TxStatus() == 'E' {
		// A statement failed inside BEGIN: the server skipped the rest
		// and the transaction waits for its ROLLBACK. (Should that fail,
		// the pool drops the connection.)
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn.Exec(rctx, "ROLLBACK")
		cancel()
	}
	conn.Release()
	switch {
	case err == nil:
		return nil, nil
	case committed:
		// Only a notification failed: the batch is written, and
		// listeners still have the poll.
		s.logf(slog.LevelWarn, "checkpoint/postgres: a notification after a commit failed", "err", err)
		return nil, nil
	}
	return failure(ctx, err, p, failed)
}

// failure is what a batch that failed at step failed (-1: before any)
// returns, once its transaction is rolled back: for a lost
// compare-and-set, what the store says about why.
func failure(ctx context.Context, err error, p *pipeline, failed int) (*checkpoint.Committed, error) {
	steps := p.steps
	var pgErr *pgconn.PgError
	if failed >= 0 && errors.As(err, &pgErr) && pgErr.Code == casLost && steps[failed].lost != nil {
		what := steps[failed].what()
		c, lerr := steps[failed].lost(ctx, p, what)
		if lerr == nil && c == nil {
			lerr = fmt.Errorf("postgres: commit: %s lost its compare-and-set", what)
		}
		return c, lerr
	}
	if failed >= 0 {
		return nil, fmt.Errorf("postgres: commit: %s: %w", steps[failed].what(), err)
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

// checkMessages refuses an empty message: each is one JSON value.
func checkMessages(thread string, msgs []json.RawMessage) error {
	for i, m := range msgs {
		if len(bytes.TrimSpace(m)) == 0 {
			return fmt.Errorf("postgres: thread %q: message %d is empty, want one JSON value", thread, i)
		}
	}
	return nil
}

// messageArgs appends to args the parameters of rowsFrom for the
// messages (column body, text): up to maxValues, each message's bytes as
// they are (pgx sends a []byte to a text parameter byte for byte, and a
// checked message is never empty, so never NULL; a string was a copy and
// a row slice a message; as strings when asString: see Store.textJSON);
// beyond, as rowArgs, one text array.
func messageArgs(args []any, msgs []json.RawMessage, asString bool) []any {
	if len(msgs) <= maxValues {
		for _, m := range msgs {
			if asString {
				args = append(args, string(m))
			} else {
				args = append(args, []byte(m))
			}
		}
		return args
	}
	rows := make([][]any, len(msgs))
	for i, m := range msgs {
		rows[i] = []any{string(m)}
	}
	return append(args, rowArgs(rows, messageColumns)...)
}

// splitMessages is [messages.Split], naming the thread.
func splitMessages(thread string, msgs json.RawMessage) ([]json.RawMessage, error) {
	out, err := messages.Split(msgs)
	if err != nil {
		return nil, fmt.Errorf("postgres: thread %q: %w", thread, err)
	}
	return out, nil
}
