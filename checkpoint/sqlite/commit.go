package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// op is one batch on its way to the writer ([writer]): what the caller
// prepared before queueing it, and what the writer found applying it. The
// caller reads the second part only after done is closed.
type op struct {
	ctx context.Context
	b   *checkpoint.Batch
	// replace: the thread write is SaveThread's, which replaces every
	// message with b.Thread.Append instead of appending them.
	replace bool
	// split: b.Thread.Append comes from messages.Split, checked.
	split bool
	// rule, when set, writes a learned rule (rules.go) after the batch's
	// events, the last of which records it: the statement just before
	// its own, as schema 9's triggers want.
	rule func(t *wtx) error
	// outbox, when set, writes the notifications' outbox (outbox.go)
	// after the batch, in its transaction.
	outbox func(t *wtx) error

	// Prepared by the caller.
	now      time.Time
	created  time.Time // the thread's CreatedAt, when the write creates it
	msgBytes int64
	question *checkpoint.Question // the copy that is stored
	resolve  checkpoint.Resolution
	// resolveEvent is the index in b.Events of the event that records
	// the resolution: the writer inserts it just before the resolution
	// (schema 7's trigger looks for it there).
	resolveEvent int
	eventAt      []time.Time
	size         int64 // about the bytes the batch writes: bounds a group

	taken bool // guarded by writer.mu: the writer has it, the caller waits for done
	done  chan struct{}

	// Set by the writer.
	err     error
	written bool // the batch is in the committed transaction
	out     checkpoint.Committed
	version int64
	threadC time.Time // the thread's CreatedAt as stored
	notes   []note
}

// note is a notification of a question write, with the change_seq it
// committed with.
type note struct {
	change int64
	n      checkpoint.Notification
}

// errQuestionExists: the batch's question exists, so nothing of the batch
// is written, and Commit returns the stored question without an error.
var errQuestionExists = errors.New("question exists")

// Commit applies b in one transaction, durably (see [checkpoint.Batch]).
// Concurrent calls share transactions: the store's single writer takes
// every batch waiting for it, applies each in a savepoint of one BEGIN
// IMMEDIATE transaction (a batch that fails is rolled back to its
// savepoint, alone), and returns to each caller once COMMIT has returned
// (with synchronous=FULL, once it is on disk). A caller whose ctx ends
// while its batch waits gets ctx's error and the batch is not written;
// once the writer has begun with it, Commit waits for the outcome.
func (s *Store) Commit(ctx context.Context, b *checkpoint.Batch) (*checkpoint.Committed, error) {
	o, err := s.commit(ctx, &op{b: b})
	if err != nil {
		return nil, err
	}
	return &o.out, nil
}

// commit is Commit, and every write of the store: o holds the batch and
// how its thread write is meant. The op is returned with an error too,
// for what it found (the stored question of a lost resolution).
func (s *Store) commit(ctx context.Context, o *op) (*op, error) {
	if s.readOnly {
		return nil, fmt.Errorf("%w: opened with ReadOnly", ErrReadOnly)
	}
	b := o.b
	if b.Empty() && o.outbox == nil {
		return o, nil
	}
	if err := s.prepareOp(o); err != nil {
		return nil, err
	}
	if err := s.wr.submit(ctx, o); err != nil {
		return nil, err
	}
	if o.err != nil {
		return o, o.err
	}
	if !o.written {
		return o, nil // the question existed: nothing changed
	}
	now := kept(o.now)
	if w := b.Thread; w != nil {
		w.Version, w.CreatedAt, w.UpdatedAt = o.version, o.threadC, now
	}
	for _, tc := range b.ToolCalls {
		tc.UpdatedAt = now
	}
	for i, e := range b.Events {
		e.Seq, e.At = o.out.EventSeqs[i], kept(o.eventAt[i])
	}
	return o, nil
}

// prepareOp checks b and fills in what the writer needs, in the caller's
// goroutine: the writer does only the database's work.
func (s *Store) prepareOp(o *op) error {
	b := o.b
	o.now = s.clk.Now()
	if err := checkTimes("commit", o.now); err != nil {
		return err
	}
	var err error
	if o.resolveEvent, err = checkpoint.ResolutionEventIndex(b); err != nil {
		return err
	}
	if w := b.Thread; w != nil {
		if w.Version == 0 && !o.replace {
			o.created = w.CreatedAt
			if o.created.IsZero() {
				o.created = o.now
			}
			if err := checkTimes("create thread "+strconv.Quote(w.ID), o.created); err != nil {
				return err
			}
		}
		if !o.split {
			if err := checkMessages(w.ID, w.Append); err != nil {
				return err
			}
		}
		o.msgBytes = messagesSize(w.Append)
		o.size += o.msgBytes
	}
	for i, tc := range b.ToolCalls {
		if tc == nil {
			return fmt.Errorf("sqlite: commit: tool call %d is nil", i)
		}
		o.size += int64(len(tc.Args) + len(tc.Result))
	}
	if q := b.Question; q != nil {
		c := *q
		c.Status = checkpoint.QuestionPending
		c.Answer, c.AnsweredBy, c.Reason, c.ResolvedAt = nil, "", "", time.Time{}
		if c.CreatedAt.IsZero() {
			c.CreatedAt = o.now
		}
		if err := checkTimes("create question "+strconv.Quote(c.ID), c.CreatedAt, c.Deadline); err != nil {
			return err
		}
		c.CreatedAt, c.Deadline = kept(c.CreatedAt), kept(c.Deadline)
		c.Payload = append(json.RawMessage(nil), c.Payload...)
		if len(c.Payload) == 0 {
			c.Payload = nil
		}
		o.question = &c
		o.size += int64(len(c.Payload))
	}
	if r := b.Resolve; r != nil {
		o.resolve = r.Resolution
		if o.resolve.At.IsZero() {
			o.resolve.At = o.now
		}
		if err := checkTimes("resolve question "+strconv.Quote(r.ID), o.resolve.At); err != nil {
			return err
		}
		o.size += int64(len(o.resolve.Answer))
	}
	if len(b.Events) > 0 {
		o.eventAt = make([]time.Time, len(b.Events))
	}
	for i, e := range b.Events {
		if e == nil {
			return fmt.Errorf("sqlite: commit: event %d is nil", i)
		}
		o.eventAt[i] = e.At
		if o.eventAt[i].IsZero() {
			o.eventAt[i] = o.now
		}
		if err := checkTimes("append event", o.eventAt[i]); err != nil {
			return err
		}
		o.size += int64(len(e.Data))
	}
	return nil
}

// wtx is a write transaction of the writer, with the prepared statements
// it has used so far.
type wtx struct {
	s  *Store
	c  *wconn
	tx wsql // statements by their text
	nv []driver.NamedValue
	// vals holds the row a statement returned until the next one.
	vals []driver.Value
}

// bg is the context of the writer's statements. Not a caller's: an
// interrupted statement would roll back the whole transaction, and with
// it other callers' batches.
var bg = context.Background()

func (t *wtx) stmt(q wq) wstmt { return wstmt{st: t.c.st[q], nv: &t.nv, vals: &t.vals} }

// apply writes o's batch in t, in the order of the Batch's fields. An
// error leaves writes in t that the writer rolls back.
func (s *Store) apply(t *wtx, o *op) error {
	b := o.b
	if b.Thread != nil {
		if err := s.applyThread(t, o); err != nil {
			return err
		}
	}
	now := encTime(o.now)
	for _, tc := range b.ToolCalls {
		claim := tc.State == checkpoint.ToolCallExecuting
		q := wPutToolCall
		if claim {
			q = wClaimToolCall
		}
		res, err := t.stmt(q).ExecContext(bg,
			tc.ThreadID, tc.RunID, tc.CallID, tc.Tool, encJSON(tc.Args), string(tc.State), encJSON(tc.Result), now)
		if err != nil {
			return fmt.Errorf("sqlite: put tool call %q: %w", tc.CallID, err)
		}
		if !claim {
			continue
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("sqlite: put tool call %q: %w", tc.CallID, err)
		} else if n == 0 {
			return fmt.Errorf("tool call %q of run %q is already claimed: %w", tc.CallID, tc.RunID, checkpoint.ErrConflict)
		}
	}
	// The resolution's compare-and-set is decided here, in the order of
	// the batch's fields; it is written after its event (below).
	var resolving *checkpoint.Question
	if rv := b.Resolve; rv != nil {
		q, err := getQuestion(t.stmt(wGetQuestion).QueryRowContext(bg, rv.ThreadID, rv.ID), rv.ThreadID, rv.ID)
		if err != nil {
			return err
		}
		if err := checkpoint.CheckResolution(q, o.resolve); err != nil {
			o.out.Resolved = q
			return err
		}
		resolving = q
	}
	// The question last of the compare-and-sets: a lost one is the
	// answer even when the question exists (checkpoint.Batch).
	if c := o.question; c != nil {
		var change int64
		err := t.stmt(wCreateQuestion).QueryRowContext(bg,
			c.ThreadID, c.ID, c.RunID, c.CallID, c.Tool, c.Kind, encJSON(c.Payload), c.Digest, string(c.Status),
			encTime(c.CreatedAt), encTime(c.Deadline)).Scan(&change)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			stored, err := getQuestion(t.stmt(wGetQuestion).QueryRowContext(bg, c.ThreadID, c.ID), c.ThreadID, c.ID)
			if err != nil {
				return err
			}
			o.out.Question = stored
			return errQuestionExists
		case err != nil:
			return fmt.Errorf("sqlite: create question %q: %w", c.ID, err)
		}
		o.out.Question, o.out.Created = c, true
		o.notes = append(o.notes, note{change, checkpoint.Notification{Kind: checkpoint.QuestionCreated, ThreadID: c.ThreadID, QuestionID: c.ID}})
	}
	if len(b.Events) > 0 {
		o.out.EventSeqs = make([]int64, len(b.Events))
	}
	for i, e := range b.Events {
		// The event's seq is its rowid: the insert's last_insert_rowid
		// (a trigger's own inserts do not change it once the trigger
		// ends). Not RETURNING: a statement that returns rows costs the
		// driver a rows value with the columns' names and types.
		res, err := t.stmt(wAppendEvent).ExecContext(bg, e.ThreadID, e.RunID, e.Type, encJSON(e.Data), encTime(o.eventAt[i]))
		if err == nil {
			// An insert that inserted nothing (a trigger's RAISE(IGNORE))
			// leaves last_insert_rowid at an earlier insert's.
			if n, _ := res.RowsAffected(); n != 1 {
				err = fmt.Errorf("event not stored (%d rows inserted)", n)
			} else {
				o.out.EventSeqs[i], err = res.LastInsertId()
			}
		}
		if err != nil {
			return fmt.Errorf("sqlite: append event: %w", err)
		}
		if i == o.resolveEvent {
			// Right after the event that records it, on the same
			// connection: schema 7's trigger refuses it otherwise.
			if err := s.applyResolve(t, o, resolving); err != nil {
				return err
			}
		}
	}
	if o.rule != nil {
		// First: the rule's row follows its event (the trigger's check).
		if err := o.rule(t); err != nil {
			return err
		}
	}
	if o.outbox != nil {
		return o.outbox(t)
	}
	return nil
}

// applyResolve writes the resolution of q (read pending under the write
// lock) and sets what Commit returns of it.
func (s *Store) applyResolve(t *wtx, o *op, q *checkpoint.Question) error {
	rv, r := o.b.Resolve, o.resolve
	var change int64
	err := t.stmt(wResolveQuestion).QueryRowContext(bg,
		string(r.Status), encJSON(r.Answer), r.By, r.Reason, encTime(r.At), rv.ThreadID, rv.ID).Scan(&change)
	if errors.Is(err, sql.ErrNoRows) { // cannot happen: the writer is alone and saw it pending
		return fmt.Errorf("question %q changed under the write lock: %w", rv.ID, checkpoint.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("sqlite: resolve question %q: %w", rv.ID, err)
	}
	q.Status, q.Answer, q.AnsweredBy, q.Reason, q.ResolvedAt = r.Status, append(json.RawMessage(nil), r.Answer...), r.By, r.Reason, kept(r.At)
	if len(q.Answer) == 0 {
		q.Answer = nil
	}
	o.out.Resolved = q
	o.notes = append(o.notes, note{change, checkpoint.Notification{Kind: checkpoint.QuestionResolved, ThreadID: rv.ThreadID, QuestionID: rv.ID}})
	return nil
}

// applyThread writes the thread row (a compare-and-set on its version, or
// its creation) and inserts the messages: only the appended ones, at the
// positions after the stored ones, or for SaveThread every one.
func (s *Store) applyThread(t *wtx, o *op) error {
	w := o.b.Thread
	n := int64(len(w.Append))
	status, now := string(w.Status), encTime(o.now)
	var count int64
	if w.Version == 0 && !o.replace {
		res, err := t.stmt(wCreateThread).ExecContext(bg, w.ID, status, w.RunID, encTime(o.created), now, n, o.msgBytes)
		if err != nil {
			return fmt.Errorf("sqlite: create thread %q: %w", w.ID, err)
		}
		if k, err := res.RowsAffected(); err != nil || k == 0 {
			return fmt.Errorf("thread %q exists: %w", w.ID, checkpoint.ErrConflict)
		}
		o.version, o.threadC, count = 1, kept(o.created), n
	} else {
		q := wAppendThread
		if o.replace {
			q = wReplaceThread
		}
		var created sql.NullInt64
		err := sql.ErrNoRows
		// Tried first for a running thread's writes only: a run writes
		// its thread many times while it runs and leaves running once,
		// where the try would cost a statement more (and its driver's
		// allocations) before qAppendThread.
		if !o.replace && w.Status == checkpoint.ThreadRunning {
			err = t.stmt(wAppendSameStatus).QueryRowContext(bg, w.RunID, now, n, o.msgBytes, w.ID, w.Version, status).
				Scan(&o.version, &created, &count)
		}
		if errors.Is(err, sql.ErrNoRows) {
			err = t.stmt(q).QueryRowContext(bg, status, w.RunID, now, n, o.msgBytes, w.ID, w.Version).
				Scan(&o.version, &created, &count)
		}
		if err != nil {
			return s.threadMissed(t, w, err)
		}
		o.threadC = decTime(created)
	}
	if o.replace {
		if _, err := t.stmt(wDeleteMessages).ExecContext(bg, w.ID); err != nil {
			return fmt.Errorf("sqlite: save thread %q: %w", w.ID, err)
		}
	}
	insert := t.stmt(wInsertMessage)
	for i, m := range w.Append {
		if _, err := insert.ExecContext(bg, w.ID, count-n+int64(i), string(m)); err != nil {
			return fmt.Errorf("sqlite: thread %q: message %d: %w", w.ID, count-n+int64(i), err)
		}
	}
	return nil
}

// threadMissed says why the compare-and-set of w updated no row.
func (s *Store) threadMissed(t *wtx, w *checkpoint.ThreadWrite, err error) error {
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlite: save thread %q: %w", w.ID, err)
	}
	var stored int64
	var legacy bool
	switch err := t.stmt(wThreadState).QueryRowContext(bg, w.ID).Scan(&stored, &legacy); {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("thread %q: %w", w.ID, checkpoint.ErrNotFound)
	case err != nil:
		return fmt.Errorf("sqlite: save thread %q: %w", w.ID, err)
	case stored != w.Version:
		return fmt.Errorf("thread %q: version %d, stored %d: %w", w.ID, w.Version, stored, checkpoint.ErrConflict)
	case legacy:
		return fmt.Errorf("sqlite: thread %q: its messages, stored by an older tollgate, are not a JSON array, so nothing can be appended to them (SaveThread replaces them)", w.ID)
	}
	return fmt.Errorf("sqlite: save thread %q: no row updated", w.ID)
}
