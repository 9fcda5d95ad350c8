package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// Fence is the lease a run's writes are made under when several replicas
// share the store (package cluster): a [Store.Commit] whose context
// carries one ([WithFence]) checks, in its transaction and before its
// writes, that the thread's lease row still has that epoch, and fails
// with [ErrFenced] when it does not. The check holds the row's key (FOR
// KEY SHARE) until the commit, so a replica taking the lease over waits
// for the write, or the write sees the takeover: a replica that lost its
// lease writes nothing more.
type Fence struct {
	ThreadID string
	Epoch    int64
}

// ErrFenced: the write was made under a lease that was lost — another
// replica drives the thread now. Nothing of the batch was written.
var ErrFenced = errors.New("postgres: the lease this write was made under was lost (another replica drives the thread now)")

type fenceKey struct{}

// WithFence returns ctx with the lease every Commit made with it checks.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

func fenceFrom(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok
}

// checkFence raises (cas, SQLSTATE TGCAS) when the lease row with the
// epoch is gone; else it holds the row's key until the commit (FOR KEY
// SHARE: a takeover, which changes the epoch, a key, and a release, a
// delete, wait for it; a renewal does not).
const checkFence = `SELECT CASE WHEN count(*) = 0 THEN cas(0, 'lease') END
FROM (SELECT 1 FROM leases WHERE thread_id = $1 AND epoch = $2 FOR KEY SHARE) l`

// TxHook is called inside the transaction of every Commit it wants,
// after the batch's writes and before COMMIT, with the transaction and
// what the batch wrote; an error rolls the whole batch back. Package
// cluster inserts its River jobs with it, so that an answer and the job
// that resumes its run commit together, or neither does. A batch that
// loses a compare-and-set (or finds its question existing) is rolled back
// before the hook would run: InTx sees only what commits.
type TxHook struct {
	// Wants says whether InTx must run for the batch. Called for every
	// Commit: it must be cheap.
	Wants func(b *checkpoint.Batch) bool
	InTx  func(ctx context.Context, tx pgx.Tx, b *checkpoint.Batch, c *checkpoint.Committed) error
	// AfterCommit, when set, is called once the transaction InTx ran in
	// committed, and returns notifications to send then, with the
	// store's own: after the COMMIT, in a transaction of their own, so
	// that they hold no lock across the commit's WAL flush (a
	// transaction that notifies does), and a listener hears of nothing
	// that did not commit.
	AfterCommit func(b *checkpoint.Batch, c *checkpoint.Committed) []Notice
}

// Notice is a notification (pg_notify) a [TxHook] sends after a commit.
type Notice struct {
	Channel, Payload string
}

// SetTxHook installs h (nil removes it). Commits already under way keep
// the hook they started with.
func (s *Store) SetTxHook(h *TxHook) { s.txHook.Store(h) }

// Pool is the store's connection pool, for programs that keep their own
// tables beside tollgate's in the schema (the pool's search_path is the
// schema): package cluster's River tables.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// sendTx runs the batch in a transaction of pgx's, then the hook, then
// COMMIT, then the notifications: what commit does when a hook wants the
// batch. One round trip more than a pipeline (BEGIN) and the hook's own.
func (s *Store) sendTx(ctx context.Context, p *pipeline, notes *pgx.Batch, hook *TxHook) (*checkpoint.Committed, error) {
	b, out := p.b, p.out
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: commit: %w", err)
	}
	// Released before a lost compare-and-set is looked into (that reads
	// with a connection of its own: holding this one could leave a full
	// pool waiting on itself), and, whatever happens (a hook that
	// panics), never with the transaction open.
	released := false
	release := func() {
		if !released {
			released = true
			conn.Release()
		}
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		release()
		return nil, fmt.Errorf("postgres: commit: %w", err)
	}
	finished := false
	rollback := func() {
		finished = true
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		tx.Rollback(rctx)
		cancel()
	}
	defer func() {
		if !finished {
			rollback()
		}
		release()
	}()
	br := tx.SendBatch(ctx, &p.batch)
	failed := -1
	for i, st := range p.steps {
		if err = st.read(p, br); err != nil {
			failed = i
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		rollback()
		release()
		return failure(ctx, err, p, failed)
	}
	if err := hook.InTx(ctx, tx, b, out); err != nil {
		rollback()
		release()
		return nil, fmt.Errorf("postgres: commit: %w", err)
	}
	finished = true
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("postgres: commit: %w", err)
	}
	if hook.AfterCommit != nil {
		for _, n := range hook.AfterCommit(b, out) {
			notes.Queue(notifyNotice, n.Channel, n.Payload)
		}
	}
	if notes.Len() > 0 {
		if err := conn.SendBatch(ctx, notes).Close(); err != nil {
			// The batch is written; listeners still have the poll.
			s.logf(slog.LevelWarn, "checkpoint/postgres: a notification after a commit failed", "err", err)
		}
	}
	return nil, nil
}
