package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/apiclient"
	"github.com/tollgate-ai/tollgate/checkpoint"
)

// Live events: every stream reads the store's event log, the one complete
// record, from its position on. What wakes a stream is only a hint to read
// again: the host's events (this process's runs), the store's
// notifications (questions asked and answered anywhere), and one
// server-wide poll of the log's head (events written by other processes).
// Nothing a stream sends comes from the hint itself, so a hint lost to a
// full buffer costs a little latency, never an event.

// broadcaster wakes waiting streams: a stream takes its channel before it
// reads the log, and the channel is closed at the next change, so a change
// between the read and the wait is never missed. A change of one thread
// wakes that thread's streams and the queue streams, not the streams of
// other threads.
type broadcaster struct {
	mu      sync.Mutex
	all     chan struct{}            // the queue streams (every thread)
	threads map[string]chan struct{} // streams of one thread, while some wait
	again   map[string]bool          // hints to repeat soon ("": every stream)
	timer   bool
}

func newBroadcaster() *broadcaster {
	return &broadcaster{all: make(chan struct{}), threads: map[string]chan struct{}{}, again: map[string]bool{}}
}

// wait returns the channel the next change of thread ("" for any thread)
// closes.
func (b *broadcaster) wait(thread string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if thread == "" {
		return b.all
	}
	ch := b.threads[thread]
	if ch == nil {
		ch = make(chan struct{})
		b.threads[thread] = ch
	}
	return ch
}

// notify wakes the streams of thread and the queue streams; "" wakes
// every stream.
func (b *broadcaster) notify(thread string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.notifyLocked(thread)
}

func (b *broadcaster) notifyLocked(thread string) {
	close(b.all)
	b.all = make(chan struct{})
	if thread == "" {
		for _, ch := range b.threads {
			close(ch)
		}
		clear(b.threads)
		return
	}
	if ch := b.threads[thread]; ch != nil {
		close(ch)
		delete(b.threads, thread)
	}
}

// followUpDelay is when a hint is repeated: a run's event (and a store's
// notification) may come just before the matching entry is committed to
// the log, and the repeat finds the entry without waiting for the poll.
const followUpDelay = 150 * time.Millisecond

// hint wakes the streams of thread now and once more shortly after (one
// timer for any number of hints).
func (b *broadcaster) hint(thread string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.notifyLocked(thread)
	b.again[thread] = true
	if b.timer {
		return
	}
	b.timer = true
	time.AfterFunc(followUpDelay, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for t := range b.again {
			b.notifyLocked(t)
		}
		clear(b.again)
		b.timer = false
	})
}

// logHead follows the highest sequence number of the store's event log.
type logHead struct {
	store checkpoint.Store
	mu    sync.Mutex
	seq   int64
	known bool
}

// advance reads the log from the known head to its end and reports
// whether it moved. The first call finds the head without reading the
// whole log.
func (h *logHead) advance(ctx context.Context) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.known {
		seq, err := findHead(ctx, h.store)
		if err != nil {
			return false, err
		}
		h.seq, h.known = seq, true
		return false, nil
	}
	moved := false
	for {
		evs, err := h.store.ListEvents(ctx, "", h.seq, 500)
		if err != nil {
			return moved, err
		}
		if len(evs) > 0 {
			h.seq, moved = evs[len(evs)-1].Seq, true
		}
		if len(evs) < 500 {
			return moved, nil
		}
	}
}

// current returns the log's head now.
func (h *logHead) current(ctx context.Context) (int64, error) {
	if _, err := h.advance(ctx); err != nil {
		return 0, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seq, nil
}

// findHead returns the highest Seq in the log (0 if empty) with about
// 2·log2(Seq) one-row reads: it gallops up from the first event, then
// halves the gap. Sequence numbers may have holes: the search relies only
// on "is there an event after g", which is true below the head and false
// from it on.
func findHead(ctx context.Context, store checkpoint.Store) (int64, error) {
	after := func(g int64) (int64, bool, error) {
		evs, err := store.ListEvents(ctx, "", g, 1)
		if err != nil || len(evs) == 0 {
			return 0, false, err
		}
		return evs[0].Seq, true, nil
	}
	lo, ok, err := after(0)
	if err != nil || !ok {
		return 0, err
	}
	// lo is an event's Seq; no event lies after hi.
	var hi int64
	for step := int64(1); ; step = min(2*step, 1<<61) {
		s, ok, err := after(lo + step)
		if err != nil {
			return 0, err
		}
		if !ok {
			hi = lo + step
			break
		}
		lo = s
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		s, ok, err := after(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = s
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// startLoops subscribes to the host's events and the store's
// notifications and starts the log's poll; Close ends them.
func (s *Server) startLoops() error {
	events, unsubscribe := s.host.Subscribe(1024)
	// The poll goes on while the store's feed is away: streams only wait
	// longer.
	follow, stopFollow := context.WithCancel(s.ctx)
	notes, err := checkpoint.Follow(follow, s.store, &checkpoint.FollowOptions{
		OnLost: func() { s.log.Warn("tollgate: the store's notifications ended; subscribing again") },
		OnError: func(err error) {
			s.metrics.storeErrors.Inc()
			s.log.Warn("tollgate: subscribing to the store's notifications again", "err", err)
		}})
	if err != nil {
		stopFollow()
		for range notes { // Follow's goroutine ends with its channel
		}
		unsubscribe()
		return fmt.Errorf("server: subscribing to the store: %w", err)
	}
	s.loops.Add(3)
	go func() {
		defer s.loops.Done()
		defer unsubscribe()
		for {
			select {
			case <-s.ctx.Done():
				return
			case e, ok := <-events:
				if !ok {
					return // the host shut down
				}
				s.metrics.observe(e)
				s.wake.hint(e.Meta().ThreadID)
			}
		}
	}()
	go func() {
		defer s.loops.Done()
		defer stopFollow()
		for n := range notes {
			s.wake.hint(n.ThreadID) // "" for a resync: every stream
		}
	}()
	go func() {
		defer s.loops.Done()
		s.pollLog()
	}()
	return nil
}

// streamGate counts the open streams: the log's poll runs only while
// there is one, so that a replica nobody watches reads nothing (the poll
// was three of an idle replica's transactions a second).
type streamGate struct {
	mu     sync.Mutex
	open   int
	opened chan struct{} // closed when a stream opens while none was
}

func newStreamGate() *streamGate { return &streamGate{opened: make(chan struct{})} }

// enter counts a stream open until the returned function is called.
func (g *streamGate) enter() func() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open++
	if g.open == 1 {
		close(g.opened)
		g.opened = make(chan struct{})
	}
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.open--
	}
}

// wait returns at once while a stream is open; with none, it calls idle
// and waits for one (false: ctx ended).
func (g *streamGate) wait(ctx context.Context, idle func()) bool {
	g.mu.Lock()
	open, opened := g.open, g.opened
	g.mu.Unlock()
	if open > 0 {
		return true
	}
	idle()
	select {
	case <-ctx.Done():
		return false
	case <-opened:
		return true
	}
}

// forget drops the known head: the next advance finds it again (a few
// one-row reads) rather than reading every event written meanwhile.
func (h *logHead) forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.known = false
}

// pollLog looks at the log's head every PollInterval while a stream is
// open, and wakes the streams when it moved: one query for all streams,
// whatever their number.
func (s *Server) pollLog() {
	t := time.NewTicker(s.poll)
	defer t.Stop()
	failing := false
	for {
		if !s.listening.wait(s.ctx, s.head.forget) {
			return
		}
		moved, err := s.head.advance(s.ctx)
		switch {
		case err != nil && s.ctx.Err() == nil:
			s.metrics.storeErrors.Inc()
			if !failing {
				s.log.Warn("tollgate: reading the event log", "err", err)
			}
			failing = true
		case err == nil:
			failing = false
		}
		if moved {
			s.wake.notify("")
		}
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// streamStart is where a stream starts: after the Last-Event-ID header,
// else ?after=, else -1 (the route's default).
func streamStart(r *http.Request) (int64, error) {
	q := r.URL.Query()
	if err := checkParams(q, "after"); err != nil {
		return 0, err
	}
	v, what := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if v == "" {
		v, what = q.Get("after"), "after"
	}
	if v == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest("%s must be an event's seq (a whole number, 0 or more), not %q", what, v)
	}
	return n, nil
}

// GET /v1/threads/{id}/stream: the thread's events, from the start of its
// log unless told where to resume.
func (s *Server) streamThread(w http.ResponseWriter, r *http.Request, id *identity) error {
	after, err := streamStart(r)
	if err != nil {
		return err
	}
	th, err := s.loadThread(r.Context(), id, r.PathValue("id"))
	if err != nil {
		return err
	}
	if after < 0 {
		after = 0
	}
	return s.stream(w, r, id, th.ID, after)
}

// GET /v1/stream: the events of every thread the caller may see, from now
// on unless told where to resume.
func (s *Server) streamAll(w http.ResponseWriter, r *http.Request, id *identity) error {
	after, err := streamStart(r)
	if err != nil {
		return err
	}
	if after < 0 {
		if after, err = s.head.current(r.Context()); err != nil {
			return err
		}
	}
	return s.stream(w, r, id, "", after)
}

// streamWriteTimeout bounds one write to a stream: a client that stops
// reading does not hold its handler for ever.
const streamWriteTimeout = 30 * time.Second

// streamPage is how many events one read of the log takes.
const streamPage = 200

// DefaultMaxStreamsPerToken is [Config].MaxStreamsPerToken's zero value:
// a reviewer's page holds one or two streams per tab.
const DefaultMaxStreamsPerToken = 32

// streamCounts counts the open event streams of each token, by name (a
// page session counts against the token that signed it in).
type streamCounts struct {
	mu   sync.Mutex
	open map[string]int
	max  int // < 0: no cap
}

// take counts a stream of name's, unless it has max open already.
func (c *streamCounts) take(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.max >= 0 && c.open[name] >= c.max {
		return false
	}
	c.open[name]++
	return true
}

func (c *streamCounts) give(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[name]--; c.open[name] <= 0 {
		delete(c.open, name)
	}
}

// stream sends the log's events of thread ("" for all the caller may see)
// after the given seq, then every new one, until the client goes, or the
// server closes.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, id *identity, thread string, after int64) error {
	if s.ctx.Err() != nil {
		return newError(http.StatusServiceUnavailable, codeUnavailable, "the server is shutting down: reconnect in a moment")
	}
	if !s.streams.take(id.name) {
		w.Header().Set("Retry-After", "10")
		return newError(http.StatusTooManyRequests, codeTooManyStreams,
			"token %q has %d event streams open, the most one token may have (serve --max-streams-per-token): close one — a page tab, a client that did not close its stream — or share one stream",
			id.name, s.streams.max)
	}
	defer s.streams.give(id.name)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil // the headers are the whole answer
	}
	if err := rc.Flush(); err != nil {
		s.log.Warn("tollgate: this connection cannot stream events", "err", err)
		return nil
	}
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()
	defer s.listening.enter()()

	ctx := r.Context()
	ping := time.NewTicker(s.ping)
	defer ping.Stop()
	var retry <-chan time.Time
	for {
		if !s.auth.live(id.session) {
			// Signed out or expired since the stream opened: it must not
			// go on showing questions.
			return nil
		}
		wake := s.wake.wait(thread)
		n, err := s.sendEvents(ctx, w, rc, id, thread, &after)
		switch {
		case errors.Is(err, errClientGone) || ctx.Err() != nil:
			return nil
		case err != nil:
			if s.ctx.Err() != nil {
				return nil
			}
			s.metrics.storeErrors.Inc()
			s.log.Warn("tollgate: reading events for a stream; trying again", "thread", thread, "err", err)
			retry = time.After(s.poll)
		case n == streamPage:
			continue // more to read at once
		default:
			retry = nil
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-s.ctx.Done():
				return nil
			case <-wake:
				break wait
			case <-retry:
				break wait
			case <-ping.C:
				if !s.auth.live(id.session) {
					return nil
				}
				_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
				if _, err := io.WriteString(w, ": ping\n\n"); err != nil {
					return nil
				}
				if rc.Flush() != nil {
					return nil
				}
			}
		}
	}
}

var errClientGone = errors.New("server: the stream's client went away")

// sendEvents writes one page of events after *after and moves *after on;
// it returns how many events it read (some may be filtered out).
func (s *Server) sendEvents(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, id *identity, thread string, after *int64) (int, error) {
	evs, err := s.store.ListEvents(ctx, thread, *after, streamPage)
	if err != nil {
		return 0, err
	}
	if len(evs) == 0 {
		return 0, nil
	}
	var b strings.Builder
	for _, e := range evs {
		*after = e.Seq
		if !id.sees(e.ThreadID) {
			continue
		}
		data, err := encodeJSON(apiclient.EventOf(e))
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(&b, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, sseField(e.Type), data)
	}
	if b.Len() == 0 {
		return len(evs), nil
	}
	_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return 0, errClientGone
	}
	if err := rc.Flush(); err != nil {
		return 0, errClientGone
	}
	return len(evs), nil
}

// sseField keeps a value on its line.
func sseField(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}
