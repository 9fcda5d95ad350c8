package sqlite_test

import (
	"database/sql"
	"testing"
)

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
