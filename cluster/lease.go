package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/host"
)

// The lease of a thread is its row in the store's leases table: the replica
// that drives the run, until when (the database's clock), and an epoch
// from one sequence. Every write of the run checks the epoch (a
// [postgres.Fence]), so a replica that lost the lease writes nothing
// more; and the replica cancels the run itself, model call and tool,
// before the store would let another replica take the lease (see
// Cluster.margin), so that two replicas never drive one thread at once.

// acquire takes the thread's lease when nobody holds it or its holder let
// it expire; a new epoch either way.
const acquire = `INSERT INTO leases AS l (thread_id, epoch, owner, expires_at)
VALUES ($1, nextval('lease_epochs'), $2, now() + $3 * interval '1 millisecond')
ON CONFLICT (thread_id) DO UPDATE SET epoch = excluded.epoch, owner = excluded.owner, expires_at = excluded.expires_at
WHERE l.expires_at < now()
RETURNING epoch`

// seize takes the thread's lease whoever holds it (an abort): a new
// epoch, so the holder's writes are refused from the next one on.
// The holder hears of it on the schema's seize channel (listenSeized).
const seize = `WITH s AS (
	INSERT INTO leases AS l (thread_id, epoch, owner, expires_at)
	VALUES ($1, nextval('lease_epochs'), $2, now() + $3 * interval '1 millisecond')
	ON CONFLICT (thread_id) DO UPDATE SET epoch = excluded.epoch, owner = excluded.owner, expires_at = excluded.expires_at
	RETURNING epoch
)
SELECT epoch FROM s, LATERAL (SELECT pg_notify($4, json_build_object('t', $1::text, 'e', s.epoch)::text)) n`

// release lets the thread go; nothing when the lease was taken over.
// The run got on (it parked, finished, or had nothing to do): a failure
// it had is over.
const release = `WITH f AS (DELETE FROM run_failures WHERE thread_id = $1
	AND EXISTS (SELECT 1 FROM leases WHERE thread_id = $1 AND epoch = $2))
DELETE FROM leases WHERE thread_id = $1 AND epoch = $2`

// releaseCut lets go of a run cut off (its replica shuts down): a failure
// it had stays, since it did not get on.
const releaseCut = `DELETE FROM leases WHERE thread_id = $1 AND epoch = $2`

// releaseFailed lets go of a run that stopped with an error and records
// the failure: one more attempt in a row, tried again after the backoff
// ($5 ms doubling with each attempt, at most $7 ms) while the attempts
// are fewer than $6, else not (retry_at NULL). Nothing, and no row, when
// the lease was taken over.
const releaseFailed = `WITH l AS (DELETE FROM leases WHERE thread_id = $1 AND epoch = $2 RETURNING thread_id)
INSERT INTO run_failures AS f (thread_id, run_id, error, attempts, failed_at, retry_at)
SELECT l.thread_id, $3, $4, 1, now(), CASE WHEN 1 < $6 THEN now() + least($5::bigint, $7::bigint) * interval '1 millisecond' END FROM l
ON CONFLICT (thread_id) DO UPDATE SET run_id = excluded.run_id, error = excluded.error,
	attempts = f.attempts + 1, failed_at = excluded.failed_at,
	retry_at = CASE WHEN f.attempts + 1 < $6
		THEN now() + least($5::bigint * (1::bigint << least(f.attempts, 30)), $7::bigint) * interval '1 millisecond' END
RETURNING attempts, retry_at`

// maxRetryWait bounds the wait between two tries of a failed run.
const maxRetryWait = 5 * time.Minute

// renew extends every lease this replica holds, in one statement, and
// says which it still holds.
const renew = `UPDATE leases SET expires_at = now() + $2 * interval '1 millisecond'
WHERE owner = $1 AND thread_id = ANY($3)
RETURNING thread_id, epoch`

// rescue takes the leases their replicas stopped renewing; one still
// locked (a write of its run in flight, or another replica's rescue)
// waits for the next round.
const rescue = `DELETE FROM leases WHERE thread_id IN (
	SELECT thread_id FROM leases WHERE expires_at < now() FOR UPDATE SKIP LOCKED)
RETURNING thread_id`

type lease struct {
	c        *Cluster
	threadID string
	epoch    int64
	// validUntil: the lease is trusted here until then, margin before
	// the database lets another replica take it (the time the renewal
	// or acquisition that set it was sent, plus ttl - margin). Under
	// Cluster.mu.
	validUntil time.Time

	mu      sync.Mutex
	lost    bool
	cancels []context.CancelFunc
}

// Acquire implements [host.Coordinator].
func (c *Cluster) Acquire(ctx context.Context, threadID string) (host.Lease, error) {
	return c.take(ctx, threadID, acquire)
}

// Seize implements [host.Coordinator]. The replica that held the lease
// finds it gone at its next renewal (within LeaseTTL/4) and cancels its
// run; what it writes before that is refused.
func (c *Cluster) Seize(ctx context.Context, threadID string) (host.Lease, error) {
	return c.take(ctx, threadID, seize, c.seizeChannel())
}

func (c *Cluster) take(ctx context.Context, threadID, sql string, more ...any) (host.Lease, error) {
	c.ensureRenewing()
	sent := time.Now()
	var epoch int64
	err := c.store.Pool().QueryRow(ctx, sql, append([]any{threadID, c.id, c.ttl.Milliseconds()}, more...)...).Scan(&epoch)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, host.ErrHeldElsewhere
	case err != nil:
		return nil, fmt.Errorf("cluster: taking the lease of thread %s: %w", threadID, err)
	}
	l := &lease{c: c, threadID: threadID, epoch: epoch, validUntil: sent.Add(c.ttl - c.margin)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.leases[threadID]; old != nil {
		// The host holds a thread once: an old lease here was let go of
		// without its row (a release that failed). Its epoch is dead.
		old.markLost()
	}
	c.leases[threadID] = l
	c.stats.Acquired++
	return l, nil
}

func (l *lease) Context(parent context.Context) context.Context {
	ctx, cancel := context.WithCancel(postgres.WithFence(parent, postgres.Fence{ThreadID: l.threadID, Epoch: l.epoch}))
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost {
		cancel()
	} else {
		l.cancels = append(l.cancels, cancel)
	}
	return ctx
}

func (l *lease) Lost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

func (l *lease) markLost() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost {
		return
	}
	l.lost = true
	for _, cancel := range l.cancels {
		cancel()
	}
	l.cancels = nil
}

// letGo forgets the lease here before its row is let go: no more writes
// under it.
func (l *lease) letGo() {
	c := l.c
	c.mu.Lock()
	if c.leases[l.threadID] == l {
		delete(c.leases, l.threadID)
	}
	c.mu.Unlock()
	l.mu.Lock()
	l.lost = true
	l.mu.Unlock()
}

func (l *lease) Release(ctx context.Context, cutOff bool) {
	c := l.c
	l.letGo()
	err := l.release(ctx, cutOff)
	c.mu.Lock()
	if err == nil {
		c.stats.Released++
	}
	c.mu.Unlock()
	if err != nil {
		// The row stays until it expires; then a replica rescues the run
		// (resuming it finds nothing to do when it had finished).
		c.log.Warn("tollgate: letting go of a thread's lease; it expires instead", "thread", l.threadID, "err", err)
	}
	// What was derived from the lease is done with.
	l.cancelAll()
}

func (l *lease) release(ctx context.Context, cutOff bool) error {
	pool := l.c.store.Pool()
	if !cutOff {
		_, err := pool.Exec(ctx, release, l.threadID, l.epoch)
		return err
	}
	// A run this replica could not finish (it shuts down): another
	// replica goes on with it, as soon as the lease is gone.
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, releaseCut, l.threadID, l.epoch); err != nil {
			return err
		}
		_, err := l.c.river.InsertTx(ctx, tx, driveArgs{ThreadID: l.threadID}, nil)
		return err
	})
	if err == nil {
		l.c.noticeJobs(ctx)
	}
	return err
}

// ReleaseFailed implements [host.FailingLease]: the thread is let go and
// its failure recorded, in one transaction with the job that tries the
// run again at its time (backoff doubling from Config.RetryAfter, for
// Config.Retries attempts in a row); every replica reads the failure
// (RunFailures).
func (l *lease) ReleaseFailed(ctx context.Context, runErr error) {
	c := l.c
	l.letGo()
	defer l.cancelAll()
	runID := ""
	if h := c.hostOf(); h != nil {
		if th, err := h.Store().LoadThread(ctx, l.threadID); err == nil {
			runID = th.RunID
		}
	}
	var attempts int
	var retryAt *time.Time
	err := pgx.BeginTxFunc(ctx, c.store.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
		msg := runErr.Error()
		if len(msg) > 4000 {
			msg = msg[:4000] + "..."
		}
		err := tx.QueryRow(ctx, releaseFailed, l.threadID, l.epoch, runID, strings.ToValidUTF8(msg, "?"),
			c.retryAfter.Milliseconds(), c.retries, maxRetryWait.Milliseconds()).Scan(&attempts, &retryAt)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil // taken over meanwhile: the new holder goes on
		case err != nil:
			return err
		case retryAt == nil:
			return nil
		}
		_, err = c.river.InsertTx(ctx, tx, driveArgs{ThreadID: l.threadID}, &river.InsertOpts{ScheduledAt: *retryAt})
		return err
	})
	c.mu.Lock()
	if err == nil {
		c.stats.Released++
	}
	c.mu.Unlock()
	switch {
	case err != nil:
		c.log.Warn("tollgate: letting go of a failed run's lease; it expires instead, and the run is taken over then", "thread", l.threadID, "err", err)
	case retryAt != nil:
		c.log.Warn("tollgate: run stopped with an error; it is tried again", "thread", l.threadID, "attempt", attempts, "of", c.retries, "at", retryAt.Format(time.RFC3339), "err", runErr)
	case attempts > 0:
		c.log.Error("tollgate: run stopped with an error again; not tried again: resume or abort it", "thread", l.threadID, "attempts", attempts, "err", runErr)
	}
}

// cancelAll ends what was derived from the lease.
func (l *lease) cancelAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, cancel := range l.cancels {
		cancel()
	}
	l.cancels = nil
}

// runFailures are the failures of threads nobody drives now.
const runFailures = `SELECT f.thread_id, f.error, f.attempts, f.failed_at, f.retry_at FROM run_failures f
WHERE f.thread_id = ANY($1)
AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.thread_id = f.thread_id AND l.expires_at > now())`

// RunFailures implements [host.FailureReader].
func (c *Cluster) RunFailures(ctx context.Context, threadIDs []string) (map[string]*host.RunFailure, error) {
	rows, err := c.store.Pool().Query(ctx, runFailures, threadIDs)
	if err != nil {
		return nil, fmt.Errorf("cluster: reading failed runs: %w", err)
	}
	out := map[string]*host.RunFailure{}
	for rows.Next() {
		var id string
		var f host.RunFailure
		var retry *time.Time
		if err := rows.Scan(&id, &f.Err, &f.Attempts, &f.At, &retry); err != nil {
			rows.Close()
			return nil, fmt.Errorf("cluster: reading failed runs: %w", err)
		}
		if retry != nil {
			f.RetryAt = *retry
		}
		out[id] = &f
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("cluster: reading failed runs: %w", err)
	}
	return out, nil
}

// renewLoop renews the replica's leases every ttl/4. A lease missing from
// the answer was taken over: its run is cancelled. A lease not renewed in
// time (renewals failing) is given up, and its run cancelled, at its
// validUntil, to the moment, before the store would let another replica
// take it.
func (c *Cluster) renewLoop(ctx context.Context) {
	defer c.loops.Done()
	t := time.NewTicker(c.ttl / 4)
	defer t.Stop()
	failing := false
	for {
		var expiry <-chan time.Time
		var timer *time.Timer
		if next := c.earliestValidity(); !next.IsZero() {
			timer = time.NewTimer(max(time.Until(next), 0))
			expiry = timer.C
		}
		var expired, tick bool
		select {
		case <-ctx.Done():
		case <-expiry:
			expired = true
		case <-t.C:
			tick = true
		}
		if timer != nil {
			timer.Stop()
		}
		switch {
		case expired:
			c.expireLocal()
			continue
		case !tick:
			return
		}
		err := c.renewOnce(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				c.log.Warn("tollgate: renewing leases", "err", err)
			}
			failing = true
		case err == nil && failing:
			c.log.Info("tollgate: renewing leases again")
			failing = false
		}
		c.expireLocal()
	}
}

// testHookRenew, when set, fails renewals (a database out of reach).
var testHookRenew atomic.Pointer[func() error]

func (c *Cluster) renewOnce(ctx context.Context) error {
	if hook := testHookRenew.Load(); hook != nil {
		if err := (*hook)(); err != nil {
			return err
		}
	}
	c.mu.Lock()
	held := make([]string, 0, len(c.leases))
	epochs := make(map[string]*lease, len(c.leases))
	for id, l := range c.leases {
		held = append(held, id)
		epochs[id] = l
	}
	c.mu.Unlock()
	sent := time.Now()
	if len(held) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, c.margin)
	defer cancel()
	rows, err := c.store.Pool().Query(rctx, renew, c.id, c.ttl.Milliseconds(), held)
	if err != nil {
		return err
	}
	kept := map[string]int64{}
	for rows.Next() {
		var id string
		var epoch int64
		if err := rows.Scan(&id, &epoch); err != nil {
			rows.Close()
			return err
		}
		kept[id] = epoch
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	for id, l := range epochs {
		if e, ok := kept[id]; ok && e == l.epoch && c.leases[id] == l {
			l.validUntil = sent.Add(c.ttl - c.margin)
		}
	}
	c.mu.Unlock()
	for id, l := range epochs {
		if e, ok := kept[id]; !ok || e != l.epoch {
			c.lose(l)
		}
	}
	return nil
}

// earliestValidity is the first validUntil of the leases held (zero:
// none).
func (c *Cluster) earliestValidity() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first time.Time
	for _, l := range c.leases {
		if first.IsZero() || l.validUntil.Before(first) {
			first = l.validUntil
		}
	}
	return first
}

// expireLocal cancels the runs of the leases that can no longer be
// trusted here (past their validUntil).
func (c *Cluster) expireLocal() {
	now := time.Now()
	c.mu.Lock()
	var all []*lease
	for _, l := range c.leases {
		if !now.Before(l.validUntil) {
			all = append(all, l)
		}
	}
	c.mu.Unlock()
	if len(all) > 0 {
		c.log.Error("tollgate: the leases could not be renewed in time; the runs driven here stop, and other replicas go on with them", "runs", len(all))
	}
	for _, l := range all {
		c.lose(l)
	}
}

// lose marks l lost and cancels its run, unless it was let go of
// meanwhile (a renewal that no longer finds a released lease).
func (c *Cluster) lose(l *lease) {
	c.mu.Lock()
	if c.leases[l.threadID] != l {
		c.mu.Unlock()
		return
	}
	delete(c.leases, l.threadID)
	c.stats.Lost++
	c.mu.Unlock()
	l.markLost()
}

// rescueLoop hands on, every ttl/2 or so, the runs of replicas that
// stopped renewing their leases: each expired lease is deleted and a job
// inserted to resume its run, in one transaction. Every replica does it;
// a lease is deleted once.
func (c *Cluster) rescueLoop(ctx context.Context) {
	defer c.loops.Done()
	for {
		wait := c.ttl/2 + time.Duration(rand.Int64N(int64(c.ttl/4)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		ids, err := c.rescueOnce(ctx)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("tollgate: rescuing the runs of stopped replicas", "err", err)
		}
		if n := len(ids); n > 0 {
			shown := ids[:min(n, 10)]
			c.log.Info("tollgate: resuming the runs of a replica that stopped", "runs", n, "threads", shown)
			c.mu.Lock()
			c.stats.Rescued += int64(n)
			c.mu.Unlock()
		}
	}
}

func (c *Cluster) rescueOnce(ctx context.Context) ([]string, error) {
	var rescued []string
	err := pgx.BeginTxFunc(ctx, c.store.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
		// This replica's row with its policy, in the same transaction.
		if err := c.beat(ctx, tx); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, rescue)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		if _, err = c.river.InsertManyTx(ctx, tx, driveJobs(ids)); err != nil {
			return err
		}
		rescued = ids
		return nil
	})
	if err == nil && len(rescued) > 0 {
		c.noticeJobs(ctx)
	}
	return rescued, err
}

// seizeChannel is the schema's channel of seized leases.
func (c *Cluster) seizeChannel() string { return "tollgate." + c.store.Schema() + ".seize" }

// listenSeized hears of leases seized by an abort on any replica and
// cancels, at once, the run here that held one: its tool is stopped now,
// not at the next renewal (which would find the lease gone too, should
// the notification be lost).
func (c *Cluster) listenSeized(ctx context.Context) {
	defer c.loops.Done()
	for wait := 100 * time.Millisecond; ctx.Err() == nil; wait = min(2*wait, 5*time.Second) {
		err := c.listenSeizedOnce(ctx, func() { wait = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("tollgate: listening for seized leases (renewals still find them)", "err", err, "again_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (c *Cluster) listenSeizedOnce(ctx context.Context, listening func()) error {
	// A connection of its own, not the pool's: one held from the pool
	// would keep the store's Close waiting for it.
	conn, err := pgx.ConnectConfig(ctx, c.store.Pool().Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{c.seizeChannel()}.Sanitize()); err != nil {
		return err
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var p struct {
			T string `json:"t"`
			E int64  `json:"e"`
		}
		if json.Unmarshal([]byte(n.Payload), &p) != nil {
			continue
		}
		c.mu.Lock()
		l := c.leases[p.T]
		c.mu.Unlock()
		if l != nil && l.epoch != p.E {
			c.lose(l)
		}
	}
}
