package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/internal/storetest"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// A raw tool's value is now the very map its arguments' canonical form was
// encoded from (decoded once). A hook that changes that map in place must
// not change what was recorded of the call: RawArgs, the call digest a
// reviewer's answer is bound to, the tool call's stored arguments.
func TestRawToolHookChangingArgsInPlaceLeavesRecordAndDigest(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	var ran map[string]any
	tool := agent.NewRawTool("rawrun", "Runs raw.", func(ctx context.Context, a map[string]any) (agent.ToolResult, error) {
		ran = a
		return agent.ToolResult{Content: "ok"}, nil
	}, nil)
	const sent = `{"path":"/tmp/a","z":[1]}`
	change := agent.BeforeToolFunc(func(ctx context.Context, tc *agent.ToolCallContext) (agent.Decision, error) {
		m := tc.Args.(map[string]any)
		m["path"] = "/etc/shadow"
		m["z"].([]any)[0] = json.Number("2")
		return agent.Continue(), nil
	})
	var raw, digest string
	look := agent.BeforeToolFunc(func(ctx context.Context, tc *agent.ToolCallContext) (agent.Decision, error) {
		raw, digest = string(tc.RawArgs), tc.CallDigest()
		return agent.Continue(), nil
	})
	model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{{ID: "c1", Name: "rawrun", Arguments: json.RawMessage(`{"z":[1], "path":"/tmp/a"}`)}}}, scripted.Turn{Text: "done"})
	a := newAgent(t, agent.Config{Provider: model, Checkpointer: store, ThreadID: "t1",
		Tools: []*agent.Tool{tool}, Middleware: []agent.Middleware{change, look}})
	last, err := a.Prompt(context.Background(), "go")
	if err != nil {
		t.Fatal(err)
	}
	if raw != sent {
		t.Errorf("RawArgs after a hook changed the value in place: %s, want %s", raw, sent)
	}
	if want := agent.CallDigest("t1", "c1", "rawrun", json.RawMessage(sent)); digest != want {
		t.Errorf("CallDigest after a hook changed the value in place: %s, want %s", digest, want)
	}
	calls, err := store.ListToolCalls(context.Background(), "t1", last.RunID)
	if err != nil || len(calls) != 1 {
		t.Fatalf("ListToolCalls = %v, %v", calls, err)
	}
	if string(calls[0].Args) != sent {
		t.Errorf("stored arguments %s, want %s", calls[0].Args, sent)
	}
	t.Logf("the tool ran with %v (the hook's in-place change, as before this branch)", ran)
}
