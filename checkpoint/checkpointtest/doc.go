// Package checkpointtest is the conformance suite for [checkpoint.Store]: the
// definition of a store. Every store's own test is a few lines that call
// [Run] (and [RunShared] when two handles can open the same data, as two
// processes on one SQLite file or one PostgreSQL schema do):
//
//	func TestConformance(t *testing.T) {
//		checkpointtest.Run(t, func(t *testing.T) checkpoint.Store {
//			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db"), nil)
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// The suite is split by area, one file each: threads, listing threads,
// tool calls, questions, the queue (listing and counting questions:
// filters, orders, cursors), events, times, JSON, notifications and
// concurrency. Errors are compared with [errors.Is] only. Times are
// compared to the microsecond (PostgreSQL keeps no more); JSON is compared
// byte for byte, because a reviewer must approve exactly the arguments
// that will run.
package checkpointtest
