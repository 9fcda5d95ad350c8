// Package memory is an in-memory [checkpoint.Store] for tests, examples and
// the offline demo. Nothing survives the process; everything else behaves as
// the durable stores do (it passes checkpoint/checkpointtest).
package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/cursor"
)

var _ checkpoint.Store = (*Store)(nil)

type questionKey struct{ thread, id string }

// Store keeps every record in maps guarded by one mutex. Records are copied
// in and out, so callers never share memory with the store.
type Store struct {
	mu        sync.Mutex
	threads   map[string]*checkpoint.Thread
	toolCalls map[string]map[string]*checkpoint.ToolCall // thread/run -> call id
	questions map[questionKey]*checkpoint.Question
	qorder    []questionKey // creation order: a question's sequence number is its index + 1
	events    []*checkpoint.Event
	subs      map[chan checkpoint.Notification]struct{}
	now       func() time.Time
	closed    bool
}

// New returns an empty store.
func New() *Store {
	return &Store{
		threads:   map[string]*checkpoint.Thread{},
		toolCalls: map[string]map[string]*checkpoint.ToolCall{},
		questions: map[questionKey]*checkpoint.Question{},
		subs:      map[chan checkpoint.Notification]struct{}{},
		now:       time.Now,
	}
}

func copyThread(t *checkpoint.Thread) *checkpoint.Thread {
	c := *t
	c.Messages = slices.Clone(t.Messages)
	return &c
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
	s.threads[t.ID] = copyThread(t)
	return nil
}

func (s *Store) LoadThread(ctx context.Context, id string) (*checkpoint.Thread, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.threads[id]
	if !ok {
		return nil, fmt.Errorf("thread %q: %w", id, checkpoint.ErrNotFound)
	}
	return copyThread(t), nil
}

func (s *Store) SaveThread(ctx context.Context, t *checkpoint.Thread) error {
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
	s.threads[t.ID] = copyThread(t)
	return nil
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
		if (f.Status == "" || t.Status == f.Status) && (after == nil || cursor.CompareThreads(*after, pos(t)) < 0) {
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

func runKey(thread, run string) string { return thread + "\x00" + run }

func (s *Store) PutToolCall(ctx context.Context, tc *checkpoint.ToolCall) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := runKey(tc.ThreadID, tc.RunID)
	m := s.toolCalls[k]
	if m == nil {
		m = map[string]*checkpoint.ToolCall{}
		s.toolCalls[k] = m
	}
	if _, exists := m[tc.CallID]; exists && tc.State == checkpoint.ToolCallExecuting {
		return fmt.Errorf("tool call %q of run %q is already claimed: %w", tc.CallID, tc.RunID, checkpoint.ErrConflict)
	}
	tc.UpdatedAt = s.now()
	m[tc.CallID] = copyToolCall(tc)
	return nil
}

func (s *Store) ListToolCalls(ctx context.Context, threadID, runID string) ([]*checkpoint.ToolCall, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*checkpoint.ToolCall
	for _, tc := range s.toolCalls[runKey(threadID, runID)] {
		out = append(out, copyToolCall(tc))
	}
	return out, nil
}

func (s *Store) CreateQuestion(ctx context.Context, q *checkpoint.Question) (*checkpoint.Question, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := questionKey{q.ThreadID, q.ID}
	if cur, ok := s.questions[k]; ok {
		return copyQuestion(cur), false, nil
	}
	c := copyQuestion(q)
	c.Status = checkpoint.QuestionPending
	c.Answer, c.AnsweredBy, c.Reason, c.ResolvedAt = nil, "", "", time.Time{}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = s.now()
	}
	s.questions[k] = c
	s.qorder = append(s.qorder, k)
	s.notifyLocked(checkpoint.Notification{Kind: checkpoint.QuestionCreated, ThreadID: q.ThreadID, QuestionID: q.ID})
	return copyQuestion(c), true, nil
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
// store is for tests and examples, not for a queue of thousands.
func (s *Store) ListQuestions(ctx context.Context, f checkpoint.QuestionFilter) ([]*checkpoint.Question, string, error) {
	page, after, err := cursor.StartQuestions(f)
	if err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
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
	var n int64
	for _, q := range s.questions {
		if matches(f, q) {
			n++
		}
	}
	return n, nil
}

func (s *Store) ResolveQuestion(ctx context.Context, threadID, id string, r checkpoint.Resolution) (*checkpoint.Question, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.questions[questionKey{threadID, id}]
	if !ok {
		return nil, fmt.Errorf("question %q of thread %q: %w", id, threadID, checkpoint.ErrNotFound)
	}
	if r.At.IsZero() {
		r.At = s.now()
	}
	if err := checkpoint.CheckResolution(q, r); err != nil {
		return copyQuestion(q), err
	}
	q.Status, q.Answer, q.AnsweredBy, q.Reason, q.ResolvedAt = r.Status, slices.Clone(r.Answer), r.By, r.Reason, r.At
	s.notifyLocked(checkpoint.Notification{Kind: checkpoint.QuestionResolved, ThreadID: threadID, QuestionID: id})
	return copyQuestion(q), nil
}

func (s *Store) AppendEvent(ctx context.Context, e *checkpoint.Event) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := *e
	c.Seq = int64(len(s.events)) + 1
	if c.At.IsZero() {
		c.At = s.now()
	}
	c.Data = slices.Clone(e.Data)
	s.events = append(s.events, &c)
	e.Seq, e.At = c.Seq, c.At
	return c.Seq, nil
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
