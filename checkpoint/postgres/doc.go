// Package postgres is a [checkpoint.Store] in PostgreSQL (pgx v5, pgxpool):
// tollgate's store for production and for several replicas sharing one
// database.
//
// Quick start:
//
//	store, err := postgres.Open(ctx, "postgres://tollgate@db/tollgate", &postgres.Options{Schema: "tollgate"})
//	if err != nil {
//		return err
//	}
//	defer store.Close()
//
// [Open] waits, quietly, for a database that is there but not ready yet
// (starting up, out of connection slots; with backoff, up to
// [Options].ConnectTimeout), and fails at once, with one line naming the
// server, when nothing listens there or its host name does not resolve
// ([ErrUnavailable]). It creates or upgrades the schema (default
// "tollgate") with migrations embedded in the binary, in one transaction
// under an advisory lock, so replicas starting together take turns. It
// refuses a schema migrated by a newer tollgate ([ErrNewerSchema]) and a
// schema holding someone else's tables ([ErrNotTollgate]); with
// [Options].MustExist, a schema it did not make ([ErrNoStore]).
//
// Every write is a single statement or one transaction: a connection that
// drops halfway leaves nothing half-written. Answers are a compare-and-set
// in one UPDATE, so with any number of replicas the first answer wins.
//
// Times are kept to the microsecond, from 4714 BC to AD 294247; a time
// outside that range is refused with an error, never stored as another.
//
// Notifications: a trigger calls pg_notify in the transaction that creates
// or resolves a question (channel "tollgate.<schema>"), so a subscriber in
// any process hears of it at commit. [Store.Subscribe] holds one listener
// connection that reconnects with backoff and then sends a
// [checkpoint.Resync] (re-list: something may have been missed); a slow
// poll ([Options].PollInterval) backs LISTEN up.
//
// Sequence numbers of events and question changes are taken under a lock
// held until commit, so they become visible in order: a reader following
// the event log by position (an SSE client resuming with Last-Event-ID)
// never skips an event that committed late.
package postgres
