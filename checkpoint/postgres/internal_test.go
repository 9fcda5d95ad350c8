package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

// The connection drops between the migration's statements and its commit:
// nothing of it stays (not even the schema), and the next Open does it all.
func TestMigrationInterrupted(t *testing.T) {
	dsn := pgtest.Start(t)
	schema := pgtest.Schema(t, dsn)
	testHookBeforeMigrationCommit = func(ctx context.Context, tx pgx.Tx) {
		pid := tx.Conn().PgConn().PID()
		if err := pgtest.Exec(ctx, dsn, "SELECT pg_terminate_backend($1)", pid); err != nil {
			t.Errorf("terminate: %v", err)
		}
	}
	_, err := Open(t.Context(), dsn, &Options{Schema: schema})
	testHookBeforeMigrationCommit = nil
	if err == nil {
		t.Fatal("Open succeeded with its connection killed before commit")
	}
	t.Logf("interrupted Open: %v", err)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var exists bool
	if err := conn.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("schema %s exists after an interrupted migration", schema)
	}
	s, err := Open(t.Context(), dsn, &Options{Schema: schema})
	if err != nil {
		t.Fatalf("Open after the interrupted one: %v", err)
	}
	defer s.Close()
	if _, _, err := s.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: "q"}); err != nil {
		t.Fatal(err)
	}
}

// The listener's connection is killed: subscribers get a Resync when it is
// back, and then notifications as before.
func TestListenerReconnects(t *testing.T) {
	dsn := pgtest.WithParams(pgtest.Start(t), "synchronous_commit", "off")
	schema := pgtest.Schema(t, dsn)
	a, err := Open(t.Context(), dsn, &Options{Schema: schema, PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(t.Context(), dsn, &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ch, err := a.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		pid := a.hub.pid.Load()
		if pid == 0 {
			t.Fatalf("round %d: no listener", round)
		}
		if err := pgtest.Exec(t.Context(), dsn, "SELECT pg_terminate_backend($1)", pid); err != nil {
			t.Fatal(err)
		}
		wait(t, ch, checkpoint.Notification{Kind: checkpoint.Resync})
		qid := []string{"q0", "q1", "q2"}[round]
		if _, _, err := b.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: qid}); err != nil {
			t.Fatal(err)
		}
		wait(t, ch, checkpoint.Notification{Kind: checkpoint.QuestionCreated, ThreadID: "t", QuestionID: qid})
	}
}

// A subscriber that falls behind loses notifications, and is told so.
func TestSlowSubscriberGetsResync(t *testing.T) {
	dsn := pgtest.WithParams(pgtest.Start(t), "synchronous_commit", "off")
	s, err := Open(t.Context(), dsn, &Options{Schema: pgtest.Schema(t, dsn), PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ch, err := s.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := range subBuffer + 10 {
		s.hub.deliver(fmt.Sprintf(`{"k":"question_created","t":"t","q":"x%d","s":%d}`, i, i+1))
	}
	for range subBuffer {
		<-ch
	}
	s.hub.deliver(`{"k":"question_created","t":"t","q":"last","s":1}`)
	wait(t, ch, checkpoint.Notification{Kind: checkpoint.Resync})
	wait(t, ch, checkpoint.Notification{Kind: checkpoint.QuestionCreated, ThreadID: "t", QuestionID: "last"})
}

func wait(t *testing.T, ch <-chan checkpoint.Notification, want checkpoint.Notification) {
	t.Helper()
	limit := time.After(20 * time.Second)
	for {
		select {
		case n, ok := <-ch:
			if !ok {
				t.Fatal(errors.New("subscription closed"))
			}
			if n == want {
				return
			}
		case <-limit:
			t.Fatalf("no %+v within 20s", want)
		}
	}
}

// stallProxy forwards TCP connections to target. stall makes every
// connection open so far stop forwarding without closing, as a connection
// whose peer vanished (or whose NAT state was dropped) behaves: writes are
// accepted, nothing comes back. refuse makes new connections fail at once.
type stallProxy struct {
	l      net.Listener
	target string

	mu      sync.Mutex
	conns   []*stallConn
	refused bool
}

type stallConn struct {
	stalled atomic.Bool
	client  net.Conn
	server  net.Conn
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{l: l, target: target}
	t.Cleanup(p.close)
	go p.serve()
	return p
}

func (p *stallProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refused := p.refused
		p.mu.Unlock()
		if refused {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		sc := &stallConn{client: c, server: s}
		p.mu.Lock()
		p.conns = append(p.conns, sc)
		p.mu.Unlock()
		go sc.pipe(s, c)
		go sc.pipe(c, s)
	}
}

// pipe copies src to dst until either fails; once stalled it reads and
// drops, so that the writer never blocks and never hears of a problem.
func (sc *stallConn) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !sc.stalled.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			dst.Close()
			src.Close()
			return
		}
	}
}

func (p *stallProxy) stall(refuseNew bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refused = refuseNew
	for _, c := range p.conns {
		c.stalled.Store(true)
	}
}

func (p *stallProxy) accept() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refused = false
}

func (p *stallProxy) close() {
	p.l.Close() // safe to call twice
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.client.Close()
		c.server.Close()
	}
}

// throughProxy returns dsn with its host replaced by the proxy's.
func throughProxy(t *testing.T, dsn string) (string, *stallProxy) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := newStallProxy(t, u.Host)
	u.Host = p.l.Addr().String()
	return u.String(), p
}

// The listener's connection stops answering without closing: its poll
// times out, the connection is replaced, subscribers get a Resync and then
// notifications again.
func TestListenerStalledConnection(t *testing.T) {
	t.Parallel()
	dsn := pgtest.WithParams(pgtest.Start(t), "synchronous_commit", "off")
	schema := pgtest.Schema(t, dsn)
	proxied, proxy := throughProxy(t, dsn)
	a, err := Open(t.Context(), proxied, &Options{Schema: schema, PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// First, as a dead peer's connections would end some day: pgx waits up
	// to 15s for a stalled connection's close, and the pool's Close for
	// that.
	defer proxy.close()
	a.hub.timeout = 300 * time.Millisecond // before Subscribe starts the listener
	b, err := Open(t.Context(), dsn, &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ch, err := a.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: "before"}); err != nil {
		t.Fatal(err)
	}
	wait(t, ch, checkpoint.Notification{Kind: checkpoint.QuestionCreated, ThreadID: "t", QuestionID: "before"})

	start := time.Now()
	proxy.stall(false)
	wait(t, ch, checkpoint.Notification{Kind: checkpoint.Resync})
	t.Logf("Resync %v after the connection stalled", time.Since(start).Round(time.Millisecond))
	if _, _, err := b.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: "after"}); err != nil {
		t.Fatal(err)
	}
	wait(t, ch, checkpoint.Notification{Kind: checkpoint.QuestionCreated, ThreadID: "t", QuestionID: "after"})
	t.Logf("notified %v after the connection stalled", time.Since(start).Round(time.Millisecond))
}

// While the listener cannot reconnect, the pool polls instead; a pool
// connection that stops answering must not hold that poll (and with it
// every further attempt to listen) forever.
func TestFallbackPollStalledConnection(t *testing.T) {
	t.Parallel()
	dsn := pgtest.WithParams(pgtest.Start(t), "synchronous_commit", "off")
	schema := pgtest.Schema(t, dsn)
	proxied, proxy := throughProxy(t, dsn)
	a, err := Open(t.Context(), proxied, &Options{Schema: schema, PollInterval: 100 * time.Millisecond, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// First, as a dead peer's connections would end some day: pgx waits up
	// to 15s for a stalled connection's close, and the pool's Close for
	// that.
	defer proxy.close()
	a.hub.timeout = 300 * time.Millisecond
	b, err := Open(t.Context(), dsn, &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ch, err := a.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The pool's one connection is open (Open used it), and stalls with
	// the listener's; new connections are refused for a while.
	proxy.stall(true)
	time.Sleep(1500 * time.Millisecond) // the listener is lost, the fallback polls run into the stalled pool connection
	proxy.accept()
	start := time.Now()
	wait(t, ch, checkpoint.Notification{Kind: checkpoint.Resync})
	t.Logf("Resync %v after connections were accepted again", time.Since(start).Round(time.Millisecond))
	if _, _, err := b.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: "after"}); err != nil {
		t.Fatal(err)
	}
	wait(t, ch, checkpoint.Notification{Kind: checkpoint.QuestionCreated, ThreadID: "t", QuestionID: "after"})
	t.Logf("notified %v after connections were accepted again", time.Since(start).Round(time.Millisecond))
}

// A step's name in errors is put together only on failure; it reads as
// the names built eagerly before did (fmt's %q is strconv.Quote), empty
// ids included.
func TestStepWhat(t *testing.T) {
	for _, c := range []struct {
		st   step
		want string
	}{
		{step{kind: "events"}, "events"},
		{step{kind: "thread", id: "t1", ids: 1}, `thread "t1"`},
		{step{kind: "thread", ids: 1}, `thread ""`},
		{step{kind: "lease of thread", id: "t\"1", ids: 1}, `lease of thread "t\"1"`},
		{step{kind: "tool call", id: "c1", run: "r1", ids: 2}, fmt.Sprintf("tool call %q of run %q", "c1", "r1")},
		{step{kind: "tool call", ids: 2}, fmt.Sprintf("tool call %q of run %q", "", "")},
	} {
		if got := c.st.what(); got != c.want {
			t.Errorf("what() = %s, want %s", got, c.want)
		}
	}
	_, err := claimLost(context.Background(), nil, `tool call "c1" of run "r1"`)
	if !errors.Is(err, checkpoint.ErrConflict) || err.Error() != `tool call "c1" of run "r1" is already claimed: `+checkpoint.ErrConflict.Error() {
		t.Errorf("claimLost: %v", err)
	}
}

// checkTimesOf refuses what checkTimes refuses, with the same message,
// and names the write only then.
func TestCheckTimesOf(t *testing.T) {
	ok := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	for _, ts := range [][]time.Time{{ok}, {{}}, {ok, {}}, {minTime}, {endTime.Add(-time.Microsecond)},
		{minTime.Add(-time.Microsecond)}, {endTime}, {ok, endTime}, {{}, minTime.Add(-time.Hour)}} {
		want := checkTimes(`create question "q\"1"`, ts...)
		got := checkTimesOf("create question", `q"1`, ts...)
		if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
			t.Errorf("%v: checkTimesOf = %v, checkTimes = %v", ts, got, want)
		}
	}
	if checkTimesOf("x", "y", endTime) == nil || checkTimesOf("x", "y", ok) != nil {
		t.Error("checkTimesOf: refused a kept time or kept a refused one")
	}
}
