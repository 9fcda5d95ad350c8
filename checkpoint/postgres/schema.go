package postgres

// The schema: migrations under an advisory lock, and the checks that
// the schema found is one this binary can write.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// migrate creates the schema if missing and applies the migrations it
// lacks, in one transaction under an advisory lock.
func (s *Store) migrate(ctx context.Context, migs []migration, mustExist bool) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", lockClass, s.schema+".migrate"); err != nil {
		return fmt.Errorf("postgres: migrate: lock: %w", err)
	}
	ident := pgx.Identifier{s.schema}.Sanitize()
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", s.schema).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	if !exists && mustExist {
		return fmt.Errorf("%w: database %q at %s has no schema %s (tollgate serve creates it when it first starts on the database)",
			ErrNoStore, s.cfg.Database, s.address(), s.schema)
	}
	if !exists {
		// Only when missing: a role without CREATE on the database can use
		// a schema made for it.
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
			return fmt.Errorf("postgres: create schema %s: %w", ident, err)
		}
	}
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+ident); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}

	var tables []string
	rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY c.relname`, s.schema)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	version := 0
	if slices.Contains(tables, "schema_version") {
		var comment *string
		if err := tx.QueryRow(ctx, "SELECT obj_description(to_regclass('schema_version'), 'pg_class')").Scan(&comment); err != nil {
			return fmt.Errorf("postgres: migrate: %w", err)
		}
		if comment == nil || *comment != marker {
			return fmt.Errorf("%w: schema %s has a schema_version table that is not tollgate's", ErrNotTollgate, s.schema)
		}
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_version").Scan(&version); err != nil {
			return fmt.Errorf("postgres: migrate: %w", err)
		}
	} else if len(tables) > 0 {
		shown := tables
		if len(shown) > 5 {
			shown = append(shown[:5:5], "...")
		}
		return fmt.Errorf("%w: schema %s holds other tables (%s); choose another schema", ErrNotTollgate, s.schema, strings.Join(shown, ", "))
	}
	if version == 0 && mustExist {
		return fmt.Errorf("%w: schema %s of database %q at %s is empty (tollgate serve creates its tables when it first starts on the database)",
			ErrNoStore, s.schema, s.cfg.Database, s.address())
	}
	if version > len(migs) {
		return fmt.Errorf("%w: schema %s is at version %d, this binary knows up to %d; upgrade tollgate", ErrNewerSchema, s.schema, version, len(migs))
	}
	if mustExist {
		if version < len(migs) {
			return s.olderSchema(version, len(migs))
		}
		if err := s.checkWritable(ctx, tx); err != nil {
			return err
		}
	}
	if version == len(migs) {
		if err := raiseSeqBase(ctx, tx, len(migs)); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	if version == 0 {
		if _, err := tx.Exec(ctx, `CREATE TABLE schema_version (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
			return fmt.Errorf("postgres: migrate: %w", err)
		}
		if _, err := tx.Exec(ctx, "COMMENT ON TABLE schema_version IS '"+marker+"'"); err != nil {
			return fmt.Errorf("postgres: migrate: %w", err)
		}
	}
	for _, m := range migs[version:] {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("postgres: migration %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_version (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			return fmt.Errorf("postgres: migration %s: %w", m.Name, err)
		}
	}
	if err := raiseSeqBase(ctx, tx, len(migs)); err != nil {
		return err
	}
	if testHookBeforeMigrationCommit != nil {
		testHookBeforeMigrationCommit(ctx, tx)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: migrate: commit: %w", err)
	}
	return nil
}

// raiseSeqBase keeps new numbers (events' seq, questions' seq and
// change_seq) above the stored ones: they are numbered from transaction
// ids (events.go), which start again from small numbers in another cluster
// (a dump restored there). Then base rises so that the next id numbers
// above the highest; otherwise nothing is written. It runs under the
// migration lock, before any writer of the restored store.
func raiseSeqBase(ctx context.Context, tx pgx.Tx, version int) error {
	if version < 5 { // seq_base comes with schema 5 (tests make older ones)
		return nil
	}
	const highest = `greatest((SELECT max(seq) FROM events), (SELECT max(seq) FROM questions), (SELECT max(change_seq) FROM questions))`
	// A read first: most Opens find nothing to do, and a program that
	// only answers (MustExist) need not be allowed to update seq_base.
	var behind bool
	err := tx.QueryRow(ctx, `SELECT coalesce(`+highest+` >= (pg_snapshot_xmax(pg_current_snapshot())::text::bigint + base) * 65536, false)
FROM seq_base`).Scan(&behind)
	if err == nil && behind {
		_, err = tx.Exec(ctx, `UPDATE seq_base SET base = `+highest+` / 65536 + 1 - pg_snapshot_xmax(pg_current_snapshot())::text::bigint`)
	}
	if err != nil {
		return fmt.Errorf("postgres: open: numbering: %w", err)
	}
	return nil
}

func (s *Store) olderSchema(version, known int) error {
	return fmt.Errorf("%w: schema %s of database %q at %s is at version %d, this tollgate needs %d; a program that keeps the store (tollgate serve) upgrades it when it opens it",
		ErrOlderSchema, s.schema, s.cfg.Database, s.address(), version, known)
}

// writtenTables are the tables a store writes, and how.
var writtenTables = []struct{ table, privilege string }{
	{"threads", "INSERT"}, {"threads", "UPDATE"}, {"messages", "INSERT"}, {"messages", "DELETE"},
	{"tool_calls", "INSERT"}, {"tool_calls", "UPDATE"},
	{"questions", "INSERT"}, {"questions", "UPDATE"}, {"events", "INSERT"},
}

// checkWritable refuses a session that cannot write the store: a
// read-only server (a standby) or session, or a role without the
// privileges.
func (s *Store) checkWritable(ctx context.Context, tx pgx.Tx) error {
	var ro string
	if err := tx.QueryRow(ctx, "SELECT current_setting('transaction_read_only')").Scan(&ro); err != nil {
		return fmt.Errorf("postgres: open: %w", err)
	}
	if ro == "on" {
		return fmt.Errorf("%w: the session of user %q on database %q at %s is read-only (a standby, or default_transaction_read_only)",
			ErrReadOnly, s.cfg.User, s.cfg.Database, s.address())
	}
	for _, t := range writtenTables {
		var ok bool
		// The privilege check of the current role: also when it has the
		// privileges through membership of another.
		if err := tx.QueryRow(ctx, "SELECT has_table_privilege(to_regclass($1), $2)", pgx.Identifier{s.schema, t.table}.Sanitize(), t.privilege).Scan(&ok); err != nil {
			return fmt.Errorf("postgres: open: %w", err)
		}
		if !ok {
			return fmt.Errorf("%w: user %q may not write table %s of schema %s (%s) in database %q at %s",
				ErrReadOnly, s.cfg.User, t.table, s.schema, t.privilege, s.cfg.Database, s.address())
		}
	}
	return nil
}

// check is what migrate does for a store opened ReadOnly, without a
// write or a lock: the schema is tollgate's, and at this binary's
// version. One read-only snapshot: a migration elsewhere is seen whole
// or not at all.
func (s *Store) check(ctx context.Context, known int) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("postgres: open: %w", err)
	}
	defer tx.Rollback(context.Background())
	var tables []string
	rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY c.relname`, s.schema)
	if err == nil {
		tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return fmt.Errorf("postgres: open: %w", err)
	}
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", s.schema).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: open: %w", err)
	}
	if !exists {
		return fmt.Errorf("%w: database %q at %s has no schema %s (tollgate serve creates it when it first starts on the database)",
			ErrNoStore, s.cfg.Database, s.address(), s.schema)
	}
	if !slices.Contains(tables, "schema_version") {
		if len(tables) > 0 {
			shown := tables
			if len(shown) > 5 {
				shown = append(shown[:5:5], "...")
			}
			return fmt.Errorf("%w: schema %s holds other tables (%s); choose another schema", ErrNotTollgate, s.schema, strings.Join(shown, ", "))
		}
		return fmt.Errorf("%w: schema %s of database %q at %s is empty (tollgate serve creates its tables when it first starts on the database)",
			ErrNoStore, s.schema, s.cfg.Database, s.address())
	}
	versionTable := pgx.Identifier{s.schema, "schema_version"}.Sanitize()
	var comment *string
	if err := tx.QueryRow(ctx, "SELECT obj_description(to_regclass($1), 'pg_class')", versionTable).Scan(&comment); err != nil {
		return fmt.Errorf("postgres: open: %w", err)
	}
	if comment == nil || *comment != marker {
		return fmt.Errorf("%w: schema %s has a schema_version table that is not tollgate's", ErrNotTollgate, s.schema)
	}
	var version int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+versionTable).Scan(&version); err != nil {
		return fmt.Errorf("postgres: open: %w", err)
	}
	switch {
	case version > known:
		return fmt.Errorf("%w: schema %s is at version %d, this binary knows up to %d; upgrade tollgate", ErrNewerSchema, s.schema, version, known)
	case version < known:
		return s.olderSchema(version, known)
	}
	return nil
}

// testHookBeforeMigrationCommit lets a test break the connection between
// the migration's statements and its commit.
var testHookBeforeMigrationCommit func(ctx context.Context, tx pgx.Tx)
