package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/cursor"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/listsql"
)

// Times are stored as Unix microseconds (schema 2; schema 1 had
// nanoseconds, which a 64-bit integer holds only until 2262, before some
// deadlines), NULL for the zero time. That keeps what PostgreSQL keeps, and
// more: any time from 290308 BC to AD 294247. A time outside is refused
// ([checkTimes]), never stored as another.
var (
	minTime = time.UnixMicro(math.MinInt64)
	endTime = time.UnixMicro(math.MaxInt64).Add(time.Microsecond)
)

// checkTimes refuses a time the store cannot keep.
func checkTimes(what string, ts ...time.Time) error {
	for _, t := range ts {
		if !t.IsZero() && (t.Before(minTime) || !t.Before(endTime)) {
			return fmt.Errorf("sqlite: %s: time %s is outside the range the store keeps (%s to %s)", what,
				t.UTC().Format(time.RFC3339Nano), minTime.UTC().Format(time.RFC3339), endTime.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

func encTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func decTime(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.UnixMicro(n.Int64).UTC()
}

// kept returns t as the store reads it back: to the microsecond, in UTC.
func kept(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMicro(t.UnixMicro()).UTC()
}

// JSON is stored as TEXT, byte for byte; NULL when empty.
func encJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func decJSON(s sql.NullString) json.RawMessage {
	if !s.Valid {
		return nil
	}
	return json.RawMessage(s.String)
}

// write runs f in one write transaction (BEGIN IMMEDIATE on the single
// writer connection) and commits it.
func (s *Store) write(ctx context.Context, f func(tx *sql.Tx) error) error {
	if s.readOnly {
		return fmt.Errorf("%w: opened with ReadOnly", ErrReadOnly)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	return nil
}

func (s *Store) CreateThread(ctx context.Context, t *checkpoint.Thread) error {
	now := s.clk.Now()
	created := t.CreatedAt
	if created.IsZero() {
		created = now
	}
	if err := checkTimes("create thread "+strconv.Quote(t.ID), created, now); err != nil {
		return err
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := s.in(ctx, tx, qCreateThread).ExecContext(ctx,
			t.ID, string(t.Status), t.RunID, encJSON(t.Messages), encTime(created), encTime(now))
		if err != nil {
			return fmt.Errorf("sqlite: create thread %q: %w", t.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("thread %q exists: %w", t.ID, checkpoint.ErrConflict)
		}
		return nil
	})
	if err != nil {
		return err
	}
	t.Version, t.CreatedAt, t.UpdatedAt = 1, kept(created), kept(now)
	return nil
}

func (s *Store) LoadThread(ctx context.Context, id string) (*checkpoint.Thread, error) {
	t := &checkpoint.Thread{ID: id}
	var status string
	var msgs sql.NullString
	var created, updated sql.NullInt64
	err := s.read(qLoadThread).QueryRowContext(ctx, id).
		Scan(&t.Version, &status, &t.RunID, &msgs, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("thread %q: %w", id, checkpoint.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: load thread %q: %w", id, err)
	}
	t.Status, t.Messages, t.CreatedAt, t.UpdatedAt = checkpoint.ThreadStatus(status), decJSON(msgs), decTime(created), decTime(updated)
	return t, nil
}

func (s *Store) SaveThread(ctx context.Context, t *checkpoint.Thread) error {
	now := s.clk.Now()
	var version int64
	var created sql.NullInt64
	if err := checkTimes("save thread "+strconv.Quote(t.ID), now); err != nil {
		return err
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		err := s.in(ctx, tx, qSaveThread).QueryRowContext(ctx,
			string(t.Status), t.RunID, encJSON(t.Messages), encTime(now), t.ID, t.Version).Scan(&version, &created)
		if err == nil {
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: save thread %q: %w", t.ID, err)
		}
		var stored int64
		switch err := s.in(ctx, tx, qThreadVersion).QueryRowContext(ctx, t.ID).Scan(&stored); {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("thread %q: %w", t.ID, checkpoint.ErrNotFound)
		case err != nil:
			return fmt.Errorf("sqlite: save thread %q: %w", t.ID, err)
		default:
			return fmt.Errorf("thread %q: version %d, stored %d: %w", t.ID, t.Version, stored, checkpoint.ErrConflict)
		}
	})
	if err != nil {
		return err
	}
	t.Version, t.CreatedAt, t.UpdatedAt = version, decTime(created), kept(now)
	return nil
}

// threadCols are what a listing reads: all but messages.
const threadCols = `id, version, status, run_id, created_at, updated_at`

func (s *Store) ListThreads(ctx context.Context, f checkpoint.ThreadFilter) ([]*checkpoint.Thread, string, error) {
	page, after, err := cursor.StartThreads(f)
	if err != nil {
		return nil, "", err
	}
	_, err = s.each(ctx, listsql.Threads(dialect, threadCols, f, after, page.Limit), func(row scanner) (bool, error) {
		t := &checkpoint.Thread{}
		var status string
		var created, updated sql.NullInt64
		if err := row.Scan(&t.ID, &t.Version, &status, &t.RunID, &created, &updated); err != nil {
			return false, err
		}
		t.Status, t.CreatedAt, t.UpdatedAt = checkpoint.ThreadStatus(status), decTime(created), decTime(updated)
		return page.Add(t), nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list threads: %w", err)
	}
	return page.Items, page.Next(), nil
}

// each runs st on the readers and calls f with every row, until f says
// stop (SQLite steps lazily: the rows after are never computed).
func (s *Store) each(ctx context.Context, st listsql.Stmt, f func(row scanner) (stop bool, err error)) (stopped bool, err error) {
	rows, err := s.r.QueryContext(ctx, st.SQL, st.Args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	for rows.Next() {
		if stop, err := f(rows); err != nil || stop {
			return stop, err
		}
	}
	return false, rows.Err()
}

// PutToolCall claims the call when tc is executing (one INSERT that does
// nothing if the call has a record: of two racing claimants, in this
// process or another, the second finds the first's row), and inserts or
// replaces it otherwise.
func (s *Store) PutToolCall(ctx context.Context, tc *checkpoint.ToolCall) error {
	now := s.clk.Now()
	claim := tc.State == checkpoint.ToolCallExecuting
	query := qPutToolCall
	if claim {
		query = qClaimToolCall
	}
	if err := checkTimes("put tool call "+strconv.Quote(tc.CallID), now); err != nil {
		return err
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := s.in(ctx, tx, query).ExecContext(ctx,
			tc.ThreadID, tc.RunID, tc.CallID, tc.Tool, encJSON(tc.Args), string(tc.State), encJSON(tc.Result), encTime(now))
		if err != nil {
			return fmt.Errorf("sqlite: put tool call %q: %w", tc.CallID, err)
		}
		if !claim {
			return nil
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("sqlite: put tool call %q: %w", tc.CallID, err)
		}
		if n == 0 {
			return fmt.Errorf("tool call %q of run %q is already claimed: %w", tc.CallID, tc.RunID, checkpoint.ErrConflict)
		}
		return nil
	})
	if err != nil {
		return err
	}
	tc.UpdatedAt = kept(now)
	return nil
}

func (s *Store) ListToolCalls(ctx context.Context, threadID, runID string) ([]*checkpoint.ToolCall, error) {
	rows, err := s.read(qListToolCalls).QueryContext(ctx, threadID, runID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list tool calls: %w", err)
	}
	defer rows.Close()
	var out []*checkpoint.ToolCall
	for rows.Next() {
		tc := &checkpoint.ToolCall{ThreadID: threadID, RunID: runID}
		var args, result sql.NullString
		var state string
		var updated sql.NullInt64
		if err := rows.Scan(&tc.CallID, &tc.Tool, &args, &state, &result, &updated); err != nil {
			return nil, fmt.Errorf("sqlite: list tool calls: %w", err)
		}
		tc.Args, tc.State, tc.Result, tc.UpdatedAt = decJSON(args), checkpoint.ToolCallState(state), decJSON(result), decTime(updated)
		out = append(out, tc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list tool calls: %w", err)
	}
	return out, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanQuestion(row scanner) (*checkpoint.Question, int64, error) {
	q := &checkpoint.Question{}
	var seq int64
	var payload, answer sql.NullString
	var status string
	var created, deadline, resolved sql.NullInt64
	err := row.Scan(&seq, &q.ThreadID, &q.ID, &q.RunID, &q.CallID, &q.Tool, &q.Kind, &payload, &q.Digest, &status,
		&answer, &q.AnsweredBy, &q.Reason, &created, &deadline, &resolved)
	if err != nil {
		return nil, 0, err
	}
	q.Payload, q.Status, q.Answer = decJSON(payload), checkpoint.QuestionStatus(status), decJSON(answer)
	q.CreatedAt, q.Deadline, q.ResolvedAt = decTime(created), decTime(deadline), decTime(resolved)
	return q, seq, nil
}

// getQuestion reads a question through stmt (qGetQuestion, for reading or
// in a write transaction).
func getQuestion(ctx context.Context, stmt *sql.Stmt, threadID, id string) (*checkpoint.Question, error) {
	q, _, err := scanQuestion(stmt.QueryRowContext(ctx, threadID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("question %q of thread %q: %w", id, threadID, checkpoint.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get question %q: %w", id, err)
	}
	return q, nil
}

func (s *Store) CreateQuestion(ctx context.Context, q *checkpoint.Question) (*checkpoint.Question, bool, error) {
	c := *q
	c.Status = checkpoint.QuestionPending
	c.Answer, c.AnsweredBy, c.Reason, c.ResolvedAt = nil, "", "", time.Time{}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = s.clk.Now()
	}
	if err := checkTimes("create question "+strconv.Quote(c.ID), c.CreatedAt, c.Deadline); err != nil {
		return nil, false, err
	}
	c.CreatedAt, c.Deadline = kept(c.CreatedAt), kept(c.Deadline)
	var stored *checkpoint.Question
	var change int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		err := s.in(ctx, tx, qCreateQuestion).QueryRowContext(ctx,
			c.ThreadID, c.ID, c.RunID, c.CallID, c.Tool, c.Kind, encJSON(c.Payload), c.Digest, string(c.Status),
			encTime(c.CreatedAt), encTime(c.Deadline)).Scan(&change)
		if err == nil {
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: create question %q: %w", c.ID, err)
		}
		stored, err = getQuestion(ctx, s.in(ctx, tx, qGetQuestion), c.ThreadID, c.ID)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if stored != nil {
		return stored, false, nil
	}
	s.hub.published(change, checkpoint.Notification{Kind: checkpoint.QuestionCreated, ThreadID: c.ThreadID, QuestionID: c.ID})
	c.Payload = append(json.RawMessage(nil), c.Payload...)
	return &c, true, nil
}

func (s *Store) GetQuestion(ctx context.Context, threadID, id string) (*checkpoint.Question, error) {
	return getQuestion(ctx, s.read(qGetQuestion), threadID, id)
}

// dialect is how SQLite spells what [listsql] needs.
var dialect = listsql.Dialect{
	Param:    func(int) string { return "?" },
	Time:     encTime,
	Bytewise: func(col string) string { return col }, // BINARY, the default collation
}

// ListQuestions reads the statements of the page in turn, as far as the
// page goes: SQLite steps lazily, so when the deadline order's first
// range fills the page, the second is never read. Two statements are two
// snapshots, which keeps the guarantees: a question's deadline, and so
// the range it is in, never changes.
func (s *Store) ListQuestions(ctx context.Context, f checkpoint.QuestionFilter) ([]*checkpoint.Question, string, error) {
	page, after, err := cursor.StartQuestions(f)
	if err != nil {
		return nil, "", err
	}
	for _, st := range listsql.Questions(dialect, questionCols, f, after, page.Limit) {
		complete, err := s.each(ctx, st, func(row scanner) (bool, error) {
			q, seq, err := scanQuestion(row)
			if err != nil {
				return false, err
			}
			return page.Add(q, seq), nil
		})
		if err != nil {
			return nil, "", fmt.Errorf("sqlite: list questions: %w", err)
		}
		if complete {
			break
		}
	}
	return page.Items, page.Next(), nil
}

func (s *Store) CountQuestions(ctx context.Context, f checkpoint.QuestionFilter) (int64, error) {
	st := listsql.CountQuestions(dialect, f)
	var n int64
	if err := s.r.QueryRowContext(ctx, st.SQL, st.Args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count questions: %w", err)
	}
	return n, nil
}

func (s *Store) ResolveQuestion(ctx context.Context, threadID, id string, r checkpoint.Resolution) (*checkpoint.Question, error) {
	if r.At.IsZero() {
		r.At = s.clk.Now()
	}
	if err := checkTimes("resolve question "+strconv.Quote(id), r.At); err != nil {
		return nil, err
	}
	var q *checkpoint.Question
	var change int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		if q, err = getQuestion(ctx, s.in(ctx, tx, qGetQuestion), threadID, id); err != nil {
			return err
		}
		if err := checkpoint.CheckResolution(q, r); err != nil {
			return err
		}
		err = s.in(ctx, tx, qResolveQuestion).QueryRowContext(ctx,
			string(r.Status), encJSON(r.Answer), r.By, r.Reason, encTime(r.At), threadID, id).Scan(&change)
		if errors.Is(err, sql.ErrNoRows) { // cannot happen: we are the only writer and saw it pending
			return fmt.Errorf("question %q changed under the write lock: %w", id, checkpoint.ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("sqlite: resolve question %q: %w", id, err)
		}
		return nil
	})
	if err != nil {
		if q != nil && (errors.Is(err, checkpoint.ErrConflict) || errors.Is(err, checkpoint.ErrExpired)) {
			return q, err
		}
		return nil, err
	}
	q.Status, q.Answer, q.AnsweredBy, q.Reason, q.ResolvedAt = r.Status, append(json.RawMessage(nil), r.Answer...), r.By, r.Reason, kept(r.At)
	if len(q.Answer) == 0 {
		q.Answer = nil
	}
	s.hub.published(change, checkpoint.Notification{Kind: checkpoint.QuestionResolved, ThreadID: threadID, QuestionID: id})
	return q, nil
}

func (s *Store) AppendEvent(ctx context.Context, e *checkpoint.Event) (int64, error) {
	at := e.At
	if at.IsZero() {
		at = s.clk.Now()
	}
	if err := checkTimes("append event", at); err != nil {
		return 0, err
	}
	var seq int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		err := s.in(ctx, tx, qAppendEvent).QueryRowContext(ctx,
			e.ThreadID, e.RunID, e.Type, encJSON(e.Data), encTime(at)).Scan(&seq)
		if err != nil {
			return fmt.Errorf("sqlite: append event: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	e.Seq, e.At = seq, kept(at)
	return seq, nil
}

func (s *Store) ListEvents(ctx context.Context, threadID string, after int64, limit int) ([]*checkpoint.Event, error) {
	if limit <= 0 {
		limit = 1000
	}
	stmt, args := s.read(qListEvents), []any{after, limit}
	if threadID != "" {
		stmt, args = s.read(qListThreadEvents), []any{threadID, after, limit}
	}
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list events: %w", err)
	}
	defer rows.Close()
	var out []*checkpoint.Event
	for rows.Next() {
		e := &checkpoint.Event{}
		var data sql.NullString
		var at sql.NullInt64
		if err := rows.Scan(&e.Seq, &e.ThreadID, &e.RunID, &e.Type, &data, &at); err != nil {
			return nil, fmt.Errorf("sqlite: list events: %w", err)
		}
		e.Data, e.At = decJSON(data), decTime(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list events: %w", err)
	}
	return out, nil
}
