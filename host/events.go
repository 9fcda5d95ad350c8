package host

import (
	"slices"
	"sync"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
)

// ResolvedEvent is published by the host when it records an answer or a
// timeout (the run's own HitlResolvedEvent follows when it resumes).
type ResolvedEvent struct {
	Question *checkpoint.Question
}

func (e *ResolvedEvent) Meta() agent.EventMeta {
	return agent.EventMeta{ThreadID: e.Question.ThreadID, RunID: e.Question.RunID, At: e.Question.ResolvedAt}
}

// Subscribe returns the events of every run this host drives, and the
// host's own [ResolvedEvent]s, with room for buffer events (zero: 1024).
// A subscriber that falls behind loses events (counted by Dropped): read
// the store's event log for a complete record. Call the returned function
// to unsubscribe.
func (h *Host) Subscribe(buffer int) (<-chan agent.Event, func()) {
	if buffer <= 0 {
		buffer = 1024
	}
	return h.events.subscribe(buffer)
}

// Dropped counts events that subscribers lost by falling behind.
func (h *Host) Dropped() int64 { return h.events.droppedCount() }

// forward publishes a's events to the host's subscribers until the
// returned function is called; that function returns once the last of
// them is published (nothing is left forwarding). The events are handed
// on from the goroutine that emits them: the host's fan never blocks, so
// a drive needs no goroutine and buffer of its own to forward them.
func (h *Host) forward(a *agent.Agent) (stop func()) {
	return a.SubscribeFunc(h.events.publish)
}

// eventFan hands events to subscribers without ever blocking a run.
type eventFan struct {
	mu      sync.Mutex
	subs    []chan agent.Event
	closed  bool
	dropped int64
}

func (f *eventFan) subscribe(buffer int) (<-chan agent.Event, func()) {
	ch := make(chan agent.Event, buffer)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		close(ch)
		return ch, func() {}
	}
	f.subs = append(f.subs, ch)
	return ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if i := slices.Index(f.subs, ch); i >= 0 {
			f.subs = slices.Delete(f.subs, i, i+1)
			close(ch)
		}
	}
}

func (f *eventFan) publish(e agent.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.subs {
		select {
		case ch <- e:
		default:
			f.dropped++
		}
	}
}

func (f *eventFan) droppedCount() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped
}

func (f *eventFan) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.subs {
		close(ch)
	}
	f.subs, f.closed = nil, true
}
