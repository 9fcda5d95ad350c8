package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/cursor"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

func openTest(t *testing.T, opts *Options) (*Store, string) {
	t.Helper()
	dsn := pgtest.WithParams(pgtest.Start(t), "synchronous_commit", "off")
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.Schema = pgtest.Schema(t, dsn)
	s, err := Open(t.Context(), dsn, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}

// slowWriter commits events as a batch does, but holds its transaction
// open for hold after numbering them: an event that commits late with a
// lower seq than events committed meanwhile.
func slowWriter(ctx context.Context, s *Store, thread string, n int, hold time.Duration) ([]int64, error) {
	var seqs []int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, writersLock, int32(lockClass), s.writersKey); err != nil {
			return err
		}
		evs := make([][]any, n)
		for i := range evs {
			evs[i] = []any{thread, "run", "slow", nil, time.Now()}
		}
		rows, err := tx.Query(ctx, appendEvents.sql(n), rowArgs(evs, eventColumns)...)
		if err != nil {
			return err
		}
		seqs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		time.Sleep(hold)
		return nil
	})
	return seqs, err
}

// Many writers commit events, some holding their transaction open after
// numbering them (so that events commit out of seq order), some losing a
// compare-and-set (their events never exist); one reader pages the log by
// its cursor all along. In the end it has seen every committed event
// exactly once, in seq order. A naive reader (seq > cursor, no horizon)
// beside it shows that the race happens.
func TestEventsNeverSkipped(t *testing.T) {
	s, _ := openTest(t, &Options{MaxConns: 16})
	ctx := t.Context()
	const writers = 8
	duration := 2 * time.Second
	if testing.Short() {
		duration = time.Second
	}

	var mu sync.Mutex
	committed := map[int64]bool{}
	record := func(seqs []int64) {
		mu.Lock()
		defer mu.Unlock()
		for _, q := range seqs {
			if committed[q] {
				t.Errorf("seq %d given twice", q)
			}
			committed[q] = true
		}
	}
	var wg sync.WaitGroup
	stop := time.Now().Add(duration)
	var lost atomic.Int64
	for w := range writers {
		wg.Go(func() {
			thread := fmt.Sprint("w", w)
			th := &checkpoint.Thread{ID: thread, Status: checkpoint.ThreadRunning, RunID: "run"}
			if err := s.CreateThread(ctx, th); err != nil {
				t.Error(err)
				return
			}
			for i := 0; time.Now().Before(stop); i++ {
				switch r := rand.IntN(10); {
				case r == 0: // late commit, low seq
					seqs, err := slowWriter(ctx, s, thread, 1+rand.IntN(3), time.Duration(rand.IntN(30))*time.Millisecond)
					if err != nil {
						t.Error(err)
						return
					}
					record(seqs)
				case r == 1: // loses: its events must never show
					w := &checkpoint.ThreadWrite{ID: thread, Version: th.Version - 1, Status: th.Status, RunID: "run"}
					_, err := s.Commit(ctx, &checkpoint.Batch{Thread: w, Events: []*checkpoint.Event{{ThreadID: thread, Type: "lost"}}})
					if err == nil {
						t.Error("a stale write committed")
					}
					lost.Add(1)
				default:
					evs := make([]*checkpoint.Event, 1+rand.IntN(3))
					for j := range evs {
						evs[j] = &checkpoint.Event{ThreadID: thread, RunID: "run", Type: "step", Data: json.RawMessage(fmt.Sprintf(`{"i":%d,"j":%d}`, i, j))}
					}
					w := &checkpoint.ThreadWrite{ID: thread, Version: th.Version, Status: th.Status, RunID: "run", Append: []json.RawMessage{json.RawMessage(`{}`)}}
					c, err := s.Commit(ctx, &checkpoint.Batch{Thread: w, Events: evs})
					if err != nil {
						t.Error(err)
						return
					}
					th.Version = w.Version
					record(c.EventSeqs)
				}
			}
		})
	}

	var seen []int64
	var naiveSkipped atomic.Int64
	done := make(chan struct{})
	readers := sync.WaitGroup{}
	readers.Go(func() { // the reader under test
		var after int64
		for {
			select {
			case <-done:
				return
			default:
			}
			evs, err := s.ListEvents(ctx, "", after, 50)
			if err != nil {
				t.Error(err)
				return
			}
			for _, e := range evs {
				seen = append(seen, e.Seq)
				after = e.Seq
			}
		}
	})
	readers.Go(func() { // a reader without the horizon
		var after int64
		got := map[int64]bool{}
		for {
			select {
			case <-done:
				// Everything has committed: what it never saw below its
				// cursor, it skipped.
				rows, err := s.pool.Query(context.Background(), `SELECT seq FROM events ORDER BY seq`)
				if err != nil {
					t.Error(err)
					return
				}
				all, err := pgx.CollectRows(rows, pgx.RowTo[int64])
				if err != nil {
					t.Error(err)
					return
				}
				for _, q := range all {
					if q <= after && !got[q] {
						naiveSkipped.Add(1)
					}
				}
				return
			default:
			}
			rows, err := s.pool.Query(ctx, `SELECT seq FROM events WHERE seq > $1 ORDER BY seq LIMIT 50`, after)
			if err != nil {
				t.Error(err)
				return
			}
			page, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				t.Error(err)
				return
			}
			for _, q := range page {
				got[q] = true
				after = q
			}
		}
	})
	wg.Wait()
	close(done)
	readers.Wait()
	// The rest, once everything has committed.
	after := int64(0)
	if len(seen) > 0 {
		after = seen[len(seen)-1]
	}
	for {
		evs, err := s.ListEvents(ctx, "", after, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			seen = append(seen, e.Seq)
			after = e.Seq
		}
	}

	if !slices.IsSorted(seen) {
		t.Error("the reader saw events out of seq order")
	}
	if len(slices.Compact(slices.Clone(seen))) != len(seen) {
		t.Error("the reader saw an event twice")
	}
	var want []int64
	for q := range committed {
		want = append(want, q)
	}
	slices.Sort(want)
	if !slices.Equal(seen, want) {
		var missing []int64
		for _, q := range want {
			if _, ok := slices.BinarySearch(seen, q); !ok {
				missing = append(missing, q)
			}
		}
		t.Errorf("the reader saw %d events, %d committed; missed %d: %v", len(seen), len(want), len(missing), missing[:min(len(missing), 20)])
	}
	t.Logf("%d events committed, %d batches lost; the reader saw all; a reader without the horizon skipped %d", len(want), lost.Load(), naiveSkipped.Load())
}

// A writer reads its own events at once, with other writers committing
// all along; an event that a transaction still running may precede is
// withheld (ListEvents waits, at most eventWait, then returns what is
// safe), and comes once that transaction ends, after the earlier one.
func TestEventsWithheldUntilSettled(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := t.Context()

	seq, err := s.AppendEvent(ctx, &checkpoint.Event{ThreadID: "t", Type: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	evs, err := s.ListEvents(ctx, "t", 0, 0)
	if err != nil || len(evs) != 1 || evs[0].Seq != seq {
		t.Fatalf("ListEvents after AppendEvent = %v, %v", evs, err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("reading one's own event took %v", d)
	}

	// An event writer numbers its event and does not commit yet.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, writersLock, int32(lockClass), s.writersKey); err != nil {
		t.Fatal(err)
	}
	var early int64
	if err := tx.QueryRow(ctx, appendEvents.sql(1), "t", "run", "early", nil, time.Now()).Scan(&early); err != nil {
		t.Fatal(err)
	}
	late, err := s.AppendEvent(ctx, &checkpoint.Event{ThreadID: "t", Type: "late"})
	if err != nil {
		t.Fatal(err)
	}
	if late <= early {
		t.Fatalf("seq %d of the later transaction is not above %d", late, early)
	}
	start = time.Now()
	gaveUp := s.gaveUp.Load()
	evs, err = s.ListEvents(ctx, "", seq, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 0 {
		t.Errorf("ListEvents returned %d events above a transaction still running", len(evs))
	}
	if d := time.Since(start); d < eventWait || s.gaveUp.Load() != gaveUp+1 {
		t.Errorf("ListEvents returned after %v, having given up %d times; want after waiting %v, giving up once", d, s.gaveUp.Load()-gaveUp, eventWait)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err = s.ListEvents(ctx, "", seq, 0)
	if err != nil || len(evs) != 2 || evs[0].Seq != early || evs[1].Seq != late {
		t.Errorf("after the commit: %v, %v; want %d then %d", evs, err, early, late)
	}
}

// Another transaction of the cluster that holds an id for long (another
// application's, a session idle in transaction) holds back the
// snapshot's xmin, but writes no event: it must not stop the log.
func TestEventsIgnoreOtherTransactions(t *testing.T) {
	s, dsn := openTest(t, nil)
	ctx := t.Context()
	other, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	var xid int64
	if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		seq, err := s.AppendEvent(ctx, &checkpoint.Event{ThreadID: "t", Type: fmt.Sprint("e", i)})
		if err != nil {
			t.Fatal(err)
		}
		gaveUp := s.gaveUp.Load()
		evs, err := s.ListEvents(ctx, "t", seq-1, 0)
		if err != nil || len(evs) != 1 || evs[0].Seq != seq {
			t.Fatalf("event %d: %v, %v", i, evs, err)
		}
		// Withheld, it would come only when settle gave up at eventWait
		// (or not at all). Not a clock: CI at load 20 once took 1.01 s
		// for a few rounds of writersHorizon that did let it through.
		if s.gaveUp.Load() != gaveUp {
			t.Errorf("event %d came only when ListEvents gave up waiting, with transaction %d running", i, xid)
		}
	}
}

// A dump restored into another cluster: the log's seqs are above what the
// cluster's transaction ids would number. Open raises the base, so that
// new events still come after the old ones.
func TestEventBaseAfterRestore(t *testing.T) {
	s, dsn := openTest(t, nil)
	ctx := t.Context()
	const restored = int64(1) << 50
	if _, err := s.pool.Exec(ctx, `INSERT INTO events (seq, thread_id, run_id, type, data, at) VALUES ($1, 't', 'run', 'restored', NULL, now())`, restored); err != nil {
		t.Fatal(err)
	}
	again, err := Open(ctx, dsn, &Options{Schema: s.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	seq, err := again.AppendEvent(ctx, &checkpoint.Event{ThreadID: "t", Type: "new"})
	if err != nil {
		t.Fatal(err)
	}
	if seq <= restored {
		t.Fatalf("new seq %d, not above the restored %d", seq, restored)
	}
	evs, err := again.ListEvents(ctx, "t", 0, 0)
	if err != nil || len(evs) != 2 || evs[0].Seq != restored || evs[1].Seq != seq {
		t.Errorf("ListEvents = %v, %v", evs, err)
	}
	// The next Open finds nothing to do.
	var base int64
	if err := s.pool.QueryRow(ctx, `SELECT base FROM seq_base`).Scan(&base); err != nil {
		t.Fatal(err)
	}
	third, err := Open(ctx, dsn, &Options{Schema: s.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	third.Close()
	var after int64
	if err := s.pool.QueryRow(ctx, `SELECT base FROM seq_base`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != base {
		t.Errorf("base changed from %d to %d with nothing to do", base, after)
	}
}

// Questions are numbered as events are: a reader paging the queue oldest
// first, and going on from its last position once it has reached the
// end, sees every question exactly once, with writers creating them all
// along, some committing late with a low number.
func TestQuestionsOldestFirstNeverSkipped(t *testing.T) {
	s, _ := openTest(t, &Options{MaxConns: 16})
	ctx := t.Context()
	var mu sync.Mutex
	created := map[string]bool{}
	var wg sync.WaitGroup
	stop := time.Now().Add(time.Second)
	for w := range 6 {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				id := fmt.Sprintf("w%d-q%d", w, i)
				if rand.IntN(5) == 0 { // late commit, low number
					err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
						if _, err := tx.Exec(ctx, writersLock, int32(lockClass), s.writersKey); err != nil {
							return err
						}
						if _, err := tx.Exec(ctx, createQuestion, "t", id, "run", "", "bash", "approve", nil, "", time.Now(), nil); err != nil {
							return err
						}
						time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
				} else if _, _, err := s.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "t", ID: id, Tool: "bash", Kind: "approve"}); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				created[id] = true
				mu.Unlock()
			}
		})
	}
	seen := map[string]int{}
	var last int64
	read := func() {
		f := checkpoint.QuestionFilter{Status: checkpoint.QuestionPending, Limit: 7}
		if last > 0 {
			f.After = cursor.Question{Order: checkpoint.OldestFirst, Seq: last}.Encode()
		}
		qs, _, err := s.ListQuestions(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			seen[q.ID]++
		}
		if len(qs) > 0 {
			if err := s.pool.QueryRow(ctx, `SELECT seq FROM questions WHERE thread_id = 't' AND id = $1`, qs[len(qs)-1].ID).Scan(&last); err != nil {
				t.Fatal(err)
			}
		}
	}
	for time.Now().Before(stop) {
		read()
	}
	wg.Wait()
	for range 100 {
		read()
	}
	for id := range created {
		if seen[id] != 1 {
			t.Errorf("question %s seen %d times", id, seen[id])
		}
	}
	t.Logf("%d questions created, %d seen", len(created), len(seen))
}
