package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// A run asks, parks (holding nothing), and resumes when it is answered.
func Example() {
	ctx := context.Background()
	store := memory.New()
	shell := agent.NewTool("bash", "Run a command.", func(ctx context.Context, a struct {
		Cmd string `json:"cmd"`
	}) (string, error) {
		return "ran " + a.Cmd, nil
	}, nil)
	askAll := func(ctx context.Context, c *hitl.PolicyContext) hitl.ApprovalDecision {
		return hitl.AskUser(hitl.AskOptions{Timeout: time.Minute})
	}
	h, err := host.New(host.Config{
		Store: store,
		Agent: agent.Config{
			Provider:   scripted.Demo{}, // "$ cmd" lines become bash calls
			Tools:      []*agent.Tool{shell},
			Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(store, "", nil), askAll)},
		},
	})
	if err != nil {
		panic(err)
	}
	if err := h.Start(ctx); err != nil {
		panic(err)
	}
	defer h.Shutdown(ctx)

	if _, _, err := h.Prompt(ctx, "t1", "$ rm -r /tmp/scratch", nil); err != nil {
		panic(err)
	}
	q := waitForQuestion(ctx, store, "t1")
	for h.Stats().Parked == 0 {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("parked:", h.Stats().Parked, "asking about", q.Tool)

	answer, _ := json.Marshal(hitl.ApproveAnswer{Decision: "deny", Reason: "keep the scratch files", Digest: q.Digest})
	if _, err := h.Answer(ctx, "t1", q.ID, answer, "alice"); err != nil {
		panic(err)
	}
	for th, _ := store.LoadThread(ctx, "t1"); th.Status != checkpoint.ThreadIdle; th, _ = store.LoadThread(ctx, "t1") {
		time.Sleep(time.Millisecond)
	}
	th, _ := store.LoadThread(ctx, "t1")
	var msgs []agent.Message
	_ = json.Unmarshal(th.Messages, &msgs)
	fmt.Println(msgs[len(msgs)-1].Text)
	// Output:
	// parked: 1 asking about bash
	// `rm -r /tmp/scratch`: denied: keep the scratch files
}

func waitForQuestion(ctx context.Context, store checkpoint.Store, thread string) *checkpoint.Question {
	for {
		qs, _, _ := store.ListQuestions(ctx, checkpoint.QuestionFilter{ThreadID: thread, Status: checkpoint.QuestionPending})
		if len(qs) > 0 {
			return qs[0]
		}
		time.Sleep(time.Millisecond)
	}
}
