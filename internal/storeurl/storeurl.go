// Package storeurl opens a checkpoint store named by a string, as the
// command line takes it: "memory", "sqlite:PATH" (or a path ending in .db),
// "postgres://..." / "postgresql://...".
//
// [Open] is for the commands that keep a store (serve, run): it creates
// what is missing. [OpenExisting] is for those that read or answer what
// they wrote: a store that is not there is an error, and nothing is
// created.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
)

// ConnectTimeout is how long opening a PostgreSQL store waits for a server
// that is there but not ready yet (starting up, out of connections).
// Nothing listening at the address and a host name that does not resolve
// fail at once.
const ConnectTimeout = 10 * time.Second

// Open opens the store that url names, creating it if it does not exist
// (a SQLite file, a PostgreSQL schema).
func Open(ctx context.Context, url string) (checkpoint.Store, error) {
	return open(ctx, url, false)
}

// OpenExisting opens the store that url names only if it exists and is a
// tollgate store: a SQLite file that does not exist (or is empty, or is
// another application's database), a PostgreSQL database without
// tollgate's schema, and "memory" (a new, empty store) are errors that say
// so, and nothing is created: no file, no -wal or -shm, no schema. An
// error for a store that is not there wraps [fs.ErrNotExist].
func OpenExisting(ctx context.Context, url string) (checkpoint.Store, error) {
	return open(ctx, url, true)
}

func open(ctx context.Context, raw string, existing bool) (checkpoint.Store, error) {
	switch {
	case raw == "memory":
		if existing {
			return nil, errors.New("store memory: an in-memory store is new and empty here; name the store tollgate serve or tollgate run keeps, such as sqlite:tollgate.db")
		}
		return memory.New(), nil
	case strings.HasPrefix(raw, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(raw, "sqlite:"), "//")
		if path == "" {
			return nil, fmt.Errorf("store %q: sqlite needs a path (sqlite:tollgate.db)", raw)
		}
		return openSQLite(ctx, path, existing)
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		s, err := postgres.Open(ctx, raw, &postgres.Options{ConnectTimeout: ConnectTimeout, MustExist: existing})
		if err != nil {
			return nil, err
		}
		return s, nil
	case strings.HasSuffix(raw, ".db") || strings.HasSuffix(raw, ".sqlite"):
		return openSQLite(ctx, raw, existing)
	}
	return nil, fmt.Errorf("store %q: want memory, sqlite:PATH or a postgres:// URL", Redacted(raw))
}

func openSQLite(ctx context.Context, path string, existing bool) (checkpoint.Store, error) {
	if existing && path == ":memory:" {
		return nil, fmt.Errorf("store sqlite::memory: is new and empty here; name the store tollgate serve or tollgate run keeps, such as sqlite:tollgate.db")
	}
	s, err := sqlite.Open(ctx, path, &sqlite.Options{MustExist: existing})
	switch {
	case err == nil:
		return s, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, &storeError{err: err, msg: fmt.Sprintf("no store at %s: the file does not exist "+
			"(tollgate serve creates tollgate.db in the directory it starts in; give --store sqlite:PATH or set TOLLGATE_STORE)", path)}
	case errors.Is(err, sqlite.ErrNotTollgate):
		why := strings.TrimPrefix(err.Error(), sqlite.ErrNotTollgate.Error()+": ")
		return nil, &storeError{err: err, msg: fmt.Sprintf("no store at %s: it is not a tollgate database (%s)", path, why)}
	case errors.Is(err, sqlite.ErrCorrupt):
		why := strings.TrimPrefix(err.Error(), sqlite.ErrCorrupt.Error()+": ")
		return nil, &storeError{err: err, msg: fmt.Sprintf("store %s: the database file is damaged (%s)", path, why)}
	}
	return nil, err
}

// storeError says what is wrong with a store in the user's terms, and
// wraps the error it comes from for [errors.Is].
type storeError struct {
	msg string
	err error
}

func (e *storeError) Error() string { return e.msg }
func (e *storeError) Unwrap() error { return e.err }

// Redacted returns a store URL, or any URL, fit to show: a password in it
// is replaced by xxxxx. Anything else is returned as it is.
func Redacted(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		// Unparsable: still never show what may be a password.
		if at := strings.LastIndex(s, "@"); at >= 0 {
			if i := strings.Index(s, "://"); i >= 0 && i+3 < at {
				return s[:i+3] + "xxxxx" + s[at:]
			}
		}
		return s
	}
	if _, has := u.User.Password(); has {
		return u.Redacted()
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
		return u.String()
	}
	return s
}
