package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// Threads of a kind run with the kind's template — its model, its tools
// (those of ToolFor too) and its middleware — whether prompted, resumed
// on an answer or answered with an edit; other threads with Agent.
func TestKinds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, 0, nil)
	relayed := &fakeShell{}
	// The kind's only tool comes from ToolFor, under another name than the
	// fixture's bash; its policy asks about everything and blocks "sudo".
	toolFor := func(name string) *agent.Tool {
		if name != "Shell" {
			return nil
		}
		return agent.NewTool("Shell", "relayed", func(ctx context.Context, a cmdArgs) (string, error) {
			relayed.mu.Lock()
			relayed.ran = append(relayed.ran, a.Cmd)
			relayed.mu.Unlock()
			return "relayed " + a.Cmd, nil
		}, nil)
	}
	kindPolicy := hitl.Typed(func(ctx context.Context, c *hitl.PolicyContext, a cmdArgs) hitl.ApprovalDecision {
		if strings.Contains(a.Cmd, "sudo") {
			return hitl.Deny("no sudo here")
		}
		return hitl.AskUser(hitl.AskOptions{})
	})
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("k1", "Shell", cmdArgs{"make"})}},
		scripted.Turn{Text: "relayed"},
	)
	f.cfg.Kinds = []host.Kind{{Name: "relay", Match: func(id string) bool { return strings.HasPrefix(id, "k-") },
		Agent: agent.Config{Provider: model, ToolFor: toolFor,
			Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(f.store, "", nil), kindPolicy)}}}}
	h := f.start(t)

	qs := f.promptParked(t, h, "k-1", "anything", 1)
	if qs[0].Tool != "Shell" {
		t.Fatalf("the kind's thread asked about %q", qs[0].Tool)
	}
	edit := func(cmd string) json.RawMessage {
		b, _ := json.Marshal(hitl.ApproveAnswer{Decision: hitl.DecisionEdit, EditedArgs: map[string]any{"cmd": cmd}, Digest: qs[0].Digest})
		return b
	}
	// The kind's policy checks the edit where it is taken.
	if _, err := h.Answer(context.Background(), "k-1", qs[0].ID, edit("sudo make"), "alice"); !errors.Is(err, hitl.ErrInvalidAnswer) || !strings.Contains(err.Error(), "no sudo here") {
		t.Fatalf("an edit the kind's policy blocks: %v", err)
	}
	if _, err := h.Answer(context.Background(), "k-1", qs[0].ID, edit("make test"), "alice"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the kind's run to end", f.idle(t, "k-1"))
	if got := relayed.runs(); len(got) != 1 || got[0] != "make test" {
		t.Fatalf("the kind's tool ran %v", got)
	}
	// Other threads keep the host's template.
	if _, _, err := h.Prompt(context.Background(), "t-1", "$ ls", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the other run to end", f.idle(t, "t-1"))
	if got := f.shell.runs(); len(got) != 1 || got[0] != "ls" {
		t.Fatalf("the host's template ran %v", got)
	}
	if h.Tool("Shell") != nil {
		t.Error("Host.Tool names a kind's tool")
	}
}

func TestKindNeedsMatchAndProvider(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, 0, nil)
	f.cfg.Kinds = []host.Kind{{Name: "broken", Agent: agent.Config{Provider: scripted.Demo{}}}}
	if _, err := host.New(f.cfg); err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("a kind without Match: %v", err)
	}
}
