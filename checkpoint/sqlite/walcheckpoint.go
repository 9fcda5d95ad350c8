package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"sync/atomic"
)

// The WAL's checkpoints run beside the writer, not in its commits.
//
// By SQLite's default (wal_autocheckpoint=1000) the connection whose
// COMMIT takes the WAL past 1,000 pages then copies the WAL into the
// database file and syncs it before that COMMIT returns: one commit in a
// few hundred waited for it, and that was the tail of every latency
// measured on SQLite (a coding agent's allowed hook call: p99 5.5 ms
// against a p90 of 2.1 ms; without the checkpoint in the commit, 3.2 ms —
// bench/README.md). So a goroutine with a connection of its own runs
// PRAGMA wal_checkpoint(PASSIVE) once checkpointEvery commits have been
// made since its last. PASSIVE waits for no lock and holds none that a
// writer or a reader waits for: the frames a reader still needs are left
// for the next checkpoint, as the automatic one leaves them. Durability
// does not change: a commit is durable in the WAL (synchronous=FULL syncs
// it at COMMIT); a checkpoint copies what is durable already.
//
// The WAL starts again from its beginning only when a write transaction
// begins with all of it copied. Between commits a moment apart (an
// agent's calls, a person's answers) the checkpointer is done by then;
// under commits back to back it never is, and the WAL would grow without
// end. So the writer's connection keeps an automatic checkpoint, at
// writerCheckpointPages rather than 1,000: it runs only under such a
// load, copies what the checkpointer has not (little), and lets the WAL
// start again.

// checkpointEvery is how many commits wait for a checkpoint: a few
// hundred pages of WAL (a commit writes a few), fewer than SQLite's
// 1,000-page default, so each checkpoint copies less.
const checkpointEvery = 64

// writerCheckpointPages is the writer connection's wal_autocheckpoint:
// the WAL's size, in pages, at which a commit checkpoints it itself.
const writerCheckpointPages = 2000

// walCheckpointer runs the WAL's checkpoints on a connection of its own.
type walCheckpointer struct {
	db      *sql.DB
	log     *slog.Logger
	commits atomic.Int64  // since the last checkpoint began
	runs    atomic.Int64  // checkpoints made
	wake    chan struct{} // capacity 1
	cancel  context.CancelFunc
	done    chan struct{}
}

func newWALCheckpointer(db *sql.DB, log *slog.Logger) *walCheckpointer {
	ctx, cancel := context.WithCancel(context.Background())
	c := &walCheckpointer{db: db, log: log, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go c.run(ctx)
	return c
}

// committed counts a commit of the writer; every checkpointEvery-th
// wakes the checkpointer (which does not block the writer).
func (c *walCheckpointer) committed() {
	if c.commits.Add(1) < checkpointEvery {
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *walCheckpointer) run(ctx context.Context) {
	defer close(c.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		}
		c.commits.Store(0)
		var busy, frames, copied int
		err := c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied)
		c.runs.Add(1)
		if err != nil && ctx.Err() == nil {
			// The next checkpoint copies what this one did not; SQLite
			// also checkpoints when the last connection closes.
			c.log.Warn("sqlite: checkpointing the WAL", "err", err)
		}
	}
}

// stop stops the checkpointer, interrupting a checkpoint under way (what
// it did not copy, the last connection to close does); the store closes
// its connection.
func (c *walCheckpointer) stop() {
	c.cancel()
	<-c.done
}
