package sqlite_test

import (
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
)

// MustExist opens a tollgate database that is there, and refuses anything
// else without creating a file.
func TestMustExist(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	must := &sqlite.Options{MustExist: true}

	missing := filepath.Join(dir, "typo.db")
	_, err := sqlite.Open(t.Context(), missing, must)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open(MustExist, missing file) = %v, want fs.ErrNotExist", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("Open(MustExist, missing file) created %v", entries)
	}

	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Open(t.Context(), empty, must); !errors.Is(err, sqlite.ErrNotTollgate) {
		t.Errorf("Open(MustExist, empty file) = %v, want ErrNotTollgate", err)
	}

	bare := filepath.Join(dir, "bare.db")
	db, err := sql.Open("sqlite", bare)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA user_version = 1"); err != nil { // an SQLite file with nothing in it
		t.Fatal(err)
	}
	db.Close()
	if _, err := sqlite.Open(t.Context(), bare, must); !errors.Is(err, sqlite.ErrNotTollgate) {
		t.Errorf("Open(MustExist, empty SQLite database) = %v, want ErrNotTollgate", err)
	}

	notes := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notes, []byte("not a database\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Open(t.Context(), notes, must); !errors.Is(err, sqlite.ErrNotTollgate) {
		t.Errorf("Open(MustExist, text file) = %v, want ErrNotTollgate", err)
	}

	if _, err := sqlite.Open(t.Context(), ":memory:", must); err == nil {
		t.Error("Open(MustExist, :memory:) succeeded")
	}

	real := filepath.Join(dir, "tollgate.db")
	s, err := sqlite.Open(t.Context(), real, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateThread(t.Context(), &checkpoint.Thread{ID: "t", Status: checkpoint.ThreadIdle, Messages: []byte("[]")}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlite.Open(t.Context(), real, must)
	if err != nil {
		t.Fatalf("Open(MustExist) of a tollgate database: %v", err)
	}
	defer s.Close()
	if _, err := s.LoadThread(t.Context(), "t"); err != nil {
		t.Errorf("LoadThread: %v", err)
	}
}
