package hooks_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/hooks"
)

// A call whose run could not be started (here: the host is shut down)
// leaves no waiter behind, so Shutdown has none to wait for (it counted
// one for good, and every Shutdown then waited its 5 s: found by a
// review).
func TestShutdownAfterAFailedStart(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	f.host.Shutdown(ctx)
	cancel()
	r := f.svc.Handle(context.Background(), hooks.ClaudeCode, pre("s1", "toolu_1", "Bash", bash("sleepy")), nil)
	t.Logf("status %d: %s", r.Status, r.Body)
	if n := hooks.Waiting(f.svc); n != 0 {
		t.Fatalf("%d hooks counted as waiting after a call that failed to start", n)
	}
}
