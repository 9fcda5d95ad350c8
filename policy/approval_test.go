package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// awayStore cannot be reached for reads of questions while away is set.
type awayStore struct {
	*memory.Store
	away atomic.Bool
}

func (s *awayStore) GetQuestion(ctx context.Context, threadID, id string) (*checkpoint.Question, error) {
	if s.away.Load() {
		return nil, fmt.Errorf("connection refused: %w", checkpoint.ErrUnavailable)
	}
	return s.Store.GetQuestion(ctx, threadID, id)
}

// Issue 22 item 6: the tool's own check that a person approved the call
// (SandboxFor) waits for a store out of reach for a moment; it refused the
// approved call for good ("no person approved it") when the store was
// away at that instant.
func TestApprovalCheckWaitsForTheStore(t *testing.T) {
	t.Parallel()
	p := mustParse(t, "version: 1\ndefault: ask\nrules: []\n", nil)
	decide := p.SandboxFor("bash")
	store := &awayStore{Store: memory.New()}
	bash := agent.NewTool("bash", "Run a command.", func(ctx context.Context, a bashArgs) (string, error) {
		raw, _ := json.Marshal(a)
		store.away.Store(true) // the store goes away as the command starts
		time.AfterFunc(300*time.Millisecond, func() { store.away.Store(false) })
		if _, err := decide(ctx, raw); err != nil {
			return "", err
		}
		return "ran " + a.Cmd, nil
	}, nil)
	model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "bash", bashArgs{Cmd: "rm -r build"})}}, scripted.Turn{Text: "done"})
	a, err := agent.New(agent.Config{Provider: model, Checkpointer: store, ThreadID: "t1", Tools: []*agent.Tool{bash},
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(store, "t1", nil), p.HITL())}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := a.Prompt(context.Background(), "go"); done <- err }()
	ch := hitl.NewCheckpointedChannel(store, "t1", nil)
	var q *checkpoint.Question
	for deadline := time.Now().Add(5 * time.Second); q == nil; time.Sleep(5 * time.Millisecond) {
		qs, _, _ := store.ListQuestions(context.Background(), checkpoint.QuestionFilter{ThreadID: "t1", Status: checkpoint.QuestionPending})
		if len(qs) == 1 {
			q = qs[0]
		} else if time.Now().After(deadline) {
			t.Fatal("no question")
		}
	}
	answer, _ := json.Marshal(map[string]string{"decision": "approve", "digest": q.Digest})
	if _, err := ch.AnswerWith(context.Background(), "t1", q.ID, answer, &hitl.AnswerOptions{By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	msgs, err := a.Messages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Role == agent.RoleTool && (m.Result.IsError || m.Result.Content != "ran rm -r build") {
			t.Errorf("the approved command's result: %+v", m.Result)
		}
	}
}
