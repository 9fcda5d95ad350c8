package postgres

// A commit's records as statements of its pipeline (commit.go sends
// them): the thread, its tool calls, a resolution, a question and events,
// each with the step that reads its result and, for a compare-and-set,
// what its loss says about the stored state.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// pipeline is one commit's statements as they are queued: each with the
// step that reads its result, and what the caller's records get once the
// transaction committed.
type pipeline struct {
	s     *Store
	b     *checkpoint.Batch
	o     commitOpts
	now   time.Time
	out   *checkpoint.Committed
	batch pgx.Batch
	steps []step

	// What the statements returned, and what the lost compare-and-sets
	// look into: the thread's version and creation (and the checked
	// column); the resolution as sent; the events' times and numbers.
	version    int64
	created    pgtype.Timestamptz
	checked    pgtype.Int8
	resolution checkpoint.Resolution
	ats        []time.Time
	seqs       []int64

	// Room in the pipeline itself for the statements of a batch of a
	// few tool calls (begin, lock, lease, up to three for the thread,
	// the calls, resolution, question, events, commit, notifications),
	// so that queuing one allocates nothing more: a cycle's commits
	// queued ~40 statements, each a pgx.QueuedQuery of its own and
	// slices grown twice.
	stepBuf    [pipelineRoom]step
	queued     [pipelineRoom]pgx.QueuedQuery
	queuedPtrs [pipelineRoom]*pgx.QueuedQuery
}

// pipelineRoom is how many statements a pipeline holds without
// allocating.
const pipelineRoom = 16

func (p *pipeline) queue(st step, sql string, args ...any) {
	// The first pipelineRoom statements go in p.queued, in order; more
	// (a batch of many tool calls) are pgx's own.
	if n := len(p.batch.QueuedQueries); n < len(p.queued) {
		q := &p.queued[n]
		q.SQL, q.Arguments = sql, args
		p.batch.QueuedQueries = append(p.batch.QueuedQueries, q)
	} else {
		p.batch.Queue(sql, args...)
	}
	p.steps = append(p.steps, st)
}

// committed gives the caller's records what they get once the
// transaction committed: versions, times, sequence numbers.
func (p *pipeline) committed() {
	if w := p.b.Thread; w != nil {
		w.Version, w.CreatedAt, w.UpdatedAt = p.version, decTime(p.created), p.now
	}
	for _, tc := range p.b.ToolCalls {
		tc.UpdatedAt = p.now
	}
	if len(p.b.Events) > 0 {
		// seq = the transaction's number + the index: in order once
		// sorted.
		slices.Sort(p.seqs)
		for i, e := range p.b.Events {
			e.Seq, e.At = p.seqs[i], p.ats[i]
		}
		p.out.EventSeqs = p.seqs
	}
}

// ignoreResult reads a statement whose result says nothing the commit
// needs.
func ignoreResult(_ *pipeline, br pgx.BatchResults) error { _, err := br.Exec(); return err }

// fenceLost is why the lease's check lost: another replica holds the
// thread's lease.
func fenceLost(ctx context.Context, _ *pipeline, _ string) (*checkpoint.Committed, error) {
	f, _ := fenceFrom(ctx)
	return nil, fmt.Errorf("thread %q, lease %d: %w", f.ThreadID, f.Epoch, ErrFenced)
}

// thread queues the batch's thread write: a create, an append (a
// compare-and-set on the version), or SaveThread's replace.
func (p *pipeline) thread(o commitOpts) error {
	w := p.b.Thread
	if w == nil {
		return nil
	}
	if err := checkMessages(w.ID, w.Append); err != nil {
		return err
	}
	n, size := len(w.Append), 0
	for _, m := range w.Append {
		size += len(m)
	}
	st := step{kind: "thread", id: w.ID, ids: 1, read: readThread, lost: threadWriteLost}
	now := p.now
	switch {
	case o.replace:
		p.queue(st, saveThread, w.ID, w.Version, string(w.Status), w.RunID, now, n, size)
		p.queue(step{kind: st.kind, id: st.id, ids: 1, read: ignoreResult}, deleteMessages, w.ID)
		if n > 0 {
			p.queue(step{kind: st.kind, id: st.id, ids: 1, read: ignoreResult}, insertMessages.sql(n), messageArgs([]any{w.ID}, w.Append, p.s.textJSON)...)
		}
	case w.Version == 0:
		createdAt := w.CreatedAt
		if createdAt.IsZero() {
			createdAt = now
		}
		if err := checkTimesOf("create thread", w.ID, createdAt); err != nil {
			return err
		}
		p.queue(st, createThread.sql(n), messageArgs(append(make([]any, 0, 6+min(n, maxValues+1)), w.ID, string(w.Status), w.RunID, createdAt, now, size), w.Append, p.s.textJSON)...)
	default:
		p.queue(st, appendThread.sql(n), messageArgs(append(make([]any, 0, 6+min(n, maxValues+1)), w.ID, w.Version, string(w.Status), w.RunID, now, size), w.Append, p.s.textJSON)...)
	}
	return nil
}

// readThread reads the thread write's version and creation time.
func readThread(p *pipeline, br pgx.BatchResults) error {
	return br.QueryRow().Scan(&p.version, &p.created, &p.checked)
}

// threadWriteLost is why the thread write lost its compare-and-set.
func threadWriteLost(ctx context.Context, p *pipeline, _ string) (*checkpoint.Committed, error) {
	w := p.b.Thread
	return nil, p.s.threadLost(ctx, w.ID, w.Version, w.Version == 0 && !p.o.replace)
}

// toolCalls queues the batch's tool calls: a claim ("executing", which
// loses when the call is claimed) or an upsert.
func (p *pipeline) toolCalls() {
	for _, tc := range p.b.ToolCalls {
		st := step{kind: "tool call", id: tc.CallID, run: tc.RunID, ids: 2, read: ignoreResult}
		args := []any{tc.ThreadID, tc.RunID, tc.CallID, tc.Tool, p.s.encJSON(tc.Args), string(tc.State), p.s.encJSON(tc.Result), p.now}
		if tc.State == checkpoint.ToolCallExecuting {
			st.lost = claimLost
			p.queue(st, claimToolCall, args...)
		} else {
			p.queue(st, putToolCall, args...)
		}
	}
}

// claimLost is why a claim of a tool call lost: the call has a record.
func claimLost(_ context.Context, _ *pipeline, what string) (*checkpoint.Committed, error) {
	return nil, fmt.Errorf("%s is already claimed: %w", what, checkpoint.ErrConflict)
}

// resolve queues the batch's resolution of a question: a compare-and-set
// on its being pending and in time.
func (p *pipeline) resolve() error {
	rv := p.b.Resolve
	if rv == nil {
		return nil
	}
	r := rv.Resolution
	switch r.Status {
	case checkpoint.QuestionAnswered, checkpoint.QuestionTimedOut, checkpoint.QuestionAborted:
	default:
		return fmt.Errorf("question %q: cannot resolve as %q", rv.ID, r.Status)
	}
	if r.At.IsZero() {
		r.At = p.now
	}
	if err := checkTimesOf("resolve question", rv.ID, r.At); err != nil {
		return err
	}
	p.resolution = r
	p.queue(step{kind: "resolution of question", id: rv.ID, ids: 1, read: readResolved, lost: resolutionLost},
		resolveQuestion, rv.ThreadID, rv.ID, string(r.Status), p.s.encJSON(r.Answer), r.By, r.Reason, r.At)
	return nil
}

// readResolved reads the question the resolution wrote.
func readResolved(p *pipeline, br pgx.BatchResults) (err error) {
	p.out.Resolved, err = scanWrittenQuestion(br)
	return err
}

// resolutionLost is why the resolution lost its compare-and-set, as
// the stored question says.
func resolutionLost(ctx context.Context, p *pipeline, _ string) (*checkpoint.Committed, error) {
	rv := p.b.Resolve
	q, err := p.s.GetQuestion(ctx, rv.ThreadID, rv.ID)
	if err != nil {
		return nil, err
	}
	// The stored deadline has microseconds; the resolution's At may
	// have more. Compare as PostgreSQL did, so that the reason matches
	// the refusal.
	r := p.resolution
	r.At = r.At.Truncate(time.Microsecond)
	if err := checkpoint.CheckResolution(q, r); err != nil {
		return &checkpoint.Committed{Resolved: q}, err
	}
	// Pending and in time now, but not when the update ran: lost a race.
	return &checkpoint.Committed{Resolved: q}, fmt.Errorf("question %q changed while being resolved: %w", rv.ID, checkpoint.ErrConflict)
}

// question queues the batch's new question; one that exists loses, and
// is then the answer (nothing of the batch is written, and that is no
// error).
func (p *pipeline) question() error {
	if p.b.Question == nil {
		return nil
	}
	c := *p.b.Question
	c.Status = checkpoint.QuestionPending
	c.Answer, c.AnsweredBy, c.Reason, c.ResolvedAt = nil, "", "", time.Time{}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = p.now
	}
	if err := checkTimesOf("create question", c.ID, c.CreatedAt, c.Deadline); err != nil {
		return err
	}
	p.queue(step{kind: "question", id: c.ID, ids: 1, read: readCreated, lost: questionExists},
		createQuestion, c.ThreadID, c.ID, c.RunID, c.CallID, c.Tool, c.Kind, p.s.encJSON(c.Payload), c.Digest, c.CreatedAt, encTime(c.Deadline))
	return nil
}

// readCreated reads the question the create wrote.
func readCreated(p *pipeline, br pgx.BatchResults) (err error) {
	p.out.Question, err = scanWrittenQuestion(br)
	p.out.Created = true
	return err
}

// questionExists is the answer when the question exists: the stored one.
func questionExists(ctx context.Context, p *pipeline, _ string) (*checkpoint.Committed, error) {
	q := p.b.Question
	stored, err := p.s.GetQuestion(ctx, q.ThreadID, q.ID)
	if err != nil {
		return nil, err
	}
	return &checkpoint.Committed{Question: stored}, nil
}

// scanWrittenQuestion reads the question a resolution or a create
// returned (with its change number and the compare-and-set's check).
func scanWrittenQuestion(br pgx.BatchResults) (*checkpoint.Question, error) {
	var change int64
	var payload string
	var checked pgtype.Int8
	q, _, err := scanQuestion(br.QueryRow(), &change, &payload, &checked)
	return q, err
}

// events queues the batch's events, numbered by one statement.
func (p *pipeline) events() error {
	n := len(p.b.Events)
	if n == 0 {
		return nil
	}
	ats := make([]time.Time, n)
	for i, e := range p.b.Events {
		at := e.At
		if at.IsZero() {
			at = p.now
		}
		if err := checkTimes("append event", at); err != nil {
			return err
		}
		ats[i] = at
	}
	var args []any
	if n <= maxValues {
		// The rows' values in order, as rowArgs would flatten them,
		// without a slice a row.
		args = make([]any, 0, n*len(eventColumns))
		for i, e := range p.b.Events {
			args = append(args, e.ThreadID, e.RunID, e.Type, p.s.encJSON(e.Data), ats[i])
		}
	} else {
		rows := make([][]any, n)
		for i, e := range p.b.Events {
			rows[i] = []any{e.ThreadID, e.RunID, e.Type, p.s.encJSON(e.Data), ats[i]}
		}
		args = rowArgs(rows, eventColumns)
	}
	p.ats = ats
	p.queue(step{kind: "events", read: readSeqs}, appendEvents.sql(n), args...)
	return nil
}

// readSeqs reads the numbers the events were given.
func readSeqs(p *pipeline, br pgx.BatchResults) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	p.seqs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	return err
}
