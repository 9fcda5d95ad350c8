package storeurl_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
	"github.com/tollgate-ai/tollgate/internal/storeurl"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	for _, url := range []string{"memory", "sqlite:" + filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")} {
		s, err := storeurl.Open(context.Background(), url)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		s.Close()
	}
	for _, url := range []string{"", "sqlite:", "mysql://x", "redis"} {
		if _, err := storeurl.Open(context.Background(), url); err == nil || !strings.Contains(err.Error(), "store") {
			t.Errorf("%q: err %v", url, err)
		}
	}
	if _, err := storeurl.Open(context.Background(), "mysql://me:s3cret@db/x"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("an unknown kind of URL: %v, want an error without the password", err)
	}
}

// Issue 22 item 11: a misspelt kind is refused with the nearest one, not
// taken for a file name; a missing directory is named; ~/ is the home
// directory.
func TestOpenSaysWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	chdir(t, dir)
	for url, want := range map[string]string{
		"sqllite:x.db":                        `unknown kind "sqllite:": want memory, sqlite:PATH or a postgres:// URL (did you mean sqlite:?)`,
		"postgress://db/x":                    `(did you mean postgres:?)`,
		"memroy:x.db":                         `(did you mean memory:?)`,
		"mysql://me:pw@db/x":                  `unknown kind "mysql:"`,
		"sqlite:" + dir + "/missing/dir/t.db": "the directory " + dir + "/missing/dir does not exist",
	} {
		_, err := storeurl.Open(t.Context(), url)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", url, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "pw@") {
			t.Errorf("%s: the password is shown: %v", url, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused stores created %v", entries)
	}

	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, url := range []string{"sqlite:~/t.db", "~/u.db"} {
		s, err := storeurl.Open(t.Context(), url)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		s.Close()
	}
	for _, name := range []string{"t.db", "u.db"} {
		if _, err := os.Stat(filepath.Join(home, name)); err != nil {
			t.Errorf("~/%s is not in the home directory: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "~")); err == nil {
		t.Error("a directory named ~ was made")
	}
}

func TestPasswords(t *testing.T) {
	for url, want := range map[string]bool{
		"postgres://me:s3cret@db/x": true, "postgres://db/x?password=s3cret": true,
		"postgres://me@db/x": false, "sqlite:/tmp/t.db": false, "memory": false,
	} {
		if got := storeurl.HasPassword(url); got != want {
			t.Errorf("HasPassword(%q) = %v", url, got)
		}
	}
	got, err := storeurl.WithPassword("postgres://me@db:5432/x?sslmode=disable", "p@ss/w:rd")
	if err != nil || got != "postgres://me:p%40ss%2Fw%3Ard@db:5432/x?sslmode=disable" {
		t.Errorf("WithPassword: %q %v", got, err)
	}
	if _, err := storeurl.WithPassword("sqlite:t.db", "x"); err == nil {
		t.Error("a password for a SQLite store is taken")
	}
	if _, err := storeurl.WithPassword("postgres://db/x", "x"); err == nil || !strings.Contains(err.Error(), "name the role") {
		t.Errorf("no user: %v", err)
	}
}

// OpenExisting opens what serve made and refuses the rest, in the user's
// terms, creating nothing.
func TestOpenExisting(t *testing.T) {
	dir := t.TempDir()
	chdir(t, dir)

	for _, url := range []string{"sqlite:typo.db", "typo.db", "sqlite:" + filepath.Join(dir, "typo.db")} {
		_, err := storeurl.OpenExisting(t.Context(), url)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: %v, want fs.ErrNotExist", url, err)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "no store at ") || !strings.Contains(msg, "typo.db: the file does not exist") ||
			!strings.Contains(msg, "tollgate serve keeps its store in $XDG_STATE_HOME/tollgate/tollgate.db") || !strings.Contains(msg, "give --store sqlite:PATH") {
			t.Errorf("%s: %q", url, msg)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("OpenExisting of a missing file created %v", entries)
	}

	if err := os.WriteFile("notes.db", []byte("my notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := storeurl.OpenExisting(t.Context(), "sqlite:notes.db")
	if err == nil || !strings.Contains(err.Error(), "no store at notes.db: it is not a tollgate database (") {
		t.Errorf("a text file: %v", err)
	}
	t.Log(err)

	if _, err := storeurl.OpenExisting(t.Context(), "memory"); err == nil || !strings.Contains(err.Error(), "sqlite:tollgate.db") {
		t.Errorf("memory: %v", err)
	}

	s, err := storeurl.Open(t.Context(), "sqlite:tollgate.db")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = storeurl.OpenExisting(t.Context(), "sqlite:tollgate.db")
	if err != nil {
		t.Fatalf("OpenExisting of the store Open made: %v", err)
	}
	s.Close()
}

func chdir(t *testing.T, dir string) {
	t.Helper()
	old, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chdir(old) })
}

// A PostgreSQL URL where nothing listens, or whose host name does not
// resolve, fails within two seconds, in one line that names the host and
// port and not the password.
func TestPostgresUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	for _, c := range []struct{ url, where string }{
		{fmt.Sprintf("postgres://tollgate:s3cret@127.0.0.1:%d/tollgate", port), fmt.Sprintf("127.0.0.1:%d", port)},
		{"postgresql://tollgate:s3cret@nohost.invalid/tollgate", "nohost.invalid:5432"},
	} {
		for _, open := range []func(context.Context, string) (interface{ Close() error }, error){
			func(ctx context.Context, u string) (interface{ Close() error }, error) { return storeurl.Open(ctx, u) },
			func(ctx context.Context, u string) (interface{ Close() error }, error) {
				return storeurl.OpenExisting(ctx, u)
			},
		} {
			start := time.Now()
			s, err := open(t.Context(), c.url)
			elapsed := time.Since(start)
			if err == nil {
				s.Close()
				t.Fatalf("%s: opened", c.url)
			}
			msg := err.Error()
			if !errors.Is(err, postgres.ErrUnavailable) || !strings.Contains(msg, "cannot connect to "+c.where+": ") ||
				strings.Contains(msg, "s3cret") || strings.Contains(msg, "\n") {
				t.Errorf("%s: %q, want one line naming %s, without the password", c.url, msg, c.where)
			}
			if elapsed > 2*time.Second {
				t.Errorf("%s: failed after %v, want < 2s", c.url, elapsed)
			}
			t.Logf("%v (after %v)", err, elapsed.Round(time.Millisecond))
		}
	}
}

func TestRedacted(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://me:s3cret@db:5432/x?sslmode=disable": "postgres://me:xxxxx@db:5432/x?sslmode=disable",
		"postgres://me@db/x":                             "postgres://me@db/x",
		"postgres://db/x?password=s3cret&user=me":        "postgres://db/x?password=xxxxx&user=me",
		"postgres://db/x?sslpassword=s3cret":             "postgres://db/x?sslpassword=xxxxx",
		"postgres://db/x?user=me@example.com":            "postgres://db/x?user=me@example.com",
		"postgres://me:pw@db/x?user=me@example.com":      "postgres://me:xxxxx@db/x?user=me@example.com",
		"sqlite:tollgate.db":                             "sqlite:tollgate.db",
		"tollgate.db":                                    "tollgate.db",
		"memory":                                         "memory",
		"postgres://me:s3cret@[::1:5432/x":               "postgres://me:xxxxx@[::1:5432/x",
		"http://127.0.0.1:8080":                          "http://127.0.0.1:8080",
		"http://me:s3cret@127.0.0.1:8080/prefix":         "http://me:xxxxx@127.0.0.1:8080/prefix",
		"https://:s3cret@host":                           "https://:xxxxx@host",
		// Reserved characters in the password, not percent-encoded.
		"postgres://me:s3cr@tPW@127.0.0.1:1/x":   "postgres://me:xxxxx@127.0.0.1:1/x",
		"postgres://me:s3cr/tPW@127.0.0.1:1/x":   "postgres://me:xxxxx@127.0.0.1:1/x",
		"postgres://me:12/34@127.0.0.1:1/x":      "postgres://me:xxxxx@127.0.0.1:1/x",
		"postgres://me:s3cr#tPW@127.0.0.1:1/x":   "postgres://me:xxxxx@127.0.0.1:1/x",
		"postgres://me:s3cr?tPW@127.0.0.1:1/x":   "postgres://me:xxxxx@127.0.0.1:1/x",
		"postgres://me:s3cr?a=b@127.0.0.1:1/x":   "postgres://me:xxxxx@127.0.0.1:1/x",
		"postgres://me:s3cr%zztPW@127.0.0.1:1/x": "postgres://me:xxxxx@127.0.0.1:1/x",
		"postgres://me:s3cr tPW@127.0.0.1:1/x":   "postgres://me:xxxxx@127.0.0.1:1/x",
		// key=value connection strings.
		"host=db user=me password=s3cret dbname=x": "host=db user=me password=xxxxx dbname=x",
		"host=db password = 's3 cr\\'et' dbname=x": "host=db password = xxxxx dbname=x",
	} {
		if got := storeurl.Redacted(in); got != want {
			t.Errorf("Redacted(%q) = %q, want %q", in, got, want)
		}
	}
}

// OpenReadOnly reads what serve made without writing anything, and is
// refused what OpenExisting is refused.
func TestOpenReadOnly(t *testing.T) {
	dir := t.TempDir()
	chdir(t, dir)
	if _, err := storeurl.OpenReadOnly(t.Context(), "sqlite:typo.db"); !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "no store at typo.db: the file does not exist") {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := storeurl.OpenReadOnly(t.Context(), "memory"); err == nil {
		t.Error("memory: opened")
	}
	s, err := storeurl.Open(t.Context(), "sqlite:tollgate.db")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	before, err := os.Stat("tollgate.db")
	if err != nil {
		t.Fatal(err)
	}
	s, err = storeurl.OpenReadOnly(t.Context(), "sqlite:tollgate.db")
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	if _, _, err := s.ListThreads(t.Context(), checkpoint.ThreadFilter{}); err != nil {
		t.Errorf("ListThreads: %v", err)
	}
	if err := s.CreateThread(t.Context(), &checkpoint.Thread{ID: "t", Status: checkpoint.ThreadIdle, Messages: []byte("[]")}); err == nil {
		t.Error("CreateThread on a read-only store: no error")
	}
	s.Close()
	after, err := os.Stat("tollgate.db")
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir("."); len(entries) != 1 || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("OpenReadOnly wrote: %v, size %d -> %d, time %v -> %v", entries, before.Size(), after.Size(), before.ModTime(), after.ModTime())
	}
}

// A store an older tollgate made is neither read nor answered here: the
// error says, in the user's terms, what upgrades it, and nothing is
// migrated.
func TestOpenOlderSchema(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "old.db")
	s, err := storeurl.Open(t.Context(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("DELETE FROM schema_version WHERE version = (SELECT max(version) FROM schema_version)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for name, open := range map[string]func(context.Context, string) (checkpoint.Store, error){
		"OpenExisting": storeurl.OpenExisting, "OpenReadOnly": storeurl.OpenReadOnly,
	} {
		_, err := open(t.Context(), "sqlite:"+path)
		want := "store " + path + ": this store was made by an older tollgate; open it once with tollgate serve to upgrade it"
		if err == nil || err.Error() != want || !errors.Is(err, sqlite.ErrOlderSchema) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
}

// A store that may only be read: OpenExisting (to answer) says so in the
// user's terms, OpenReadOnly reads it. Not as root, whom chmod does not
// stop (TestOpenReadOnly checks that nothing is written).
func TestOpenExistingReadOnlyFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("as root, a file's mode does not stop a write")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "tollgate.db")
	s, err := storeurl.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	_, err = storeurl.OpenExisting(t.Context(), path)
	if !errors.Is(err, storeurl.ErrReadOnly) || !strings.HasPrefix(err.Error(), "the store at "+path+" is read-only for you") {
		t.Errorf("OpenExisting of a read-only file: %v", err)
	}
	s, err = storeurl.OpenReadOnly(t.Context(), path)
	if err != nil {
		t.Fatalf("OpenReadOnly of a read-only file: %v", err)
	}
	s.Close()
}
