-- tollgate checkpoint store, schema 6: leases, so that several replicas
-- (package cluster) drive each thread one at a time.
--
-- A row says which replica drives the thread's run now, until when, and
-- under which epoch. Epochs come from one sequence, so a lease taken after
-- another (even after its row was deleted) has a greater number: a write
-- made under a lease checks that the row with its epoch still exists (see
-- Fence), and a replica whose lease was taken over cannot write. A row
-- exists only while a replica drives the thread; rows whose replica
-- stopped renewing them expire and are rescued.

CREATE SEQUENCE lease_epochs;

--
-- The fence takes FOR KEY SHARE, and epoch is a key (unique): a takeover
-- (which sets a new epoch) and a release (a delete) wait for the writes
-- in flight, while a renewal (expires_at only) does not — one slow commit
-- must not hold up the renewal of every lease of its replica. Nothing
-- indexes expires_at, so that a renewal is a HOT update; the table holds
-- only the threads being driven, and the rescue's scan of it is short.

CREATE TABLE leases (
	thread_id  text PRIMARY KEY,
	epoch      bigint NOT NULL UNIQUE,
	owner      text NOT NULL,
	expires_at timestamptz NOT NULL
);

-- The runs nothing would resume (package cluster's reconcile): unfinished
-- threads in id order, each checked for a pending question.
CREATE INDEX threads_running ON threads (id) WHERE status = 'running';
CREATE INDEX questions_pending_by_thread ON questions (thread_id) WHERE status = 'pending';
