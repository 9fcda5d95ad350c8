// Package crashtest holds the crash tests of the durable stores; it has no
// API. The test runs approval scenarios in a child process (the test
// binary, re-executed) on the SQLite and the PostgreSQL store, SIGKILLs the
// child, restarts it, answers the questions it leaves pending from the
// parent process, and checks at the end that no question was lost or asked
// again (its creation time is the one the parent first saw, and the answer
// the parent won is the stored one), no tool ran without an approval, no
// non-idempotent tool ran twice (counted in a ledger file outside the
// store), deadlines held (late answers refused, timeouts recorded, also
// when the deadline passed while no child ran) and every thread reached
// its end.
//
// The kills aim at moments (a note executing, a question pending, an
// answer given while the child is down, a deadline passing while it is
// down, a transfer executing, a transfer's result written, a random
// moment), watched in the store and in the ledger, so that with enough
// kills every phase is reached whatever the machine's speed; the test
// fails if one is not. Some rounds run two children at once on the same
// threads: both wait on each question and race for the transfer's claim,
// which only one may win.
//
//	go test ./checkpoint/crashtest/                          # 25 kills per store
//	TOLLGATE_CRASH_KILLS=200 go test -v ./checkpoint/crashtest/ # as CI runs it
package crashtest
