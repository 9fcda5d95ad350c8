package anthropic

import (
	"slices"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/hitl"
	pt "github.com/tollgate-ai/tollgate/internal/providertest"
)

// The seed scenario end to end through the provider and the runtime: the
// model (a recorded stream) lists /tmp and deletes the logs in one turn;
// the policy lets ls run and asks about rm; the host answers; the model's
// next request carries every tool result; its answer ends the run.
func TestSeedScenario(t *testing.T) {
	t.Parallel()
	const lsID, rmID = "toolu_01A09q90qw90lq917835lq9", "toolu_01B2xY7pQmN4kL8vR3sT6wZ"
	tests := []struct {
		name   string
		answer *hitl.ApproveAnswer // nil: no answer, the question times out
		ran    []string
		result string // the rm call's tool_result, as the model gets it
	}{
		{
			name:   "approve",
			answer: &hitl.ApproveAnswer{Decision: hitl.DecisionApprove},
			ran:    []string{"ls /tmp", "rm -r /tmp/logs"},
			result: `{"type":"tool_result","tool_use_id":"` + rmID + `","content":[{"type":"text","text":"ran: rm -r /tmp/logs"}]}`,
		},
		{
			name:   "deny with a reason",
			answer: &hitl.ApproveAnswer{Decision: hitl.DecisionDeny, Reason: "keep the logs until the audit"},
			ran:    []string{"ls /tmp"},
			result: `{"type":"tool_result","tool_use_id":"` + rmID + `","is_error":true,"content":[{"type":"text","text":"keep the logs until the audit"}]}`,
		},
		{
			name:   "edit",
			answer: &hitl.ApproveAnswer{Decision: hitl.DecisionEdit, EditedArgs: map[string]any{"command": "rm -r /tmp/logs/2024"}},
			ran:    []string{"ls /tmp", "rm -r /tmp/logs/2024"},
			result: `{"type":"tool_result","tool_use_id":"` + rmID + `","content":[{"type":"text","text":"ran: rm -r /tmp/logs/2024"}]}`,
		},
		{
			name:   "timeout",
			ran:    []string{"ls /tmp"},
			result: `{"type":"tool_result","tool_use_id":"` + rmID + `","is_error":true,"content":[{"type":"text","text":"approval_timeout"}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, srv := setup(t, nil, pt.SSE(fixture(t, "parallel.sse")), pt.SSE(fixture(t, "final.sse")))
			seed := pt.RunSeed(t, p, agent.Model{ID: "claude-sonnet-4-6"}, func(*hitl.Request) *hitl.ApproveAnswer { return tt.answer })

			if len(seed.Asked) != 1 {
				t.Fatalf("asked %d times, want once", len(seed.Asked))
			}
			if q := seed.Asked[0]; q.CallID != rmID || q.Payload.ToolName != "bash" || q.Payload.Args["command"] != "rm -r /tmp/logs" {
				t.Errorf("asked about %s %s %v", q.CallID, q.Payload.ToolName, q.Payload.Args)
			}
			// ls runs at once, rm when answered: in either order.
			if ran := slices.Sorted(slices.Values(seed.Ran)); !slices.Equal(ran, tt.ran) {
				t.Errorf("ran %q, want %q", seed.Ran, tt.ran)
			}
			if f := seed.Final; f.Text != "I listed /tmp. The tool results above say what became of the logs." || f.StopReason != agent.StopEndTurn {
				t.Errorf("final message = %+v", f)
			}

			if n := len(srv.Requests()); n != 2 {
				t.Fatalf("%d model calls, want 2", n)
			}
			first := srv.Request(0).JSON(t)
			pt.JSONEq(t, "first request's tools", first["tools"], `[{"name":"bash","description":"Run a shell command.",
				"input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false}}]`)
			msgs := srv.Request(1).JSON(t)["messages"].([]any)
			if len(msgs) != 3 {
				t.Fatalf("second request has %d messages, want 3: %s", len(msgs), pt.Canon(t, msgs))
			}
			pt.JSONEq(t, "the model's turn, sent back", msgs[1], `{"role":"assistant","content":[
				{"type":"text","text":"Listing, then deleting the logs."},
				{"type":"tool_use","id":"`+lsID+`","name":"bash","input":{"command":"ls /tmp"}},
				{"type":"tool_use","id":"`+rmID+`","name":"bash","input":{"command":"rm -r /tmp/logs"}}]}`)
			pt.JSONEq(t, "tool results", msgs[2], `{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"`+lsID+`","content":[{"type":"text","text":"ran: ls /tmp"}]},
				`+tt.result+`]}`)
		})
	}
}
