// Package sqlite is a [checkpoint.Store] in one SQLite file: tollgate's
// embedded default. It uses modernc.org/sqlite (pure Go; builds with
// CGO_ENABLED=0).
//
// Quick start:
//
//	store, err := sqlite.Open(ctx, "tollgate.db", nil)
//	if err != nil {
//		return err
//	}
//	defer store.Close()
//
// Durability: WAL mode with synchronous=FULL by default, so a question or
// an answer that a call returned is on disk and survives a crash or a power
// cut ([Options].Synchronous trades that for speed). All writes go through
// one connection, by one goroutine, in BEGIN IMMEDIATE transactions; reads
// use a pool and run beside the writer. Writes that wait for the writer
// share its next transaction (group commit: each batch in a savepoint of
// its own, each caller answered once the COMMIT is durable), so that
// concurrent runs share the disk's syncs; [Store.WriteStats] counts them.
// A deferrable batch ([checkpoint.Batch].Deferrable) that finds no other
// write waiting is held up to 2 ms for the next one to share its sync.
// Several processes may open the same file: writes take turns (waiting up
// to [Options].BusyTimeout), compare-and-set holds across them, and a
// subscriber sees other processes' questions and answers within
// [Options].PollInterval (its own store's at once).
//
// The audit log (events) is append-only for every writer of the file:
// triggers refuse a DELETE, an UPDATE and an INSERT that numbers its own
// row, so that an event's seq, one above the highest before it, is never
// given twice (schema 11; docs/ARCHITECTURE.md has the argument).
// Questions are kept the same way: a question is never deleted nor
// created again, what it asks never changes, and a resolved one is final
// (schema 13), so a resolution and its event stay about the call that was
// asked.
//
// A thread's messages are rows, one per message, appended by
// [Store.Commit] and never rewritten: a step writes what it adds, however
// long the thread. [Store.LoadThread] reads them in one statement.
//
// Times are kept to the microsecond, as PostgreSQL keeps them, from
// 290308 BC to AD 294247 (so a deadline centuries away is kept as given); a
// time outside that range is refused with an error, never stored as
// another.
//
// The schema is created and upgraded on [Open] by migrations embedded in
// the binary, in one transaction, and tracked in a schema_version table. A
// file that is not a tollgate database ([ErrNotTollgate]) or whose schema is
// newer than the binary knows ([ErrNewerSchema]) is refused and left
// untouched. ":memory:" opens a private in-memory database (one connection,
// gone on Close) for tests and examples.
package sqlite
