package storeurl_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
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
			!strings.Contains(msg, "tollgate serve creates tollgate.db") || !strings.Contains(msg, "give --store sqlite:PATH") {
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
		"sqlite:tollgate.db":                             "sqlite:tollgate.db",
		"memory":                                         "memory",
		"postgres://me:s3cret@[::1:5432/x":               "postgres://xxxxx@[::1:5432/x",
	} {
		if got := storeurl.Redacted(in); got != want {
			t.Errorf("Redacted(%q) = %q, want %q", in, got, want)
		}
	}
}
