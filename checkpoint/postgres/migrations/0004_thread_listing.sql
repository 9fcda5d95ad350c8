-- tollgate checkpoint store, schema 4: threads can be listed, newest first
-- and by status. Newest first is (created_at, id) read backwards; IDs in
-- byte order (COLLATE "C", as the statements say), so that the order of
-- threads created at the same instant does not depend on the database's
-- collation. A listing does not read messages (a conversation is TOASTed
-- out of the row when large), so the table stays as it is.

CREATE INDEX threads_by_created ON threads (created_at, id COLLATE "C");
CREATE INDEX threads_by_status ON threads (status, created_at, id COLLATE "C");
