package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

// Issue 22 item 6: the database away for a second while approved commands
// run. Every command ran to its end during the outage; each result must
// be kept — written once the database is back, by the replica that ran
// it, under its lease — not thrown away and reported "outcome unknown"
// by whichever replica took the run over once the lease expired (15 of
// 60 in the trial), and no run stops with an error (23).
func TestOutageKeepsKnownResults(t *testing.T) {
	w := newWorld(t)
	proxy, through := pgtest.NewProxy(t, w.dsn)
	w.dsn = through // the replicas reach the database through the proxy
	w.gate = make(chan struct{})
	ctx := context.Background()
	// A lease the outage does not outlast (trusted 4.8 s from its last
	// renewal, renewed every 1.5 s).
	a := w.replica(t, 6*time.Second, time.Hour)
	b := w.replica(t, 6*time.Second, time.Hour)
	const threads = 6
	var qs []*checkpoint.Question
	for i := range threads {
		r := []*replica{a, b}[i%2]
		th := fmt.Sprintf("t%d", i)
		if _, _, err := r.h.Prompt(ctx, th, fmt.Sprintf("%s\n$ echo %d", th, i), nil); err != nil {
			t.Fatal(err)
		}
		qs = append(qs, pending(t, r.store, th, 1)[0])
	}
	for i, q := range qs {
		approve(t, []*replica{b, a}[i%2], q) // on the other replica
	}
	eventually(t, "every command to start", 15*time.Second, func() (bool, error) {
		for _, q := range qs {
			calls, err := a.store.ListToolCalls(ctx, q.ThreadID, q.RunID)
			if err != nil || len(calls) != 1 || calls[0].State != checkpoint.ToolCallExecuting {
				return false, err
			}
		}
		return true, nil
	})
	proxy.Cut()
	close(w.gate) // the commands end while the database is away
	time.Sleep(time.Second)
	proxy.Restore()
	for _, q := range qs {
		idle(t, a.store, q.ThreadID)
	}
	w.mu.Lock()
	ran := w.ran
	w.mu.Unlock()
	for i, q := range qs {
		if n := ran[fmt.Sprintf("echo %d", i)]; n != 1 {
			t.Errorf("%s: the command ran %d times", q.ThreadID, n)
		}
		evs, err := a.store.ListEvents(ctx, q.ThreadID, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		results := 0
		for _, e := range evs {
			var d map[string]any
			json.Unmarshal(e.Data, &d)
			switch e.Type {
			case "tool_result":
				results++
				if reason, _ := d["reason"].(string); strings.Contains(reason, "unknown") {
					t.Errorf("%s: the command ran to its end, its result says: %s", q.ThreadID, reason)
				}
			case "run_finished":
				if msg, ok := d["error"]; ok {
					t.Errorf("%s: a run stopped with an error: %v", q.ThreadID, msg)
				}
			}
		}
		if results != 1 {
			t.Errorf("%s: %d tool_result entries, want 1", q.ThreadID, results)
		}
	}
	t.Logf("leases lost: a %d, b %d; rescued: a %d, b %d", a.c.Stats().Lost, b.c.Stats().Lost, a.c.Stats().Rescued, b.c.Stats().Rescued)
}
