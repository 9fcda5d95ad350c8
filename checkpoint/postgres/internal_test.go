package postgres

import (
	"context"
	"errors"
	"fmt"
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
