-- tollgate checkpoint store, schema 1. Runs with search_path set to the
-- store's schema, inside the migration transaction. JSON columns are type
-- json (not jsonb): kept byte for byte as the caller wrote them, so a
-- reviewer approves exactly the arguments that will run.

CREATE TABLE threads (
	id         text PRIMARY KEY,
	version    bigint NOT NULL,
	status     text NOT NULL,
	run_id     text NOT NULL,
	messages   json,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);

CREATE TABLE tool_calls (
	thread_id  text NOT NULL,
	run_id     text NOT NULL,
	call_id    text NOT NULL,
	tool       text NOT NULL,
	args       json,
	state      text NOT NULL,
	result     json,
	updated_at timestamptz NOT NULL,
	PRIMARY KEY (thread_id, run_id, call_id)
);

-- seq orders questions by creation (the list cursor); change_seq is taken
-- on every write (creation, resolution) for pollers. Both are assigned by
-- the trigger below under a lock held until commit, so their order is
-- commit order: a reader that has seen n has seen everything below n.
CREATE SEQUENCE questions_seq;
CREATE SEQUENCE questions_change_seq;
CREATE TABLE questions (
	seq         bigint NOT NULL UNIQUE,
	thread_id   text NOT NULL,
	id          text NOT NULL,
	run_id      text NOT NULL,
	call_id     text NOT NULL,
	kind        text NOT NULL,
	payload     json,
	digest      text NOT NULL,
	status      text NOT NULL,
	answer      json,
	answered_by text NOT NULL,
	reason      text NOT NULL,
	created_at  timestamptz NOT NULL,
	deadline    timestamptz,
	resolved_at timestamptz,
	change_seq  bigint NOT NULL,
	PRIMARY KEY (thread_id, id)
);
-- The primary key serves lookups by thread. The reviewers' queue is the
-- pending questions: a partial index, which a resolution leaves (one index
-- write fewer per answer than an index on status).
CREATE INDEX questions_pending ON questions (seq) WHERE status = 'pending';
CREATE INDEX questions_by_change ON questions (change_seq);

CREATE SEQUENCE events_seq;
CREATE TABLE events (
	seq       bigint PRIMARY KEY,
	thread_id text NOT NULL,
	run_id    text NOT NULL,
	type      text NOT NULL,
	data      json,
	at        timestamptz NOT NULL
);
CREATE INDEX events_by_thread ON events (thread_id, seq);

-- Advisory locks: class 1416588396 (0x546F6C6C, "Toll"), object the hash
-- of schema and table, held to the end of the writing transaction.
CREATE FUNCTION questions_order() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	PERFORM pg_advisory_xact_lock(1416588396, hashtext(TG_TABLE_SCHEMA || '.questions'));
	IF TG_OP = 'INSERT' THEN
		NEW.seq := nextval('questions_seq');
	END IF;
	NEW.change_seq := nextval('questions_change_seq');
	RETURN NEW;
END $$;
CREATE TRIGGER questions_order BEFORE INSERT OR UPDATE ON questions
	FOR EACH ROW EXECUTE FUNCTION questions_order();

-- Listeners hear of every new or resolved question in the transaction that
-- writes it (delivered at commit): channel "tollgate.<schema>", payload
-- {"k": kind, "t": thread, "q": question, "s": change_seq}.
CREATE FUNCTION questions_notify() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
	payload text;
BEGIN
	IF TG_OP = 'UPDATE' AND OLD.status = NEW.status THEN
		RETURN NULL;
	END IF;
	payload := json_build_object(
		'k', CASE WHEN TG_OP = 'INSERT' THEN 'question_created' ELSE 'question_resolved' END,
		't', NEW.thread_id, 'q', NEW.id, 's', NEW.change_seq)::text;
	IF octet_length(payload) > 7900 THEN -- NOTIFY's limit is 8000 bytes
		payload := json_build_object('k', 'resync', 's', NEW.change_seq)::text;
	END IF;
	PERFORM pg_notify('tollgate.' || TG_TABLE_SCHEMA, payload);
	RETURN NULL;
END $$;
CREATE TRIGGER questions_notify AFTER INSERT OR UPDATE ON questions
	FOR EACH ROW EXECUTE FUNCTION questions_notify();

CREATE FUNCTION events_order() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	PERFORM pg_advisory_xact_lock(1416588396, hashtext(TG_TABLE_SCHEMA || '.events'));
	NEW.seq := nextval('events_seq');
	RETURN NEW;
END $$;
CREATE TRIGGER events_order BEFORE INSERT ON events
	FOR EACH ROW EXECUTE FUNCTION events_order();
