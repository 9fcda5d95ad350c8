package postgres_test

// The fence and the hook path under concurrency (issue 14).

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

// the cluster's acquire statement (cluster/lease.go), verbatim.
const reviewAcquire = `INSERT INTO leases AS l (thread_id, epoch, owner, expires_at)
VALUES ($1, nextval('lease_epochs'), $2, now() + $3 * interval '1 millisecond')
ON CONFLICT (thread_id) DO UPDATE SET epoch = excluded.epoch, owner = excluded.owner, expires_at = excluded.expires_at
WHERE l.expires_at < now()
RETURNING epoch`

// the cluster's rescue statement (cluster/lease.go), verbatim.
const reviewRescue = `DELETE FROM leases WHERE expires_at < now() RETURNING thread_id`

func reviewConn(t *testing.T, dsn, schema string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if _, err := c.Exec(t.Context(), "SET search_path TO "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return c
}

func isLockTimeout(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// Sound: in the implicit-transaction pipeline (a thread write, no
// question), the fence's FOR SHARE is held until the pipeline's commit, so
// a takeover of an expired lease waits for the write.
func TestFenceHeldInImplicitPipeline(t *testing.T) {
	dsn := testDSN(t)
	schema := pgtest.Schema(t, dsn)
	s := open(t, dsn, schema, nil)
	ctx := t.Context()
	if err := s.CreateThread(ctx, &checkpoint.Thread{ID: "t1", Status: checkpoint.ThreadIdle}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO leases VALUES ('t1', 7, 'A', now() - interval '1 s')`); err != nil {
		t.Fatal(err)
	}
	// Something else holds the thread's row: the fenced write waits for
	// it after its fence.
	holder := reviewConn(t, dsn, schema)
	if _, err := holder.Exec(ctx, `BEGIN; SELECT 1 FROM threads WHERE id = 't1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Commit(postgres.WithFence(ctx, postgres.Fence{ThreadID: "t1", Epoch: 7}), &checkpoint.Batch{
			Thread: &checkpoint.ThreadWrite{ID: "t1", Version: 1, Status: checkpoint.ThreadRunning, Append: []json.RawMessage{json.RawMessage(`{"n":1}`)}},
		})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	taker := reviewConn(t, dsn, schema)
	if _, err := taker.Exec(ctx, `SET lock_timeout = '500ms'`); err != nil {
		t.Fatal(err)
	}
	var epoch int64
	err := taker.QueryRow(ctx, reviewAcquire, "t1", "B", 15000).Scan(&epoch)
	t.Logf("takeover while the fenced write is in flight: %v", err)
	if !isLockTimeout(err) {
		t.Errorf("takeover did not wait for the fenced write: %v (epoch %d)", err, epoch)
	}
	holder.Exec(ctx, `ROLLBACK`)
	if err := <-done; err != nil {
		t.Fatalf("fenced write: %v", err)
	}
	if err := taker.QueryRow(ctx, reviewAcquire, "t1", "B", 15000).Scan(&epoch); err != nil {
		t.Fatal(err)
	}
	_, err = s.Commit(postgres.WithFence(ctx, postgres.Fence{ThreadID: "t1", Epoch: 7}), &checkpoint.Batch{
		Thread: &checkpoint.ThreadWrite{ID: "t1", Version: 2, Status: checkpoint.ThreadRunning},
	})
	if !errors.Is(err, postgres.ErrFenced) {
		t.Errorf("write under the old epoch after the takeover: %v, want ErrFenced", err)
	}
}

// The hook path keeps its transaction open across client round trips
// (BEGIN; the batch; the hook's statements; COMMIT). If the replica stops
// between them (SIGSTOP, VM pause, a network partition: anything but a
// clean close of its socket), the server keeps the transaction "idle in
// transaction" -- with the numbered writers' lock, a transaction id, the
// lease row FOR SHARE and the question's row -- until TCP keepalive
// notices (tcp_keepalives_idle 0 = the OS's 7200 s): no
// idle_in_transaction_session_timeout is set by the store. Meanwhile, on
// every OTHER replica: events and questions written after it are never
// returned (the horizon is stuck at its id), the rescue of ALL expired
// leases blocks, and the thread cannot be taken over.
func TestHookTxFrozenReplica(t *testing.T) {
	dsn := testDSN(t)
	schema := pgtest.Schema(t, dsn)
	frozen := open(t, dsn, schema, nil) // the replica that stops mid-commit
	other := open(t, dsn, schema, nil)  // a healthy replica
	ctx := t.Context()
	entered := make(chan struct{})
	thaw := make(chan struct{})
	var once atomic.Bool
	frozen.SetTxHook(&postgres.TxHook{
		Wants: func(b *checkpoint.Batch) bool { return b.Question != nil && !b.Question.Deadline.IsZero() },
		InTx: func(ctx context.Context, tx pgx.Tx, b *checkpoint.Batch, c *checkpoint.Committed) error {
			if once.CompareAndSwap(false, true) {
				close(entered)
			}
			<-thaw // the process is stopped here
			return nil
		},
	})
	for _, id := range []string{"t1", "t2", "t3"} {
		if err := other.CreateThread(ctx, &checkpoint.Thread{ID: id, Status: checkpoint.ThreadIdle}); err != nil {
			t.Fatal(err)
		}
	}
	// The frozen replica's lease of t1 (it expires while it is frozen),
	// and one of a replica that died cleanly, on t9.
	if _, err := other.Pool().Exec(ctx, `INSERT INTO leases VALUES ('t1', 7, 'A', now() + interval '200 ms'), ('t9', 8, 'dead', now() - interval '1 s')`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := frozen.Commit(postgres.WithFence(ctx, postgres.Fence{ThreadID: "t1", Epoch: 7}), &checkpoint.Batch{
			Question: &checkpoint.Question{ThreadID: "t1", ID: "q1", RunID: "r1", Kind: "approve", Payload: json.RawMessage(`{}`), Deadline: time.Now().Add(time.Hour)},
			Events:   []*checkpoint.Event{{ThreadID: "t1", RunID: "r1", Type: "asked"}},
		})
		done <- err
	}()
	<-entered
	defer func() {
		close(thaw)
		<-done
	}()
	time.Sleep(300 * time.Millisecond) // t1's lease is expired now

	var state string
	if err := other.Pool().QueryRow(ctx, `SELECT state || ', xid ' || backend_xid || ', for ' || round(extract(epoch FROM now() - state_change)::numeric, 1) || ' s' FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND datname = current_database() AND state = 'idle in transaction' LIMIT 1`).Scan(&state); err == nil {
		t.Logf("the frozen replica's backend: %s", state)
	}

	// A healthy replica writes an event and a question on other threads.
	if _, err := other.AppendEvent(ctx, &checkpoint.Event{ThreadID: "t2", RunID: "r2", Type: "healthy"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t3", ID: "q3", RunID: "r3", Kind: "approve", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	// While it is open, readers wait (they stop at the horizon of the
	// writers in flight); the server ends it after the store's
	// idle_in_transaction_session_timeout (5 s), and all goes on.
	var evs []*checkpoint.Event
	var qs []*checkpoint.Question
	var err error
	start := time.Now()
	for time.Since(start) < 10*time.Second {
		evs, err = other.ListEvents(ctx, "", 0, 100)
		if err == nil && len(evs) > 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("ListEvents on the healthy replica: %d events after %v", len(evs), time.Since(start).Round(time.Millisecond))
	if len(evs) == 0 || time.Since(start) > 7*time.Second {
		t.Errorf("the healthy replica's committed event is not returned %v after the frozen replica's transaction began (want within the 5 s idle timeout)", time.Since(start).Round(time.Millisecond))
	}
	qs, _, err = other.ListQuestions(ctx, checkpoint.QuestionFilter{Status: checkpoint.QuestionPending})
	if err != nil || len(qs) == 0 {
		t.Errorf("the healthy replica's committed question q3 is not listed after the frozen transaction ended: %d, %v", len(qs), err)
	}
	// The rescue and the takeover of t1 go on.
	c := reviewConn(t, dsn, schema)
	if _, err := c.Exec(ctx, `SET lock_timeout = '1s'`); err != nil {
		t.Fatal(err)
	}
	if _, err = c.Exec(ctx, reviewRescue); err != nil {
		t.Errorf("rescue after the frozen transaction ended: %v", err)
	}
	var epoch int64
	if err = c.QueryRow(ctx, reviewAcquire, "t1", "B", 15000).Scan(&epoch); err != nil {
		t.Errorf("takeover of t1 after the frozen transaction ended: %v", err)
	}
	if !strings.Contains(state, "idle in transaction") {
		t.Logf("(backend state not found as expected: %q)", state)
	}
}

// Sound: a context cancelled while the hook runs (the hook ignoring it
// and returning nil) fails the commit, writes nothing, and leaves no
// session idle in transaction; the pool goes on.
func TestHookCancelled(t *testing.T) {
	dsn := testDSN(t)
	schema := pgtest.Schema(t, dsn)
	s := open(t, dsn, schema, nil)
	ctx := t.Context()
	s.SetTxHook(&postgres.TxHook{
		Wants: func(b *checkpoint.Batch) bool { return b.Question != nil },
		InTx: func(ctx context.Context, tx pgx.Tx, b *checkpoint.Batch, c *checkpoint.Committed) error {
			if b.Question.ID == "slow" {
				<-ctx.Done()
			}
			return nil
		},
	})
	if err := s.CreateThread(ctx, &checkpoint.Thread{ID: "t1", Status: checkpoint.ThreadIdle}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, _, err := s.CreateQuestion(cctx, &checkpoint.Question{ThreadID: "t1", ID: "slow", RunID: "r", Kind: "approve", Payload: json.RawMessage(`{}`)})
	t.Logf("commit whose context ended in the hook: %v", err)
	if err == nil {
		t.Fatal("committed after its context ended")
	}
	time.Sleep(200 * time.Millisecond)
	var idle int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&idle); err != nil {
		t.Fatal(err)
	}
	if idle != 0 {
		t.Errorf("%d sessions idle in transaction after the cancelled commit", idle)
	}
	if _, err := s.GetQuestion(ctx, "t1", "slow"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("the cancelled commit's question: %v", err)
	}
	if _, _, err := s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t1", ID: "q2", RunID: "r", Kind: "approve", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Errorf("the next commit: %v", err)
	}
}

// A hook that panics (recovered above, as net/http does for a handler)
// leaves its connection checked out and its transaction open: nothing in
// sendTx is deferred. The session stays idle in transaction with the
// writers' lock and an id until the process exits -- and, as above, every
// replica's question list fails meanwhile.
func TestHookPanicLeaksTransaction(t *testing.T) {
	dsn := testDSN(t)
	schema := pgtest.Schema(t, dsn)
	s := open(t, dsn, schema, nil)
	other := open(t, dsn, schema, nil)
	ctx := t.Context()
	s.SetTxHook(&postgres.TxHook{
		Wants: func(b *checkpoint.Batch) bool { return b.Question != nil && b.Question.ID == "boom" },
		InTx: func(ctx context.Context, tx pgx.Tx, b *checkpoint.Batch, c *checkpoint.Committed) error {
			panic("hook bug")
		},
	})
	if err := s.CreateThread(ctx, &checkpoint.Thread{ID: "t1", Status: checkpoint.ThreadIdle}); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { t.Logf("recovered: %v", recover()) }()
		s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t1", ID: "boom", RunID: "r", Kind: "approve", Payload: json.RawMessage(`{}`)})
	}()
	if _, _, err := other.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t1", ID: "q2", RunID: "r", Kind: "approve", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	var idle int
	if err := other.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction' AND backend_xid IS NOT NULL`).Scan(&idle); err != nil {
		t.Fatal(err)
	}
	_, _, lerr := other.ListQuestions(ctx, checkpoint.QuestionFilter{Status: checkpoint.QuestionPending})
	t.Logf("sessions idle in transaction with an id 1.5 s later: %d; another store's ListQuestions: %v", idle, lerr)
	if idle > 0 || lerr != nil {
		t.Errorf("a panicking hook leaks an open transaction holding the horizon")
	}
	// Let the test's cleanup drop the schema: end the leaked session.
	other.Pool().Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'`)
}
