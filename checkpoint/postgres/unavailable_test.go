package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

// A store that cannot reach its server — connections cut and refused
// (a network cut, a server restarting), or ended by the server (a
// backend terminated) — fails reads and writes with
// checkpoint.ErrUnavailable, so that a run can tell "try again once the
// store is back" from a refusal (issue 22 item 6); a lost
// compare-and-set is not that; and once the server is back the store
// works again.
func TestUnavailable(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	proxy, through := pgtest.NewProxy(t, dsn)
	s := open(t, through, pgtest.Schema(t, dsn), nil)
	defer s.Close()
	if err := s.CreateThread(ctx, &checkpoint.Thread{ID: "t1", Status: checkpoint.ThreadIdle}); err != nil {
		t.Fatal(err)
	}
	err := s.CreateThread(ctx, &checkpoint.Thread{ID: "t1", Status: checkpoint.ThreadIdle})
	if !errors.Is(err, checkpoint.ErrConflict) || errors.Is(err, checkpoint.ErrUnavailable) {
		t.Errorf("a thread created twice: %v, want a conflict, not unavailable", err)
	}
	event := func() error {
		_, err := s.Commit(ctx, &checkpoint.Batch{Events: []*checkpoint.Event{{ThreadID: "t1", Type: "note"}}})
		return err
	}

	proxy.Cut()
	for what, err := range map[string]error{
		"a read":  func() error { _, err := s.LoadThread(ctx, "t1"); return err }(),
		"a list":  func() error { _, _, err := s.ListQuestions(ctx, checkpoint.QuestionFilter{}); return err }(),
		"a write": event(),
	} {
		if !errors.Is(err, checkpoint.ErrUnavailable) {
			t.Errorf("%s with the connections cut: %v, want checkpoint.ErrUnavailable", what, err)
		}
	}
	proxy.Restore()
	if err := event(); err != nil {
		t.Fatalf("a write once the server is back: %v", err)
	}

	// The server ends the connection the pool hands out next (the one
	// used last).
	c, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid := c.Conn().PgConn().PID()
	c.Release()
	if err := pgtest.Exec(ctx, dsn, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	if err := event(); !errors.Is(err, checkpoint.ErrUnavailable) {
		t.Errorf("a write on a connection the server ended: %v, want checkpoint.ErrUnavailable", err)
	}
}
