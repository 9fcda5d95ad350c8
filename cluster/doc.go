// Package cluster lets several tollgate replicas (processes, machines)
// share one PostgreSQL store: any replica takes any answer, any replica
// resumes any run, a replica that dies loses nothing, and a deadline
// fires once whatever restarts. It is a [host.Coordinator] built on River
// (github.com/riverqueue/river), the PostgreSQL job queue; the runs are
// the host's, so there is one run loop, the agent's.
//
//	store, _ := postgres.Open(ctx, dsn, nil)
//	c, _ := cluster.New(ctx, cluster.Config{Store: store})
//	h, _ := host.New(host.Config{Store: store, Coordinator: c, Agent: ...})
//	_ = h.Start(ctx)            // starts c too
//	...
//	h.Shutdown(ctx); c.Close()
//
// # Jobs, committed with what they follow
//
// River's jobs, in tollgate's schema, are what makes runs go on:
//   - an answer (or a timeout) commits in one transaction with a job that
//     resumes its run (the store's [postgres.TxHook], River's InsertTx on
//     the store's transaction): no answer is ever recorded without its
//     resume, nor a resume without its answer;
//   - a deadline is fired by every replica's host from the store (one
//     indexed read of the earliest pending deadlines, again on each new
//     question): the compare-and-set an answer makes lets one of them win
//     (none, if an answer came first), and its commit carries the job that
//     resumes the run. No deadline waits for one replica, River's leader
//     (whose scheduler alone makes scheduled jobs available), to be alive;
//   - a replica that lets go of a run it could not finish (shutting down)
//     commits a job with the release, and another replica goes on.
//
// Whichever replica works the job drives the run; each job's commit is
// followed by a notification, so that replicas fetch it at once. A run
// that waits for a person holds nothing on any replica: its question and
// its thread are rows. Questions reach every replica's event streams
// at once (the store's notifications); other events by each replica's
// poll of the log.
//
// What no lease can do: a replica that is frozen (SIGSTOP, a paused
// virtual machine) while its tool runs cannot stop that tool's process;
// it may finish after another replica took the run over, though nothing
// it writes is recorded.
//
// # One driver per thread: a lease with fencing
//
// A replica drives a thread's run only under its lease: a row naming the
// replica, until when (the database's clock), and an epoch from one
// sequence. River's unique jobs are not enough for this: they keep two
// jobs from being queued, not two replicas from running one (a job rescued
// from a replica that is only slow runs again while the first still runs).
// The lease is:
//   - taken only when free or expired, with a new epoch;
//   - renewed by the replica every LeaseTTL/4, for all its runs in one
//     statement; one it no longer holds is cancelled at once;
//   - fenced: every write of the run checks, in its transaction, that the
//     row with its epoch still exists, and holds it until the commit, so a
//     replica that lost the lease writes nothing more ([postgres.Fence]);
//   - given up early: a replica whose renewals fail cancels each run (the
//     model call, the tool) LeaseTTL/5 before the database could let
//     another replica take its lease (timed from when the last renewal
//     that succeeded was sent), so two replicas never call the model or
//     run a tool for one thread at the same time.
//
// # Aborts
//
// An abort, given to any replica (or a command line on the database),
// seizes the thread's lease from whichever replica drives it
// ([host.Coordinator] Seize): that replica hears at once (a notification,
// else its next renewal) and stops its run, model call and tool; whatever
// it still writes is refused by the fence; the abort's own writes are
// fenced by the seized lease.
//
// # Rescue
//
// Every replica looks, about every LeaseTTL/2, for leases that expired (a
// replica that died, or froze): each is deleted and a job inserted to
// resume its run, in one transaction. The replica that works it resumes
// the run under the agent's at-most-once rule: a tool found executing is
// not run again unless it is idempotent; its result says it was cut off.
//
// Once at start-up and every ReconcileEvery, one replica (River's leader)
// also resumes unfinished runs that nothing holds and that wait for no
// answer (an answer written by a program that inserted no job, a failed
// run whose retry is late).
//
// # Failed runs
//
// A run that stops with an error (a model that fails) is recorded where
// every replica reads it ([Cluster.RunFailures], a row with the error,
// the failures in a row and when it is tried again), as its lease is let
// go, in one transaction with a job scheduled then: every replica's
// [host.Host.States] says failed, and the run is tried again with
// backoff (Config.RetryAfter, doubling) up to Config.Retries times in a
// row; then it stays failed for a person to resume or abort. A run that
// gets on (it parks, or ends) clears its record.
//
// # Policies
//
// Each started replica keeps a row with the digest of the policy it
// decides by (Config.PolicyDigest), renewed with its rescue round, and
// compares the live replicas' with its own: when one differs, it logs an
// error, [Cluster.PolicyMismatch] says which (tollgate serve's /readyz),
// and the metric tollgate_cluster_policy_mismatch counts them; with
// Config.RequireSamePolicy, Start refuses ([ErrPolicyMismatch]).
//
// # The database out of reach
//
// A replica whose database goes away for a moment keeps its runs while
// their leases can be trusted: a tool's result is written once the
// database is back (package agent), and a run stopped by the outage goes
// on from the store (package host), under the same lease; the fence keeps
// whatever is written after a lease was lost from being recorded.
//
// # Answers from other programs
//
// A program that answers questions on the store without being a replica
// (a command line) builds a Cluster and never starts it: New installs the
// hook, so its answers commit with their jobs.
package cluster
