package sqlite_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
)

// latestSchema is the number of the last migration: the version a file
// is at once Open migrated it.
func latestSchema(t *testing.T) int {
	t.Helper()
	names, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(names) == 0 {
		t.Fatal(names, err)
	}
	return len(names)
}

// oldSchemaFile makes the file at path as an older tollgate left it: the
// named migrations applied, in order, and recorded, then rows.
func oldSchemaFile(t *testing.T, path, rows string, names ...string) {
	t.Helper()
	var versions []string
	for i, name := range names {
		versions = append(versions, fmt.Sprintf("(%d, '%s', 0)", i+1, name))
	}
	execSQL(t, path, migrationSQL(t, names...)+`
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT;
INSERT INTO schema_version VALUES `+strings.Join(versions, ", ")+`;
`+rows)
}

// migrationSQL is the text of the named migrations, one after the other:
// the schema an older tollgate made.
func migrationSQL(t *testing.T, names ...string) string {
	t.Helper()
	var schema strings.Builder
	for _, name := range names {
		b, err := os.ReadFile("migrations/" + name)
		if err != nil {
			t.Fatal(err)
		}
		schema.Write(b)
	}
	return schema.String()
}

// readOnlyFile makes the file at path, and its directory, read-only
// until the test ends (for a user who is not root).
func readOnlyFile(t *testing.T, path string) {
	t.Helper()
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
}

// execSQL runs statements on a file with a plain connection, as another
// program (or a future tollgate) would.
func execSQL(t *testing.T, path, stmts string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(stmts); err != nil {
		t.Fatalf("%s: %v", stmts, err)
	}
}

// openMigrated opens the store at path (migrating the file) and the file
// with a plain connection beside it, to read what the migration left;
// both are closed when the test ends.
func openMigrated(t *testing.T, path string) (*sqlite.Store, *sql.DB) {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return s, db
}
