package apiclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/apiclient"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/provider/scripted"
	"github.com/tollgate-ai/tollgate/server"
)

// A reviewer reads the pending questions of a server and answers one; a
// second answer is refused, with the question as the first left it.
func Example() {
	ctx := context.Background()
	url, stop := demoServer(ctx)
	defer stop()

	app, _ := apiclient.New(url, "app-secret-0123456789", nil)
	if err := app.Do(ctx, "POST", "/v1/threads/demo/messages", nil, []byte(`{"text": "$ rm -r /tmp/cache"}`), nil); err != nil {
		panic(err)
	}

	alice, _ := apiclient.New(url, "alice-secret-0123456789", nil)
	var q *checkpoint.Question
	for q == nil {
		qs, err := alice.Questions(ctx, apiclient.QuestionQuery{Status: checkpoint.QuestionPending})
		if err != nil {
			panic(err)
		}
		if len(qs) > 0 {
			q = qs[0]
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	var payload struct {
		Args json.RawMessage `json:"args"`
	}
	_ = json.Unmarshal(q.Payload, &payload)
	fmt.Println("asked:", q.Kind, q.Tool, string(payload.Args))

	approve := json.RawMessage(fmt.Sprintf(`{"decision": "approve", "digest": %q}`, q.Digest))
	answered, err := alice.Answer(ctx, q.ThreadID, q.ID, approve)
	if err != nil {
		panic(err)
	}
	fmt.Println("answered by", answered.AnsweredBy)

	_, err = alice.Answer(ctx, q.ThreadID, q.ID, approve)
	var refused *apiclient.Error
	if errors.As(err, &refused) {
		fmt.Println("again:", refused.Status, refused.Code, "— answered by", refused.Question.AnsweredBy)
	}

	_, err = alice.Question(ctx, "demo", "no-such-question")
	fmt.Println("missing:", errors.Is(err, checkpoint.ErrNotFound))
	// Output:
	// asked: approve bash {"cmd":"rm -r /tmp/cache"}
	// answered by alice
	// again: 409 already_answered — answered by alice
	// missing: true
}

// demoServer serves a host whose runs ask before every bash call.
func demoServer(ctx context.Context) (string, func()) {
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
	tokens, err := server.ParseTokensEnv("app:client:app-secret-0123456789,alice:reviewer:alice-secret-0123456789")
	if err != nil {
		panic(err)
	}
	srv, err := server.New(server.Config{Host: h, Tokens: tokens, Logger: quiet})
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(srv.Handler())
	return ts.URL, func() {
		srv.Close() // the event streams first, then the listener, then the host
		ts.Close()
		h.Shutdown(ctx)
	}
}
