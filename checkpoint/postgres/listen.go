package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// minPollTimeout is the least time a poll is given to answer.
const minPollTimeout = 5 * time.Second

// subBuffer is the room each subscriber has; past it notifications are
// dropped for that subscriber and it gets a Resync once there is room.
const subBuffer = 256

// hub delivers notifications from one dedicated listener connection
// (LISTEN "tollgate.<schema>"), started by the first Subscribe and kept
// until Close. The connection reconnects with backoff; after a gap it
// sends subscribers a [checkpoint.Resync]. A poll of questions.change_seq
// on the same connection is a safety net and a liveness check, and while
// the listener is down the pool polls instead. Notifications are sent by
// the writer right after its commit (commit.go: notifyQuestion).
type hub struct {
	s    *Store
	poll time.Duration
	// timeout bounds each poll: a connection that stops answering without
	// closing (the server's host gone, a NAT or firewall that dropped the
	// connection's state) would otherwise hold the listener until TCP
	// gives up, which takes many minutes. A poll that times out counts as
	// a lost connection.
	timeout time.Duration

	mu      sync.Mutex
	subs    map[*subscriber]struct{}
	closed  bool
	started bool
	ready   chan struct{} // closed when the first attempt to listen has finished
	// hw is the highest change_seq the poll has passed: every change at or
	// below it was delivered or is history. Only the poll moves it, and
	// only below the horizon (events.go): a notification must not, since
	// a change numbered lower may still commit, and its own notification
	// may be lost (its writer killed between COMMIT and the notification).
	hw int64
	// notified holds the change_seqs above hw already delivered by
	// notification, so the poll does not deliver them again.
	notified map[int64]struct{}
	cancel   context.CancelFunc
	done     chan struct{}

	pid atomic.Uint32 // the listener's backend process, for tests
}

type subscriber struct {
	ch     chan checkpoint.Notification
	stop   func() bool
	missed bool
}

func newHub(s *Store, poll time.Duration) *hub {
	return &hub{s: s, poll: poll, timeout: max(poll, minPollTimeout), subs: map[*subscriber]struct{}{}, ready: make(chan struct{})}
}

func (s *Store) channel() string { return "tollgate." + s.schema }

// Subscribe delivers notifications of questions created and resolved by
// any process using this schema, at their commit. The first call starts
// the listener and returns once it listens (or its first attempt failed;
// a Resync follows when it succeeds). A [checkpoint.Resync] means
// notifications may have been missed: re-list.
func (s *Store) Subscribe(ctx context.Context) (<-chan checkpoint.Notification, error) {
	h := s.hub
	sub := &subscriber{ch: make(chan checkpoint.Notification, subBuffer)}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		close(sub.ch)
		return sub.ch, nil
	}
	h.subs[sub] = struct{}{}
	sub.stop = context.AfterFunc(ctx, func() { h.unsubscribe(sub) })
	if !h.started {
		h.started = true
		lctx, cancel := context.WithCancel(context.Background())
		h.cancel, h.done = cancel, make(chan struct{})
		go h.run(lctx)
	}
	ready := h.ready
	h.mu.Unlock()
	select {
	case <-ready:
	case <-ctx.Done():
	}
	return sub.ch, nil
}

func (h *hub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[sub]; ok {
		delete(h.subs, sub)
		close(sub.ch)
	}
}

func (h *hub) sendLocked(n checkpoint.Notification) {
	for sub := range h.subs {
		if sub.missed {
			select {
			case sub.ch <- checkpoint.Notification{Kind: checkpoint.Resync}:
				sub.missed = false
			default:
				continue
			}
		}
		select {
		case sub.ch <- n:
		default:
			sub.missed = true
		}
	}
}

func (h *hub) send(n checkpoint.Notification) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sendLocked(n)
}

// run keeps a listener connection until ctx ends.
func (h *hub) run(ctx context.Context) {
	defer close(h.done)
	first, gap := true, false
	backoff := 100 * time.Millisecond
	nextPoll := time.Now().Add(h.poll)
	for ctx.Err() == nil {
		conn, err := h.listen(ctx)
		if first {
			first = false
			close(h.ready)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			gap = true
			h.s.logf(slog.LevelWarn, "checkpoint/postgres: cannot listen for notifications; retrying", "err", err, "retry_in", backoff)
			wait := backoff/2 + rand.N(backoff/2+1)
			if h.poll > 0 && time.Until(nextPoll) < wait {
				// The fallback: without a listener, ask the pool.
				if err := h.pollWithin(ctx, h.s.pool); err != nil && ctx.Err() == nil {
					h.s.logf(slog.LevelDebug, "checkpoint/postgres: fallback poll failed", "err", err)
				}
				nextPoll = time.Now().Add(h.poll)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		if gap {
			gap = false
			h.send(checkpoint.Notification{Kind: checkpoint.Resync})
		}
		err = h.serve(ctx, conn)
		h.pid.Store(0)
		conn.Close(context.Background())
		if ctx.Err() != nil {
			return
		}
		gap = true
		h.s.logf(slog.LevelWarn, "checkpoint/postgres: listener connection lost; reconnecting", "err", err)
	}
}

// listen connects, listens, and moves the high-water mark to what the
// database holds now: older changes are history (or covered by a Resync).
func (h *hub) listen(ctx context.Context) (*pgx.Conn, error) {
	cfg := h.s.cfg.Copy()
	cfg.RuntimeParams["application_name"] = "tollgate-listener"
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(cctx, "LISTEN "+pgx.Identifier{h.s.channel()}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	// The mark starts at what is history: below the horizon. (Above it,
	// changes still committing are found by the poll; a listener that
	// (re)connects sends a Resync, so subscribers re-list the rest.)
	var hw int64
	if err := conn.QueryRow(cctx, `SELECT least(coalesce(max(change_seq), 0),
	(pg_snapshot_xmin(pg_current_snapshot())::text::bigint + (SELECT base FROM seq_base)) * 65536 - 1) FROM questions`).Scan(&hw); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	h.mu.Lock()
	h.hw = max(h.hw, hw)
	h.mu.Unlock()
	h.pid.Store(conn.PgConn().PID())
	return conn, nil
}

// serve waits for notifications, polling on the same connection every
// poll interval, until the connection fails or ctx ends.
//
// One context with the next poll's deadline serves every wait until that
// poll (a context a notification cost a cycle's listener a timer and its
// watch, twice a cycle).
func (h *hub) serve(ctx context.Context, conn *pgx.Conn) error {
	untilPoll := func() (context.Context, context.CancelFunc) {
		if h.poll > 0 {
			return context.WithDeadline(ctx, time.Now().Add(h.poll))
		}
		return ctx, func() {}
	}
	wctx, cancel := untilPoll()
	defer func() { cancel() }()
	for {
		n, err := conn.WaitForNotification(wctx)
		switch {
		case err == nil:
			h.deliver(n.Payload)
		case ctx.Err() != nil:
			return ctx.Err()
		case pgconn.Timeout(err) && !conn.IsClosed():
			// A poll that fails or times out ends the connection: run
			// reconnects, and sends a Resync once it listens again.
			if err := h.pollWithin(ctx, conn); err != nil {
				return err
			}
			cancel()
			wctx, cancel = untilPoll()
		default:
			return err
		}
	}
}

type payload struct {
	Kind     string `json:"k"`
	ThreadID string `json:"t"`
	ID       string `json:"q"`
	Seq      int64  `json:"s"`
}

func (h *hub) deliver(raw string) {
	var p payload
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		h.s.logf(slog.LevelWarn, "checkpoint/postgres: unreadable notification", "payload", raw, "err", err)
		p.Kind = string(checkpoint.Resync)
	}
	n := checkpoint.Notification{Kind: checkpoint.NotificationKind(p.Kind), ThreadID: p.ThreadID, QuestionID: p.ID}
	switch n.Kind {
	case checkpoint.QuestionCreated, checkpoint.QuestionResolved:
	default:
		n = checkpoint.Notification{Kind: checkpoint.Resync}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if p.Seq > h.hw {
		if h.notified == nil {
			h.notified = map[int64]struct{}{}
		}
		h.notified[p.Seq] = struct{}{}
	}
	h.sendLocked(n)
}

// pollWithin is pollOnce bounded by the hub's timeout.
func (h *hub) pollWithin(ctx context.Context, q querier) error {
	pctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	err := h.pollOnce(pctx, q)
	if err != nil && ctx.Err() == nil && pctx.Err() != nil {
		return fmt.Errorf("poll: no answer within %v: %w", h.timeout, err)
	}
	return err
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// pollOnce delivers the question writes above the high-water mark that no
// notification brought, up to the horizon (events.go): change_seq numbers
// come from transaction ids, and a change below the horizon can no longer
// be preceded by one that commits later, so nothing appears later below
// the mark. Notifications do not move the mark: a change whose
// notification was lost is still found here.
func (h *hub) pollOnce(ctx context.Context, q querier) error {
	writers, err := h.s.writersHorizon(ctx, q)
	if err != nil {
		return err
	}
	h.mu.Lock()
	hw := h.hw
	h.mu.Unlock()
	rows, err := q.Query(ctx, `SELECT change_seq, thread_id, id, status FROM questions
WHERE change_seq > $1 AND change_seq < (greatest(pg_snapshot_xmin(pg_current_snapshot())::text::bigint, $2) + (SELECT base FROM seq_base)) * 65536
ORDER BY change_seq LIMIT 1000`, hw, writers)
	if err != nil {
		return err
	}
	type change struct {
		seq int64
		n   checkpoint.Notification
	}
	changes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (change, error) {
		var c change
		var status string
		err := row.Scan(&c.seq, &c.n.ThreadID, &c.n.QuestionID, &status)
		c.n.Kind = checkpoint.QuestionResolved
		if status == string(checkpoint.QuestionPending) {
			c.n.Kind = checkpoint.QuestionCreated
		}
		return c, err
	})
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range changes {
		if c.seq <= h.hw {
			continue
		}
		h.hw = c.seq
		if _, done := h.notified[c.seq]; !done {
			h.sendLocked(c.n) // its notification never came (or not yet)
		}
	}
	for seq := range h.notified {
		if seq <= h.hw {
			delete(h.notified, seq)
		}
	}
	return nil
}

// close ends every subscription and stops the listener.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	for sub := range h.subs {
		sub.stop()
		delete(h.subs, sub)
		close(sub.ch)
	}
	cancel, done := h.cancel, h.done
	h.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
