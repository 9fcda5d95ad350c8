// Package crashtest holds the crash tests of the durable stores; it has no
// API. The test runs approval scenarios in a child process (the test
// binary, re-executed) on the SQLite and the PostgreSQL store, SIGKILLs the
// child at random moments, restarts it, answers the questions it leaves
// pending from the parent process, and checks at the end that no question
// was lost, no tool ran without an approval, no non-idempotent tool ran
// twice (counted in a ledger file outside the store) and every thread
// reached its end.
//
//	go test ./checkpoint/crashtest/                          # a few kills per store
//	TOLLGATE_CRASH_KILLS=200 go test -v ./checkpoint/crashtest/ # as CI runs it
package crashtest
