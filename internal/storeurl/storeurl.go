// Package storeurl opens a checkpoint store named by a string, as the
// command line takes it: "memory", "sqlite:PATH" (or a path ending in .db),
// "postgres://..." / "postgresql://...".
//
// [Open] is for the commands that keep a store (serve, run): it creates
// what is missing and upgrades an older schema. [OpenExisting] is for
// those that answer what they wrote, [OpenReadOnly] for those that only
// read it: a store that is not there, or that an older tollgate made, is
// an error, and nothing is created or migrated.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
	"github.com/tollgate-ai/tollgate/internal/nearest"
)

// ConnectTimeout is how long opening a PostgreSQL store waits for a server
// that is there but not ready yet (starting up, out of connections).
// Nothing listening at the address and a host name that does not resolve
// fail at once.
const ConnectTimeout = 10 * time.Second

// ErrReadOnly is wrapped by the error of [OpenExisting] for a store this
// process may only read: a SQLite file (or its directory) it may not
// write, a PostgreSQL role without the privileges or a read-only server.
// Its message is "the store at X is read-only for you", and a command
// says what it cannot do: "cannot answer: the store at X is read-only for
// you".
var ErrReadOnly = errors.New("the store is read-only")

// DefaultHint says where tollgate serve keeps its store by default, in
// messages about a store that is not there.
const DefaultHint = "$XDG_STATE_HOME/tollgate/tollgate.db (~/.local/state/tollgate/tollgate.db)"

// mode is how a store is opened.
type mode int

const (
	create   mode = iota // Open
	existing             // OpenExisting: there, to write
	readOnly             // OpenReadOnly: there, to read
)

// ServeConns is the pool a store opened by [Open] gets on PostgreSQL,
// unless the URL sets pool_max_conns.
const ServeConns = 16

// Open opens the store that url names, creating it if it does not exist
// (a SQLite file, a PostgreSQL schema).
func Open(ctx context.Context, url string) (checkpoint.Store, error) {
	return open(ctx, url, create)
}

// OpenExisting opens the store that url names only if it exists and is a
// tollgate store, to answer or abort what is in it: a SQLite file that does
// not exist (or is empty, or is another application's database), a
// PostgreSQL database without tollgate's schema, and "memory" (a new,
// empty store) are errors that say so, and nothing is created: no file, no
// schema. An error for a store that is not there wraps [fs.ErrNotExist];
// one for a store this process may not write wraps [ErrReadOnly]. A store
// an older tollgate made is not upgraded: the error says to open it once
// with tollgate serve.
func OpenExisting(ctx context.Context, url string) (checkpoint.Store, error) {
	return open(ctx, url, existing)
}

// OpenReadOnly opens the store that url names as [OpenExisting] does, to
// read it only: it writes nothing, not even the -wal and -shm files of a
// SQLite database (so reading needs only read access to the file and its
// directory), and on PostgreSQL every session is read-only, so read access
// to the tables is enough. Every write of the store fails.
func OpenReadOnly(ctx context.Context, url string) (checkpoint.Store, error) {
	return open(ctx, url, readOnly)
}

func open(ctx context.Context, raw string, m mode) (checkpoint.Store, error) {
	existing := m != create
	switch {
	case raw == "memory":
		if existing {
			return nil, errors.New("store memory: an in-memory store is new and empty here; name the store tollgate serve or tollgate run keeps, such as sqlite:tollgate.db")
		}
		return memory.New(), nil
	case strings.HasPrefix(raw, "sqlite:"):
		path, err := SQLitePath(raw)
		if err != nil {
			return nil, err
		}
		return openSQLite(ctx, path, m)
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		o := &postgres.Options{ConnectTimeout: ConnectTimeout, MustExist: existing, ReadOnly: m == readOnly}
		if m == create && !strings.Contains(raw, "pool_max_conns") {
			// A service (a cluster replica): River, the lease loops and
			// the runs share the pool; pgxpool's default is 4 on a
			// small machine.
			o.MaxConns = ServeConns
		}
		s, err := postgres.Open(ctx, raw, o)
		switch {
		case err == nil:
			return s, nil
		case errors.Is(err, postgres.ErrOlderSchema):
			return nil, olderError(Redacted(raw), err)
		case errors.Is(err, postgres.ErrReadOnly):
			why := strings.TrimPrefix(err.Error(), postgres.ErrReadOnly.Error()+": ")
			return nil, &storeError{errs: []error{ErrReadOnly, err}, msg: fmt.Sprintf("the store at %s is read-only for you (%s)", Redacted(raw), why)}
		}
		return nil, err
	}
	if scheme, ok := schemeOf(raw); ok {
		msg := fmt.Sprintf("store %q: unknown kind %q: want memory, sqlite:PATH or a postgres:// URL", Redacted(raw), scheme+":")
		if near := nearest.Name(strings.ToLower(scheme), []string{"sqlite", "postgres", "memory"}, false); near != "" {
			msg += fmt.Sprintf(" (did you mean %s:?)", near)
		}
		return nil, errors.New(msg)
	}
	if strings.HasSuffix(raw, ".db") || strings.HasSuffix(raw, ".sqlite") {
		path, err := SQLitePath(raw)
		if err != nil {
			return nil, err
		}
		return openSQLite(ctx, path, m)
	}
	return nil, fmt.Errorf("store %q: want memory, sqlite:PATH or a postgres:// URL", Redacted(raw))
}

// SQLitePath returns the file a SQLite store URL names (sqlite:PATH, or a
// bare path ending in .db or .sqlite), with a leading ~/ made the home
// directory. It is an error for a URL of another kind, or for sqlite:
// with no path.
func SQLitePath(raw string) (string, error) {
	path, ok := strings.CutPrefix(raw, "sqlite:")
	if ok {
		path = strings.TrimPrefix(path, "//")
	} else if _, scheme := schemeOf(raw); scheme || !(strings.HasSuffix(raw, ".db") || strings.HasSuffix(raw, ".sqlite")) {
		return "", fmt.Errorf("store %q: not a SQLite store (sqlite:PATH)", Redacted(raw))
	}
	if path == "" {
		return "", fmt.Errorf("store %q: sqlite needs a path (sqlite:tollgate.db)", raw)
	}
	if path == "~" || strings.HasPrefix(path, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("store %q: ~ is your home directory, which is not known here (%v): give the full path", raw, err)
		}
		path = filepath.Join(home, path[1:])
	}
	return path, nil
}

// schemeOf returns the scheme of a string that starts like a URL
// ("sqllite:x.db", "mysql://x"): a letter, then letters, digits, + - or
// ., then a colon, before any / (a single letter is a Windows drive, not a
// scheme).
func schemeOf(raw string) (string, bool) {
	i := strings.IndexByte(raw, ':')
	if i < 2 || strings.ContainsAny(raw[:i], `/\`) {
		return "", false
	}
	for j, r := range raw[:i] {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (j == 0 || !(r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return "", false
		}
	}
	return raw[:i], true
}

func openSQLite(ctx context.Context, path string, m mode) (checkpoint.Store, error) {
	if m != create && path == ":memory:" {
		return nil, fmt.Errorf("store sqlite::memory: is new and empty here; name the store tollgate serve or tollgate run keeps, such as sqlite:tollgate.db")
	}
	if m == create && path != ":memory:" {
		// SQLite says only "unable to open database file (14)".
		dir := filepath.Dir(path)
		if info, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil, &storeError{errs: []error{err}, msg: fmt.Sprintf("store %s: the directory %s does not exist (make it, or name a file in a directory that does)", path, dir)}
		} else if err == nil && !info.IsDir() {
			return nil, fmt.Errorf("store %s: %s is not a directory", path, dir)
		}
	}
	s, err := sqlite.Open(ctx, path, &sqlite.Options{MustExist: m == existing, ReadOnly: m == readOnly})
	switch {
	case err == nil:
		return s, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, &storeError{errs: []error{err}, msg: fmt.Sprintf("no store at %s: the file does not exist "+
			"(tollgate serve keeps its store in %s unless told otherwise; give --store sqlite:PATH or set TOLLGATE_STORE)", path, DefaultHint)}
	case errors.Is(err, sqlite.ErrNotTollgate):
		why := strings.TrimPrefix(err.Error(), sqlite.ErrNotTollgate.Error()+": ")
		return nil, &storeError{errs: []error{err}, msg: fmt.Sprintf("no store at %s: it is not a tollgate database (%s)", path, why)}
	case errors.Is(err, sqlite.ErrCorrupt):
		why := strings.TrimPrefix(err.Error(), sqlite.ErrCorrupt.Error()+": ")
		return nil, &storeError{errs: []error{err}, msg: fmt.Sprintf("store %s: the database file is damaged (%s)", path, why)}
	case errors.Is(err, sqlite.ErrOlderSchema):
		return nil, olderError(path, err)
	case errors.Is(err, sqlite.ErrReadOnly) && m == existing:
		return nil, &storeError{errs: []error{ErrReadOnly, err}, msg: fmt.Sprintf("the store at %s is read-only for you "+
			"(writing it takes write access to the file and to its directory)", path)}
	}
	return nil, err
}

// olderError says that the store needs the migration only serve does.
func olderError(shown string, err error) error {
	return &storeError{errs: []error{err}, msg: fmt.Sprintf("store %s: this store was made by an older tollgate; "+
		"open it once with tollgate serve to upgrade it", shown)}
}

// storeError says what is wrong with a store in the user's terms, and
// wraps the errors it stands for, for [errors.Is].
type storeError struct {
	msg  string
	errs []error
}

func (e *storeError) Error() string   { return e.msg }
func (e *storeError) Unwrap() []error { return e.errs }

// mask replaces a password.
const mask = "xxxxx"

// Redacted returns s, a store URL or any URL (a --server URL), fit to
// show: every password in it is replaced by xxxxx, and nothing else is
// changed.
//
// In a URL (SCHEME://...), the user information ends at the last @ that is
// not part of a query parameter's value (so that a password with an @, a
// /, a ? or a # not percent-encoded is hidden whole, however a parser
// would misread it), and the password in it, after the first colon, is
// replaced: postgres://me:s3cret@db/x gives postgres://me:xxxxx@db/x. The
// values of query parameters password and sslpassword are replaced too:
// postgres://db/x?password=s3cret gives postgres://db/x?password=xxxxx.
// In a string of key=value words (host=db password=s3cret), the values of
// password and sslpassword are replaced, quoted or not. Anything else
// (memory, sqlite:PATH, a URL without a password) is returned as it is.
func Redacted(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return keywordPassword.ReplaceAllString(s, "${1}"+mask)
	}
	head, rest := s[:i+3], s[i+3:]
	if at := userinfoEnd(rest); at >= 0 {
		if user, _, hasPassword := strings.Cut(rest[:at], ":"); hasPassword {
			head += user + ":" + mask + "@"
			rest = rest[at+1:]
		}
	}
	q := strings.IndexByte(rest, '?')
	if q < 0 {
		return head + rest
	}
	query, fragment, hasFragment := strings.Cut(rest[q+1:], "#")
	fields := strings.Split(query, "&")
	for j, f := range fields {
		key, _, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		if k, err := url.QueryUnescape(key); err == nil && (strings.EqualFold(k, "password") || strings.EqualFold(k, "sslpassword")) {
			fields[j] = key + "=" + mask
		}
	}
	out := head + rest[:q+1] + strings.Join(fields, "&")
	if hasFragment {
		out += "#" + fragment
	}
	return out
}

// keywordPassword is a password=VALUE word of a key=value connection
// string, quoted ('...', with \' inside) or not.
var keywordPassword = regexp.MustCompile(`(?i)(\b(?:ssl)?password\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|[^\s]*)`)

// userinfoEnd is the index in rest (a URL after its scheme://) of the @
// that ends the user information, or -1: the last @ that is not in the
// value of a query parameter (?user=me@example.com).
func userinfoEnd(rest string) int {
	for p := strings.LastIndexByte(rest, '@'); p >= 0; p = strings.LastIndexByte(rest[:p], '@') {
		if !inQueryValue(rest, p) {
			return p
		}
	}
	return -1
}

// inQueryValue reports whether the @ at p is inside the value of a query
// parameter: after a ? and in a field KEY=VALUE whose key is a plain name,
// and followed in the value only by what a host or mail name holds (not
// the / or : of a host and path that a misread password would leave).
func inQueryValue(rest string, p int) bool {
	if strings.IndexByte(rest[:p], '?') < 0 {
		return false
	}
	start := strings.LastIndexAny(rest[:p], "?&") + 1
	end := len(rest)
	if e := strings.IndexAny(rest[p:], "&#"); e >= 0 {
		end = p + e
	}
	key, _, ok := strings.Cut(rest[start:p], "=")
	return ok && plainKey.MatchString(key) && plainValue.MatchString(rest[p+1:end])
}

var (
	plainKey   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	plainValue = regexp.MustCompile(`^[A-Za-z0-9._%+-]*$`)
)

// HasPassword reports whether the store URL carries a password: in its
// user information (postgres://me:s3cret@db/x) or in a password query
// parameter. Anything that shows a process's command line (ps, /proc)
// shows such a URL given as a flag; give the password in PGPASSWORD, a
// password file or ~/.pgpass instead.
func HasPassword(raw string) bool { return Redacted(raw) != raw }

// WithPassword returns the PostgreSQL URL raw with password as its
// password, replacing any it has. It is an error for a URL of another kind
// (a SQLite store has no password) or for one that does not parse.
func WithPassword(raw, password string) (string, error) {
	if !strings.HasPrefix(raw, "postgres://") && !strings.HasPrefix(raw, "postgresql://") {
		return "", fmt.Errorf("store %q: only a postgres:// store takes a password", Redacted(raw))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("store %s: %v", Redacted(raw), errors.Unwrap(err))
	}
	user := ""
	if u.User != nil {
		user = u.User.Username()
	}
	if user == "" {
		return "", fmt.Errorf("store %s: name the role the password is for (postgres://USER@HOST/DB)", Redacted(raw))
	}
	u.User = url.UserPassword(user, password)
	return u.String(), nil
}
