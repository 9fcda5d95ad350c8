package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/cursor"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/listsql"
)

// The times the store keeps: PostgreSQL's timestamptz starts on 24 November
// 4714 BC; pgx sends microseconds since 1970 in an int64, which ends in
// AD 294247 (before PostgreSQL's end, 294276). A time outside is refused
// ([checkTimes]): pgx would send it wrapped around, another time.
var (
	minTime = time.Date(-4713, time.November, 24, 0, 0, 0, 0, time.UTC)
	endTime = time.UnixMicro(math.MaxInt64).Add(time.Microsecond)
)

// checkTimes refuses a time the store cannot keep.
func checkTimes(what string, ts ...time.Time) error {
	for _, t := range ts {
		if !t.IsZero() && (t.Before(minTime) || !t.Before(endTime)) {
			return fmt.Errorf("postgres: %s: time %s is outside the range the store keeps (%s to %s)", what,
				t.UTC().Format(time.RFC3339Nano), minTime.Format(time.RFC3339), endTime.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// Zero times are NULL. PostgreSQL keeps microseconds.
func encTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func decTime(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

// JSON goes to json columns as text, byte for byte; empty is NULL.
func encJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func decJSON(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
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
	tag, err := s.pool.Exec(ctx, `INSERT INTO threads (id, version, status, run_id, messages, created_at, updated_at)
VALUES ($1, 1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`,
		t.ID, string(t.Status), t.RunID, encJSON(t.Messages), created, now)
	if err != nil {
		return fmt.Errorf("postgres: create thread %q: %w", t.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("thread %q exists: %w", t.ID, checkpoint.ErrConflict)
	}
	t.Version, t.CreatedAt, t.UpdatedAt = 1, created, now
	return nil
}

func (s *Store) LoadThread(ctx context.Context, id string) (*checkpoint.Thread, error) {
	t := &checkpoint.Thread{ID: id}
	var status string
	var msgs []byte
	var created, updated pgtype.Timestamptz
	err := s.pool.QueryRow(ctx, `SELECT version, status, run_id, messages, created_at, updated_at FROM threads WHERE id = $1`, id).
		Scan(&t.Version, &status, &t.RunID, &msgs, &created, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("thread %q: %w", id, checkpoint.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: load thread %q: %w", id, err)
	}
	t.Status, t.Messages, t.CreatedAt, t.UpdatedAt = checkpoint.ThreadStatus(status), decJSON(msgs), decTime(created), decTime(updated)
	return t, nil
}

func (s *Store) SaveThread(ctx context.Context, t *checkpoint.Thread) error {
	now := s.clk.Now()
	var version int64
	var created pgtype.Timestamptz
	if err := checkTimes("save thread "+strconv.Quote(t.ID), now); err != nil {
		return err
	}
	err := s.pool.QueryRow(ctx, `UPDATE threads SET version = version + 1, status = $3, run_id = $4, messages = $5, updated_at = $6
WHERE id = $1 AND version = $2 RETURNING version, created_at`,
		t.ID, t.Version, string(t.Status), t.RunID, encJSON(t.Messages), now).Scan(&version, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		// Threads are never deleted: it either never existed or moved on.
		var stored int64
		switch err := s.pool.QueryRow(ctx, `SELECT version FROM threads WHERE id = $1`, t.ID).Scan(&stored); {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("thread %q: %w", t.ID, checkpoint.ErrNotFound)
		case err != nil:
			return fmt.Errorf("postgres: save thread %q: %w", t.ID, err)
		default:
			return fmt.Errorf("thread %q: version %d, stored %d: %w", t.ID, t.Version, stored, checkpoint.ErrConflict)
		}
	}
	if err != nil {
		return fmt.Errorf("postgres: save thread %q: %w", t.ID, err)
	}
	t.Version, t.CreatedAt, t.UpdatedAt = version, decTime(created), now
	return nil
}

// threadCols are what a listing reads: all but messages.
const threadCols = `id, version, status, run_id, created_at, updated_at`

func (s *Store) ListThreads(ctx context.Context, f checkpoint.ThreadFilter) ([]*checkpoint.Thread, string, error) {
	page, after, err := cursor.StartThreads(f)
	if err != nil {
		return nil, "", err
	}
	err = s.each(ctx, listsql.Threads(dialect, threadCols, f, after, page.Limit), func(row pgx.Row) (bool, error) {
		t := &checkpoint.Thread{}
		var status string
		var created, updated pgtype.Timestamptz
		if err := row.Scan(&t.ID, &t.Version, &status, &t.RunID, &created, &updated); err != nil {
			return false, err
		}
		t.Status, t.CreatedAt, t.UpdatedAt = checkpoint.ThreadStatus(status), decTime(created), decTime(updated)
		return page.Add(t), nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("postgres: list threads: %w", err)
	}
	return page.Items, page.Next(), nil
}

// each runs st and calls f with every row, until f says stop.
func (s *Store) each(ctx context.Context, st listsql.Stmt, f func(row pgx.Row) (stop bool, err error)) error {
	rows, err := s.pool.Query(ctx, st.SQL, st.Args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if stop, err := f(rows); err != nil || stop {
			return err
		}
	}
	return rows.Err()
}

const (
	// claimToolCall writes "executing": a claim, one INSERT that does
	// nothing if the call has a record. A concurrent claimant waits on the
	// unique index for the first's transaction and then inserts nothing.
	claimToolCall = `INSERT INTO tool_calls (thread_id, run_id, call_id, tool, args, state, result, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (thread_id, run_id, call_id) DO NOTHING`
	putToolCall = `INSERT INTO tool_calls (thread_id, run_id, call_id, tool, args, state, result, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (thread_id, run_id, call_id) DO UPDATE SET
	tool = excluded.tool, args = excluded.args, state = excluded.state, result = excluded.result, updated_at = excluded.updated_at`
)

// PutToolCall claims the call when tc is executing (ErrConflict if it has a
// record), and inserts or replaces it otherwise.
func (s *Store) PutToolCall(ctx context.Context, tc *checkpoint.ToolCall) error {
	now := s.clk.Now()
	claim := tc.State == checkpoint.ToolCallExecuting
	query := putToolCall
	if claim {
		query = claimToolCall
	}
	if err := checkTimes("put tool call "+strconv.Quote(tc.CallID), now); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, query,
		tc.ThreadID, tc.RunID, tc.CallID, tc.Tool, encJSON(tc.Args), string(tc.State), encJSON(tc.Result), now)
	if err != nil {
		return fmt.Errorf("postgres: put tool call %q: %w", tc.CallID, err)
	}
	if claim && tag.RowsAffected() == 0 {
		return fmt.Errorf("tool call %q of run %q is already claimed: %w", tc.CallID, tc.RunID, checkpoint.ErrConflict)
	}
	tc.UpdatedAt = now
	return nil
}

func (s *Store) ListToolCalls(ctx context.Context, threadID, runID string) ([]*checkpoint.ToolCall, error) {
	rows, err := s.pool.Query(ctx, `SELECT call_id, tool, args, state, result, updated_at FROM tool_calls
WHERE thread_id = $1 AND run_id = $2 ORDER BY call_id`, threadID, runID)
	if err != nil {
		return nil, fmt.Errorf("postgres: list tool calls: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*checkpoint.ToolCall, error) {
		tc := &checkpoint.ToolCall{ThreadID: threadID, RunID: runID}
		var args, result []byte
		var state string
		var updated pgtype.Timestamptz
		if err := row.Scan(&tc.CallID, &tc.Tool, &args, &state, &result, &updated); err != nil {
			return nil, err
		}
		tc.Args, tc.State, tc.Result, tc.UpdatedAt = decJSON(args), checkpoint.ToolCallState(state), decJSON(result), decTime(updated)
		return tc, nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list tool calls: %w", err)
	}
	return out, nil
}

const questionCols = `seq, thread_id, id, run_id, call_id, tool, kind, payload, digest, status, answer, answered_by, reason, created_at, deadline, resolved_at`

func scanQuestion(row pgx.Row) (*checkpoint.Question, int64, error) {
	q := &checkpoint.Question{}
	var seq int64
	var payload, answer []byte
	var status string
	var created, deadline, resolved pgtype.Timestamptz
	err := row.Scan(&seq, &q.ThreadID, &q.ID, &q.RunID, &q.CallID, &q.Tool, &q.Kind, &payload, &q.Digest, &status,
		&answer, &q.AnsweredBy, &q.Reason, &created, &deadline, &resolved)
	if err != nil {
		return nil, 0, err
	}
	q.Payload, q.Status, q.Answer = decJSON(payload), checkpoint.QuestionStatus(status), decJSON(answer)
	q.CreatedAt, q.Deadline, q.ResolvedAt = decTime(created), decTime(deadline), decTime(resolved)
	return q, seq, nil
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
	// One statement: the row, its sequence numbers and the notification
	// (by trigger) commit together.
	stored, _, err := scanQuestion(s.pool.QueryRow(ctx, `INSERT INTO questions (thread_id, id, run_id, call_id, tool, kind, payload, digest, status, answered_by, reason, created_at, deadline)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', '', '', $9, $10)
ON CONFLICT (thread_id, id) DO NOTHING RETURNING `+questionCols,
		c.ThreadID, c.ID, c.RunID, c.CallID, c.Tool, c.Kind, encJSON(c.Payload), c.Digest, c.CreatedAt, encTime(c.Deadline)))
	if err == nil {
		return stored, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, fmt.Errorf("postgres: create question %q: %w", c.ID, err)
	}
	stored, err = s.GetQuestion(ctx, c.ThreadID, c.ID)
	if err != nil {
		return nil, false, err
	}
	return stored, false, nil
}

func (s *Store) GetQuestion(ctx context.Context, threadID, id string) (*checkpoint.Question, error) {
	q, _, err := scanQuestion(s.pool.QueryRow(ctx, `SELECT `+questionCols+` FROM questions WHERE thread_id = $1 AND id = $2`, threadID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("question %q of thread %q: %w", id, threadID, checkpoint.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: get question %q: %w", id, err)
	}
	return q, nil
}

// dialect is how PostgreSQL spells what [listsql] needs.
var dialect = listsql.Dialect{
	Param: func(n int) string { return "$" + strconv.Itoa(n) },
	Time:  encTime,
	// The indexes on thread IDs are COLLATE "C" too.
	Bytewise: func(col string) string { return col + ` COLLATE "C"` },
}

// ListQuestions runs the page as one statement (a union for the deadline
// order): one round trip, one snapshot.
func (s *Store) ListQuestions(ctx context.Context, f checkpoint.QuestionFilter) ([]*checkpoint.Question, string, error) {
	page, after, err := cursor.StartQuestions(f)
	if err != nil {
		return nil, "", err
	}
	err = s.each(ctx, listsql.Union(listsql.Questions(dialect, questionCols, f, after, page.Limit), page.Limit), func(row pgx.Row) (bool, error) {
		q, seq, err := scanQuestion(row)
		if err != nil {
			return false, err
		}
		return page.Add(q, seq), nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("postgres: list questions: %w", err)
	}
	return page.Items, page.Next(), nil
}

func (s *Store) CountQuestions(ctx context.Context, f checkpoint.QuestionFilter) (int64, error) {
	st := listsql.CountQuestions(dialect, f)
	var n int64
	if err := s.pool.QueryRow(ctx, st.SQL, st.Args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: count questions: %w", err)
	}
	return n, nil
}

// resolveSQL is the compare-and-set, with the rule of
// [checkpoint.CheckResolution] in its WHERE clause, so that the common case
// is one statement: the update, its change_seq and the notification commit
// together. When it matches nothing, the stored question says why.
const resolveSQL = `UPDATE questions SET status = $3, answer = $4, answered_by = $5, reason = $6, resolved_at = $7
WHERE thread_id = $1 AND id = $2 AND status = 'pending' AND CASE $3::text
	WHEN 'answered' THEN deadline IS NULL OR $7 < deadline
	WHEN 'timed_out' THEN deadline IS NOT NULL AND $7 >= deadline
	ELSE true END
RETURNING ` + questionCols

func (s *Store) ResolveQuestion(ctx context.Context, threadID, id string, r checkpoint.Resolution) (*checkpoint.Question, error) {
	switch r.Status {
	case checkpoint.QuestionAnswered, checkpoint.QuestionTimedOut, checkpoint.QuestionAborted:
	default:
		return nil, fmt.Errorf("question %q: cannot resolve as %q", id, r.Status)
	}
	if r.At.IsZero() {
		r.At = s.clk.Now()
	}
	if err := checkTimes("resolve question "+strconv.Quote(id), r.At); err != nil {
		return nil, err
	}
	q, _, err := scanQuestion(s.pool.QueryRow(ctx, resolveSQL, threadID, id, string(r.Status), encJSON(r.Answer), r.By, r.Reason, r.At))
	if err == nil {
		return q, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: resolve question %q: %w", id, err)
	}
	q, err = s.GetQuestion(ctx, threadID, id)
	if err != nil {
		return nil, err
	}
	// The stored deadline has microseconds; r.At may have more. Compare
	// as PostgreSQL did, so that the reason matches the refusal.
	r.At = r.At.Truncate(time.Microsecond)
	if err := checkpoint.CheckResolution(q, r); err != nil {
		return q, err
	}
	// Pending and in time now, but not when the update ran: lost a race.
	return q, fmt.Errorf("question %q changed while being resolved: %w", id, checkpoint.ErrConflict)
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
	// seq is assigned by trigger under a lock held to commit, so events
	// become visible in seq order and a reader following the log by
	// position never skips one.
	err := s.pool.QueryRow(ctx, `INSERT INTO events (thread_id, run_id, type, data, at) VALUES ($1, $2, $3, $4, $5) RETURNING seq`,
		e.ThreadID, e.RunID, e.Type, encJSON(e.Data), at).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("postgres: append event: %w", err)
	}
	e.Seq, e.At = seq, at
	return seq, nil
}

func (s *Store) ListEvents(ctx context.Context, threadID string, after int64, limit int) ([]*checkpoint.Event, error) {
	if limit <= 0 {
		limit = 1000
	}
	query := `SELECT seq, thread_id, run_id, type, data, at FROM events WHERE seq > $1 ORDER BY seq LIMIT $2`
	args := []any{after, limit}
	if threadID != "" {
		query = `SELECT seq, thread_id, run_id, type, data, at FROM events WHERE thread_id = $3 AND seq > $1 ORDER BY seq LIMIT $2`
		args = append(args, threadID)
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*checkpoint.Event, error) {
		e := &checkpoint.Event{}
		var data []byte
		var at pgtype.Timestamptz
		if err := row.Scan(&e.Seq, &e.ThreadID, &e.RunID, &e.Type, &data, &at); err != nil {
			return nil, err
		}
		e.Data, e.At = decJSON(data), decTime(at)
		return e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list events: %w", err)
	}
	return out, nil
}
