package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// The event log without a lock held to commit. (Questions are numbered
// the same way, seq and change_seq: ListQuestions oldest first and the
// listener's poll read up to the same horizon.)
//
// Readers follow the log by position: an SSE client resumes after the last
// seq it saw, a poller asks for seq > n. So a reader that has returned seq n
// must never see, later, an event with a lower seq: it would be skipped.
// Schema 1 gave that by numbering events under a lock held until commit,
// so that seq order was commit order; but every commit of a cycle carries
// events now, and a lock held across the WAL flush lets one committer
// flush at a time (no group commit).
//
// Schema 5 numbers an event from the id of the transaction that writes it:
//
//	seq = (xid8 + base) * 2^16 + index in the batch
//
// (pg_current_xact_id: 64 bits, never wraps; base is constant, see
// 0005_append_only.sql), so seq order is transaction id order, and a
// snapshot says which ids are settled: every transaction with an id below
// its xmin has ended (committed, and then visible in it, or rolled back),
// and every transaction that gets an id later gets one above. So with
//
//	horizon = (xmin of the reading statement's snapshot + base) * 2^16
//
// the events below the horizon that the statement sees are all the events
// below the horizon that will ever exist. A reader returns only those: it
// never returns seq n while an event below n can still commit. What it
// leaves out comes on a later call (its seq is above what it returned).
//
// Two refinements:
//
//   - A writer reads its own events at once: its transaction has ended,
//     but the horizon is held back by every older transaction still
//     running (other commits, each about one WAL flush long). When rows
//     above the horizon are visible, ListEvents polls (a few ms, at most
//     eventWait) until they come under it, and then returns what is safe.
//
//   - The snapshot's xmin is held back by any transaction of the cluster
//     that has an id, not only by tollgate's: another application's long
//     transaction, a session idle in transaction, a CREATE INDEX. That
//     must not stop the log. So every batch that numbers rows (events,
//     question writes) first takes a shared advisory lock (writersLock;
//     shared locks do not wait for each other), before its first write,
//     so before its transaction has an id. A reader that finds rows
//     withheld reads, in one statement, its snapshot's xmax X and the ids
//     of the transactions that hold that lock (pg_locks), L; then, in a
//     later statement, the rows. H = min(L ∪ {X}) is a horizon as good as xmin for that later
//     statement: take a numbered writer with id y < H. y < X, so it had its
//     id before the first statement's snapshot, so it held the lock since
//     then (lock first); when pg_locks was read it either still held it,
//     and then y ∈ L, so H <= y, which is not the case; or it had ended,
//     before the later statement's snapshot (each statement its own
//     transaction), which therefore sees it. And
//     a writer that takes the lock later gets an id above X. The reader
//     uses the larger of H and its own xmin. (pg_locks shows a
//     transaction's id a moment after the transaction gets it, so a
//     holder shown without one may have one below X: then the first
//     statement's xmin is H, no refinement that time. On a standby,
//     pg_locks does not show the primary's locks: there only xmin holds.)
//
// The 16 bits of index leave 47 for the id: 10^14 transactions, 44 years
// of a cluster committing 100,000 a second. Seqs stay below 2^53 (a
// JavaScript number) for the first 10^11 transactions after the schema.

// eventWait bounds how long ListEvents waits for events withheld by the
// horizon to come under it.
const eventWait = time.Second

// writersKey is the second key of the numbered writers' advisory lock
// (the first is lockClass): a hash of the schema, so that stores in two
// schemas do not hold each other's readers back.
func writersKey(schema string) int32 {
	h := fnv.New32a()
	h.Write([]byte(schema + ".writers"))
	return int32(h.Sum32())
}

// listEvents reads a page of events after the cursor and the horizon of
// its snapshot: xmin and base.
const (
	listEvents       = `SELECT ` + horizonCols + `, seq, thread_id, run_id, type, data, at FROM events WHERE seq > $1 ORDER BY seq LIMIT $2`
	listThreadEvents = `SELECT ` + horizonCols + `, seq, thread_id, run_id, type, data, at FROM events WHERE thread_id = $3 AND seq > $1 ORDER BY seq LIMIT $2`

	// numberedWriters is the refinement's first statement: its snapshot's
	// xmin and xmax, and for each holder of the numbered writers' lock its
	// transaction id (32 bits, as pg_locks has them; NULL when it has none
	// in the lock table), from one copy of the lock table.
	numberedWriters = `WITH l AS MATERIALIZED (
	SELECT locktype, virtualtransaction, classid, objid, objsubid, transactionid, mode, granted FROM pg_locks
	WHERE locktype IN ('advisory', 'transactionid')
)
SELECT pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint, pg_is_in_recovery(),
	array(SELECT x.transactionid::text::bigint FROM l a
		LEFT JOIN l x ON x.virtualtransaction = a.virtualtransaction AND x.locktype = 'transactionid' AND x.mode = 'ExclusiveLock' AND x.granted
		WHERE a.locktype = 'advisory' AND a.classid = $1::bigint::oid AND a.objid = $2::bigint::oid AND a.objsubid = 2)
FROM pg_current_snapshot() s`
)

// horizonCols are the horizon of a statement's snapshot, as columns of
// its rows: its xmin and base. A row numbered n is settled when
//
//	n < (max(xmin, writers) + base) * 65536
//
// where writers is writersHorizon's, read before the statement (0: none).
const horizonCols = `pg_snapshot_xmin(pg_current_snapshot())::text::bigint, (SELECT base FROM seq_base)`

func settled(n, xmin, base, writers int64) bool { return n < (max(xmin, writers)+base)*65536 }

// settle runs read, which reads a page and reports whether visible rows
// in it are not settled, with writers as above; while they are, it waits
// a little and reads again, after writersHorizon, for at most eventWait.
func (s *Store) settle(ctx context.Context, read func(writers int64) (unsettled bool, err error)) error {
	unsettled, err := read(0)
	if err != nil || !unsettled {
		return err
	}
	deadline := time.Now().Add(eventWait)
	pause := 500 * time.Microsecond
	for {
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		writers, err := s.writersHorizon(ctx, s.pool)
		if err != nil {
			return err
		}
		if unsettled, err = read(writers); err != nil || !unsettled {
			return err
		}
		if time.Now().After(deadline) {
			s.gaveUp.Add(1)
			return nil
		}
		pause = min(2*pause, 10*time.Millisecond)
	}
}

// ListEvents returns the events after the cursor that are settled (see
// above), waiting up to eventWait for those that are visible but not yet
// settled.
func (s *Store) ListEvents(ctx context.Context, threadID string, after int64, limit int) ([]*checkpoint.Event, error) {
	if limit <= 0 {
		limit = 1000
	}
	var evs []*checkpoint.Event
	err := s.settle(ctx, func(writers int64) (withheld bool, err error) {
		evs, withheld, err = s.readEvents(ctx, threadID, after, limit, writers)
		return withheld, err
	})
	if err != nil {
		return nil, unavailable(fmt.Errorf("postgres: list events: %w", err))
	}
	return evs, nil
}

// readEvents reads a page and keeps the events under the horizon: the
// larger of the snapshot's xmin and writers (a horizon in transaction ids
// that writersHorizon found before this statement; 0 for none). withheld
// says whether visible events were left out.
func (s *Store) readEvents(ctx context.Context, threadID string, after int64, limit int, writers int64) ([]*checkpoint.Event, bool, error) {
	query, args := listEvents, []any{after, limit}
	if threadID != "" {
		query, args = listThreadEvents, append(args, threadID)
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, false, err
	}
	var out []*checkpoint.Event
	withheld := false
	var xmin, base int64
	defer rows.Close()
	for rows.Next() {
		e := &checkpoint.Event{}
		var data []byte
		var at pgtype.Timestamptz
		if err := rows.Scan(&xmin, &base, &e.Seq, &e.ThreadID, &e.RunID, &e.Type, &data, &at); err != nil {
			return nil, false, err
		}
		if !settled(e.Seq, xmin, base, writers) {
			// Ordered by seq: every later row is above the horizon too.
			withheld = true
			break
		}
		e.Data, e.At = decJSON(data), decTime(at)
		out = append(out, e)
	}
	return out, withheld, rows.Err()
}

// writersHorizon is the refinement's horizon, in transaction ids: the
// lowest id of a numbered writer still running, or the snapshot's xmax when
// none runs; 0 (no refinement) on a standby.
//
// A transaction enters the lock table's transactionid rows just after it
// gets its id (AssignTransactionId), so a writer that got its id before
// the snapshot may, for a moment, show no id in pg_locks. A writer without
// an id there is most often one that has none yet (it will get one above
// xmax), but cannot be told apart from that one: then the statement's own
// xmin is the horizon (no refinement this time; ListEvents tries again).
func (s *Store) writersHorizon(ctx context.Context, q querier) (int64, error) {
	var xmin, xmax int64
	var standby bool
	var ids []pgtype.Int8
	rows, err := q.Query(ctx, numberedWriters, int64(lockClass), int64(uint32(s.writersKey)))
	if err == nil {
		_, err = pgx.ForEachRow(rows, []any{&xmin, &xmax, &standby, &ids}, func() error { return nil })
	}
	if err != nil {
		return 0, fmt.Errorf("numbered writers: %w", err)
	}
	if standby {
		return 0, nil
	}
	h := xmax
	for _, id := range ids {
		if !id.Valid {
			return xmin, nil
		}
		// pg_locks has the low 32 bits: the full id is the one at most
		// 2^31 below xmax (running transactions are never farther apart).
		// An id at or above xmax came after the snapshot: no bound.
		d := int64(uint32(uint64(xmax) - uint64(id.Int64)))
		if d > 0 && d <= 1<<31 {
			h = min(h, xmax-d)
		}
	}
	return h, nil
}
