-- tollgate checkpoint store, schema 9: the replicas (package cluster)
-- and the policy each decides by.
--
-- Replicas with different policies decide the same call differently
-- depending on which one drives the run (a blocking one blocked calls a
-- person had approved; a lenient one allowed what the others ask about),
-- and nothing said so. Each replica keeps its row here, renewed with its
-- rescue round, with the digest of the policy it decides by; each
-- compares the others' with its own, warns when they differ, and refuses
-- to start when told to (tollgate serve --require-same-policy).

CREATE TABLE replicas (
	id            text PRIMARY KEY,
	policy_digest text NOT NULL,
	started_at    timestamptz NOT NULL,
	seen_at       timestamptz NOT NULL
);
