package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/cursor"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/listsql"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/messages"
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

// CreateThread is a Commit of a thread write that creates the thread with
// t's messages. They must be a JSON array (or nothing): each element is
// kept as written.
func (s *Store) CreateThread(ctx context.Context, t *checkpoint.Thread) error {
	msgs, err := messages.Split(t.Messages)
	if err != nil {
		return fmt.Errorf("sqlite: create thread %q: %w", t.ID, err)
	}
	w := &checkpoint.ThreadWrite{ID: t.ID, Status: t.Status, RunID: t.RunID, Append: msgs, CreatedAt: t.CreatedAt}
	if _, err := s.commit(ctx, &op{b: &checkpoint.Batch{Thread: w}, split: true}); err != nil {
		return err
	}
	t.Version, t.CreatedAt, t.UpdatedAt = w.Version, w.CreatedAt, w.UpdatedAt
	return nil
}

// LoadThread reads the thread and its messages in one statement, and
// returns them as one array: "[", the messages joined by ",", "]".
func (s *Store) LoadThread(ctx context.Context, id string) (*checkpoint.Thread, error) {
	t := &checkpoint.Thread{ID: id}
	var status string
	var created, updated sql.NullInt64
	var legacy sql.NullString
	var count, size int64
	var body sql.NullString // a string: the driver's copy, not one more
	var null any
	var j *messages.Joiner
	found := false
	err := s.query(ctx, rLoadThread, func(row wrow) error {
		var err error
		if !found {
			err = row.Scan(&t.Version, &status, &t.RunID, &created, &updated, &legacy, &count, &size, &body)
		} else { // the thread's columns are NULL
			err = row.Scan(&null, &null, &null, &null, &null, &null, &null, &null, &body)
		}
		if err != nil {
			return err
		}
		if !found {
			found = true
			j = messages.NewJoiner(size, count)
		}
		if body.Valid { // else no message: the LEFT JOIN's row
			j.AddString(body.String)
		}
		return nil
	}, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: load thread %q: %w", id, err)
	}
	if !found {
		return nil, fmt.Errorf("thread %q: %w", id, checkpoint.ErrNotFound)
	}
	t.Messages = j.Messages()
	if legacy.Valid && j.Len() == 0 {
		t.Messages = json.RawMessage(legacy.String) // not an array: kept as an older store wrote it
	}
	t.Status, t.CreatedAt, t.UpdatedAt = checkpoint.ThreadStatus(status), decTime(created), decTime(updated)
	return t, nil
}

// SaveThread replaces every message of the thread, in one write of the
// writer (as a Commit): t.Messages must be a JSON array, each element is
// kept as written.
func (s *Store) SaveThread(ctx context.Context, t *checkpoint.Thread) error {
	msgs, err := messages.Split(t.Messages)
	if err != nil {
		return fmt.Errorf("sqlite: save thread %q: %w", t.ID, err)
	}
	w := &checkpoint.ThreadWrite{ID: t.ID, Version: t.Version, Status: t.Status, RunID: t.RunID, Append: msgs}
	if _, err := s.commit(ctx, &op{b: &checkpoint.Batch{Thread: w}, replace: true, split: true}); err != nil {
		return err
	}
	t.Version, t.CreatedAt, t.UpdatedAt = w.Version, w.CreatedAt, w.UpdatedAt
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

// PutToolCall is a Commit of the one tool call. A claim (executing) is
// one INSERT that does nothing if the call has a record: of two racing
// claimants, in this process or another, the second finds the first's row.
func (s *Store) PutToolCall(ctx context.Context, tc *checkpoint.ToolCall) error {
	_, err := s.commit(ctx, &op{b: &checkpoint.Batch{ToolCalls: []*checkpoint.ToolCall{tc}}})
	return err
}

// ListToolCalls reads the run's calls, or with callIDs those calls alone,
// toolCallChunk at a time, each a lookup of the primary key.
func (s *Store) ListToolCalls(ctx context.Context, threadID, runID string, callIDs ...string) ([]*checkpoint.ToolCall, error) {
	if len(callIDs) == 0 {
		return s.toolCalls(ctx, nil, rListToolCalls, threadID, runID)
	}
	ids := slices.Clone(callIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids) // each call once
	var out []*checkpoint.ToolCall
	args := make([]any, 2+toolCallChunk)
	args[0], args[1] = threadID, runID
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), toolCallChunk)]
		ids = ids[len(chunk):]
		for i := range toolCallChunk {
			args[2+i] = chunk[min(i, len(chunk)-1)]
		}
		var err error
		if out, err = s.toolCalls(ctx, out, rGetToolCalls, args...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// toolCalls appends to out the calls query reads; its first two arguments
// are the thread and run.
func (s *Store) toolCalls(ctx context.Context, out []*checkpoint.ToolCall, query rq, args ...any) ([]*checkpoint.ToolCall, error) {
	threadID, runID := args[0].(string), args[1].(string)
	err := s.query(ctx, query, func(row wrow) error {
		tc := &checkpoint.ToolCall{ThreadID: threadID, RunID: runID}
		var args, result sql.NullString
		var state string
		var updated sql.NullInt64
		if err := row.Scan(&tc.CallID, &tc.Tool, &args, &state, &result, &updated); err != nil {
			return err
		}
		tc.Args, tc.State, tc.Result, tc.UpdatedAt = decJSON(args), checkpoint.ToolCallState(state), decJSON(result), decTime(updated)
		out = append(out, tc)
		return nil
	}, args...)
	if err != nil {
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

// getQuestion reads a question from row (qGetQuestion's, for reading or
// in a write transaction).
func getQuestion(row scanner, threadID, id string) (*checkpoint.Question, error) {
	q, _, err := scanQuestion(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("question %q of thread %q: %w", id, threadID, checkpoint.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get question %q: %w", id, err)
	}
	return q, nil
}

// CreateQuestion is a Commit of the one question.
func (s *Store) CreateQuestion(ctx context.Context, q *checkpoint.Question) (*checkpoint.Question, bool, error) {
	o, err := s.commit(ctx, &op{b: &checkpoint.Batch{Question: q}})
	if err != nil {
		return nil, false, err
	}
	return o.out.Question, o.out.Created, nil
}

func (s *Store) GetQuestion(ctx context.Context, threadID, id string) (*checkpoint.Question, error) {
	return getQuestion(s.queryRow(ctx, rGetQuestion, threadID, id), threadID, id)
}

// dialect is how SQLite spells what [listsql] needs.
var dialect = listsql.Dialect{
	Param:    func(int) string { return "?" },
	Time:     encTime,
	Bytewise: func(col string) string { return col }, // BINARY, the default collation
	Contains: func(col, p string) string { return "instr(lower(" + col + "), lower(" + p + ")) > 0" },
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

// ResolveQuestion is a Commit of the resolution and its audit entry
// ([checkpoint.ResolveBatch] of the question as read). A compare-and-set
// that loses returns the stored question with its error.
func (s *Store) ResolveQuestion(ctx context.Context, threadID, id string, r checkpoint.Resolution) (*checkpoint.Question, error) {
	q, err := s.GetQuestion(ctx, threadID, id)
	if err != nil {
		return nil, err
	}
	if r.At.IsZero() {
		r.At = s.clk.Now()
	}
	o, err := s.commit(ctx, &op{b: checkpoint.ResolveBatch(q, r)})
	if err != nil {
		if o != nil && o.out.Resolved != nil && (errors.Is(err, checkpoint.ErrConflict) || errors.Is(err, checkpoint.ErrExpired)) {
			return o.out.Resolved, err
		}
		return nil, err
	}
	return o.out.Resolved, nil
}

// AppendEvent is a Commit of the one event.
func (s *Store) AppendEvent(ctx context.Context, e *checkpoint.Event) (int64, error) {
	o, err := s.commit(ctx, &op{b: &checkpoint.Batch{Events: []*checkpoint.Event{e}}})
	if err != nil {
		return 0, err
	}
	return o.out.EventSeqs[0], nil
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
