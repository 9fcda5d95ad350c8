package host_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
)

// A run resumed on the agent it parked on (what the host keeps of its
// last parked runs) decides its call as any resume does: the policy runs
// again, and a deny it gives now blocks the approved call; an answer
// stored by other code about other arguments than the call's is denied.
func TestKeptRunDecidesAsAnyResume(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// answer answers q once the run has parked; deny makes the
		// policy deny.
		answer func(t *testing.T, f *fixture, h *host.Host, q *checkpoint.Question, deny *atomic.Bool)
		check  func(t *testing.T, trace map[string]any)
	}{
		{"the policy denies now", func(t *testing.T, f *fixture, h *host.Host, q *checkpoint.Question, deny *atomic.Bool) {
			deny.Store(true) // a policy reloaded while the run was parked
			ans, _ := json.Marshal(hitl.ApproveAnswer{Decision: hitl.DecisionApprove, Digest: q.Digest})
			if _, err := h.Answer(context.Background(), "t1", q.ID, ans, "alice"); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, trace map[string]any) {
			if trace["decision"] != "policy_deny" || trace["reason"] != "reloaded" {
				t.Fatalf("trace %v, want the policy's deny", trace)
			}
		}},
		{"a stored answer about other arguments", func(t *testing.T, f *fixture, _ *host.Host, q *checkpoint.Question, _ *atomic.Bool) {
			if _, err := f.store.ResolveQuestion(context.Background(), "t1", q.ID, checkpoint.Resolution{Status: checkpoint.QuestionAnswered,
				Answer: json.RawMessage(`{"decision":"approve","digest":"sha256:00"}`), By: "elsewhere", At: q.CreatedAt}); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, trace map[string]any) {
			if trace["decision"] != "policy_deny" || trace["digest_mismatch"] != true {
				t.Fatalf("trace %v, want the digest mismatch denied", trace)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil, 0, nil)
			var deny atomic.Bool
			policy := func(ctx context.Context, pc *hitl.PolicyContext) hitl.ApprovalDecision {
				if deny.Load() {
					return hitl.Deny("reloaded")
				}
				return hitl.AskUser(hitl.AskOptions{})
			}
			f.cfg.Agent.Middleware = []agent.Middleware{hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(f.store, "", nil), policy)}
			h := f.start(t)
			q := f.promptParked(t, h, "t1", "$ touch x", 1)[0]
			c.answer(t, f, h, q, &deny)
			eventually(t, "the run to end", f.idle(t, "t1"))
			if got := f.shell.runs(); len(got) != 0 {
				t.Fatalf("ran %v", got)
			}
			_, msgs := f.thread(t, "t1")
			var res *agent.ToolResult
			for _, m := range msgs {
				if m.Role == agent.RoleTool {
					res = m.Result
				}
			}
			if res == nil || !res.IsError {
				t.Fatalf("result %+v, want the call blocked", res)
			}
			trace, _ := res.Details["hitl"].(map[string]any)
			c.check(t, trace)
		})
	}
}
