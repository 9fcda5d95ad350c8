-- tollgate checkpoint store, schema 8: runs that stopped with an error,
-- as several replicas (package cluster) see them.
--
-- A run that stops with an error (a model that fails, a store that
-- refused a write) was "failed" only on the replica that drove it, and
-- retried only by the ten-minute reconcile. A row here says it stopped,
-- why, how many times in a row, and when it is tried again (NULL: not
-- again, unless someone resumes it): every replica reads the same, and
-- the retry is a job scheduled at retry_at. The row goes when the run
-- gets on (it parks or finishes: the lease's release deletes it).

CREATE TABLE run_failures (
	thread_id text PRIMARY KEY,
	run_id    text NOT NULL,
	error     text NOT NULL,
	attempts  integer NOT NULL,
	failed_at timestamptz NOT NULL,
	retry_at  timestamptz
);
