package mcpgate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/internal/mcptest"
)

// An allowed call whose first write is still under way when Shutdown's
// grace ends is not made after Shutdown has returned: the gateway is
// stopped, and the process goes on to close its servers and its store.
func TestGatewayAllowedCallNotMadeAfterShutdownReturned(t *testing.T) {
	ledger := &mcptest.Ledger{}
	store := &commitLog{Store: memory.New(), ledger: ledger}
	w := newGateway(t, gwOptions{store: store, ledger: ledger, policy: notesAllowed})
	store.mu.Lock()
	store.fail, store.hold, store.held = len(store.commits)+1, make(chan struct{}), make(chan struct{})
	store.mu.Unlock()
	ch := w.callAsync(context.Background(), "write_note", note)
	<-store.held
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_ = w.g.Shutdown(ctx)
	// Shutdown has returned: the first write completes now.
	close(store.hold)
	res := wait(t, ch)
	var th *checkpoint.Thread
	eventually(t, "the call's thread to go idle", func() bool {
		ths, _, err := store.ListThreads(context.Background(), checkpoint.ThreadFilter{})
		if err == nil && len(ths) == 1 {
			th = ths[0]
		}
		return err == nil && len(ths) == 1 && ths[0].Status == checkpoint.ThreadIdle
	})
	if n := ledger.Count("write_note"); n != 0 {
		t.Errorf("the call was made after Shutdown returned (%d calls reached the server); the client got %q", n, text(res))
	}
	// The thread says what happened: not made (neither unknown nor made).
	recs, err := store.ListToolCalls(context.Background(), th.ID, th.RunID)
	if err != nil || len(recs) != 1 || !strings.Contains(string(recs[0].Result), "not made") || strings.Contains(string(recs[0].Result), "unknown") {
		t.Errorf("the record of a call not made at shutdown: %+v %v", recs, err)
	}
}
