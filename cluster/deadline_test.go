package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/cluster"
)

// Checked sound: a deadline further away than River's scheduler interval
// fires once, on time, on one of two replicas.
func TestLongDeadlineFiresOnTime(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	a := w.replica(t, 2*time.Second, 8*time.Second)
	b := w.replica(t, 2*time.Second, 8*time.Second)
	if _, _, err := a.h.Prompt(ctx, "t1", "t1\n$ echo late", nil); err != nil {
		t.Fatal(err)
	}
	q := pending(t, a.store, "t1", 1)[0]
	idle(t, a.store, "t1")
	got, err := a.store.GetQuestion(ctx, "t1", q.ID)
	if err != nil {
		t.Fatal(err)
	}
	late := got.ResolvedAt.Sub(q.Deadline)
	t.Logf("deadline %s, resolved %s (%s late), status %s; fired a=%d b=%d", q.Deadline.Format(time.RFC3339Nano), got.ResolvedAt.Format(time.RFC3339Nano), late, got.Status, a.c.Stats().DeadlinesFired, b.c.Stats().DeadlinesFired)
	if got.Status != checkpoint.QuestionTimedOut || late < 0 || late > time.Second {
		t.Errorf("status %s, %s late", got.Status, late)
	}
	if n := deadlinesFired(t, 1, a.c, b.c); n != 1 {
		t.Errorf("fired %d times", n)
	}
}

// holdRiverLeadership makes River's leadership that of a replica that was
// killed: its row stays, as a killed leader's does until it expires (10–15
// s; here an hour), and no live replica can be elected meanwhile.
func holdRiverLeadership(t *testing.T, pg *postgres.Store) {
	t.Helper()
	_, err := pg.Pool().Exec(context.Background(), `WITH gone AS (DELETE FROM river_leader)
INSERT INTO river_leader (name, leader_id, elected_at, expires_at) VALUES ('default', 'a-killed-replica', now(), now() + interval '1 hour')`)
	if err != nil {
		t.Fatal(err)
	}
}

// Issue 22 item 5: deadlines fire while River has no leader. River's
// leader alone makes scheduled jobs available (its scheduler), so when
// deadlines were jobs scheduled before them, a killed leader held them
// until its leadership expired and another replica's scheduler ran: 7–21
// s late in the trial, and never here, where the dead leader's row stays.
// Every replica's host now fires deadlines from the store.
func TestDeadlinesFireWithoutALeader(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	// River's tables first (a cluster that is never started, as a
	// command line's), then the leadership a killed replica holds, then
	// the replicas: none of them is ever River's leader.
	pg, err := postgres.Open(ctx, w.dsn, &postgres.Options{Schema: w.schema})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if _, err := cluster.New(ctx, cluster.Config{Store: pg}); err != nil {
		t.Fatal(err)
	}
	holdRiverLeadership(t, pg)
	// Deadlines beyond River's scheduler interval (5 s) and beyond what
	// a deadline job used to be scheduled ahead of its time (6 s).
	const timeout = 10 * time.Second
	a := w.replica(t, 2*time.Second, timeout)
	b := w.replica(t, 2*time.Second, timeout)
	threads := []string{"t1", "t2", "t3", "t4"}
	for i, th := range threads {
		r := a
		if i%2 == 1 {
			r = b
		}
		if _, _, err := r.h.Prompt(ctx, th, th+"\n$ echo "+th, nil); err != nil {
			t.Fatal(err)
		}
	}
	asked := map[string]*checkpoint.Question{}
	for _, th := range threads {
		asked[th] = pending(t, a.store, th, 1)[0]
	}
	for _, th := range threads {
		eventually(t, th+"'s question to time out and its run to finish", timeout+30*time.Second, func() (bool, error) {
			got, err := a.store.LoadThread(ctx, th)
			return err == nil && got.Status == checkpoint.ThreadIdle, nil
		})
	}
	var late []time.Duration
	for _, th := range threads {
		got, err := a.store.GetQuestion(ctx, th, asked[th].ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != checkpoint.QuestionTimedOut {
			t.Errorf("%s: question %s, want timed_out", th, got.Status)
		}
		late = append(late, got.ResolvedAt.Sub(got.Deadline))
	}
	if n := deadlinesFired(t, int64(len(threads)), a.c, b.c); n != int64(len(threads)) {
		t.Errorf("deadlines fired %d times, want %d", n, len(threads))
	}
	var leader string
	if err := pg.Pool().QueryRow(ctx, `SELECT leader_id FROM river_leader`).Scan(&leader); err != nil || leader != "a-killed-replica" {
		t.Fatalf("River's leader is %q (%v): the test did not keep the replicas from being elected", leader, err)
	}
	slices.Sort(late)
	t.Logf("with River's leader dead, deadlines fired after their time by %v (fired: a %d, b %d)", fmt.Sprint(late), a.c.Stats().DeadlinesFired, b.c.Stats().DeadlinesFired)
}
