package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

func openFile(t *testing.T, opts *Options) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "tollgate.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// holdWriter takes the writer's only connection, so that the writer waits
// in BEGIN and the batches sent meanwhile queue; release gives it back.
// This is how the tests make a group without relying on timing.
func holdWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	conn, err := s.w.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { conn.Close() }) }
	t.Cleanup(release)
	return release
}

// waitQueued waits until n batches wait for the writer.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s.wr.mu.Lock()
		queued := len(s.wr.queue)
		s.wr.mu.Unlock()
		if queued >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d batches queued, want %d", queued, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func appendBatch(th *checkpoint.Thread, msg string, evType string) *checkpoint.Batch {
	return &checkpoint.Batch{
		Thread: &checkpoint.ThreadWrite{ID: th.ID, Version: th.Version, Status: checkpoint.ThreadRunning, RunID: "run-1",
			Append: []json.RawMessage{json.RawMessage(msg)}},
		Events: []*checkpoint.Event{{ThreadID: th.ID, RunID: "run-1", Type: evType}},
	}
}

type outcome struct {
	c   *checkpoint.Committed
	err error
}

// commitAll sends each batch from a goroutine of its own, once the one
// before is queued, and returns their outcomes once all have returned.
func commitAll(t *testing.T, s *Store, ctxs []context.Context, bs []*checkpoint.Batch, queuedBefore int) (wait func() []outcome) {
	t.Helper()
	out := make([]outcome, len(bs))
	var wg sync.WaitGroup
	for i, b := range bs {
		ctx := t.Context()
		if ctxs != nil && ctxs[i] != nil {
			ctx = ctxs[i]
		}
		wg.Go(func() {
			c, err := s.Commit(ctx, b)
			out[i] = outcome{c, err}
		})
		waitQueued(t, s, queuedBefore+i+1) // in this order
	}
	return func() []outcome { wg.Wait(); return out }
}

func createThreads(t *testing.T, s *Store, n int) []*checkpoint.Thread {
	t.Helper()
	ths := make([]*checkpoint.Thread, n)
	for i := range ths {
		ths[i] = &checkpoint.Thread{ID: fmt.Sprint("t", i), Status: checkpoint.ThreadIdle, Messages: json.RawMessage(`[]`)}
		if err := s.CreateThread(t.Context(), ths[i]); err != nil {
			t.Fatal(err)
		}
	}
	return ths
}

// Batches that wait for the writer together commit in one transaction,
// each with its own outcome.
func TestGroupCommit(t *testing.T) {
	s := openFile(t, nil)
	const n = 32
	ths := createThreads(t, s, n)
	before := s.WriteStats()
	release := holdWriter(t, s)
	bs := make([]*checkpoint.Batch, n)
	for i, th := range ths {
		bs[i] = appendBatch(th, fmt.Sprintf(`{"i":%d}`, i), "step")
	}
	wait := commitAll(t, s, nil, bs, 0)
	release()
	for i, o := range wait() {
		if o.err != nil {
			t.Fatalf("batch %d: %v", i, o.err)
		}
		if bs[i].Thread.Version != 2 || len(o.c.EventSeqs) != 1 || bs[i].Events[0].Seq != o.c.EventSeqs[0] {
			t.Errorf("batch %d: version %d, seqs %v", i, bs[i].Thread.Version, o.c.EventSeqs)
		}
	}
	st := s.WriteStats()
	tx, batches := st.Transactions-before.Transactions, st.Batches-before.Batches
	t.Logf("%d batches in %d transactions", batches, tx)
	if batches != n || tx >= batches || tx != 1 {
		t.Errorf("%d batches in %d transactions, want %d in 1", batches, tx, n)
	}
	for i, th := range ths {
		got, err := s.LoadThread(t.Context(), th.ID)
		if err != nil || string(got.Messages) != fmt.Sprintf(`[{"i":%d}]`, i) || got.Version != 2 {
			t.Errorf("%s: %s version %d, %v", th.ID, got.Messages, got.Version, err)
		}
	}
}

// Concurrent writers, not held: with a commit waiting for the disk, the
// ones that arrive meanwhile share the next one. (Fewer transactions than
// batches, not a rate.)
func TestGroupCommitConcurrentWriters(t *testing.T) {
	s := openFile(t, nil)
	const writers, each = 8, 30
	ths := createThreads(t, s, writers)
	before := s.WriteStats()
	release := holdWriter(t, s) // all start queued: at least one group
	var wg sync.WaitGroup
	for _, th := range ths {
		wg.Go(func() {
			for i := range each {
				b := appendBatch(th, fmt.Sprint(i), "step")
				if _, err := s.Commit(t.Context(), b); err != nil {
					t.Error(err)
					return
				}
				th.Version = b.Thread.Version
			}
		})
	}
	waitQueued(t, s, writers)
	release()
	wg.Wait()
	st := s.WriteStats()
	tx, batches := st.Transactions-before.Transactions, st.Batches-before.Batches
	t.Logf("%d batches in %d transactions", batches, tx)
	if batches != writers*each || tx >= batches {
		t.Errorf("%d batches in %d transactions, want %d in fewer", batches, tx, writers*each)
	}
	for _, th := range ths {
		got, err := s.LoadThread(t.Context(), th.ID)
		if err != nil || got.Version != each+1 {
			t.Fatalf("%s: version %d, %v", th.ID, got.Version, err)
		}
		var msgs []int
		if err := json.Unmarshal(got.Messages, &msgs); err != nil || len(msgs) != each {
			t.Fatalf("%s: %s, %v", th.ID, got.Messages, err)
		}
		for i, m := range msgs {
			if m != i {
				t.Fatalf("%s: message %d is %d", th.ID, i, m)
			}
		}
	}
}

// A batch that loses its compare-and-set in a group is rolled back alone:
// the others commit, and none of its writes remain.
func TestGroupCommitFailingBatch(t *testing.T) {
	s := openFile(t, nil)
	ths := createThreads(t, s, 3)
	bad := appendBatch(ths[1], `"lost"`, "bad")
	bad.Thread.Version = 7 // stale
	bad.ToolCalls = []*checkpoint.ToolCall{{ThreadID: ths[1].ID, RunID: "run-1", CallID: "c1", Tool: "bash", State: checkpoint.ToolCallExecuting}}
	bad.Question = &checkpoint.Question{ThreadID: ths[1].ID, ID: "q1", Kind: "approve"}
	// A question that exists: no error, nothing written.
	existing := &checkpoint.Question{ThreadID: ths[2].ID, ID: "q0", Kind: "approve"}
	if _, _, err := s.CreateQuestion(t.Context(), existing); err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, s)
	again := appendBatch(ths[2], `"not written"`, "again")
	again.Question = existing
	bs := []*checkpoint.Batch{appendBatch(ths[0], `"a"`, "good"), bad, again, appendBatch(ths[2], `"c"`, "good")}
	wait := commitAll(t, s, nil, bs, 0)
	release()
	out := wait()
	if out[0].err != nil || out[3].err != nil {
		t.Fatalf("the good batches: %v, %v", out[0].err, out[3].err)
	}
	if !errors.Is(out[1].err, checkpoint.ErrConflict) {
		t.Errorf("the stale batch: %v, want ErrConflict", out[1].err)
	}
	if out[2].err != nil || out[2].c.Created || out[2].c.Question == nil || out[2].c.Question.ID != "q0" {
		t.Errorf("the batch of an existing question: %+v, %v", out[2].c, out[2].err)
	}
	if bad.Thread.Version != 7 || again.Thread.Version != 1 {
		t.Errorf("versions of the batches not written changed: %d, %d", bad.Thread.Version, again.Thread.Version)
	}
	for id, want := range map[string]string{ths[0].ID: `["a"]`, ths[1].ID: `[]`, ths[2].ID: `["c"]`} {
		got, err := s.LoadThread(t.Context(), id)
		if err != nil || string(got.Messages) != want {
			t.Errorf("%s: %s, %v; want %s", id, got.Messages, err, want)
		}
	}
	if calls, err := s.ListToolCalls(t.Context(), ths[1].ID, "run-1"); err != nil || len(calls) != 0 {
		t.Errorf("the stale batch's tool call: %v, %v", calls, err)
	}
	if _, err := s.GetQuestion(t.Context(), ths[1].ID, "q1"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("the stale batch's question: %v", err)
	}
	evs, err := s.ListEvents(t.Context(), "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.ThreadID+":"+e.Type)
	}
	if fmt.Sprint(types) != "[t0:good t2:good]" {
		t.Errorf("events %v, want the good batches' alone", types)
	}
}

// A caller whose context ends while its batch is queued gets its error,
// and the batch is never written; the others are.
func TestGroupCommitCancelledWhileQueued(t *testing.T) {
	s := openFile(t, nil)
	ths := createThreads(t, s, 2)
	before := s.WriteStats()
	release := holdWriter(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	bs := []*checkpoint.Batch{appendBatch(ths[0], `"gone"`, "gone"), appendBatch(ths[1], `"kept"`, "kept")}
	wait := commitAll(t, s, []context.Context{ctx, nil}, bs, 0)
	cancel()
	for { // until the cancelled one has left the queue
		s.wr.mu.Lock()
		left := len(s.wr.queue)
		s.wr.mu.Unlock()
		if left == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	release()
	out := wait()
	if !errors.Is(out[0].err, context.Canceled) {
		t.Errorf("the cancelled batch: %v, want context.Canceled", out[0].err)
	}
	if out[1].err != nil {
		t.Errorf("the other batch: %v", out[1].err)
	}
	if got, err := s.LoadThread(t.Context(), ths[0].ID); err != nil || string(got.Messages) != "[]" || got.Version != 1 {
		t.Errorf("the cancelled batch's thread: %s version %d, %v", got.Messages, got.Version, err)
	}
	if evs, err := s.ListEvents(t.Context(), ths[0].ID, 0, 0); err != nil || len(evs) != 0 {
		t.Errorf("the cancelled batch's event: %v, %v", evs, err)
	}
	if st := s.WriteStats(); st.Batches-before.Batches != 1 || st.Transactions-before.Transactions != 1 {
		t.Errorf("stats %+v after %+v, want one batch in one transaction", st, before)
	}
}

// When COMMIT itself fails, every batch of the group gets the error and
// none is written; the writer then goes on. (A deferred foreign key,
// violated by a trigger on one batch's event, fails at COMMIT.)
func TestGroupCommitFailingCommit(t *testing.T) {
	s := openFile(t, nil)
	ths := createThreads(t, s, 3)
	if _, err := s.w.ExecContext(t.Context(), `PRAGMA foreign_keys = ON;
CREATE TABLE parent (id INTEGER PRIMARY KEY);
CREATE TABLE child (p INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
CREATE TRIGGER poison AFTER INSERT ON events WHEN new.type = 'poison' BEGIN INSERT INTO child VALUES (42); END;`); err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, s)
	bs := []*checkpoint.Batch{appendBatch(ths[0], `"a"`, "good"), appendBatch(ths[1], `"b"`, "poison"), appendBatch(ths[2], `"c"`, "good")}
	wait := commitAll(t, s, nil, bs, 0)
	release()
	for i, o := range wait() {
		if o.err == nil {
			t.Errorf("batch %d committed", i)
		}
		t.Logf("batch %d: %v", i, o.err)
		if bs[i].Thread.Version != 1 {
			t.Errorf("batch %d: version %d, want 1 as before", i, bs[i].Thread.Version)
		}
	}
	for _, th := range ths {
		if got, err := s.LoadThread(t.Context(), th.ID); err != nil || string(got.Messages) != "[]" {
			t.Errorf("%s: %s, %v", th.ID, got.Messages, err)
		}
	}
	// Not left in a transaction.
	if _, err := s.Commit(t.Context(), appendBatch(ths[0], `"after"`, "good")); err != nil {
		t.Fatalf("a commit after the failed one: %v", err)
	}
}

// Close lets the writer commit what is queued, then refuses writes.
func TestCloseDrainsQueue(t *testing.T) {
	s := openFile(t, nil)
	ths := createThreads(t, s, 4)
	release := holdWriter(t, s)
	bs := make([]*checkpoint.Batch, len(ths))
	for i, th := range ths {
		bs[i] = appendBatch(th, `"x"`, "step")
	}
	wait := commitAll(t, s, nil, bs, 0)
	closed := make(chan error)
	go func() { closed <- s.Close() }()
	for {
		s.wr.mu.Lock()
		c := s.wr.closed
		s.wr.mu.Unlock()
		if c {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := s.Commit(t.Context(), appendBatch(ths[0], `"late"`, "late")); !errors.Is(err, errClosed) {
		t.Errorf("Commit during Close: %v, want errClosed", err)
	}
	release()
	for i, o := range wait() {
		if o.err != nil {
			t.Errorf("queued batch %d: %v", i, o.err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := s.CreateThread(t.Context(), &checkpoint.Thread{ID: "new"}); !errors.Is(err, errClosed) {
		t.Errorf("CreateThread after Close: %v, want errClosed", err)
	}
}

// Several batches that create and resolve questions in one transaction:
// a subscriber gets each notification once, although the store's poller
// (for other processes' writes) sees them too; another store on the file
// gets them from its poller.
func TestGroupCommitNotifications(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tollgate.db")
	opts := &Options{PollInterval: 5 * time.Millisecond}
	s, err := Open(t.Context(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := Open(t.Context(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	mine, err := s.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := other.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateQuestion(t.Context(), &checkpoint.Question{ThreadID: "t", ID: "q0"}); err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, s)
	abort := func(id string) *checkpoint.Batch {
		return checkpoint.ResolveBatch(&checkpoint.Question{ThreadID: "t", ID: id}, checkpoint.Resolution{Status: checkpoint.QuestionAborted, By: "abort"})
	}
	createAndAbort := abort("q1")
	createAndAbort.Question = &checkpoint.Question{ThreadID: "t", ID: "q2"}
	bs := []*checkpoint.Batch{
		{Question: &checkpoint.Question{ThreadID: "t", ID: "q1"}},
		abort("q0"),
		{Question: &checkpoint.Question{ThreadID: "t", ID: "q0"}}, // exists: nothing, no notification
		createAndAbort,
		abort("q0"), // lost
	}
	wait := commitAll(t, s, nil, bs, 0)
	release()
	out := wait()
	if !errors.Is(out[4].err, checkpoint.ErrConflict) {
		t.Errorf("the second abort: %v, want ErrConflict", out[4].err)
	}
	// Its own store delivers each write of the group once, in order.
	// (Within a batch the question is written before the resolution,
	// which follows its audit event, the batch's last write: as in
	// PostgreSQL, where the creation's change number is the lower.)
	want := []string{"question_created q0", "question_created q1", "question_resolved q0", "question_created q2", "question_resolved q1"}
	got := receive(t, mine, len(want))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("own store: notifications %v, want %v", got, want)
	}
	// The other store polls the questions' last changes: q1, created and
	// resolved in one transaction, is one change (resolved), and q0 may
	// have been resolved before a poll saw it created.
	want = []string{"question_resolved q0", "question_created q2", "question_resolved q1"}
	got = receive(t, theirs, len(want))
	if got[0] == "question_created q0" {
		got = append(got[1:], receive(t, theirs, 1)...)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("other store: notifications %v, want %v", got, want)
	}
	for name, ch := range map[string]<-chan checkpoint.Notification{"own": mine, "other": theirs} {
		select { // several poll intervals: a duplicate would come now
		case n := <-ch:
			t.Errorf("%s store: %s %s once more", name, n.Kind, n.QuestionID)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// receive returns the next n notifications of ch, as "kind id".
func receive(t *testing.T, ch <-chan checkpoint.Notification, n int) []string {
	t.Helper()
	var got []string
	timeout := time.After(20 * time.Second)
	for len(got) < n {
		select {
		case n := <-ch:
			got = append(got, string(n.Kind)+" "+n.QuestionID)
		case <-timeout:
			t.Fatalf("notifications %v, want %d", got, n)
		}
	}
	return got
}

// A deferrable batch alone waits for the next write and shares its
// transaction; Close does not wait for one; and with the store's own
// bound, one that no write follows is committed all the same.
func TestDeferrableBatch(t *testing.T) {
	s := openFile(t, nil)
	ths := createThreads(t, s, 2)
	s.wr.deferWait = time.Minute // no timing: only the next write or Close ends the hold
	before := s.WriteStats()
	d := appendBatch(ths[0], `"result"`, "tool_result")
	d.Deferrable = true
	done := make(chan error, 1)
	go func() { _, err := s.Commit(t.Context(), d); done <- err }()
	waitQueued(t, s, 1)
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the deferrable batch was committed alone (%v)", err)
	default:
	}
	if _, err := s.Commit(t.Context(), appendBatch(ths[1], `"call"`, "run_started")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := s.WriteStats()
	if tx, b := st.Transactions-before.Transactions, st.Batches-before.Batches; tx != 1 || b != 2 {
		t.Errorf("%d batches in %d transactions, want 2 in 1", b, tx)
	}

	late := appendBatch(&checkpoint.Thread{ID: ths[0].ID, Version: d.Thread.Version}, `"late"`, "run_finished")
	late.Deferrable = true
	go func() { _, err := s.Commit(t.Context(), late); done <- err }()
	waitQueued(t, s, 1)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	for _, ch := range []chan error{done, closed} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close waited for a deferrable batch's hold")
		}
	}

	s = openFile(t, nil)
	ths = createThreads(t, s, 1)
	alone := appendBatch(ths[0], `"alone"`, "tool_result")
	alone.Deferrable = true
	if _, err := s.Commit(t.Context(), alone); err != nil {
		t.Fatal(err)
	}
	if th, err := s.LoadThread(t.Context(), ths[0].ID); err != nil || string(th.Messages) != `["alone"]` {
		t.Errorf("after a deferrable batch alone: %v, %v", th, err)
	}
}

// A deferrable batch whose caller gives up while it is held is not
// written, and the writer goes on with the next write.
func TestDeferrableBatchCancelledWhileHeld(t *testing.T) {
	s := openFile(t, nil)
	ths := createThreads(t, s, 2)
	s.wr.deferWait = time.Minute
	ctx, cancel := context.WithCancel(t.Context())
	d := appendBatch(ths[0], `"result"`, "tool_result")
	d.Deferrable = true
	done := make(chan error, 1)
	go func() { _, err := s.Commit(ctx, d); done <- err }()
	waitQueued(t, s, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit of a held batch whose ctx ended: %v, want context.Canceled", err)
	}
	if _, err := s.Commit(t.Context(), appendBatch(ths[1], `"call"`, "run_started")); err != nil {
		t.Fatal(err)
	}
	if th, err := s.LoadThread(t.Context(), ths[0].ID); err != nil || string(th.Messages) != `[]` {
		t.Errorf("the given-up batch's thread: %v, %v", th, err)
	}
}

// The writer keeps the sub-journal of a group's savepoints in memory
// (temp_store): a group of large batches, one of which fails after its
// messages are written, commits the others and none of the failed one's,
// as with the temporary file SQLite spills it to by default past 64 KB.
func TestGroupSubJournalInMemory(t *testing.T) {
	s := openFile(t, nil)
	var store int
	if err := s.w.QueryRowContext(t.Context(), "PRAGMA temp_store").Scan(&store); err != nil || store != 2 {
		t.Fatalf("the writer's temp_store = %d, %v; want 2 (memory)", store, err)
	}
	ths := createThreads(t, s, 4)
	claimed := &checkpoint.ToolCall{ThreadID: ths[2].ID, RunID: "run-1", CallID: "c1", Tool: "bash", State: checkpoint.ToolCallExecuting}
	if _, err := s.Commit(t.Context(), &checkpoint.Batch{ToolCalls: []*checkpoint.ToolCall{claimed}}); err != nil {
		t.Fatal(err)
	}
	big := func(th *checkpoint.Thread, n int) *checkpoint.Batch {
		b := appendBatch(th, `"first"`, "big")
		for i := range n {
			b.Thread.Append = append(b.Thread.Append, json.RawMessage(fmt.Sprintf(`"%d %s"`, i, strings.Repeat("x", 8000))))
		}
		return b
	}
	bad := big(ths[2], 40) // 320 KB of messages, then a claim that loses
	bad.ToolCalls = []*checkpoint.ToolCall{{ThreadID: ths[2].ID, RunID: "run-1", CallID: "c1", Tool: "bash", State: checkpoint.ToolCallExecuting}}
	release := holdWriter(t, s)
	bs := []*checkpoint.Batch{big(ths[0], 20), big(ths[1], 20), bad, big(ths[3], 20)}
	before := s.WriteStats()
	wait := commitAll(t, s, nil, bs, 0)
	release()
	out := wait()
	if st := s.WriteStats(); st.Transactions-before.Transactions != 1 {
		t.Fatalf("%d transactions, want one group", st.Transactions-before.Transactions)
	}
	for i, o := range out {
		if i == 2 {
			if !errors.Is(o.err, checkpoint.ErrConflict) {
				t.Errorf("the batch whose claim lost: %v, want ErrConflict", o.err)
			}
			continue
		}
		if o.err != nil {
			t.Errorf("batch %d: %v", i, o.err)
		}
	}
	for i, th := range ths {
		got, err := s.LoadThread(t.Context(), th.ID)
		if err != nil {
			t.Fatal(err)
		}
		var msgs []json.RawMessage
		if err := json.Unmarshal(got.Messages, &msgs); err != nil {
			t.Fatal(err)
		}
		want := 21
		if i == 2 {
			want = 0
		}
		if len(msgs) != want || got.Version != int64(1+min(want, 1)) {
			t.Errorf("%s: %d messages at version %d; want %d", th.ID, len(msgs), got.Version, want)
		}
	}
}
