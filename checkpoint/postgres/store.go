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
	"github.com/tollgate-ai/tollgate/checkpoint/internal/messages"
)

// The times the store keeps: PostgreSQL's timestamptz starts on 24 November
// 4714 BC; pgx sends microseconds since 1970 in an int64, which ends in
// AD 294247 (before PostgreSQL's end, 294276). A time outside is refused
// ([checkTimes]): pgx would send it wrapped around, another time.
var (
	minTime = time.Date(-4713, time.November, 24, 0, 0, 0, 0, time.UTC)
	endTime = time.UnixMicro(math.MaxInt64).Add(time.Microsecond)
)

// checkTimesOf is checkTimes of what is named "kind \"id\"", the name
// put together only for the error (a commit's writes check their times
// every time, and fail that check almost never).
func checkTimesOf(kind, id string, ts ...time.Time) error {
	for _, t := range ts {
		if !kept(t) {
			return checkTimes(kind+" "+strconv.Quote(id), ts...)
		}
	}
	return nil
}

// kept says whether the store can keep t (zero is NULL).
func kept(t time.Time) bool { return t.IsZero() || !t.Before(minTime) && t.Before(endTime) }

// checkTimes refuses a time the store cannot keep.
func checkTimes(what string, ts ...time.Time) error {
	for _, t := range ts {
		if !kept(t) {
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

// JSON goes to json columns as text, byte for byte; empty is NULL. The
// bytes as they are (pgx sends a []byte to a json or text parameter
// unchanged; a string was a copy of each argument, payload and event) —
// but a string where pgx would send a []byte as bytea (s.textJSON).
func (s *Store) encJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	if s.textJSON {
		return string(b)
	}
	return []byte(b)
}

func decJSON(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

// CreateThread is a one-record batch: a ThreadWrite of Version 0 with
// the messages of t.Messages.
func (s *Store) CreateThread(ctx context.Context, t *checkpoint.Thread) error {
	msgs, err := splitMessages(t.ID, t.Messages)
	if err != nil {
		return err
	}
	w := &checkpoint.ThreadWrite{ID: t.ID, Status: t.Status, RunID: t.RunID, Append: msgs, CreatedAt: t.CreatedAt}
	if _, err := s.commit(ctx, &checkpoint.Batch{Thread: w}, commitOpts{}); err != nil {
		return err
	}
	t.Version, t.CreatedAt, t.UpdatedAt = w.Version, w.CreatedAt, w.UpdatedAt
	return nil
}

// loadThread reads the thread's row and its messages, one a row, in one
// statement (one snapshot): the rows carry the messages' stored values,
// which are sent as they are read, where an aggregate in the server
// (string_agg) decompressed and sorted them all first, six times slower
// for a thread of 4 MB.
const loadThread = `SELECT t.version, t.status, t.run_id, t.created_at, t.updated_at, t.message_count, t.message_bytes, m.body
FROM threads t LEFT JOIN messages m ON m.thread_id = t.id
WHERE t.id = $1 ORDER BY m.position`

// LoadThread returns the thread with its messages joined: "[", the
// messages separated by ",", "]".
func (s *Store) LoadThread(ctx context.Context, id string) (*checkpoint.Thread, error) {
	rows, err := s.pool.Query(ctx, loadThread, id)
	if err != nil {
		return nil, unavailable(fmt.Errorf("postgres: load thread %q: %w", id, err))
	}
	defer rows.Close()
	var t *checkpoint.Thread
	var j *messages.Joiner
	// One set of scan targets for every row (each row's own were a
	// thread and seven values on the heap, a row a message).
	var r struct {
		version          int64
		status, runID    string
		created, updated pgtype.Timestamptz
		count, size      int64
		body             pgtype.DriverBytes // the connection's buffer: copied at once
	}
	dest := []any{&r.version, &r.status, &r.runID, &r.created, &r.updated, &r.count, &r.size, &r.body}
	for rows.Next() {
		r.body = nil
		if err := rows.Scan(dest...); err != nil {
			return nil, unavailable(fmt.Errorf("postgres: load thread %q: %w", id, err))
		}
		body := r.body
		if t == nil {
			// The thread's columns are the same in every row: read once.
			t = &checkpoint.Thread{ID: id, Version: r.version, RunID: r.runID}
			t.Status, t.CreatedAt, t.UpdatedAt = checkpoint.ThreadStatus(r.status), decTime(r.created), decTime(r.updated)
			j = messages.NewJoiner(r.size, r.count)
		}
		if body == nil {
			continue // no message: the LEFT JOIN's one row
		}
		j.Add(body)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(fmt.Errorf("postgres: load thread %q: %w", id, err))
	}
	if t == nil {
		return nil, fmt.Errorf("thread %q: %w", id, checkpoint.ErrNotFound)
	}
	t.Messages = j.Messages()
	return t, nil
}

// SaveThread is a one-record batch that replaces every message.
func (s *Store) SaveThread(ctx context.Context, t *checkpoint.Thread) error {
	msgs, err := splitMessages(t.ID, t.Messages)
	if err != nil {
		return err
	}
	w := &checkpoint.ThreadWrite{ID: t.ID, Version: t.Version, Status: t.Status, RunID: t.RunID, Append: msgs}
	if _, err := s.commit(ctx, &checkpoint.Batch{Thread: w}, commitOpts{replace: true}); err != nil {
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
		return nil, "", unavailable(fmt.Errorf("postgres: list threads: %w", err))
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

// PutToolCall is a one-record batch: it claims the call when tc is
// executing (ErrConflict if it has a record), and inserts or replaces it
// otherwise.
func (s *Store) PutToolCall(ctx context.Context, tc *checkpoint.ToolCall) error {
	_, err := s.commit(ctx, &checkpoint.Batch{ToolCalls: []*checkpoint.ToolCall{tc}}, commitOpts{})
	return err
}

// ListToolCalls reads the run's calls, or only those of callIDs (a
// range of the primary key, or its entries for those ids).
func (s *Store) ListToolCalls(ctx context.Context, threadID, runID string, callIDs ...string) ([]*checkpoint.ToolCall, error) {
	var rows pgx.Rows
	var err error
	if len(callIDs) == 0 {
		rows, err = s.pool.Query(ctx, `SELECT call_id, tool, args, state, result, updated_at FROM tool_calls
WHERE thread_id = $1 AND run_id = $2 ORDER BY call_id`, threadID, runID)
	} else {
		rows, err = s.pool.Query(ctx, `SELECT call_id, tool, args, state, result, updated_at FROM tool_calls
WHERE thread_id = $1 AND run_id = $2 AND call_id = ANY($3) ORDER BY call_id`, threadID, runID, callIDs)
	}
	if err != nil {
		return nil, unavailable(fmt.Errorf("postgres: list tool calls: %w", err))
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
		return nil, unavailable(fmt.Errorf("postgres: list tool calls: %w", err))
	}
	return out, nil
}

const questionCols = `seq, thread_id, id, run_id, call_id, tool, kind, payload, digest, status, answer, answered_by, reason, created_at, deadline, resolved_at`

// scanQuestion scans questionCols, then into extra the columns after them.
func scanQuestion(row pgx.Row, extra ...any) (*checkpoint.Question, int64, error) {
	// The scan targets in one allocation (they were one each), room for
	// the callers' extra columns included; apart from the question,
	// which may be kept long.
	q := &checkpoint.Question{}
	v := &struct {
		seq                         int64
		payload, answer             []byte
		status                      string
		created, deadline, resolved pgtype.Timestamptz
		dest                        [16 + 3]any
	}{}
	v.dest = [len(v.dest)]any{&v.seq, &q.ThreadID, &q.ID, &q.RunID, &q.CallID, &q.Tool, &q.Kind, &v.payload, &q.Digest, &v.status,
		&v.answer, &q.AnsweredBy, &q.Reason, &v.created, &v.deadline, &v.resolved}
	if err := row.Scan(append(v.dest[:16], extra...)...); err != nil {
		return nil, 0, err
	}
	q.Payload, q.Status, q.Answer = decJSON(v.payload), checkpoint.QuestionStatus(v.status), decJSON(v.answer)
	q.CreatedAt, q.Deadline, q.ResolvedAt = decTime(v.created), decTime(v.deadline), decTime(v.resolved)
	return q, v.seq, nil
}

// CreateQuestion is a one-record batch.
func (s *Store) CreateQuestion(ctx context.Context, q *checkpoint.Question) (*checkpoint.Question, bool, error) {
	c, err := s.commit(ctx, &checkpoint.Batch{Question: q}, commitOpts{})
	if err != nil {
		return nil, false, err
	}
	return c.Question, c.Created, nil
}

func (s *Store) GetQuestion(ctx context.Context, threadID, id string) (*checkpoint.Question, error) {
	q, _, err := scanQuestion(s.pool.QueryRow(ctx, `SELECT `+questionCols+` FROM questions WHERE thread_id = $1 AND id = $2`, threadID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("question %q of thread %q: %w", id, threadID, checkpoint.ErrNotFound)
	}
	if err != nil {
		return nil, unavailable(fmt.Errorf("postgres: get question %q: %w", id, err))
	}
	return q, nil
}

// dialect is how PostgreSQL spells what [listsql] needs.
var dialect = listsql.Dialect{
	Param: func(n int) string { return "$" + strconv.Itoa(n) },
	Time:  encTime,
	// The indexes on thread IDs are COLLATE "C" too.
	Bytewise: func(col string) string { return col + ` COLLATE "C"` },
	Contains: func(col, p string) string { return "strpos(lower(" + col + "::text), lower(" + p + ")) > 0" },
}

// ListQuestions runs the page as one statement (a union for the deadline
// order): one round trip, one snapshot.
//
// Creation order is the order of the questions' numbers, which is the
// order of their transactions' ids (events.go), not quite that of their
// commits: oldest first, a page that holds a question not yet settled
// (a transaction with a lower id may still commit one before it) is read
// again once it is (as ListEvents waits, at most eventWait), so that a
// question created while paging comes on a later page, never before the
// cursor. Newest first and by deadline, a question created while paging
// may come, or not, wherever its position is: no wait.
func (s *Store) ListQuestions(ctx context.Context, f checkpoint.QuestionFilter) ([]*checkpoint.Question, string, error) {
	page, after, err := cursor.StartQuestions(f)
	if err != nil {
		return nil, "", err
	}
	if f.Order != checkpoint.OldestFirst {
		err = s.each(ctx, listsql.Union(listsql.Questions(dialect, questionCols, f, after, page.Limit), page.Limit), func(row pgx.Row) (bool, error) {
			q, seq, err := scanQuestion(row)
			if err != nil {
				return false, err
			}
			return page.Add(q, seq), nil
		})
	} else {
		// The page stops at the first question not settled yet (events.go):
		// a question numbered lower may still commit, and a cursor past it
		// would skip it. The read waits a little for it to settle.
		st := listsql.Questions(dialect, questionCols+", "+horizonCols, f, after, page.Limit)[0]
		var cut bool
		err = s.settle(ctx, func(writers int64) (unsettled bool, err error) {
			page, _, _ = cursor.StartQuestions(f)
			cut = false
			err = s.each(ctx, st, func(row pgx.Row) (bool, error) {
				var xmin, base int64
				q, seq, err := scanQuestion(row, &xmin, &base)
				if err != nil {
					return false, err
				}
				if !settled(seq, xmin, base, writers) && len(page.Items) < page.Limit {
					cut = true
					return true, nil
				}
				return page.Add(q, seq), nil
			})
			return cut, err
		})
		if err == nil && cut && !page.Cut() {
			err = fmt.Errorf("a transaction writing questions has held the list back for over %v; try again", eventWait)
		}
	}
	if err != nil {
		return nil, "", unavailable(fmt.Errorf("postgres: list questions: %w", err))
	}
	return page.Items, page.Next(), nil
}

func (s *Store) CountQuestions(ctx context.Context, f checkpoint.QuestionFilter) (int64, error) {
	st := listsql.CountQuestions(dialect, f)
	var n int64
	if err := s.pool.QueryRow(ctx, st.SQL, st.Args...).Scan(&n); err != nil {
		return 0, unavailable(fmt.Errorf("postgres: count questions: %w", err))
	}
	return n, nil
}

// ResolveQuestion is a batch of the resolution and its audit entry
// ([checkpoint.ResolveBatch] of the question as read).
func (s *Store) ResolveQuestion(ctx context.Context, threadID, id string, r checkpoint.Resolution) (*checkpoint.Question, error) {
	q, err := s.GetQuestion(ctx, threadID, id)
	if err != nil {
		return nil, err
	}
	if r.At.IsZero() {
		r.At = s.clk.Now()
	}
	c, err := s.commit(ctx, checkpoint.ResolveBatch(q, r), commitOpts{})
	if c == nil {
		return nil, err
	}
	return c.Resolved, err
}

// AppendEvent is a one-record batch.
func (s *Store) AppendEvent(ctx context.Context, e *checkpoint.Event) (int64, error) {
	if _, err := s.commit(ctx, &checkpoint.Batch{Events: []*checkpoint.Event{e}}, commitOpts{}); err != nil {
		return 0, err
	}
	return e.Seq, nil
}
