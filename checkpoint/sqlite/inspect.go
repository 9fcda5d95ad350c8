package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var sqliteHeader = []byte("SQLite format 3\x00")

// inspect refuses a file that exists and is not a tollgate database, or
// whose schema is newer than known, without writing to it; with
// mustExist, also a file that is not there, holds no tollgate database or
// has an older schema, and unless readOnly, one this process may not
// write.
func inspect(ctx context.Context, abs string, known int, busy time.Duration, mustExist, readOnly bool) error {
	f, err := os.Open(abs)
	if errors.Is(err, fs.ErrNotExist) {
		if mustExist {
			return fmt.Errorf("sqlite: no database at %s: %w", abs, fs.ErrNotExist)
		}
		return nil // created on open
	}
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	head := make([]byte, len(sqliteHeader))
	n, err := io.ReadFull(f, head)
	f.Close()
	if n == 0 && (err == io.EOF) {
		if mustExist {
			return fmt.Errorf("%w: %s is an empty file", ErrNotTollgate, abs)
		}
		return nil // an empty file is an empty database
	}
	if err != nil && err != io.ErrUnexpectedEOF || !bytes.Equal(head[:n], sqliteHeader) {
		return fmt.Errorf("%w: %s is not an SQLite file", ErrNotTollgate, abs)
	}
	if mustExist && !readOnly {
		// Opening the file for writing changes nothing in it (nor its
		// times); SQLite would fall back to reading it without a word,
		// and fail at the first write.
		f, err := os.OpenFile(abs, os.O_RDWR, 0)
		if err != nil {
			if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
				return fmt.Errorf("%w: %s may not be written by this process: %w", ErrReadOnly, abs, err)
			}
			return fmt.Errorf("sqlite: %w", err)
		}
		f.Close()
	}

	// Read-only, and no pragma that writes (busy_timeout only waits for
	// another process migrating the file). For ReadOnly, as the store's
	// connections will be: creating nothing beside the file either.
	params := url.Values{"mode": {"ro"}}
	if readOnly {
		if params, err = readOnlyParams(abs); err != nil {
			return err
		}
	}
	params["_pragma"] = []string{"busy_timeout(" + strconv.FormatInt(busy.Milliseconds(), 10) + ")"}
	db, err := sql.Open("sqlite", fileURI(abs, params))
	if err != nil {
		return fmt.Errorf("sqlite: inspect %s: %w", abs, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	// One read transaction: the header (application_id) and the tables
	// must come from the same moment, or another process migrating the
	// file in between makes a new tollgate database look like something
	// else's (tables without the application_id).
	var st dbState
	tx, err := db.BeginTx(ctx, nil)
	if err == nil {
		st, err = readState(ctx, tx)
		tx.Rollback()
	}
	if corrupt(err) {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, abs, err)
	}
	if err != nil {
		return openError(abs, fmt.Errorf("sqlite: inspect %s: %w", abs, err))
	}
	if mustExist && st.appID == 0 && len(st.tables) == 0 {
		return fmt.Errorf("%w: %s is an empty SQLite database", ErrNotTollgate, abs)
	}
	if err := st.check(abs, known); err != nil {
		return err
	}
	if mustExist {
		return st.current(abs, known)
	}
	return nil
}

// current refuses a tollgate database whose schema is older than known
// (or that has no tables yet: a file whose creation did not finish).
func (st dbState) current(name string, known int) error {
	if st.version < known {
		return fmt.Errorf("%w: %s has schema version %d, this tollgate needs %d; a program that keeps the store (tollgate serve) upgrades it when it opens it",
			ErrOlderSchema, name, st.version, known)
	}
	return nil
}

// dbState is what decides whether a database may be opened.
type dbState struct {
	appID   int64
	tables  []string // user tables
	version int      // schema version, 0 when none
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func readState(ctx context.Context, q querier) (dbState, error) {
	var st dbState
	if err := q.QueryRowContext(ctx, "PRAGMA application_id").Scan(&st.appID); err != nil {
		return st, err
	}
	rows, err := q.QueryContext(ctx, "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
	if err != nil {
		return st, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return st, err
		}
		st.tables = append(st.tables, name)
	}
	if err := rows.Err(); err != nil {
		return st, err
	}
	if st.appID == applicationID && slices.Contains(st.tables, "schema_version") {
		var v sql.NullInt64
		if err := q.QueryRowContext(ctx, "SELECT max(version) FROM schema_version").Scan(&v); err != nil {
			return st, err
		}
		st.version = int(v.Int64)
	}
	return st, nil
}

func (st dbState) check(name string, known int) error {
	switch {
	case st.appID == applicationID:
		if st.version > known {
			return fmt.Errorf("%w: %s has schema version %d, this binary knows up to %d; upgrade tollgate", ErrNewerSchema, name, st.version, known)
		}
		return nil
	case st.appID == 0 && len(st.tables) == 0:
		return nil // a new, empty database
	case st.appID != 0:
		return fmt.Errorf("%w: %s belongs to another application (SQLite application_id %#x)", ErrNotTollgate, name, st.appID)
	default:
		shown := st.tables
		if len(shown) > 5 {
			shown = append(shown[:5:5], "...")
		}
		return fmt.Errorf("%w: %s is an SQLite database of something else (tables %s)", ErrNotTollgate, name, strings.Join(shown, ", "))
	}
}
