-- tollgate checkpoint store, schema 2: times become Unix microseconds (UTC),
-- as PostgreSQL keeps them. Nanoseconds in a 64-bit integer end in 2262,
-- and a deadline may be later than that (a timeout of the largest Go
-- duration is 292 years); microseconds reach AD 294247.
--
-- x / 1000 rounds toward zero; minus one for a negative remainder makes it
-- round down (toward the past), as the store rounds a time it writes.
-- schema_version.applied_at stays in nanoseconds: it is written by the
-- migration step itself, for people, and never read back.

UPDATE threads SET
	created_at = created_at / 1000 - (created_at % 1000 < 0),
	updated_at = updated_at / 1000 - (updated_at % 1000 < 0);

UPDATE tool_calls SET
	updated_at = updated_at / 1000 - (updated_at % 1000 < 0);

UPDATE questions SET
	created_at = created_at / 1000 - (created_at % 1000 < 0),
	deadline = deadline / 1000 - (deadline % 1000 < 0),
	resolved_at = resolved_at / 1000 - (resolved_at % 1000 < 0);

UPDATE events SET
	at = at / 1000 - (at % 1000 < 0);
