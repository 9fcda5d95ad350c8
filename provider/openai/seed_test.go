package openai

import (
	"encoding/json"
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
	const lsID, rmID = "call_A0wPzLq7DkM5d3eDm0y9Hc8X", "call_B1xQaMr8ElN6e4fEn1z0Id9Y"
	tests := []struct {
		name   string
		answer *hitl.ApproveAnswer // nil: no answer, the question times out
		ran    []string
		result string // the rm call's tool message, as the model gets it
	}{
		{
			name:   "approve",
			answer: &hitl.ApproveAnswer{Decision: hitl.DecisionApprove},
			ran:    []string{"ls /tmp", "rm -r /tmp/logs"},
			result: "ran: rm -r /tmp/logs",
		},
		{
			name:   "deny with a reason",
			answer: &hitl.ApproveAnswer{Decision: hitl.DecisionDeny, Reason: "keep the logs until the audit"},
			ran:    []string{"ls /tmp"},
			result: "Error: keep the logs until the audit",
		},
		{
			name:   "edit",
			answer: &hitl.ApproveAnswer{Decision: hitl.DecisionEdit, EditedArgs: map[string]any{"command": "rm -r /tmp/logs/2024"}},
			ran:    []string{"ls /tmp", "rm -r /tmp/logs/2024"},
			result: "ran: rm -r /tmp/logs/2024",
		},
		{
			name:   "timeout",
			ran:    []string{"ls /tmp"},
			result: "Error: approval_timeout",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, srv := setup(t, nil, pt.SSE(fixture(t, "parallel.sse")), pt.SSE(fixture(t, "final.sse")))
			seed := pt.RunSeed(t, p, agent.Model{ID: "gpt-4.1"}, func(*hitl.Request) *hitl.ApproveAnswer { return tt.answer })

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
			if u := seed.Final.Usage; u == nil || *u != (agent.Usage{InputTokens: 231, OutputTokens: 23}) {
				t.Errorf("final usage = %+v", u)
			}

			if n := len(srv.Requests()); n != 2 {
				t.Fatalf("%d model calls, want 2", n)
			}
			first := srv.Request(0).JSON(t)
			pt.JSONEq(t, "first request's tools", first["tools"], `[{"type":"function","function":{"name":"bash","description":"Run a shell command.",
				"parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false}}}]`)
			msgs := srv.Request(1).JSON(t)["messages"].([]any)
			if len(msgs) != 5 {
				t.Fatalf("second request has %d messages, want 5: %s", len(msgs), pt.Canon(t, msgs))
			}
			pt.JSONEq(t, "second request", msgs, `[
				{"role":"system","content":"You are a careful shell assistant."},
				{"role":"user","content":"list files then delete temp logs"},
				{"role":"assistant","tool_calls":[
					{"id":"`+lsID+`","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls /tmp\"}"}},
					{"id":"`+rmID+`","type":"function","function":{"name":"bash","arguments":"{\"command\":\"rm -r /tmp/logs\"}"}}]},
				{"role":"tool","tool_call_id":"`+lsID+`","content":"ran: ls /tmp"},
				{"role":"tool","tool_call_id":"`+rmID+`","content":`+quote(tt.result)+`}]`)
		})
	}
}

// quote returns s as a JSON string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
