// Package replicatest holds the multi-process test of several `tollgate
// serve` replicas on one PostgreSQL database (issue 14, "Done when"). It
// has no code of its own: everything is in its tests.
//
// TestReplicas builds the tollgate command, starts a fake OpenAI-compatible
// model in the test process (each replica gets its own base URL path, so
// the fake knows which replica called), and starts the replicas with the
// same store, policy and working directory. Each thread's prompt says
// "job N"; the fake's first turn asks the bash tool to append "job-N" and
// the time to a log file in the working directory, its second turn (once
// the conversation holds the tool's result) ends the run with a text. The
// policy asks a person about every such command: the threads the test
// means to leave unanswered get a command of another shape whose rule
// times out in 20 s; the others wait 10 minutes. The test posts every
// prompt, waits for every question, then answers through random replicas
// (approve most, deny some; a replica that refuses the connection is
// retried on another) while it SIGKILLs replica 1, restarts replica 2 with
// SIGTERM and later starts replica 1 again. When every thread is idle it
// checks the audit log, the questions, the tool's log file and the fake's
// record of model calls: every run finished, no question lost, no tool run
// twice or without approval, every deadline fired once, no turn's model
// call made twice (except one in flight on the killed replica, which the
// rescue repeats), and prints the figures.
//
// A run that stopped on an error writes a run_finished with the error:
// one cut off by a shutdown ("agent: run stopped: ...") is resumed and
// only counted; any other is a failed driver and fails the test. What the
// rescue legitimately repeats (a model call in flight on the killed
// replica, made again after the kill) and what it cuts off (a tool found
// executing, whose result then says the outcome is unknown) is printed,
// not failed. TestChecksCatch shows each check failing on a job where
// what it checks went wrong.
//
// TestEventsAcrossReplicas opens a stream of each thread on both of two
// replicas and checks that every event one replica writes reaches the
// other's stream within a second of its time.
//
// TestHooksAcrossReplicas sends coding agents' hooks (Claude Code's
// PreToolUse payload, as tollgate-hook sends it) to two replicas: a call
// asked on one is answered through the other; a hook whose replica is
// SIGKILLed while it waits sends the call again to the other replica,
// which finds the question asked before and hands the hook its answer;
// no call is asked twice.
//
// Run them (PostgreSQL as internal/pgtest finds it; with CI=true a missing
// PostgreSQL fails):
//
//	go test ./cluster/replicatest/ -v
//	TOLLGATE_REPLICA_THREADS=300 go test ./cluster/replicatest/ -run TestReplicas -v -timeout 30m
//
// The tests of disruption_test.go each disrupt three replicas one way
// (issue 22): TestDeadlinesWithTheLeaderKilled SIGKILLs River's leader
// before deadlines nobody answers (and holds its leadership) and checks
// every deadline fires once; TestOutage cuts the database away for a
// second (a proxy in the test process) while approved commands run and
// checks no command that ran is reported "outcome unknown" and no run
// stops with an error; TestReplicasWithTwoPolicies gives two replicas
// different policy files and checks /readyz says so, decisions name their
// policy, and --require-same-policy refuses to start. Each prints what it
// measured (deadline lateness, unknown outcomes).
//
// Environment: TOLLGATE_REPLICA_THREADS (threads per replica, default 20),
// TOLLGATE_REPLICAS (replicas, default 3; 1 checks the harness against the
// single-process host), TOLLGATE_REPLICA_SEED (the random plan, printed by
// every run), TOLLGATE_DEADLINE_THREADS (TestDeadlinesWithTheLeaderKilled,
// default 12), TOLLGATE_OUTAGE_THREADS (TestOutage, per replica, default
// 20), TOLLGATE_DEADLINE_HOLD=0 (TestDeadlinesWithTheLeaderKilled lets
// the killed leader's leadership expire, as it does, instead of holding
// it: to measure what a real kill costs), TOLLGATE_REPLICA_BIN (a
// tollgate binary to run instead of building this checkout's: an older
// one, to compare).
package replicatest
