//go:build unix

// Package pgtest gives tests a real PostgreSQL server.
//
// When TOLLGATE_TEST_POSTGRES holds a server URL, tests use that server (a
// database of their own is created on it when the role may, else they
// share the URL's database and isolate themselves with schemas). Otherwise
// pgtest starts a throwaway cluster from the local PostgreSQL binaries
// (initdb and postgres from PATH or /usr/lib/postgresql/*/bin) in a
// temporary directory, on a free loopback port with trust authentication,
// once per test binary, and stops it when the tests end. As root, the
// cluster runs as the "postgres" user (or "nobody"), because PostgreSQL
// refuses to run as root.
//
// Without a server and without binaries, tests skip with a message saying
// how to get one; with CI=true they fail instead, so CI never passes by
// skipping.
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		dsn := pgtest.Start(t)
//		schema := pgtest.Schema(t, dsn) // a fresh schema, dropped after the test
//		...
//	}
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the environment variable holding an existing server's URL.
const EnvURL = "TOLLGATE_TEST_POSTGRES"

var (
	mainCalled atomic.Bool
	once       sync.Once
	srv        *server
	skipReason string
	startErr   error
)

type server struct {
	dsn      string // the database the tests use
	socket   string // the server's UNIX socket, when pgtest started it
	cleanups []func()
}

// Main runs the package's tests (m.Run) and then stops the cluster or drops
// the database that [Start] set up, runs cleanups (the package's own:
// files its tests share), and exits. Call it from TestMain.
func Main(m *testing.M, cleanups ...func()) {
	mainCalled.Store(true)
	code := m.Run()
	if srv != nil {
		for _, f := range slices.Backward(srv.cleanups) {
			f()
		}
	}
	for _, f := range cleanups {
		f()
	}
	os.Exit(code)
}

// Start returns the URL of a database that this test binary has to itself
// (or shares only through unique schemas, see [Schema]). The first call
// starts the server; it is stopped by [Main]. Start skips the test when no
// PostgreSQL is available, or fails it when CI=true.
func Start(t testing.TB) string {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("pgtest: call pgtest.Main(m) from TestMain, so that the PostgreSQL server is stopped after the tests")
	}
	once.Do(func() { srv, skipReason, startErr = setup() })
	if skipReason != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgtest: CI=true and no PostgreSQL: %s", skipReason)
		}
		t.Skip("pgtest: " + skipReason)
	}
	if startErr != nil {
		t.Fatalf("pgtest: %v", startErr)
	}
	return srv.dsn
}

// Socket returns the path of the UNIX socket of the cluster pgtest
// started (trust authentication, as on the TCP port; database and user
// "postgres"), for tests of what can reach it. With a server from
// TOLLGATE_TEST_POSTGRES there is no socket it knows: the test skips, or
// fails when CI=true.
func Socket(t testing.TB) string {
	t.Helper()
	Start(t)
	if srv.socket == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgtest: CI=true and no local UNIX socket: the server is %s's", EnvURL)
		}
		t.Skipf("pgtest: no local UNIX socket: the server is %s's", EnvURL)
	}
	return srv.socket
}

var schemaSeq atomic.Int64

// Schema returns the name of a new, unique schema (not yet created: a store
// creates its own) and drops it, with everything in it, when the test ends.
func Schema(t testing.TB, dsn string) string {
	t.Helper()
	name := fmt.Sprintf("tg_%d_%s_%d", os.Getpid(), randomHex(3), schemaSeq.Add(1))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := Exec(ctx, dsn, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", name, err)
		}
	})
	return name
}

// Exec runs one statement on a connection of its own.
func Exec(ctx context.Context, dsn, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func setup() (*server, string, error) {
	if u := os.Getenv(EnvURL); u != "" {
		s, err := useServer(u)
		return s, "", err
	}
	bin, err := findBinaries()
	if err != nil {
		return nil, err.Error(), nil
	}
	s, err := startCluster(bin)
	return s, "", err
}

// useServer creates a database for this test binary on an existing server,
// or falls back to the URL's own database when the role may not.
func useServer(raw string) (*server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("%s=%q: want a postgres:// URL", EnvURL, raw)
	}
	conn, err := pgx.Connect(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("%s: connect: %w", EnvURL, err)
	}
	defer conn.Close(context.Background())
	db := fmt.Sprintf("tollgate_test_%d_%s", os.Getpid(), randomHex(4))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		// No CREATEDB privilege: share the database, isolated by schemas.
		return &server{dsn: raw}, nil
	}
	own := *u
	own.Path = "/" + db
	return &server{dsn: own.String(), cleanups: []func(){func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := Exec(ctx, raw, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: drop database %s: %v\n", db, err)
		}
	}}}, nil
}

type binaries struct{ initdb, postgres string }

// findBinaries looks for initdb and postgres in PATH, then in Debian's
// /usr/lib/postgresql/<version>/bin, newest first.
func findBinaries() (binaries, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(debian, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	dirs = append(dirs, debian...)
	for _, d := range dirs {
		b := binaries{initdb: filepath.Join(d, "initdb"), postgres: filepath.Join(d, "postgres")}
		if executable(b.initdb) && executable(b.postgres) {
			return b, nil
		}
	}
	return binaries{}, fmt.Errorf("no PostgreSQL server binaries (initdb, postgres) in PATH or /usr/lib/postgresql/*/bin; "+
		"install them (Debian: apt-get install postgresql) or set %s to a server URL", EnvURL)
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// startCluster runs initdb and then the postmaster itself as a child
// process, rather than through pg_ctl, which would detach it: a child dies
// with the test binary (SIGQUIT on its parent's death, an immediate
// shutdown) even when the binary is killed before Main's cleanup.
func startCluster(bin binaries) (*server, error) {
	sweep()
	dir, err := os.MkdirTemp("", "tollgate-pg-")
	if err != nil {
		return nil, err
	}
	s := &server{cleanups: []func(){func() { os.RemoveAll(dir) }}}
	fail := func(err error) (*server, error) {
		for _, f := range slices.Backward(s.cleanups) {
			f()
		}
		return nil, err
	}
	cred, err := runAs(dir)
	if err != nil {
		return fail(err)
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(bin.initdb, "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}

	port, err := freePort()
	if err != nil {
		return fail(err)
	}
	logPath := filepath.Join(dir, "postgres.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fail(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin.postgres, "-D", data,
		"-p", strconv.Itoa(port),
		"-k", dir, // the unix socket stays inside the temporary directory
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=300",
		"-c", "shared_buffers=64MB",
		"-c", "log_min_messages=warning",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
	cmd.SysProcAttr = serverProcAttr(cred)

	// Pdeathsig fires when the thread that started the child exits, so that
	// thread is locked to a goroutine that lives as long as the server.
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return fail(fmt.Errorf("start postgres: %w", err))
	}
	s.cleanups = append(s.cleanups, func() {
		cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})

	s.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	s.socket = filepath.Join(dir, fmt.Sprintf(".s.PGSQL.%d", port))
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, s.dsn)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return s, nil
		}
		select {
		case werr := <-exited:
			exited <- werr
			log, _ := os.ReadFile(logPath)
			return fail(fmt.Errorf("postgres exited (%v):\n%s", werr, log))
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			return fail(fmt.Errorf("postgres not ready after 60s: %v\n%s", err, log))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sweep removes the directories of clusters whose test binary was killed
// (the server died with it, its directory stayed): those whose postmaster
// is not running any more, or that never got one and are an hour old.
func sweep() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "tollgate-pg-*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "data", "postmaster.pid"))
		if err != nil {
			if fi, err := os.Stat(d); err == nil && time.Since(fi.ModTime()) > time.Hour {
				os.RemoveAll(d)
			}
			continue
		}
		line, _, _ := strings.Cut(string(b), "\n")
		pid, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}

// runAs returns the credential to run PostgreSQL with: nil unless we are
// root, then the postgres user if it exists, else nobody; dir is handed to
// that user.
func runAs(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var u *user.User
	var err error
	for _, name := range []string{"postgres", "nobody"} {
		if u, err = user.Lookup(name); err == nil {
			break
		}
	}
	if err != nil {
		return nil, errors.New("running as root and neither a postgres nor a nobody user exists to run PostgreSQL as")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// WithParams returns dsn with the given run-time parameters added (for
// example synchronous_commit=off, for tests that do not measure
// durability).
func WithParams(dsn string, kv ...string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}
