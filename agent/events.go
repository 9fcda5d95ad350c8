package agent

import (
	"errors"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// Event is one thing that happened in a run. Events of an agent are
// numbered in the order they happened (Seq); a subscriber receives them in
// that order.
type Event interface {
	// Meta returns the fields every event has.
	Meta() EventMeta
}

// EventMeta is common to all events.
type EventMeta struct {
	// Seq numbers the agent's events from 1 in the order they happened.
	Seq      int64
	ThreadID string
	RunID    string
	At       time.Time
}

type meta = EventMeta

func (m EventMeta) Meta() EventMeta { return m }

// RunStartedEvent: a run began (Prompt) or was resumed (Resume).
type RunStartedEvent struct {
	meta
	Prompt  string
	Resumed bool
}

// RunFinishedEvent: the run ended with Message (the final assistant
// message), or stopped early with Err (the thread then waits for Resume
// or AbortPending).
type RunFinishedEvent struct {
	meta
	Message *Message
	Err     error
}

// RunParkedEvent: the run stopped to wait for answers to Questions (their
// ids) without holding a goroutine, a lease or a connection in this
// process (see [ErrParked]); it
// goes on when its driver resumes it.
type RunParkedEvent struct {
	meta
	Questions []string
}

// TextDeltaEvent carries a piece of assistant text as the model streams it.
type TextDeltaEvent struct {
	meta
	Delta string
}

// MessageEvent: an assistant message is complete and persisted.
type MessageEvent struct {
	meta
	Message Message
}

// ToolCallStartedEvent: the tool is about to run with Args (after any
// middleware replaced them).
type ToolCallStartedEvent struct {
	meta
	Call ToolCall
	Args []byte
}

// ToolCallFinishedEvent: the call has its result: it ran, failed, was
// blocked, was invalid, or was aborted.
type ToolCallFinishedEvent struct {
	meta
	Call   ToolCall
	Result ToolResult
}

// HitlRequestEvent: a question for a person is pending. Existing is true
// when a resumed run found the question already stored.
type HitlRequestEvent struct {
	meta
	Question *checkpoint.Question
	Existing bool
}

// HitlResolvedEvent: a question was answered, timed out or aborted
// (Question.Status says which).
type HitlResolvedEvent struct {
	meta
	Question *checkpoint.Question
}

// AgentAbortedEvent: AbortPending closed the run.
type AgentAbortedEvent struct {
	meta
	Reason string
}

// ErrSlowSubscriber ends a subscription whose reader fell too far behind.
var ErrSlowSubscriber = errors.New("agent: subscriber too slow; events dropped")

// Subscription receives an agent's events on C.
//
// What a subscriber sees: every event from the moment it subscribed, in
// order, with no gaps. When its buffer is full the run waits for it up to
// the agent's SlowSubscriberTimeout; if it is still full then, the
// subscription is ended: C is closed and Err returns ErrSlowSubscriber. So
// a slow subscriber sees an exact prefix of the events, never a reordered
// or gapped stream, and never holds the run for longer than that timeout.
// Durable events stay in the checkpointer's event log for catching up.
type Subscription struct {
	C <-chan Event

	c         chan Event
	fn        func(Event) // SubscribeFunc's, instead of c
	hub       *eventHub
	done      chan struct{} // closed by Close, without the hub's lock
	closeOnce sync.Once
	err       error
	closed    bool
}

// Err says why C was closed: nil after Close, ErrSlowSubscriber when the
// subscriber fell behind.
func (s *Subscription) Err() error {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.err
}

// Close ends the subscription and closes C. It never waits for a publisher
// blocked on this subscription's full buffer: it releases it.
func (s *Subscription) Close() {
	s.closeOnce.Do(func() { close(s.done) })
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.hub.removeLocked(s, nil)
}

type eventHub struct {
	mu          sync.Mutex
	seq         int64
	subs        []*Subscription
	slowTimeout time.Duration
}

func (h *eventHub) subscribe(buffer int) *Subscription {
	if buffer <= 0 {
		buffer = 256
	}
	c := make(chan Event, buffer)
	s := &Subscription{C: c, c: c, hub: h, done: make(chan struct{})}
	h.mu.Lock()
	h.subs = append(h.subs, s)
	h.mu.Unlock()
	return s
}

// subscribeFunc adds f as a subscriber called in publish, under the
// hub's lock.
func (h *eventHub) subscribeFunc(f func(Event)) (stop func()) {
	s := &Subscription{fn: f, hub: h}
	h.mu.Lock()
	h.subs = append(h.subs, s)
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.removeLocked(s, nil)
	}
}

func (h *eventHub) removeLocked(s *Subscription, err error) {
	if s.closed {
		return
	}
	s.closed, s.err = true, err
	if s.c != nil {
		close(s.c)
	}
	for i, x := range h.subs {
		if x == s {
			h.subs = append(h.subs[:i], h.subs[i+1:]...)
			break
		}
	}
}

// publish numbers e and hands it to every subscriber. It holds the hub's
// lock throughout, which is what keeps every subscriber's stream in order
// when tool calls run in parallel; a full subscriber holds it for at most
// the slow-subscriber timeout, or until it closes.
func (h *eventHub) publish(e Event, setSeq func(int64)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	setSeq(h.seq)
	// Those that leave are removed after the loop (removing shifts
	// h.subs), so that an event costs no copy of the list.
	type leaving struct {
		s   *Subscription
		err error
	}
	var gone []leaving
	for _, s := range h.subs {
		if s.fn != nil {
			s.fn(e)
			continue
		}
		select {
		case s.c <- e:
			continue
		case <-s.done:
			gone = append(gone, leaving{s, nil})
			continue
		default:
		}
		t := time.NewTimer(h.slowTimeout)
		select {
		case s.c <- e:
		case <-s.done:
			gone = append(gone, leaving{s, nil})
		case <-t.C:
			gone = append(gone, leaving{s, ErrSlowSubscriber})
		}
		t.Stop()
	}
	for _, l := range gone {
		h.removeLocked(l.s, l.err)
	}
}
