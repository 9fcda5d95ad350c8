package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// runState is how a run writes: every durable point is one
// [checkpoint.Store.Commit] that carries the audit events of what it
// records, and the thread is appended to, never rewritten.
//
// The model's message with tool calls is not written on its own: it is
// pending until the first write of its turn (a question, an executing
// claim or a result) commits it in the same transaction. So the message is
// durable before any of its calls runs or is asked about, as the guarantee
// needs, and costs no commit of its own. A crash before that write loses
// only the model's answer, which Resume asks for again (no call of it can
// have run).
type runState struct {
	a *Agent
	// mu is held across every commit that writes the thread, so that the
	// calls of a turn, which run concurrently, append in order and the
	// first one to write takes the pending message along.
	mu      sync.Mutex
	th      *checkpoint.Thread // as last committed: Version, Status, RunID
	pending []Message          // the turn's message, not committed yet
	solo    bool               // the turn handles one call
	// read holds questions a middleware just read (ToolCallContext's
	// Question), so that Ask, which follows, need not read them again.
	read map[string]*checkpoint.Question
	// callIDs: the thread's call ids, for the model turns of the run
	// (one goroutine: the run's loop).
	callIDs callIDs
	// valid: the calls' validated arguments, by call id (see keptRun);
	// last: the messages the run held when its turn stopped on an error
	// (parked), for keepParked.
	valid map[string]*validCall
	last  []Message
}

// noteRead keeps a question a middleware read for the Ask that follows.
func (rs *runState) noteRead(q *checkpoint.Question) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.read == nil {
		rs.read = map[string]*checkpoint.Question{}
	}
	rs.read[q.ID] = q
}

// takeRead returns the question noted by noteRead, and forgets it if it
// is pending (it may change; a resolved one never does, and a tool's own
// check of its approval reads it again).
func (rs *runState) takeRead(id string) *checkpoint.Question {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	q := rs.read[id]
	if q != nil && q.Status == checkpoint.QuestionPending {
		delete(rs.read, id)
	}
	return q
}

// resolvedRead returns the question noted by noteRead (or handed to the
// resumed run) if it is resolved: what a read would return again.
func (rs *runState) resolvedRead(id string) *checkpoint.Question {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if q := rs.read[id]; q != nil && q.Status != checkpoint.QuestionPending {
		return q
	}
	return nil
}

// turnFresh reports whether the turn's message is not committed yet: then
// nothing of the turn (a question, a call record) can be in the store.
func (rs *runState) turnFresh() bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.pending) > 0
}

// commit commits b together with the pending message (if any) and add,
// the messages that follow it. end ends the run in the same write (the
// thread goes idle). A batch whose question already exists writes
// nothing, the pending message included: it stays pending.
func (rs *runState) commit(ctx context.Context, b *checkpoint.Batch, add []Message, end bool) (*checkpoint.Committed, error) {
	return rs.commitKept(ctx, b, add, end, nil)
}

// keep makes a write that holds what exists nowhere else (a tool's
// result) outlast a store that cannot be reached for a while: the write
// is tried again ([keep.wait]), and before each new try, landed says
// whether an earlier one, whose answer the lost connection hid, was
// committed after all.
type keep struct {
	// live bounds the tries: the run's context, which ends when its
	// lease can no longer be trusted (another replica may take the run
	// over) or the run is stopped; and storeRetryFor at most.
	live   context.Context
	landed func(ctx context.Context) (bool, error)
	// until and tries are the wait's own.
	until time.Time
	tries int
}

type soleDriverKey struct{}

// WithSoleDriver returns ctx saying that while it lasts no other driver
// writes the run's thread: its writes are fenced by a lease that another
// driver could take only once ctx has ended (package host says so of a
// run driven under a [host.Coordinator]'s lease). A claim of a tool call
// whose answer a lost connection hid, found written, is then known to be
// this run's own, and the tool runs; without it the run stops, and the
// call is later found claimed with an unknown outcome (it may have been
// another driver's).
func WithSoleDriver(ctx context.Context) context.Context {
	return context.WithValue(ctx, soleDriverKey{}, true)
}

func soleDriver(ctx context.Context) bool {
	sole, _ := ctx.Value(soleDriverKey{}).(bool)
	return sole && ctx.Err() == nil
}

// errUnknowable: whether a write was made cannot be told (a claim read
// back without WithSoleDriver).
var errUnknowable = errors.New("agent: whose write it was cannot be told")

// storeRetryFor bounds how long a kept write waits for the store;
// keptTries are the tries it makes whatever (a run stopped while its tool
// ran still records what it knows): 50, 100 and 200 ms apart.
var (
	storeRetryFor = 2 * time.Minute
	keptTries     = 3
)

// wait sleeps before the next try after err, and reports whether to try
// again: only after checkpoint.ErrUnavailable, keptTries times and then
// while live lasts.
func (k *keep) wait(err error) bool {
	if k == nil || !errors.Is(err, checkpoint.ErrUnavailable) || k.tries >= keptTries && k.live.Err() != nil {
		return false
	}
	if k.until.IsZero() {
		k.until = time.Now().Add(storeRetryFor)
	}
	d := min(50*time.Millisecond<<min(k.tries, 5), time.Second)
	k.tries++
	if time.Now().Add(d).After(k.until) {
		return false
	}
	var ended <-chan struct{}
	if k.tries > keptTries {
		ended = k.live.Done()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ended:
		return false
	case <-t.C:
		return true
	}
}

// settle finds out whether a write that failed was made, reading it back
// (landed) and waiting again while the store cannot be reached. known
// false: the store stayed out of reach.
func (k *keep) settle(ctx context.Context) (made, known bool) {
	for {
		made, err := k.landed(ctx)
		if err == nil {
			return made, true
		}
		if !k.wait(err) {
			return false, false
		}
	}
}

// commitKept is commit, and with k (nil: none) a write kept across a
// store out of reach. The lock is held through the tries when the write
// includes the thread's, so that no other call of the turn writes the
// thread while it is not known whether this one was written.
func (rs *runState) commitKept(ctx context.Context, b *checkpoint.Batch, add []Message, end bool, k *keep) (*checkpoint.Committed, error) {
	rs.mu.Lock()
	if len(rs.pending) == 0 && len(add) == 0 && !end {
		// Nothing for the thread: no need to keep the other calls of the
		// turn from committing at the same time (they can share a commit).
		rs.mu.Unlock()
		for {
			c, err := rs.a.store.Commit(ctx, b)
			if err == nil || !k.wait(err) {
				return c, err
			}
			switch made, known := k.settle(ctx); {
			case !known:
				return nil, err
			case made:
				return &checkpoint.Committed{}, nil
			}
		}
	}
	defer rs.mu.Unlock()
	w := &checkpoint.ThreadWrite{ID: rs.th.ID, Version: rs.th.Version, Status: checkpoint.ThreadRunning, RunID: rs.th.RunID}
	if end {
		w.Status = checkpoint.ThreadIdle
	}
	flushed := rs.pending
	for _, m := range append(rs.pending[:len(rs.pending):len(rs.pending)], add...) {
		raw, err := marshalMessage(&m)
		if err != nil {
			return nil, fmt.Errorf("agent: encoding a message: %w", err)
		}
		w.Append = append(w.Append, raw)
	}
	b.Thread = w
	version := w.Version
	c, err := rs.a.store.Commit(ctx, b)
	for err != nil && k.wait(err) {
		made, known := k.settle(ctx)
		if !known {
			break
		}
		if made {
			// Committed, its answer lost: the store moved the thread to
			// the next version, as it does on every write.
			w.Version, w.UpdatedAt = version+1, rs.a.clock.Now()
			c, err = &checkpoint.Committed{Created: b.Question != nil}, nil
			break
		}
		w.Version = version
		c, err = rs.a.store.Commit(ctx, b)
	}
	if err != nil {
		return nil, fmt.Errorf("agent: writing the thread's step: %w", err)
	}
	if b.Question != nil && !c.Created {
		return c, nil // nothing was written
	}
	rs.th.Version, rs.th.Status, rs.th.UpdatedAt = w.Version, w.Status, w.UpdatedAt
	if rs.th.CreatedAt.IsZero() {
		rs.th.CreatedAt = w.CreatedAt
	}
	rs.pending = nil
	for _, m := range flushed {
		// Told once it is durable, in the order it was written, and under
		// the lock: the turn's other calls tell of their own steps only
		// after this (a slow subscriber holds them up no more than it
		// would hold up their own events).
		rs.a.emit(&MessageEvent{meta: rs.a.meta(rs.th.RunID), Message: m})
	}
	return c, nil
}

// event is an audit entry, to be committed with the change it records.
func (a *Agent) event(runID, typ string, data map[string]any) *checkpoint.Event {
	raw, err := jsontext.Marshal(data)
	if err != nil {
		// Every value here is one the agent built: strings, numbers,
		// maps of them. Keep the entry, say what could not be encoded.
		raw, _ = json.Marshal(map[string]string{"encoding_error": err.Error()})
	}
	return &checkpoint.Event{ThreadID: a.threadID, RunID: runID, Type: typ, Data: raw, At: a.clock.Now()}
}

// audit commits an entry that records no change of state of its own (a run
// parked, a run that stopped on an error). A failure is logged, never
// fatal: the log is a record, not a decision.
func (a *Agent) audit(ctx context.Context, runID, typ string, data map[string]any) {
	// Recorded even when the run is being stopped: what happened, happened.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := a.store.Commit(ctx, &checkpoint.Batch{Events: []*checkpoint.Event{a.event(runID, typ, data)}}); err != nil {
		a.log.Warn("tollgate: cannot append audit event", "type", typ, "thread", a.threadID, "err", err)
	}
}

// finishedEvent is the run_finished entry of a run that ends with msg (nil
// when it stops on an error) and err.
func (a *Agent) finishedEvent(runID string, msg *Message, err error) *checkpoint.Event {
	fin := map[string]any{}
	if msg != nil {
		fin["stop_reason"] = string(msg.StopReason)
	}
	if err != nil {
		fin["error"] = err.Error()
	}
	return a.event(runID, "run_finished", fin)
}

// soloCall reports whether the turn handles one call only (see runTurn).
func (rs *runState) soloCall() bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.solo
}
