//go:build linux

// Command bench measures tollgate end to end, each figure beside the raw
// limit of the same machine and database measured in the same run.
//
//	go run ./bench cycle -store memory|sqlite:PATH|postgres://... -loops 1,8,64 -n N \
//		[-thread-turns 1000] [-parked K] [-short] [-json] [-cpuprofile F -memprofile F]
//
// (The service benchmark, tollgate serve with many parked runs, is
// go run ./bench/service; the benchmarks of one run through the agent
// loop are go test -bench Run ./bench.)
//
// # The cycle
//
// One approval cycle, built through the public API as a user builds it
// (host.New with hitl's approval middleware over a checkpointed channel,
// provider/scripted's Demo model): a prompt on a new thread; the model
// proposes one bash call with about 1 KB of arguments (-arg-bytes); the
// policy's rule for bash asks; a goroutine subscribed to the host's events
// sees the question and approves it with [host.Host.Answer]; the tool (a
// trivial Go function, not idempotent, so it is claimed before it runs)
// runs; the model answers; the run ends. -loops L runs L such loops at
// once, each doing cycles back to back on new threads, for -n cycles in
// all (or -d), after a warm-up.
//
// Each store and loop count is measured in -rounds rounds (3). A round
// opens a fresh handle on the store and a fresh host, warms up, measures,
// and closes both; beside it run raw rounds: single-row insert
// transactions on the same database with the same durability, first from
// one goroutine, then from L. Cycle and raw rounds take turns at going
// first, and every figure printed is the median of the rounds, because on
// a shared machine the disk's flush time moves by 2-3x from one minute to
// the next: only figures measured side by side compare.
//
// The raw transaction:
//   - SQLite: BEGIN IMMEDIATE; INSERT of one row; COMMIT, on one
//     connection to a file of its own in the store's directory, in WAL
//     mode with synchronous=FULL (the store's defaults).
//   - PostgreSQL: one INSERT committed on its own (one round trip, one
//     WAL flush, as pgbench's simplest transaction) into a table of a
//     scratch schema on the same server, from a pool of as many
//     connections as loops (the store gets the same pool size, -pg-conns).
//   - memory: none.
//
// # The figures
//
//   - cycles/s, with the range of the rounds.
//   - writes and reads per cycle: the store calls made, counted by a
//     wrapping checkpoint.Store (-count-calls=false removes it), and by
//     method on a line of their own. A write is one durable write request
//     (a Commit of a batch, or a single-record write).
//   - commits per cycle: the database transactions that wrote. The
//     store's WriteStats().Transactions when it has the method (SQLite;
//     with group commit several writes share a transaction), else one
//     per write call (each is its own transaction). PostgreSQL adds, per
//     cycle and from the server: pg_stat_database.xact_commit (every
//     commit, read-only ones too), the transaction ids assigned (write
//     transactions and their subtransactions: a cross-check, not the
//     count), pg_stat_wal.wal_sync (WAL flushes: commits per flush is
//     what concurrent commits share), WAL bytes, and the server
//     processes' CPU time when the server runs on this machine. Those
//     are taken from the store's opening to its closing (a session's
//     statistics reach pg_stat_database only when it ends), so they
//     include the warm-up and are divided by warm-up plus measured
//     cycles; they are cluster-wide (but xact_commit), so run it on a
//     server of its own.
//   - answer→tool p50/p99: from host.Answer returning to the tool's
//     function being entered (0 when the tool started first; the table
//     says how often), and cycle p50/p99: from Prompt to the run's
//     RunFinishedEvent.
//   - CPU per cycle: the process's user+system time (getrusage), which for
//     SQLite includes the database; allocations per cycle: heap objects
//     (runtime.MemStats.Mallocs), the benchmark's own bookkeeping (a few
//     per cycle) included.
//
// # The ratio
//
//	ratio = cycles/s × commits per cycle ÷ raw commits/s at the same loops
//
// taken per round, against the raw rounds beside it, then the median. It
// is the share of the database's own commit rate that the cycles turn
// into tollgate commits: 1.0 means each tollgate commit costs what the
// cheapest durable transaction of that database costs, and cycles/s is
// then limited only by how many commits a cycle needs. A ratio well under
// 1 says where to look: time outside the database (CPU, locks, waiting
// for notifications) or transactions dearer than a single-row insert (more
// rows, indexes, triggers). With group commit, commits per cycle fall
// below writes per cycle and cycles/s can pass raw/writes.
//
// # -thread-turns T
//
// One thread, one run of T tool-call turns: scripted.Model calls read
// (allowed by the policy), which returns -result-bytes (4 KB), T times,
// then answers. At turns 10, 100, 500, 1000 (those up to T, and T) it
// prints the step time (median of the last ten steps: from one call
// starting to the next starting, i.e. storing the result, calling the
// model, storing its message and claiming the next call), the bytes
// written per step (SQLite: what this process wrote with write/pwrite,
// its WAL and checkpoints, from /proc/self/io; PostgreSQL: WAL bytes,
// pg_current_wal_insert_lsn), and the step's own new content (the JSON of
// the result and the model message it adds) beside it. A store whose cost
// is flat in the thread's length keeps step time and bytes constant.
//
// # -parked K
//
// K runs, prompted on one host, ask and get no answer, so they park. It
// prints the process's resident memory (VmRSS), heap and goroutines
// before and after (after a GC).
//
// # -short
//
// 24 cycles a round, two rounds, loops 1 and 4, raw rounds of 100ms, a
// thread of 20 turns and 20 parked runs (each can still be set): seconds,
// to check the benchmark still works.
// TestCycleShort runs it on memory, SQLite and PostgreSQL (the throwaway
// server of internal/pgtest, or TOLLGATE_TEST_POSTGRES) and checks that
// every cycle finished and commits were counted, never timings.
//
// -print FILE prints the tables of a report written with -json-file.
//
// # Profiles
//
// -cpuprofile F profiles the measured part of the last round of each
// store and loop count (F-KIND-LOOPS.ext when the run has several);
// -memprofile F writes the allocation profile before that part (F.base)
// and after it (F): go tool pprof -sample_index=alloc_objects -base F.base F.
package main
