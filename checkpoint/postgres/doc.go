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
// Every write is one batch ([Store.Commit]; the single-record methods are
// batches of one): its statements go to the server together and run in one
// implicit transaction, one round trip and one WAL flush, all or nothing,
// so a connection that drops halfway leaves nothing half-written. A
// compare-and-set that loses (a thread's version, a claim, an answer)
// raises in the server and rolls the batch back. Answers are a
// compare-and-set in one UPDATE, so with any number of replicas the first
// answer wins. A thread's messages are rows: a batch inserts the ones it
// adds, whatever the thread holds; LoadThread reads them as one array in
// one statement.
//
// Times are kept to the microsecond, from 4714 BC to AD 294247; a time
// outside that range is refused with an error, never stored as another.
//
// Notifications: the store sends pg_notify for every question a batch
// creates or resolves (channel "tollgate.<schema>") right after the
// batch's COMMIT, in the same round trip, in a transaction of its own (a
// transaction that notifies holds a lock of PostgreSQL's across its
// commit's WAL flush, so notifying in the writing one would serialize the
// commits); a subscriber in any process hears of it once it is committed.
// [Store.Subscribe] holds one listener connection that reconnects with
// backoff and then sends a [checkpoint.Resync] (re-list: something may
// have been missed); a slow poll ([Options].PollInterval) backs LISTEN up.
//
// Events, and questions (their creation order and every change), are
// numbered from the id of the transaction that writes them, with no lock
// held to commit, so commits share WAL flushes (group commit); a reader
// returns only what no running transaction can precede, so one following
// the log by position (an SSE client resuming with Last-Event-ID) never
// skips an event that committed late (events.go says why), and a list of
// questions oldest first finds those created while it pages on its later
// pages.
package postgres
