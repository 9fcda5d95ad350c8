// Package memory is an in-memory [checkpoint.Store] for tests, examples and
// the offline demo. Nothing survives the process; everything else behaves as
// the durable stores do (it passes checkpoint/checkpointtest).
package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/btree"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/cursor"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/messages"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

var (
	_ checkpoint.Store     = (*Store)(nil)
	_ checkpoint.RuleStore = (*Store)(nil)
)

type questionKey struct{ thread, id string }

// pendingEntry is a pending question's place in the deadline order.
type pendingEntry struct {
	pos cursor.Question // Order: DeadlineFirst
	key questionKey
}

func (s *Store) pendingEntry(k questionKey, q *checkpoint.Question) pendingEntry {
	return pendingEntry{cursor.Question{Order: checkpoint.DeadlineFirst, Seq: s.qseq[k], Deadline: q.Deadline}, k}
}

// Store keeps every record in maps guarded by one mutex. Records are copied
// in and out, so callers never share memory with the store.
type Store struct {
	mu        sync.Mutex
	threads   map[string]*checkpoint.Thread              // Messages nil: see msgs
	msgs      map[string][]json.RawMessage               // thread id -> its messages, appended
	toolCalls map[string]map[string]*checkpoint.ToolCall // thread/run -> call id
	questions map[questionKey]*checkpoint.Question
	qorder    []questionKey // creation order: a question's sequence number is its index + 1
	qseq      map[questionKey]int64
	// byThread holds each thread's questions, in creation order: what a
	// thread's count, and a listing of threads by their questions, read
	// instead of every question.
	byThread map[string][]*checkpoint.Question
	// pending holds the pending questions in deadline order: the earliest
	// deadlines (what a host's deadline loop reads on every new question)
	// are found in O(log n), not by sorting every question.
	pending *btree.BTreeG[pendingEntry]
	events  []*checkpoint.Event
	rules   []*checkpoint.LearnedRule // creation order
	subs    map[chan checkpoint.Notification]struct{}
	now     func() time.Time
	closed  bool
}

// New returns an empty store.
func New() *Store {
	return &Store{
		threads:   map[string]*checkpoint.Thread{},
		msgs:      map[string][]json.RawMessage{},
		toolCalls: map[string]map[string]*checkpoint.ToolCall{},
		questions: map[questionKey]*checkpoint.Question{},
		qseq:      map[questionKey]int64{},
		byThread:  map[string][]*checkpoint.Question{},
		pending: btree.NewG(16, func(a, b pendingEntry) bool {
			return cursor.Compare(a.pos, b.pos) < 0
		}),
		subs: map[chan checkpoint.Notification]struct{}{},
		now:  time.Now,
	}
}

func cloneAll(ms []json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, len(ms))
	for i, m := range ms {
		out[i] = slices.Clone(m)
	}
	return out
}

func copyQuestion(q *checkpoint.Question) *checkpoint.Question {
	c := *q
	c.Payload = slices.Clone(q.Payload)
	c.Answer = slices.Clone(q.Answer)
	return &c
}

func copyToolCall(tc *checkpoint.ToolCall) *checkpoint.ToolCall {
	c := *tc
	c.Args = slices.Clone(tc.Args)
	c.Result = slices.Clone(tc.Result)
	return &c
}

func (s *Store) CreateThread(ctx context.Context, t *checkpoint.Thread) error {
	msgs, err := messages.Split(t.Messages)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.threads[t.ID]; ok {
		return fmt.Errorf("thread %q exists: %w", t.ID, checkpoint.ErrConflict)
	}
	now := s.now()
	t.Version = 1
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now
	}
	t.UpdatedAt = now
	c := *t
	c.Messages = nil
	s.threads[t.ID] = &c
	s.msgs[t.ID] = cloneAll(msgs)
	return nil
}

func (s *Store) LoadThread(ctx context.Context, id string) (*checkpoint.Thread, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.threads[id]
	if !ok {
		return nil, fmt.Errorf("thread %q: %w", id, checkpoint.ErrNotFound)
	}
	c := *t
	c.Messages = messages.Join(s.msgs[id])
	return &c, nil
}

func (s *Store) SaveThread(ctx context.Context, t *checkpoint.Thread) error {
	msgs, err := messages.Split(t.Messages)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.threads[t.ID]
	if !ok {
		return fmt.Errorf("thread %q: %w", t.ID, checkpoint.ErrNotFound)
	}
	if cur.Version != t.Version {
		return fmt.Errorf("thread %q: version %d, stored %d: %w", t.ID, t.Version, cur.Version, checkpoint.ErrConflict)
	}
	t.Version++
	t.CreatedAt = cur.CreatedAt
	t.UpdatedAt = s.now()
	c := *t
	c.Messages = nil
	s.threads[t.ID] = &c
	s.msgs[t.ID] = cloneAll(msgs)
	return nil
}

// Commit checks every write of the batch first and applies them only if
// all pass, under the store's one lock: all or nothing.
func (s *Store) Commit(ctx context.Context, b *checkpoint.Batch) (*checkpoint.Committed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := &checkpoint.Committed{}
	if w := b.Thread; w != nil {
		cur, ok := s.threads[w.ID]
		switch {
		case w.Version == 0 && ok:
			return nil, fmt.Errorf("thread %q exists: %w", w.ID, checkpoint.ErrConflict)
		case w.Version != 0 && !ok:
			return nil, fmt.Errorf("thread %q: %w", w.ID, checkpoint.ErrNotFound)
		case w.Version != 0 && cur.Version != w.Version:
			return nil, fmt.Errorf("thread %q: version %d, stored %d: %w", w.ID, w.Version, cur.Version, checkpoint.ErrConflict)
		}
		for i, m := range w.Append {
			if !jsontext.Valid(m) { // json.Valid, faster
				return nil, fmt.Errorf("thread %q: appended message %d is not valid JSON", w.ID, i)
			}
		}
	}
	claimed := map[string]bool{}
	for _, tc := range b.ToolCalls {
		k := runKey(tc.ThreadID, tc.RunID) + "\x00" + tc.CallID
		if _, exists := s.toolCalls[runKey(tc.ThreadID, tc.RunID)][tc.CallID]; (exists || claimed[k]) && tc.State == checkpoint.ToolCallExecuting {
			return nil, fmt.Errorf("tool call %q of run %q is already claimed: %w", tc.CallID, tc.RunID, checkpoint.ErrConflict)
		}
		claimed[k] = true
	}
	// A resolution commits with its audit entry, or not at all.
	if _, err := checkpoint.ResolutionEventIndex(b); err != nil {
		return nil, err
	}
	var resolving *checkpoint.Question
	var res checkpoint.Resolution
	if r := b.Resolve; r != nil {
		q, ok := s.questions[questionKey{r.ThreadID, r.ID}]
		if !ok {
			return nil, fmt.Errorf("question %q of thread %q: %w", r.ID, r.ThreadID, checkpoint.ErrNotFound)
		}
		res = r.Resolution
		if res.At.IsZero() {
			res.At = now
		}
		if err := checkpoint.CheckResolution(q, res); err != nil {
			return nil, err
		}
		resolving = q
	}

	if q := b.Question; q != nil {
		// After the compare-and-sets: a lost one is the answer even when
		// the question exists.
		if cur, ok := s.questions[questionKey{q.ThreadID, q.ID}]; ok {
			out.Question = copyQuestion(cur)
			return out, nil // the batch commits only if it creates its question
		}
	}

	// Every check passed: apply.
	if w := b.Thread; w != nil {
		t := s.threads[w.ID]
		if w.Version == 0 {
			t = &checkpoint.Thread{ID: w.ID, CreatedAt: w.CreatedAt}
			if t.CreatedAt.IsZero() {
				t.CreatedAt = now
			}
			s.threads[w.ID] = t
		}
		t.Version++
		t.Status, t.RunID, t.UpdatedAt = w.Status, w.RunID, now
		s.msgs[w.ID] = append(s.msgs[w.ID], cloneAll(w.Append)...)
		w.Version, w.CreatedAt, w.UpdatedAt = t.Version, t.CreatedAt, now
	}
	for _, tc := range b.ToolCalls {
		s.putToolCallLocked(tc, now)
	}
	if q := b.Question; q != nil {
		out.Question, out.Created = s.createQuestionLocked(q, now), true
	}
	if q := resolving; q != nil {
		s.pending.Delete(s.pendingEntry(questionKey{q.ThreadID, q.ID}, q))
		q.Status, q.Answer, q.AnsweredBy, q.Reason, q.ResolvedAt = res.Status, slices.Clone(res.Answer), res.By, res.Reason, res.At
		s.notifyLocked(checkpoint.Notification{Kind: checkpoint.QuestionResolved, ThreadID: q.ThreadID, QuestionID: q.ID})
		out.Resolved = copyQuestion(q)
	}
	for _, e := range b.Events {
		out.EventSeqs = append(out.EventSeqs, s.appendEventLocked(e, now))
	}
	return out, nil
}

// ListThreads sorts the threads that match on every call, as
// ListQuestions does.
func (s *Store) ListThreads(ctx context.Context, f checkpoint.ThreadFilter) ([]*checkpoint.Thread, string, error) {
	page, after, err := cursor.StartThreads(f)
	if err != nil {
		return nil, "", err
	}
	pos := func(t *checkpoint.Thread) cursor.Thread { return cursor.Thread{CreatedAt: t.CreatedAt, ID: t.ID} }
	s.mu.Lock()
	defer s.mu.Unlock()
	var ts []*checkpoint.Thread
	for _, t := range s.threads {
		if (f.Status == "" || t.Status == f.Status) && (after == nil || cursor.CompareThreads(*after, pos(t)) < 0) &&
			(f.Questions == "" || s.hasQuestion(t.ID, func(q *checkpoint.Question) bool { return q.Status == f.Questions })) &&
			(f.Search == "" || s.mentions(t.ID, f.Search)) {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, func(a, b *checkpoint.Thread) int { return cursor.CompareThreads(pos(a), pos(b)) })
	for _, t := range ts {
		c := *t
		c.Messages = nil
		if page.Add(&c) {
			break
		}
	}
	return page.Items, page.Next(), nil
}

// hasQuestion reports whether one of the thread's questions is ok.
func (s *Store) hasQuestion(thread string, ok func(*checkpoint.Question) bool) bool {
	return slices.ContainsFunc(s.byThread[thread], ok)
}

// mentions reports whether the thread's ID, one of its messages or the
// tool of one of its questions contains text, ASCII letters in either
// case (ThreadFilter.Search).
func (s *Store) mentions(thread, text string) bool {
	text = asciiLower(text)
	in := func(s string) bool { return strings.Contains(asciiLower(s), text) }
	if in(thread) || s.hasQuestion(thread, func(q *checkpoint.Question) bool { return in(q.Tool) }) {
		return true
	}
	return slices.ContainsFunc(s.msgs[thread], func(m json.RawMessage) bool { return in(string(m)) })
}

// asciiLower lowers ASCII letters only, as SQLite's lower() does.
func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

func runKey(thread, run string) string { return thread + "\x00" + run }

func (s *Store) PutToolCall(ctx context.Context, tc *checkpoint.ToolCall) error {
	_, err := s.Commit(ctx, &checkpoint.Batch{ToolCalls: []*checkpoint.ToolCall{tc}})
	return err
}

func (s *Store) putToolCallLocked(tc *checkpoint.ToolCall, now time.Time) {
	k := runKey(tc.ThreadID, tc.RunID)
	m := s.toolCalls[k]
	if m == nil {
		m = map[string]*checkpoint.ToolCall{}
		s.toolCalls[k] = m
	}
	tc.UpdatedAt = now
	m[tc.CallID] = copyToolCall(tc)
}

func (s *Store) ListToolCalls(ctx context.Context, threadID, runID string, callIDs ...string) ([]*checkpoint.ToolCall, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*checkpoint.ToolCall
	calls := s.toolCalls[runKey(threadID, runID)]
	if len(callIDs) > 0 {
		for _, id := range slices.Compact(slices.Sorted(slices.Values(callIDs))) {
			if tc, ok := calls[id]; ok {
				out = append(out, copyToolCall(tc))
			}
		}
		return out, nil
	}
	for _, tc := range calls {
		out = append(out, copyToolCall(tc))
	}
	return out, nil
}

func (s *Store) CreateQuestion(ctx context.Context, q *checkpoint.Question) (*checkpoint.Question, bool, error) {
	c, err := s.Commit(ctx, &checkpoint.Batch{Question: q})
	if err != nil {
		return nil, false, err
	}
	return c.Question, c.Created, nil
}

func (s *Store) createQuestionLocked(q *checkpoint.Question, now time.Time) *checkpoint.Question {
	k := questionKey{q.ThreadID, q.ID}
	c := copyQuestion(q)
	c.Status = checkpoint.QuestionPending
	c.Answer, c.AnsweredBy, c.Reason, c.ResolvedAt = nil, "", "", time.Time{}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	s.questions[k] = c
	s.qorder = append(s.qorder, k)
	s.byThread[k.thread] = append(s.byThread[k.thread], c)
	s.qseq[k] = int64(len(s.qorder))
	s.pending.ReplaceOrInsert(s.pendingEntry(k, c))
	s.notifyLocked(checkpoint.Notification{Kind: checkpoint.QuestionCreated, ThreadID: q.ThreadID, QuestionID: q.ID})
	return copyQuestion(c)
}

func (s *Store) GetQuestion(ctx context.Context, threadID, id string) (*checkpoint.Question, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.questions[questionKey{threadID, id}]
	if !ok {
		return nil, fmt.Errorf("question %q of thread %q: %w", id, threadID, checkpoint.ErrNotFound)
	}
	return copyQuestion(q), nil
}

func matches(f checkpoint.QuestionFilter, q *checkpoint.Question) bool {
	return (f.ThreadID == "" || q.ThreadID == f.ThreadID) && (f.Status == "" || q.Status == f.Status) &&
		(f.Tool == "" || q.Tool == f.Tool) && (f.Kind == "" || q.Kind == f.Kind)
}

// ListQuestions sorts the questions that match on every call: the memory
// store is for tests and examples, not for a queue of thousands. The
// pending questions in deadline order (a host's read of the earliest
// deadlines) are the exception: they are kept in that order.
func (s *Store) ListQuestions(ctx context.Context, f checkpoint.QuestionFilter) ([]*checkpoint.Question, string, error) {
	page, after, err := cursor.StartQuestions(f)
	if err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Status == checkpoint.QuestionPending && f.Order == checkpoint.DeadlineFirst && f.ThreadID == "" && f.Tool == "" && f.Kind == "" {
		add := func(e pendingEntry) bool {
			if after != nil && cursor.Compare(*after, e.pos) >= 0 {
				return true
			}
			q := s.questions[e.key]
			if len(page.Items) < page.Limit { // else q only says the list goes on
				q = copyQuestion(q)
			}
			return !page.Add(q, e.pos.Seq)
		}
		if after == nil {
			s.pending.Ascend(add)
		} else {
			pivot := *after
			pivot.Order = checkpoint.DeadlineFirst
			s.pending.AscendGreaterOrEqual(pendingEntry{pos: pivot}, add)
		}
		return page.Items, page.Next(), nil
	}
	type row struct {
		pos cursor.Question
		q   *checkpoint.Question
	}
	var rows []row
	for i, k := range s.qorder {
		q := s.questions[k]
		// The sequence number of a question is its place in qorder, from 1.
		pos := cursor.Question{Order: f.Order, Seq: int64(i) + 1, Deadline: q.Deadline}
		if matches(f, q) && (after == nil || cursor.Compare(*after, pos) < 0) {
			rows = append(rows, row{pos, q})
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return cursor.Compare(a.pos, b.pos) })
	for _, r := range rows {
		if page.Add(copyQuestion(r.q), r.pos.Seq) {
			break
		}
	}
	return page.Items, page.Next(), nil
}

func (s *Store) CountQuestions(ctx context.Context, f checkpoint.QuestionFilter) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The pending ones are indexed (the server's gauge reads their
	// number), and so is each thread's (a thread's page shows its count).
	if f.ThreadID == "" && f.Status == checkpoint.QuestionPending && f.Tool == "" && f.Kind == "" {
		return int64(s.pending.Len()), nil
	}
	qs := slices.Values(s.byThread[f.ThreadID])
	if f.ThreadID == "" {
		qs = maps.Values(s.questions)
	}
	var n int64
	for q := range qs {
		if matches(f, q) {
			n++
		}
	}
	return n, nil
}

func (s *Store) ResolveQuestion(ctx context.Context, threadID, id string, r checkpoint.Resolution) (*checkpoint.Question, error) {
	q, err := s.GetQuestion(ctx, threadID, id)
	if err != nil {
		return nil, err
	}
	if r.At.IsZero() {
		r.At = s.now()
	}
	c, err := s.Commit(ctx, checkpoint.ResolveBatch(q, r))
	if errors.Is(err, checkpoint.ErrConflict) || errors.Is(err, checkpoint.ErrExpired) {
		q, gerr := s.GetQuestion(ctx, threadID, id)
		if gerr != nil {
			return nil, err
		}
		return q, err
	}
	if err != nil {
		return nil, err
	}
	return c.Resolved, nil
}

func (s *Store) AppendEvent(ctx context.Context, e *checkpoint.Event) (int64, error) {
	c, err := s.Commit(ctx, &checkpoint.Batch{Events: []*checkpoint.Event{e}})
	if err != nil {
		return 0, err
	}
	return c.EventSeqs[0], nil
}

func (s *Store) appendEventLocked(e *checkpoint.Event, now time.Time) int64 {
	c := *e
	c.Seq = int64(len(s.events)) + 1
	if c.At.IsZero() {
		c.At = now
	}
	c.Data = slices.Clone(e.Data)
	s.events = append(s.events, &c)
	e.Seq, e.At = c.Seq, c.At
	return c.Seq
}

func (s *Store) ListEvents(ctx context.Context, threadID string, after int64, limit int) ([]*checkpoint.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit <= 0 {
		limit = 1000
	}
	var out []*checkpoint.Event
	for i := max(after, 0); i < int64(len(s.events)) && len(out) < limit; i++ {
		e := s.events[i]
		if threadID != "" && e.ThreadID != threadID {
			continue
		}
		c := *e
		c.Data = slices.Clone(e.Data)
		out = append(out, &c)
	}
	return out, nil
}

// Subscribe returns a channel with room for 256 notifications; when a
// subscriber falls further behind, notifications are dropped for it (it
// re-reads the store, as every subscriber must).
func (s *Store) Subscribe(ctx context.Context) (<-chan checkpoint.Notification, error) {
	ch := make(chan checkpoint.Notification, 256)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		close(ch)
		return ch, nil
	}
	s.subs[ch] = struct{}{}
	s.mu.Unlock()
	go func() {
		<-ctx.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.subs[ch]; ok {
			delete(s.subs, ch)
			close(ch)
		}
	}()
	return ch, nil
}

func (s *Store) notifyLocked(n checkpoint.Notification) {
	for ch := range s.subs {
		select {
		case ch <- n:
		default:
		}
	}
}

// Close ends every subscription.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for ch := range s.subs {
		delete(s.subs, ch)
		close(ch)
	}
	return nil
}
