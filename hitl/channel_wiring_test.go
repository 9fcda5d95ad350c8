package hitl_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/storetest"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

func TestMiswiredChannelStopsTheRunWithAClearError(t *testing.T) {
	t.Parallel()
	agentsChannel := hitl.NewCheckpointedChannel(memory.New(), "t", nil)
	otherChannel := hitl.NewCheckpointedChannel(memory.New(), "t", nil) // another store: its host would never see the question
	a, _ := agent.New(agent.Config{Provider: scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "bash", `{"cmd":"ls"}`)}}),
		Tools:      []*agent.Tool{agent.NewRawTool("bash", "Run.", func(ctx context.Context, m map[string]any) (agent.ToolResult, error) { return agent.ToolResult{}, nil }, nil)},
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(otherChannel, nil)}, Channel: agentsChannel, ThreadID: "t"})
	_, err := a.Prompt(context.Background(), "go")
	if !errors.Is(err, agent.ErrQuestion) || !strings.Contains(err.Error(), "another store") {
		t.Fatalf("err = %v", err)
	}
}

func TestUnreadableQuestionDoesNotHideOthers(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	ctx := context.Background()
	for _, q := range []*checkpoint.Question{
		{ThreadID: "t", ID: "bad", Kind: hitl.KindApprove, Payload: json.RawMessage(`{"kind":"approve","args":"not an object"}`)},
		{ThreadID: "t", ID: "good", Kind: hitl.KindConfirm, Payload: json.RawMessage(`{"kind":"confirm","message":"ok?"}`)},
	} {
		if _, _, err := store.CreateQuestion(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	reqs, err := hitl.NewCheckpointedChannel(store, "t", nil).Pending(ctx)
	if len(reqs) != 1 || reqs[0].QuestionID != "good" || err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("reqs %v err %v", reqs, err)
	}
}

func TestZeroDecisionAsks(t *testing.T) {
	t.Parallel()
	if got := (hitl.ApprovalDecision{}).Action(); got != "ask" {
		t.Fatalf("zero decision: %s", got)
	}
}
