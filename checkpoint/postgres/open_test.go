package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Nothing listens, or the host name does not resolve: waiting would not
// mend it, so Open fails at once, in one line that names the server and
// not the password.
func TestUnreachableFailsAtOnce(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	for name, c := range map[string]struct{ dsn, want string }{
		"refused": {fmt.Sprintf("postgres://tollgate:s3cret@127.0.0.1:%d/tollgate?sslmode=disable", port),
			fmt.Sprintf("postgres: cannot connect to 127.0.0.1:%d: connection refused", port)},
		"refused, TLS then plain": {fmt.Sprintf("postgres://tollgate:s3cret@localhost:%d/tollgate", port),
			fmt.Sprintf("postgres: cannot connect to localhost:%d: connection refused", port)},
		"no such host": {"postgres://tollgate:s3cret@nohost.invalid:5432/tollgate",
			"postgres: cannot connect to nohost.invalid:5432: the host name nohost.invalid does not resolve"},
		"no such socket": {"postgres://tollgate:s3cret@/tollgate?host=" + t.TempDir(),
			"postgres: cannot connect to socket "},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			_, err := postgres.Open(t.Context(), c.dsn, &postgres.Options{ConnectTimeout: time.Minute})
			elapsed := time.Since(start)
			if !errors.Is(err, postgres.ErrUnavailable) {
				t.Fatalf("Open = %v, want ErrUnavailable", err)
			}
			if elapsed > 2*time.Second {
				t.Errorf("Open took %v to fail, want < 2s: %v", elapsed, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, c.want) || strings.Contains(msg, "\n") || strings.Contains(msg, "s3cret") {
				t.Errorf("error %q: want one line starting %q, without the password", msg, c.want)
			}
			t.Logf("%v (after %v)", err, elapsed.Round(time.Millisecond))
		})
	}
}

// A server that is starting up (SQLSTATE 57P03) is waited for, quietly:
// no log line per attempt.
func TestWaitsForDatabaseStartingUp(t *testing.T) {
	t.Parallel()
	real := pgtest.Start(t)
	u, err := url.Parse(real)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	u.Host = l.Addr().String()
	var refused atomic.Int32
	go startingUp(l, target, 3, &refused)

	var logs strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	s, err := postgres.Open(t.Context(), u.String(), &postgres.Options{Schema: pgtest.Schema(t, real), ConnectTimeout: time.Minute, Logger: log})
	if err != nil {
		t.Fatalf("Open while the server started up: %v", err)
	}
	s.Close()
	if n := refused.Load(); n < 3 {
		t.Errorf("the server said it was starting up %d times, want 3", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "\n"); n > 1 {
		t.Errorf("%d log lines while waiting, want at most 1:\n%s", n, logs.String())
	}

	// Never ready: Open gives up after ConnectTimeout and says why.
	never, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer never.Close()
	go startingUp(never, target, 1<<30, new(atomic.Int32))
	u.Host = never.Addr().String()
	start := time.Now()
	_, err = postgres.Open(t.Context(), u.String(), &postgres.Options{ConnectTimeout: 700 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, postgres.ErrUnavailable) || !strings.Contains(err.Error(), "not ready after") || !strings.Contains(err.Error(), "57P03") {
		t.Fatalf("Open(never ready) = %v, want ErrUnavailable saying it was not ready", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Open(never ready, ConnectTimeout 700ms) took %v", elapsed)
	}
	t.Log(err)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// startingUp answers the first n connections on l as a PostgreSQL server
// that is starting up does, and forwards the others to target.
func startingUp(l net.Listener, target string, n int32, refused *atomic.Int32) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		if refused.Load() >= n {
			go forward(c, target)
			continue
		}
		refused.Add(1)
		go func() {
			defer c.Close()
			be := startup(c)
			if be == nil {
				return
			}
			be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "57P03", Message: "the database system is starting up"})
			be.Flush()
		}()
	}
}

// startup reads a client's startup message on c as a server without TLS
// does; nil when the client went away.
func startup(c net.Conn) *pgproto3.Backend {
	be := pgproto3.NewBackend(c, c)
	for {
		msg, err := be.ReceiveStartupMessage()
		if err != nil {
			return nil
		}
		if _, ok := msg.(*pgproto3.SSLRequest); ok {
			c.Write([]byte("N"))
			continue
		}
		return be
	}
}

// forward copies c to a new connection to target and back.
func forward(c net.Conn, target string) {
	defer c.Close()
	s, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer s.Close()
	go io.Copy(s, c)
	io.Copy(c, s)
}

// A server that says no is not waited for.
func TestNoSuchDatabase(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/no_such_database"
	start := time.Now()
	_, err = postgres.Open(t.Context(), u.String(), &postgres.Options{ConnectTimeout: time.Minute})
	if err == nil || errors.Is(err, postgres.ErrUnavailable) {
		t.Fatalf("Open(no such database) = %v, want a plain error", err)
	}
	t.Logf("%v (after %v)", err, time.Since(start))
}

func TestNewerSchema(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	schema := pgtest.Schema(t, dsn)
	open(t, dsn, schema, nil).Close()
	if err := pgtest.Exec(t.Context(), dsn, fmt.Sprintf(`INSERT INTO %s.schema_version (version, name) VALUES (999, '0999_future.sql')`, schema)); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(t.Context(), dsn, &postgres.Options{Schema: schema})
	if !errors.Is(err, postgres.ErrNewerSchema) {
		t.Fatalf("Open(newer schema) = %v, want ErrNewerSchema", err)
	}
	t.Log(err)
}

func TestForeignSchema(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	for name, setup := range map[string]string{
		"tables":    `CREATE TABLE %[1]s.customers (id int PRIMARY KEY, name text); INSERT INTO %[1]s.customers VALUES (1, 'ada')`,
		"lookalike": `CREATE TABLE %[1]s.schema_version (version int); INSERT INTO %[1]s.schema_version VALUES (1)`,
	} {
		t.Run(name, func(t *testing.T) {
			schema := pgtest.Schema(t, dsn)
			if err := pgtest.Exec(t.Context(), dsn, "CREATE SCHEMA "+schema); err != nil {
				t.Fatal(err)
			}
			if err := pgtest.Exec(t.Context(), dsn, fmt.Sprintf(setup, schema)); err != nil {
				t.Fatal(err)
			}
			_, err := postgres.Open(t.Context(), dsn, &postgres.Options{Schema: schema})
			if !errors.Is(err, postgres.ErrNotTollgate) {
				t.Fatalf("Open(foreign schema) = %v, want ErrNotTollgate", err)
			}
			t.Log(err)
			conn, err := pgx.Connect(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(t.Context())
			var tables int
			if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE schemaname = $1`, schema).Scan(&tables); err != nil {
				t.Fatal(err)
			}
			if tables != 1 {
				t.Errorf("the refused schema now has %d tables, want its 1", tables)
			}
		})
	}
}

func TestBadSchemaName(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"a-b", `x"; DROP TABLE y; --`, strings.Repeat("s", 51), "1abc", "a b", "a.b", "ä", `Mixed"Quote`} {
		if _, err := postgres.Open(t.Context(), "postgres://127.0.0.1:1/x", &postgres.Options{Schema: name}); err == nil || errors.Is(err, postgres.ErrUnavailable) {
			t.Errorf("schema %q: %v, want a refusal before connecting", name, err)
		}
	}
}

// Replicas starting together: the advisory lock makes them take turns.
func TestOpenConcurrently(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	schema := pgtest.Schema(t, dsn)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			s, err := postgres.Open(t.Context(), dsn, &postgres.Options{Schema: schema, MaxConns: 2})
			if err != nil {
				t.Errorf("Open: %v", err)
				return
			}
			s.Close()
		})
	}
	wg.Wait()
}

// A question written without its notification (as by a writer whose
// server went away between its commit and the notification) is found by
// the poll.
func TestPollFindsMissedNotifications(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	schema := pgtest.Schema(t, dsn)
	a := open(t, dsn, schema, &postgres.Options{PollInterval: 50 * time.Millisecond})
	defer a.Close()
	ch, err := a.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Numbered as the store numbers it.
	if err := pgtest.Exec(t.Context(), dsn, fmt.Sprintf(`INSERT INTO %[1]s.questions (seq, change_seq, thread_id, id, run_id, call_id, tool, kind, digest, status, answered_by, reason, created_at)
SELECT n, n, 't', 'silent', '', '', '', 'approve', '', 'pending', '', '', now()
FROM (SELECT (pg_current_xact_id()::text::bigint + base) * 65536 AS n FROM %[1]s.seq_base) x`, schema)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, checkpoint.QuestionCreated, "silent")
}

func waitFor(t *testing.T, ch <-chan checkpoint.Notification, kind checkpoint.NotificationKind, qid string) {
	t.Helper()
	limit := time.After(20 * time.Second)
	for {
		select {
		case n, ok := <-ch:
			if !ok {
				t.Fatalf("subscription closed while waiting for %s %s", kind, qid)
			}
			if n.Kind == kind && n.QuestionID == qid {
				return
			}
		case <-limit:
			t.Fatalf("no %s %q within 20s", kind, qid)
		}
	}
}

// A schema name with capital letters is used as written, everywhere: the
// tables, every statement of the pool and the listener. A schema with the
// lowercase name beside it is never touched.
func TestMixedCaseSchema(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	lower := pgtest.Schema(t, dsn)
	mixed := "TG_" + strings.TrimPrefix(lower, "tg_") + "_Mixed"
	t.Cleanup(func() {
		if err := pgtest.Exec(context.Background(), dsn, "DROP SCHEMA IF EXISTS "+pgx.Identifier{mixed}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", mixed, err)
		}
	})
	lowerOfMixed := strings.ToLower(mixed)
	t.Cleanup(func() {
		pgtest.Exec(context.Background(), dsn, "DROP SCHEMA IF EXISTS "+pgx.Identifier{lowerOfMixed}.Sanitize()+" CASCADE")
	})
	// The lowercase twin exists and holds a tollgate store of its own.
	twin := open(t, dsn, lowerOfMixed, nil)
	defer twin.Close()
	if _, _, err := twin.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "twin", ID: "q"}); err != nil {
		t.Fatal(err)
	}

	s := open(t, dsn, mixed, &postgres.Options{PollInterval: -1})
	defer s.Close()
	if s.Schema() != mixed {
		t.Errorf("Schema() = %q, want %q", s.Schema(), mixed)
	}
	ch, err := s.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateThread(t.Context(), &checkpoint.Thread{ID: "t", Status: checkpoint.ThreadIdle, Messages: []byte("[]")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: "q"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, checkpoint.QuestionCreated, "q") // LISTEN and NOTIFY agree on the channel
	if _, err := s.ResolveQuestion(t.Context(), "t", "q", checkpoint.Resolution{Status: checkpoint.QuestionAborted, By: "test"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, checkpoint.QuestionResolved, "q")
	if _, err := s.AppendEvent(t.Context(), &checkpoint.Event{ThreadID: "t", Type: "x"}); err != nil {
		t.Fatal(err)
	}

	// Everything went to the mixed-case schema, nothing to its twin.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	count := func(schema, table string) int {
		t.Helper()
		var n int
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM "+pgx.Identifier{schema, table}.Sanitize()).Scan(&n); err != nil {
			t.Fatalf("count %s.%s: %v", schema, table, err)
		}
		return n
	}
	for _, c := range []struct {
		schema, table string
		want          int
	}{
		{mixed, "threads", 1}, {mixed, "questions", 1}, {mixed, "events", 2}, // x and the resolution's
		{lowerOfMixed, "threads", 0}, {lowerOfMixed, "questions", 1}, {lowerOfMixed, "events", 0},
	} {
		if got := count(c.schema, c.table); got != c.want {
			t.Errorf("%s.%s holds %d rows, want %d", c.schema, c.table, got, c.want)
		}
	}
	if q, err := twin.GetQuestion(t.Context(), "twin", "q"); err != nil || q.Status != checkpoint.QuestionPending {
		t.Errorf("the twin's question: %+v, %v", q, err)
	}

	// Opening it again finds the schema migrated.
	again := open(t, dsn, mixed, nil)
	defer again.Close()
	if q, err := again.GetQuestion(t.Context(), "t", "q"); err != nil || q.Status != checkpoint.QuestionAborted {
		t.Errorf("reopened: %+v, %v", q, err)
	}
}

// MustExist opens a store tollgate made, and creates nothing when there is
// none: no schema, no tables.
func TestMustExist(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	schemaExists := func(schema string) bool {
		t.Helper()
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(t.Context())
		var n int
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}

	missing := pgtest.Schema(t, dsn)
	_, err := postgres.Open(t.Context(), dsn, &postgres.Options{Schema: missing, MustExist: true})
	if !errors.Is(err, postgres.ErrNoStore) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Open(MustExist, no schema) = %v, want ErrNoStore naming the schema", err)
	}
	t.Log(err)
	if schemaExists(missing) {
		t.Error("Open(MustExist) created the schema")
	}

	empty := pgtest.Schema(t, dsn)
	if err := pgtest.Exec(t.Context(), dsn, "CREATE SCHEMA "+empty); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(t.Context(), dsn, &postgres.Options{Schema: empty, MustExist: true}); !errors.Is(err, postgres.ErrNoStore) {
		t.Fatalf("Open(MustExist, empty schema) = %v, want ErrNoStore", err)
	}

	made := pgtest.Schema(t, dsn)
	open(t, dsn, made, nil).Close()
	s, err := postgres.Open(t.Context(), dsn, &postgres.Options{Schema: made, MustExist: true})
	if err != nil {
		t.Fatalf("Open(MustExist) of a store tollgate made: %v", err)
	}
	s.Close()
}

// refusing answers every connection on l as a server that says no does:
// it refuses TLS, asks for a password when password is set, and sends a
// FATAL error with the code.
func refusing(l net.Listener, code, message string, password bool, conns *atomic.Int32) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		conns.Add(1)
		go func() {
			defer c.Close()
			be := startup(c)
			if be == nil {
				return
			}
			if password {
				be.Send(&pgproto3.AuthenticationCleartextPassword{})
				if err := be.Flush(); err != nil {
					return
				}
				be.SetAuthType(pgproto3.AuthTypeCleartextPassword)
				if _, err := be.Receive(); err != nil {
					return
				}
			}
			be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: code, Message: message})
			be.Flush()
		}()
	}
}

// A server that says no for good (a wrong password, a role it does not
// let in, no such database) is not waited for, even when TLS was tried
// first (sslmode=prefer, the default): Open fails at once, in one line
// that says what to check and does not show the password.
func TestOpenRefusedAtOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		code, message string
		password      bool
		want          string
	}{
		{"28P01", `password authentication failed for user "tollgate"`, true, "check the user name and password in the connection URL"},
		{"28000", `no pg_hba.conf entry for host "127.0.0.1", user "tollgate", database "tollgate", no encryption`, false, "pg_hba.conf"},
		{"3D000", `database "tollgate" does not exist`, false, "check the database name in the connection URL"},
		{"42501", `permission denied for database "tollgate"`, false, "GRANT CONNECT"},
	} {
		t.Run(c.code, func(t *testing.T) {
			t.Parallel()
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var conns atomic.Int32
			go refusing(l, c.code, c.message, c.password, &conns)
			for _, dsn := range []string{
				fmt.Sprintf("postgres://tollgate:s3cretPW@%s/tollgate", l.Addr()),
				fmt.Sprintf("postgres://tollgate:s3cretPW@%s/tollgate?sslmode=disable", l.Addr()),
			} {
				start := time.Now()
				_, err := postgres.Open(t.Context(), dsn, &postgres.Options{ConnectTimeout: time.Minute, MustExist: true})
				elapsed := time.Since(start)
				if err == nil || errors.Is(err, postgres.ErrUnavailable) {
					t.Fatalf("Open = %v, want a refusal", err)
				}
				msg := err.Error()
				if !strings.Contains(msg, "(SQLSTATE "+c.code+")") || !strings.Contains(msg, c.want) ||
					strings.Contains(msg, "s3cret") || strings.Contains(msg, "\n") {
					t.Errorf("%q: want one line with SQLSTATE %s and %q, without the password", msg, c.code, c.want)
				}
				if elapsed > 2*time.Second {
					t.Errorf("Open took %v to fail, want < 2s: %v", elapsed, err)
				}
				t.Logf("%v (after %v)", err, elapsed.Round(time.Millisecond))
			}
			if n := conns.Load(); n > 3 {
				t.Errorf("%d connections for 2 Opens, want at most 3 (TLS refused, then plain text; plain text)", n)
			}
		})
	}
}

// The same against a real server, with the default sslmode (prefer: TLS
// first, which the test server refuses).
func TestOpenNoSuchDatabaseAtOnce(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/no_such_database"
	q := u.Query()
	q.Del("sslmode")
	u.RawQuery = q.Encode()
	start := time.Now()
	_, err = postgres.Open(t.Context(), u.String(), &postgres.Options{ConnectTimeout: time.Minute})
	if err == nil || errors.Is(err, postgres.ErrUnavailable) || !strings.Contains(err.Error(), "3D000") {
		t.Fatalf("Open(no such database) = %v, want a refusal with SQLSTATE 3D000", err)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("Open took %v to fail, want < 2s: %v", elapsed, err)
	}
	t.Log(err)
}

// A password with characters a URL reserves, not percent-encoded: no part
// of it is in the error, whichever way the URL is misread.
func TestOpenPasswordInURLNeverShown(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	for _, pw := range []string{"s3cr@tPW", "s3cr@t@PW", "s3cr/tPW", "s3cr#tPW", "s3cr?tPW", "s3cr%zztPW", "s3cr tPW", "s3cr:tPW"} {
		dsn := fmt.Sprintf("postgres://tollgate:%s@127.0.0.1:%d/tollgate", pw, port)
		_, err := postgres.Open(t.Context(), dsn, &postgres.Options{ConnectTimeout: time.Minute})
		if err == nil {
			t.Fatalf("%s: opened", dsn)
		}
		msg := err.Error()
		if strings.Contains(msg, "s3cr") || strings.Contains(msg, "tPW") || strings.Contains(msg, "\n") {
			t.Errorf("password %q: %q shows part of it", pw, msg)
		}
		t.Logf("password %q: %v", pw, err)
	}
}

// ReadOnly reads a store, writing nothing and taking no lock, as a role
// that may only read it; it refuses what MustExist refuses, and a schema
// that needs a migration. MustExist refuses a role that may not write.
func TestOpenReadOnly(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	schema := pgtest.Schema(t, dsn)
	if _, err := postgres.Open(t.Context(), dsn, &postgres.Options{Schema: schema, ReadOnly: true}); !errors.Is(err, postgres.ErrNoStore) {
		t.Fatalf("Open(ReadOnly, no schema) = %v, want ErrNoStore", err)
	}
	s := open(t, dsn, schema, nil)
	if err := s.CreateThread(t.Context(), &checkpoint.Thread{ID: "t", Status: checkpoint.ThreadIdle, Messages: []byte("[]")}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	r, err := postgres.Open(t.Context(), dsn, &postgres.Options{Schema: schema, ReadOnly: true})
	if err != nil {
		t.Fatalf("Open(ReadOnly): %v", err)
	}
	if _, err := r.LoadThread(t.Context(), "t"); err != nil {
		t.Errorf("LoadThread: %v", err)
	}
	if err := r.CreateThread(t.Context(), &checkpoint.Thread{ID: "u", Status: checkpoint.ThreadIdle, Messages: []byte("[]")}); err == nil || !strings.Contains(err.Error(), "25006") {
		t.Errorf("CreateThread on a ReadOnly store: %v, want a read-only transaction's refusal", err)
	}
	r.Close()

	// A role that may read the tables and not write them.
	role := "tg_reader_" + strings.TrimPrefix(schema, "tg_")
	if err := pgtest.Exec(t.Context(), dsn, fmt.Sprintf(`CREATE ROLE %[1]s LOGIN; GRANT USAGE ON SCHEMA %[2]s TO %[1]s; GRANT SELECT ON ALL TABLES IN SCHEMA %[2]s TO %[1]s`, role, schema)); err != nil {
		t.Logf("no role of its own (%v): the reader's privileges are not tested", err)
	} else {
		t.Cleanup(func() {
			pgtest.Exec(context.Background(), dsn, fmt.Sprintf(`REVOKE ALL ON ALL TABLES IN SCHEMA %[2]s FROM %[1]s; REVOKE ALL ON SCHEMA %[2]s FROM %[1]s; DROP ROLE %[1]s`, role, schema))
		})
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User(role)
		_, err = postgres.Open(t.Context(), u.String(), &postgres.Options{Schema: schema, MustExist: true})
		if !errors.Is(err, postgres.ErrReadOnly) || !strings.Contains(err.Error(), role) {
			t.Errorf("Open(MustExist) as a reader: %v, want ErrReadOnly naming the role", err)
		}
		t.Log(err)
		r, err := postgres.Open(t.Context(), u.String(), &postgres.Options{Schema: schema, ReadOnly: true})
		if err != nil {
			t.Fatalf("Open(ReadOnly) as a reader: %v", err)
		}
		if _, err := r.LoadThread(t.Context(), "t"); err != nil {
			t.Errorf("LoadThread as a reader: %v", err)
		}
		r.Close()
	}

	// An older schema: neither migrates it.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	versions := func() int {
		t.Helper()
		var n int
		if err := conn.QueryRow(t.Context(), fmt.Sprintf("SELECT count(*) FROM %s.schema_version", schema)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := versions()
	if _, err := conn.Exec(t.Context(), fmt.Sprintf(`DELETE FROM %s.schema_version WHERE version = (SELECT max(version) FROM %[1]s.schema_version)`, schema)); err != nil {
		t.Fatal(err)
	}
	for _, o := range []postgres.Options{{Schema: schema, MustExist: true}, {Schema: schema, ReadOnly: true}} {
		_, err := postgres.Open(t.Context(), dsn, &o)
		if !errors.Is(err, postgres.ErrOlderSchema) {
			t.Errorf("Open(MustExist %v, ReadOnly %v) of an older schema: %v, want ErrOlderSchema", o.MustExist, o.ReadOnly, err)
		}
		t.Log(err)
	}
	if n := versions(); n != before-1 {
		t.Errorf("schema_version has %d rows after the refused Opens, want %d", n, before-1)
	}
}
