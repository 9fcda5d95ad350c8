package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/provider/scripted"
	"github.com/tollgate-ai/tollgate/server"
)

// Mount the server over a host: a client starts a run, a reviewer answers
// the question it asks.
func Example() {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	store := memory.New()
	bash := agent.NewTool("bash", "Run a command (pretend).", func(ctx context.Context, a struct {
		Cmd string `json:"cmd"`
	}) (string, error) {
		return "ran " + a.Cmd, nil
	}, nil)
	askAlways := func(ctx context.Context, c *hitl.PolicyContext) hitl.ApprovalDecision {
		return hitl.AskUser(hitl.AskOptions{Timeout: time.Hour})
	}
	h, err := host.New(host.Config{Store: store, Logger: quiet, Agent: agent.Config{
		Provider:   scripted.Demo{}, // "$ cmd" lines become bash calls
		Tools:      []*agent.Tool{bash},
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(store, "", nil), askAlways)},
		Logger:     quiet,
	}})
	if err != nil {
		panic(err)
	}
	_ = h.Start(ctx)
	defer h.Shutdown(ctx)

	tokens, err := server.ParseTokensEnv("app:client:app-secret-0123456789,alice:reviewer:alice-secret-0123456789")
	if err != nil {
		panic(err)
	}
	srv, err := server.New(server.Config{Host: h, Tokens: tokens, Logger: quiet})
	if err != nil {
		panic(err)
	}
	defer srv.Close() // ends the event streams; then shut the http.Server down
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	call := func(method, path, secret, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer res.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(res.Body).Decode(&m)
		return res.StatusCode, m
	}

	status, _ := call("POST", "/v1/threads/demo/messages", "app-secret-0123456789", `{"text": "$ rm -r /tmp/cache"}`)
	fmt.Println("message:", status)
	var q map[string]any
	for q == nil {
		_, list := call("GET", "/v1/questions", "alice-secret-0123456789", "")
		if qs, _ := list["questions"].([]any); len(qs) > 0 {
			q = qs[0].(map[string]any)
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	fmt.Println("asked:", q["tool"], q["payload"].(map[string]any)["args"])
	status, answered := call("POST", fmt.Sprintf("/v1/questions/%s/%s/answer", q["thread_id"], q["id"]), "alice-secret-0123456789",
		fmt.Sprintf(`{"decision": "approve", "digest": %q}`, q["digest"]))
	fmt.Println("answer:", status, "by", answered["answered_by"])
	// Output:
	// message: 202
	// asked: bash map[cmd:rm -r /tmp/cache]
	// answer: 200 by alice
}
