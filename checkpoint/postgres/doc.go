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
// Notifications: a trigger calls pg_notify in the transaction that creates
// or resolves a question (channel "tollgate.<schema>"), so a subscriber in
// any process hears of it at commit. [Store.Subscribe] holds one listener
// connection that reconnects with backoff and then sends a
// [checkpoint.Resync] (re-list: something may have been missed); a slow
// poll ([Options].PollInterval) backs LISTEN up.
//
// Events are numbered from the id of the transaction that writes them, with
// no lock held to commit, so commits share WAL flushes (group commit); a
// reader returns only the events that no running transaction can precede,
// so one following the log by position (an SSE client resuming with
// Last-Event-ID) never skips an event that committed late (events.go says
// why). Questions' sequence numbers are taken under a lock held until
// commit, so their creation order is their commit order, as
// [checkpoint.Store.ListQuestions] and the listener's poll rely on.
package postgres
