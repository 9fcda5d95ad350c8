package mcpgate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
)

// anotherClient connects one more client to the gateway, recording the
// progress notifications it gets.
func anotherClient(t *testing.T, w *gw, name string) (*mcp.ClientSession, func() []*mcp.ProgressNotificationParams) {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := w.g.Server().Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, r.Params)
			mu.Unlock()
		},
	})
	cs, err := c.Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, func() []*mcp.ProgressNotificationParams {
		mu.Lock()
		defer mu.Unlock()
		return append([]*mcp.ProgressNotificationParams(nil), got...)
	}
}

// Two clients call an allowed tool that reports progress, side by side,
// on goroutines the pool hands from one call to the next: the client that
// gave tokens gets progress on its own tokens only, the one that gave
// none gets none, and each gets its own result.
func TestGatewayAllowedProgressStaysWithItsClient(t *testing.T) {
	w := newGateway(t, gwOptions{policy: slowAllowed, defaults: true})
	a, seenA := anotherClient(t, w, "client-a")
	b, seenB := anotherClient(t, w, "client-b")
	const rounds, each = 3, 4
	for r := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, 2*each)
		for i := range each {
			for _, c := range []struct {
				cs    *mcp.ClientSession
				token string
			}{{a, fmt.Sprintf("A-%d-%d", r, i)}, {b, ""}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ms := 60 + 10*i
					p := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": ms}}
					if c.token != "" {
						p.SetProgressToken(c.token)
					}
					res, err := c.cs.CallTool(context.Background(), p)
					if err != nil {
						errs <- err
						return
					}
					if want := fmt.Sprintf("slept %d ms", ms); res.IsError || text(res) != want {
						errs <- fmt.Errorf("token %q: got %q, want %q", c.token, text(res), want)
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	if got := seenB(); len(got) != 0 {
		t.Errorf("client b gave no token and got %d notifications: first %+v", len(got), got[0])
	}
	// Not checked: that every token of a's got a notification — one the
	// upstream sent can reach the gateway after the call's result (the
	// SDK's client handles them apart), and a late one is dropped.
	for _, p := range seenA() {
		if s, _ := p.ProgressToken.(string); !strings.HasPrefix(s, "A-") {
			t.Errorf("client a got a notification on token %v", p.ProgressToken)
		}
	}
}

// What the client gets of an allowed call's result is what the thread
// keeps (but for the _meta keys and the resultType the SDK adds on the
// way out), for a result with structured content.
func TestGatewayAllowedResultIsWhatTheThreadKeeps(t *testing.T) {
	w := newGateway(t, gwOptions{})
	res := w.call(t, "structured", map[string]any{"n": 21})
	if res.IsError {
		t.Fatal(text(res))
	}
	var ths []*checkpoint.Thread
	eventually(t, "the thread to go idle", func() bool {
		var err error
		ths, _, err = w.store.ListThreads(context.Background(), checkpoint.ThreadFilter{Status: checkpoint.ThreadIdle})
		return err == nil && len(ths) == 1
	})
	th, err := w.store.LoadThread(context.Background(), ths[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []agent.Message
	if err := json.Unmarshal(th.Messages, &msgs); err != nil || len(msgs) != 4 || msgs[2].Result == nil {
		t.Fatalf("%v %s", err, th.Messages)
	}
	kept, _ := json.Marshal(msgs[2].Result.Details["mcp_result"])
	got, _ := json.Marshal(res)
	norm := func(b []byte) string {
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if meta, _ := m["_meta"].(map[string]any); meta != nil {
			delete(meta, "io.modelcontextprotocol/serverInfo")
			if len(meta) == 0 {
				delete(m, "_meta")
			}
		}
		delete(m, "resultType")
		out, _ := json.Marshal(m)
		return string(out)
	}
	if norm(kept) != norm(got) {
		t.Errorf("the client got\n%s\nthe thread keeps\n%s", got, kept)
	}
	t.Logf("client %s\nthread %s", got, kept)
}

// Shutdown waits for an allowed call running upstream, whose client has
// gone, to write its result, and leaves no goroutine of the pool.
func TestGatewayShutdownWaitsForAnAllowedCallsRecord(t *testing.T) {
	w := newGateway(t, gwOptions{policy: slowAllowed})
	// One call first, so that a pooled goroutine is idle.
	if res := w.call(t, "echo", map[string]any{"text": "x"}); res.IsError {
		t.Fatal(text(res))
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := w.callAsync(ctx, "slow", map[string]any{"ms": 400})
	eventually(t, "the slow call's thread", func() bool {
		ths, _, err := w.store.ListThreads(context.Background(), checkpoint.ThreadFilter{Status: checkpoint.ThreadRunning})
		return err == nil && len(ths) == 1
	})
	cancel()
	<-ch
	if err := w.g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ths, _, err := w.store.ListThreads(context.Background(), checkpoint.ThreadFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range ths {
		if th.Status != checkpoint.ThreadIdle {
			t.Errorf("thread %s is %s after Shutdown returned", th.ID, th.Status)
		}
	}
	buf := make([]byte, 1<<22)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, f := range []string{"gopool.(*Pool).serve", "mcpgate.(*Gateway).recordAllowed"} {
		if strings.Contains(stacks, f) {
			t.Errorf("%s still runs after Shutdown returned", f)
		}
	}
}
