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
			be := pgproto3.NewBackend(c, c)
			for {
				msg, err := be.ReceiveStartupMessage()
				if err != nil {
					return
				}
				if _, ok := msg.(*pgproto3.SSLRequest); ok {
					c.Write([]byte("N"))
					continue
				}
				break
			}
			be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "57P03", Message: "the database system is starting up"})
			be.Flush()
		}()
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

// A notification that never came (the trigger is off) is found by the
// poll.
func TestPollFindsMissedNotifications(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	schema := pgtest.Schema(t, dsn)
	a := open(t, dsn, schema, &postgres.Options{PollInterval: 50 * time.Millisecond})
	defer a.Close()
	b := open(t, dsn, schema, nil)
	defer b.Close()
	ch, err := a.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := pgtest.Exec(t.Context(), dsn, fmt.Sprintf("ALTER TABLE %s.questions DISABLE TRIGGER questions_notify", schema)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: "silent", Kind: "approve"}); err != nil {
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
		{mixed, "threads", 1}, {mixed, "questions", 1}, {mixed, "events", 1},
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
