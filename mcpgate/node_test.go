package mcpgate_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/mcptest"
)

const httpToken = "a-test-token-of-32-characters-xx"

// serveHTTP serves the gateway over streamable HTTP; it returns the
// endpoint's URL.
func (w *gw) serveHTTP(t *testing.T) string {
	t.Helper()
	h, err := w.g.HTTPHandler(httpToken)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

// lateAnswerRefused: the question of a call whose client went away was
// aborted, an approval given now is refused as such, and nothing runs.
func (w *gw) lateAnswerRefused(t *testing.T, q *checkpoint.Question, tool string) {
	t.Helper()
	if err := w.answer(t, q, hitl.ApproveAnswer{Decision: hitl.DecisionApprove}); !errors.Is(err, hitl.ErrAborted) {
		t.Fatalf("an approval of a call whose client went away: %v, want %v (the API's 410)", err, hitl.ErrAborted)
	}
	time.Sleep(200 * time.Millisecond)
	if n := w.ledger.Count(tool); n != 0 {
		t.Fatalf("a call whose client went away was made (%d)", n)
	}
}

// A TypeScript SDK client killed while its call waits for a person (no
// cancel, no DELETE: its process is gone) has its question aborted, and
// an approval given afterwards runs nothing.
func TestNodeClientKilledMidWait(t *testing.T) {
	w := newGateway(t, gwOptions{})
	c := mcptest.StartNodeClient(t, w.serveHTTP(t), httpToken)
	t.Logf("TypeScript SDK %s", c.SDK)
	c.Call(t, mcptest.NodeCall{ID: "w", Name: "write_note", Args: map[string]any{"path": "/tmp/k", "text": "x"}})
	q := w.question(t, "mcp__t__write_note")
	start := time.Now()
	c.Kill(t)
	w.waitStatusWithin(t, q, checkpoint.QuestionAborted, "the question of a killed client's call", 20*time.Second)
	t.Logf("the question was aborted %s after the client was killed", time.Since(start).Round(time.Millisecond))
	w.lateAnswerRefused(t, q, "write_note")
}

// A TypeScript SDK client whose request times out (its default is 60 s;
// here 1.5 s) cancels the call: the question is aborted, whether the
// client then lives on or dies.
func TestNodeClientTimesOut(t *testing.T) {
	w := newGateway(t, gwOptions{})
	c := mcptest.StartNodeClient(t, w.serveHTTP(t), httpToken)
	c.Call(t, mcptest.NodeCall{ID: "w", Name: "write_note", Args: map[string]any{"path": "/tmp/t", "text": "x"}, Timeout: 1500})
	q := w.question(t, "mcp__t__write_note")
	ev := c.Next(t, "error", "w", 30*time.Second)
	start := time.Now()
	t.Logf("the client gave up: %d %s", ev.Code, ev.Message)
	w.waitStatusWithin(t, q, checkpoint.QuestionAborted, "the question of a call its client timed out", 20*time.Second)
	t.Logf("the question was aborted %s after the client's timeout", time.Since(start).Round(time.Millisecond))
	w.lateAnswerRefused(t, q, "write_note")

	// The same, and the client dies right after its timeout.
	c.Call(t, mcptest.NodeCall{ID: "w2", Name: "write_note", Args: map[string]any{"path": "/tmp/t2", "text": "x"}, Timeout: 1500})
	q = w.question(t, "mcp__t__write_note")
	c.Next(t, "error", "w2", 30*time.Second)
	c.Kill(t)
	w.waitStatusWithin(t, q, checkpoint.QuestionAborted, "the question of a call its client timed out, then died", 20*time.Second)
	w.lateAnswerRefused(t, q, "write_note")
}

// waitStatusWithin is waitStatus with its own bound.
func (w *gw) waitStatusWithin(t *testing.T, q *checkpoint.Question, want checkpoint.QuestionStatus, what string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, err := w.store.GetQuestion(context.Background(), q.ThreadID, q.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s after %s, want %s", what, got.Status, within, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// frozen is a clock that never moves: the gateway's pings never go out,
// so what gives a call up is the client's own doing (its connection
// lost, its session ended), not a ping's timeout.
func frozen() clock.Clock { return clock.NewFake(time.Now()) }

// The client's connection is lost (its process killed): the gateway
// notices at once, without waiting for its next ping.
func TestNodeClientKilledNoticedAtOnce(t *testing.T) {
	w := newGateway(t, gwOptions{clock: frozen()})
	c := mcptest.StartNodeClient(t, w.serveHTTP(t), httpToken)
	c.Call(t, mcptest.NodeCall{ID: "w", Name: "write_note", Args: map[string]any{"path": "/tmp/k", "text": "x"}})
	q := w.question(t, "mcp__t__write_note")
	c.Kill(t)
	w.waitStatusWithin(t, q, checkpoint.QuestionAborted, "the question of a killed client's call, with no ping", 20*time.Second)
	w.lateAnswerRefused(t, q, "write_note")
}

// A client that ends its session (HTTP DELETE) while its call waits has
// the call given up at once: the DELETE does not wait for a ping to fail.
func TestNodeClientDeletesSession(t *testing.T) {
	w := newGateway(t, gwOptions{clock: frozen()})
	c := mcptest.StartNodeClient(t, w.serveHTTP(t), httpToken)
	c.Call(t, mcptest.NodeCall{ID: "w", Name: "write_note", Args: map[string]any{"path": "/tmp/d", "text": "x"}})
	q := w.question(t, "mcp__t__write_note")
	start := time.Now()
	c.Delete(t)
	c.Next(t, "deleted", "", 20*time.Second)
	t.Logf("the DELETE took %s", time.Since(start).Round(time.Millisecond))
	got, err := w.store.GetQuestion(context.Background(), q.ThreadID, q.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != checkpoint.QuestionAborted {
		t.Fatalf("once the session's DELETE was answered, its call's question is %s", got.Status)
	}
	w.lateAnswerRefused(t, q, "write_note")
}

// A TypeScript SDK client that asks for progress gets the upstream's
// notifications with their totals — after the gateway's own while a
// person decided — in increasing order, as its onprogress sees them.
func TestNodeClientGetsUpstreamProgress(t *testing.T) {
	w := newGateway(t, gwOptions{policy: slowAsks})
	c := mcptest.StartNodeClient(t, w.serveHTTP(t), httpToken)
	c.Call(t, mcptest.NodeCall{ID: "s", Name: "slow", Args: map[string]any{"ms": 400}, Progress: true})
	q := w.question(t, "mcp__t__slow")
	c.Next(t, "progress", "s", 20*time.Second) // the gateway's own, while it waits
	if err := w.answer(t, q, hitl.ApproveAnswer{Decision: hitl.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	if ev := c.Next(t, "result", "s", 30*time.Second); strings.Contains(string(ev.Result), `"isError":true`) {
		t.Fatalf("slow: %s", ev.Result)
	}
	var got []progressSeen
	for _, ev := range c.Seen() {
		if ev.Event == "progress" && ev.ID == "s" {
			got = append(got, progressSeen{ev.Progress.Progress, ev.Progress.Total, ev.Progress.Message})
		}
	}
	checkForwarded(t, got, 400)
}
