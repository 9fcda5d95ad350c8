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

CREATE TABLE leases (
	thread_id  text PRIMARY KEY,
	epoch      bigint NOT NULL,
	owner      text NOT NULL,
	expires_at timestamptz NOT NULL
);

CREATE INDEX leases_expiry ON leases (expires_at);
CREATE INDEX leases_owner ON leases (owner);
