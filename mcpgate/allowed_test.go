package mcpgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/mcptest"
)

// notesAllowed is gatewayPolicy with write_note allowed: a call the
// test server records in its ledger.
var notesAllowed = strings.Replace(gatewayPolicy, "    action: ask\n    impact: writes a file\n", "    action: allow\n", 1)

var note = map[string]any{"path": "/tmp/n", "text": "x"}

// commitLog records the store's commits of one thread's writes, with how
// many echo calls had reached the server at each; fail, if set, fails
// the commit of that number (1: the first) with err.
type commitLog struct {
	checkpoint.Store
	ledger *mcptest.Ledger

	mu      sync.Mutex
	writes  int // every write method, not only Commit
	commits []commitSeen
	fail    int
	err     error
	// hold, if set, holds the commit of number fail (with no error)
	// until it is closed; held is closed when that commit is reached.
	hold, held chan struct{}
}

type commitSeen struct {
	batch *checkpoint.Batch
	notes int // calls of write_note the server had taken
}

func (c *commitLog) Commit(ctx context.Context, b *checkpoint.Batch) (*checkpoint.Committed, error) {
	c.mu.Lock()
	c.writes++
	c.commits = append(c.commits, commitSeen{b, c.ledger.Count("write_note")})
	n := len(c.commits)
	c.mu.Unlock()
	if n == c.fail && c.hold != nil {
		close(c.held)
		<-c.hold
	} else if n == c.fail {
		return nil, c.err
	}
	return c.Store.Commit(ctx, b)
}

func (c *commitLog) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

func (c *commitLog) note() {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
}

func (c *commitLog) CreateThread(ctx context.Context, t *checkpoint.Thread) error {
	c.note()
	return c.Store.CreateThread(ctx, t)
}
func (c *commitLog) SaveThread(ctx context.Context, t *checkpoint.Thread) error {
	c.note()
	return c.Store.SaveThread(ctx, t)
}
func (c *commitLog) PutToolCall(ctx context.Context, tc *checkpoint.ToolCall) error {
	c.note()
	return c.Store.PutToolCall(ctx, tc)
}
func (c *commitLog) AppendEvent(ctx context.Context, e *checkpoint.Event) (int64, error) {
	c.note()
	return c.Store.AppendEvent(ctx, e)
}

// An allowed call is written in two commits, as issue 26 asks: its
// thread, claim and run_started entry before the call reaches the server
// (the audit entry is durable before the call is made), its result and
// the run's end after. The thread is the one a run writes, so the page,
// the threads list and tollgate audit read it as any.
func TestGatewayAllowedCallTwoCommits(t *testing.T) {
	ledger := &mcptest.Ledger{}
	store := &commitLog{Store: memory.New(), ledger: ledger}
	w := newGateway(t, gwOptions{store: store, ledger: ledger, policy: notesAllowed})
	before := store.count()
	r := w.call(t, "write_note", note)
	if r.IsError || text(r) != "wrote 1 bytes to /tmp/n" {
		t.Fatalf("allowed call: %v %q", r.IsError, text(r))
	}
	var th *checkpoint.Thread
	eventually(t, "the call's thread to go idle", func() bool {
		ths, _, err := store.ListThreads(context.Background(), checkpoint.ThreadFilter{})
		if err != nil || len(ths) != 1 {
			return false
		}
		th, err = store.LoadThread(context.Background(), ths[0].ID)
		return err == nil && th.Status == checkpoint.ThreadIdle
	})
	if n := store.count() - before; n != 2 {
		t.Errorf("an allowed call made %d writes, want 2", n)
	}
	store.mu.Lock()
	commits := store.commits
	store.mu.Unlock()
	if len(commits) < 2 {
		t.Fatalf("%d commits", len(commits))
	}
	first := commits[len(commits)-2]
	if first.notes != 0 || first.batch.Thread == nil || len(first.batch.Thread.Append) != 2 ||
		len(first.batch.ToolCalls) != 1 || first.batch.ToolCalls[0].State != checkpoint.ToolCallExecuting {
		t.Errorf("the first commit (server had %d calls) is not the thread and claim before the call: %+v", first.notes, first.batch)
	}

	var msgs []agent.Message
	if err := json.Unmarshal(th.Messages, &msgs); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4 || msgs[0].Role != agent.RoleUser || len(msgs[1].ToolCalls) != 1 || msgs[2].Result == nil ||
		msgs[3].StopReason != agent.StopEndTurn || msgs[2].Result.Content != text(r) || msgs[1].ToolCalls[0].Name != "mcp__t__write_note" {
		t.Fatalf("the thread holds %+v", msgs)
	}
	if state, _ := w.g.Host().State(th); state != host.RunIdle {
		t.Errorf("the host says the call's run is %v", state)
	}
	evs, err := store.ListEvents(context.Background(), th.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if strings.Join(types, " ") != "run_started tool_result run_finished" {
		t.Fatalf("the audit log of an allowed call: %v", types)
	}
	var entry struct {
		Digest string `json:"digest"`
		Tool   string `json:"tool"`
	}
	if err := json.Unmarshal(evs[1].Data, &entry); err != nil {
		t.Fatal(err)
	}
	call := msgs[1].ToolCalls[0]
	if want := agent.CallDigest(th.ID, call.ID, call.Name, call.Arguments); entry.Digest != want || entry.Tool != "mcp__t__write_note" {
		t.Errorf("tool_result %s, want digest %s of mcp__t__write_note", evs[1].Data, want)
	}
	recs, err := store.ListToolCalls(context.Background(), th.ID, th.RunID)
	if err != nil || len(recs) != 1 || recs[0].State != checkpoint.ToolCallDone {
		t.Fatalf("the call's record: %+v %v", recs, err)
	}
}

// A store that cannot take the first write refuses the call: it is not
// made, and the client may retry.
func TestGatewayAllowedCallUnrecordedNotMade(t *testing.T) {
	ledger := &mcptest.Ledger{}
	store := &commitLog{Store: memory.New(), ledger: ledger}
	w := newGateway(t, gwOptions{store: store, ledger: ledger, policy: notesAllowed})
	store.mu.Lock()
	store.fail, store.err = len(store.commits)+1, errors.New("disk full")
	store.mu.Unlock()
	r := w.call(t, "write_note", note)
	if !r.IsError || r.Meta["tollgate/retryable"] != true || !strings.Contains(text(r), "not made") || ledger.Count("write_note") != 0 {
		t.Fatalf("a call the store could not record: %v %q meta %v, server took %d", r.IsError, text(r), r.Meta, ledger.Count("write_note"))
	}
}

// A gateway that stops between the call and its result's write leaves
// the thread running with the call claimed: the next start records the
// call's outcome as unknown, and never makes it again.
func TestGatewayAllowedCallCutBeforeItsResult(t *testing.T) {
	ledger := &mcptest.Ledger{}
	base := memory.New()
	store := &commitLog{Store: base, ledger: ledger}
	w := newGateway(t, gwOptions{store: store, ledger: ledger, policy: notesAllowed})
	store.mu.Lock()
	store.fail, store.err = len(store.commits)+2, errors.New("the process died")
	store.mu.Unlock()
	if r := w.call(t, "write_note", note); r.IsError {
		t.Fatalf("allowed call: %q", text(r))
	}
	ths, _, err := base.ListThreads(context.Background(), checkpoint.ThreadFilter{})
	if err != nil || len(ths) != 1 || ths[0].Status != checkpoint.ThreadRunning {
		t.Fatalf("the thread left: %+v %v", ths, err)
	}
	newGateway(t, gwOptions{store: base, ledger: ledger, policy: notesAllowed})
	eventually(t, "the next start to close the call", func() bool {
		th, err := base.LoadThread(context.Background(), ths[0].ID)
		return err == nil && th.Status == checkpoint.ThreadIdle
	})
	recs, err := base.ListToolCalls(context.Background(), ths[0].ID, ths[0].RunID)
	if err != nil || len(recs) != 1 || !strings.Contains(string(recs[0].Result), "unknown") {
		t.Fatalf("the cut call's record: %+v %v", recs, err)
	}
	if n := ledger.Count("write_note"); n != 1 {
		t.Fatalf("the server took %d calls, want 1", n)
	}
}

// A client that cancels while its allowed call's thread is being written
// gets its call refused, not made, as a run's liveness check refuses it;
// the thread records it as aborted.
func TestGatewayAllowedCallCancelledBeforeItIsMade(t *testing.T) {
	ledger := &mcptest.Ledger{}
	store := &commitLog{Store: memory.New(), ledger: ledger}
	w := newGateway(t, gwOptions{store: store, ledger: ledger, policy: notesAllowed})
	store.mu.Lock()
	store.fail, store.hold, store.held = len(store.commits)+1, make(chan struct{}), make(chan struct{})
	store.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	ch := w.callAsync(ctx, "write_note", note)
	<-store.held
	cancel()
	<-ch
	time.Sleep(300 * time.Millisecond) // the cancel reaches the gateway's handler
	close(store.hold)
	var th *checkpoint.Thread
	eventually(t, "the call's thread to go idle", func() bool {
		ths, _, err := store.ListThreads(context.Background(), checkpoint.ThreadFilter{})
		if err != nil || len(ths) != 1 {
			return false
		}
		th, err = store.LoadThread(context.Background(), ths[0].ID)
		return err == nil && th.Status == checkpoint.ThreadIdle
	})
	if n := ledger.Count("write_note"); n != 0 {
		t.Fatalf("a call cancelled before it was made reached the server %d times", n)
	}
	evs, err := store.ListEvents(context.Background(), th.ID, 0, 0)
	if err != nil || len(evs) != 3 || !strings.Contains(string(evs[1].Data), `"decision":"aborted"`) {
		t.Fatalf("the audit log of a call cancelled before it was made: %v %v", evs, err)
	}
}

// An allowed call still running upstream when Shutdown's grace ends is
// cancelled there, and its thread records its outcome as unknown (the
// server may have taken it), not as made or not made.
func TestGatewayAllowedCallCutAtShutdown(t *testing.T) {
	w := newGateway(t, gwOptions{policy: slowAllowed})
	ch := w.callAsync(context.Background(), "slow", map[string]any{"ms": 5000})
	var th *checkpoint.Thread
	eventually(t, "the slow call's thread", func() bool {
		ths, _, err := w.store.ListThreads(context.Background(), checkpoint.ThreadFilter{Status: checkpoint.ThreadRunning})
		if err == nil && len(ths) == 1 {
			th = ths[0]
		}
		return err == nil && len(ths) == 1
	})
	time.Sleep(100 * time.Millisecond) // the call is upstream now
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_ = w.g.Shutdown(ctx)
	wait(t, ch)
	eventually(t, "the cut call's thread to go idle", func() bool {
		got, err := w.store.LoadThread(context.Background(), th.ID)
		return err == nil && got.Status == checkpoint.ThreadIdle
	})
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the cut call's record came %v after Shutdown began: the call was not cancelled", d)
	}
	recs, err := w.store.ListToolCalls(context.Background(), th.ID, th.RunID)
	if err != nil || len(recs) != 1 || !strings.Contains(string(recs[0].Result), "outcome is unknown") {
		t.Fatalf("the record of a call cut at shutdown: %+v %v", recs, err)
	}
}
