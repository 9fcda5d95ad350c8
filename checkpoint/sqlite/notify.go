package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// subBuffer is the room each subscriber has before notifications are
// dropped for it (it re-reads the store, as every subscriber must).
const subBuffer = 256

// hub fans notifications out to subscribers: at once for this Store's own
// writes, and from a slow poll of questions.change_seq for writes of other
// processes on the same file. The poll runs only while someone listens.
type hub struct {
	s    *Store
	poll time.Duration // <= 0: no polling

	mu     sync.Mutex
	subs   map[chan checkpoint.Notification]func() bool // -> stop of its context.AfterFunc
	closed bool
	// hw is the highest change_seq the poller has seen (while it runs),
	// and own holds the change_seqs of this Store's writes above hw,
	// delivered or about to be, which the poller must not deliver again.
	hw         int64
	own        map[int64]struct{}
	stopPoll   context.CancelFunc
	pollerDone chan struct{}
}

func newHub(s *Store, poll time.Duration) *hub {
	return &hub{s: s, poll: poll, subs: map[chan checkpoint.Notification]func() bool{}, own: map[int64]struct{}{}}
}

func (s *Store) Subscribe(ctx context.Context) (<-chan checkpoint.Notification, error) {
	return s.hub.subscribe(ctx)
}

func (h *hub) subscribe(ctx context.Context) (<-chan checkpoint.Notification, error) {
	ch := make(chan checkpoint.Notification, subBuffer)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(ch)
		return ch, nil
	}
	if len(h.subs) == 0 && h.poll > 0 {
		// Start from what is there now: a subscriber wants what changes
		// from here on, and re-lists for the rest.
		var hw sql.NullInt64
		if err := h.s.r.QueryRowContext(ctx, `SELECT max(change_seq) FROM questions`).Scan(&hw); err != nil {
			close(ch)
			return nil, err
		}
		h.hw = hw.Int64
		for seq := range h.own {
			if seq <= h.hw {
				delete(h.own, seq)
			}
		}
		pctx, cancel := context.WithCancel(context.Background())
		h.stopPoll, h.pollerDone = cancel, make(chan struct{})
		go h.poller(pctx, h.pollerDone)
	}
	h.subs[ch] = context.AfterFunc(ctx, func() { h.unsubscribe(ch) })
	return ch, nil
}

func (h *hub) unsubscribe(ch chan checkpoint.Notification) {
	h.mu.Lock()
	if _, ok := h.subs[ch]; !ok {
		h.mu.Unlock()
		return
	}
	delete(h.subs, ch)
	close(ch)
	var done chan struct{}
	if len(h.subs) == 0 && h.stopPoll != nil {
		h.stopPoll()
		h.stopPoll, done = nil, h.pollerDone
	}
	h.mu.Unlock()
	if done != nil {
		<-done
	}
}

// expect records the change_seqs of this store's writes that are about
// to commit, before they do: the poller may read them as soon as they are
// committed, and must not deliver them again as another process's. (Also
// with no poller running: one that starts before the commit takes its
// high-water mark below them.)
func (h *hub) expect(changes []int64) {
	if h.poll <= 0 || len(changes) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range changes {
		h.own[c] = struct{}{}
	}
}

// forget drops changes that expect recorded and that did not commit:
// another process may commit the same change_seqs.
func (h *hub) forget(changes []int64) {
	if h.poll <= 0 || len(changes) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range changes {
		delete(h.own, c)
	}
}

// published delivers the notifications of this store's own writes, once
// they are committed (with the change_seqs given to expect).
func (h *hub) published(notes []note) {
	if len(notes) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range notes {
		if h.stopPoll == nil {
			delete(h.own, n.change) // no poller to drop it once it passes it
		}
		h.sendLocked(n.n)
	}
}

func (h *hub) sendLocked(n checkpoint.Notification) {
	for ch := range h.subs {
		select {
		case ch <- n:
		default: // falling behind: it will re-read the store
		}
	}
}

func (h *hub) poller(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(h.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := h.pollOnce(ctx); err != nil && ctx.Err() == nil {
			h.s.log.Warn("checkpoint/sqlite: polling for other processes' changes failed", "err", err)
		}
	}
}

// pollOnce delivers the question writes of other processes since the
// high-water mark. One writer at a time means change_seq is in commit
// order, so nothing can appear later below the mark.
func (h *hub) pollOnce(ctx context.Context) error {
	h.mu.Lock()
	hw := h.hw
	h.mu.Unlock()
	rows, err := h.s.r.QueryContext(ctx, `SELECT change_seq, thread_id, id, status FROM questions WHERE change_seq > ? ORDER BY change_seq LIMIT 1000`, hw)
	if err != nil {
		return err
	}
	defer rows.Close()
	type change struct {
		seq int64
		n   checkpoint.Notification
	}
	var changes []change
	for rows.Next() {
		var c change
		var status string
		if err := rows.Scan(&c.seq, &c.n.ThreadID, &c.n.QuestionID, &status); err != nil {
			return err
		}
		c.n.Kind = checkpoint.QuestionResolved
		if status == string(checkpoint.QuestionPending) {
			c.n.Kind = checkpoint.QuestionCreated
		}
		changes = append(changes, c)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if ctx.Err() != nil {
		return nil
	}
	for _, c := range changes {
		if c.seq <= h.hw {
			continue
		}
		h.hw = c.seq
		if _, mine := h.own[c.seq]; mine {
			continue
		}
		h.sendLocked(c.n)
	}
	for seq := range h.own {
		if seq <= h.hw {
			delete(h.own, seq)
		}
	}
	return nil
}

// close ends every subscription and stops the poller.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	for ch, stop := range h.subs {
		stop()
		delete(h.subs, ch)
		close(ch)
	}
	var done chan struct{}
	if h.stopPoll != nil {
		h.stopPoll()
		h.stopPoll, done = nil, h.pollerDone
	}
	h.mu.Unlock()
	if done != nil {
		<-done
	}
}
