package sqlite_test

import (
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
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

// fileState is what a write would change in a directory: each file's
// name, size, time and content.
func fileState(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]string{}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		state[e.Name()] = fmt.Sprintf("%d bytes, %v, %x", fi.Size(), fi.ModTime().UnixNano(), sha256.Sum256(b))
	}
	return state
}

// ReadOnly reads a store that no process has open, as a user who may not
// write the file or its directory would: nothing is written, no -wal or
// -shm is created, and every write is ErrReadOnly. (As root, chmod does
// not stop a write: what is checked is that none is attempted.)
func TestReadOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tollgate.db")
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateThread(t.Context(), &checkpoint.Thread{ID: "t", Status: checkpoint.ThreadIdle, Messages: []byte("[]")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: "q", Kind: "approve"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	readOnlyFile(t, path)
	before := fileState(t, dir)
	if len(before) != 1 {
		t.Fatalf("after Close: %v, want the database alone", before)
	}

	for range 2 { // twice: the second finds what the first left, if anything
		s, err = sqlite.Open(t.Context(), path, &sqlite.Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("Open(ReadOnly): %v", err)
		}
		if th, err := s.LoadThread(t.Context(), "t"); err != nil || th.ID != "t" {
			t.Errorf("LoadThread: %v, %v", th, err)
		}
		if qs, _, err := s.ListQuestions(t.Context(), checkpoint.QuestionFilter{}); err != nil || len(qs) != 1 {
			t.Errorf("ListQuestions: %v, %v", qs, err)
		}
		if ths, _, err := s.ListThreads(t.Context(), checkpoint.ThreadFilter{}); err != nil || len(ths) != 1 {
			t.Errorf("ListThreads: %v, %v", ths, err)
		}
		if _, err := s.ListEvents(t.Context(), "", 0, 10); err != nil {
			t.Errorf("ListEvents: %v", err)
		}
		if _, err := s.ResolveQuestion(t.Context(), "t", "q", checkpoint.Resolution{Status: checkpoint.QuestionAborted, By: "x"}); !errors.Is(err, sqlite.ErrReadOnly) {
			t.Errorf("ResolveQuestion on a ReadOnly store: %v, want ErrReadOnly", err)
		}
		if _, err := s.AppendEvent(t.Context(), &checkpoint.Event{ThreadID: "t", Type: "x"}); !errors.Is(err, sqlite.ErrReadOnly) {
			t.Errorf("AppendEvent on a ReadOnly store: %v, want ErrReadOnly", err)
		}
		if after := fileState(t, dir); !maps.Equal(after, before) {
			t.Fatalf("Open(ReadOnly) changed the directory:\nbefore %v\nafter  %v", before, after)
		}
		s.Close()
		if after := fileState(t, dir); !maps.Equal(after, before) {
			t.Fatalf("Close of a ReadOnly store changed the directory:\nbefore %v\nafter  %v", before, after)
		}
	}
}

// A ReadOnly store beside a process that has the database open sees its
// commits as they are made, through the -wal it keeps.
func TestReadOnlyBesideWriter(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tollgate.db")
	w, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.CreateThread(t.Context(), &checkpoint.Thread{ID: "a", Status: checkpoint.ThreadIdle, Messages: []byte("[]")}); err != nil {
		t.Fatal(err)
	}
	r, err := sqlite.Open(t.Context(), path, &sqlite.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.LoadThread(t.Context(), "a"); err != nil {
		t.Errorf("a thread committed before Open(ReadOnly): %v", err)
	}
	if err := w.CreateThread(t.Context(), &checkpoint.Thread{ID: "b", Status: checkpoint.ThreadIdle, Messages: []byte("[]")}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.LoadThread(t.Context(), "b"); err != nil {
		t.Errorf("a thread committed after Open(ReadOnly): %v", err)
	}
}

// A database of an older schema is not migrated by MustExist or ReadOnly:
// it is ErrOlderSchema, and the file is left as it is, for the program
// that keeps the store to upgrade.
func TestMustExistOlderSchema(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tollgate.db")
	execSQL(t, path, migrationSQL(t, "0001_init.sql", "0002_microseconds.sql")+`
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT;
INSERT INTO schema_version VALUES (1, '0001_init.sql', 0), (2, '0002_microseconds.sql', 0);`)
	before := fileState(t, dir)
	for _, o := range []*sqlite.Options{{MustExist: true}, {ReadOnly: true}} {
		_, err := sqlite.Open(t.Context(), path, o)
		if !errors.Is(err, sqlite.ErrOlderSchema) || !strings.Contains(err.Error(), "schema version 2") {
			t.Errorf("Open(%+v) of a schema 2 database: %v, want ErrOlderSchema", *o, err)
		}
		t.Log(err)
		if after := fileState(t, dir); !maps.Equal(after, before) {
			t.Fatalf("Open(%+v) changed the directory:\nbefore %v\nafter  %v", *o, before, after)
		}
	}
	s, err := sqlite.Open(t.Context(), path, nil) // what serve does
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, o := range []*sqlite.Options{{MustExist: true}, {ReadOnly: true}} {
		s, err := sqlite.Open(t.Context(), path, o)
		if err != nil {
			t.Fatalf("Open(%+v) after the upgrade: %v", *o, err)
		}
		s.Close()
	}
}

// A database this process may not write: MustExist (to answer) says so
// before touching it, ReadOnly reads it. Not as root, whom chmod does not
// stop.
func TestMustExistNotWritable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("as root, a file's mode does not stop a write")
	}
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tollgate.db")
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	readOnlyFile(t, path)
	if _, err := sqlite.Open(t.Context(), path, &sqlite.Options{MustExist: true}); !errors.Is(err, sqlite.ErrReadOnly) {
		t.Errorf("Open(MustExist) of a read-only file: %v, want ErrReadOnly", err)
	}
	s, err = sqlite.Open(t.Context(), path, &sqlite.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("Open(ReadOnly) of a read-only file in a read-only directory: %v", err)
	}
	defer s.Close()
	if _, _, err := s.ListThreads(t.Context(), checkpoint.ThreadFilter{}); err != nil {
		t.Errorf("ListThreads: %v", err)
	}
}
