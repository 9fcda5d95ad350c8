package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/checkpointtest"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

// With a hook that wants every batch, every write goes the way of a
// batch with a job (a transaction of pgx's, the hook, COMMIT, then the
// notifications): the store must behave exactly the same.
func TestConformanceTxHook(t *testing.T) {
	dsn := testDSN(t)
	checkpointtest.Run(t, func(t *testing.T) checkpoint.Store {
		s := open(t, dsn, pgtest.Schema(t, dsn), nil)
		s.SetTxHook(&postgres.TxHook{
			Wants: func(*checkpoint.Batch) bool { return true },
			InTx: func(ctx context.Context, tx pgx.Tx, b *checkpoint.Batch, c *checkpoint.Committed) error {
				_, err := tx.Exec(ctx, "SELECT 1")
				return err
			},
		})
		return s
	})
}

// The hook runs in the batch's transaction: its writes commit with the
// batch, its error rolls the batch back, and it never runs for a batch
// that lost.
func TestTxHook(t *testing.T) {
	dsn := testDSN(t)
	s := open(t, dsn, pgtest.Schema(t, dsn), nil)
	ctx := t.Context()
	if _, err := s.Pool().Exec(ctx, `CREATE TABLE hook_log (thread text, question text)`); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	fail := errors.New("the hook refuses")
	var refuse atomic.Bool
	s.SetTxHook(&postgres.TxHook{
		Wants: func(b *checkpoint.Batch) bool { return b.Question != nil },
		InTx: func(ctx context.Context, tx pgx.Tx, b *checkpoint.Batch, c *checkpoint.Committed) error {
			calls.Add(1)
			if !c.Created || c.Question == nil {
				t.Errorf("the hook ran for a batch that did not create its question: %+v", c)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO hook_log VALUES ($1, $2)`, c.Question.ThreadID, c.Question.ID); err != nil {
				return err
			}
			if refuse.Load() {
				return fail
			}
			return nil
		},
	})
	if err := s.CreateThread(ctx, &checkpoint.Thread{ID: "t1", Status: checkpoint.ThreadIdle}); err != nil {
		t.Fatal(err)
	}
	batch := func(version int64, q string) *checkpoint.Batch {
		return &checkpoint.Batch{
			Thread:   &checkpoint.ThreadWrite{ID: "t1", Version: version, Status: checkpoint.ThreadRunning, Append: []json.RawMessage{json.RawMessage(`{"n":1}`)}},
			Question: &checkpoint.Question{ThreadID: "t1", ID: q, RunID: "r1", Kind: "approve", Payload: json.RawMessage(`{}`)},
		}
	}
	logged := func() int {
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM hook_log`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := s.Commit(ctx, batch(1, "q1")); err != nil {
		t.Fatal(err)
	}
	if logged() != 1 {
		t.Fatalf("the hook's write did not commit with the batch")
	}
	// Refused: nothing of the batch, nothing of the hook.
	refuse.Store(true)
	if _, err := s.Commit(ctx, batch(2, "q2")); !errors.Is(err, fail) {
		t.Fatalf("a batch whose hook failed: %v, want the hook's error", err)
	}
	refuse.Store(false)
	if th, _ := s.LoadThread(ctx, "t1"); th.Version != 2 {
		t.Errorf("thread at version %d after a refused batch, want 2", th.Version)
	}
	if _, err := s.GetQuestion(ctx, "t1", "q2"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("the question of a refused batch: %v", err)
	}
	if logged() != 1 {
		t.Errorf("the refused hook's write committed")
	}
	// Lost: the hook does not run.
	before := calls.Load()
	if _, err := s.Commit(ctx, batch(1, "q3")); !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("a stale version: %v, want ErrConflict", err)
	}
	if c, err := s.Commit(ctx, batch(2, "q1")); err != nil || c.Created {
		t.Fatalf("a batch whose question exists: %+v, %v", c, err)
	}
	if calls.Load() != before {
		t.Errorf("the hook ran for batches that lost")
	}
}
