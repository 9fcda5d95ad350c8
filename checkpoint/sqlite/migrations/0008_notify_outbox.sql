-- tollgate checkpoint store, schema 8: the notifications' outbox (package
-- notify). The events of the log are its first half: each question asked
-- or resolved, each run that failed, commits with its event; a notifier
-- turns the events after notify_cursor.seq into deliveries, one per
-- destination, and moves the cursor on in the same transaction
-- (checkpoint.Outbox), then sends them, retrying with backoff, until each
-- is delivered or dead. A delivery's id is its idempotency key (a
-- webhook's webhook-id): the same across tries and restarts.
--
-- No secret is kept here: a delivery is signed (webhooks) or given its
-- one-time links (Slack, mail) when it is sent.

CREATE TABLE notify_deliveries (
	id          TEXT PRIMARY KEY,
	event       TEXT NOT NULL,
	thread_id   TEXT NOT NULL,
	question_id TEXT NOT NULL,
	channel     TEXT NOT NULL,
	target      TEXT NOT NULL,
	payload     TEXT,
	state       TEXT NOT NULL,
	attempts    INTEGER NOT NULL DEFAULT 0,
	next_at     INTEGER,
	last_error  TEXT NOT NULL DEFAULT '',
	result      TEXT NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL
) STRICT;

CREATE INDEX notify_deliveries_due ON notify_deliveries (next_at) WHERE state = 'pending';
CREATE INDEX notify_deliveries_state ON notify_deliveries (state, updated_at);

CREATE TABLE notify_cursor (
	one INTEGER PRIMARY KEY CHECK (one = 1),
	seq INTEGER NOT NULL
) STRICT;
