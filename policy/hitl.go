package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
)

// HITL returns the policy as a [hitl.Policy] for
// [hitl.NewApprovalPolicyMiddleware]: allow becomes [hitl.Approve] (by a
// learned rule, [hitl.ApproveWith] its id, author and scope), block
// [hitl.DenyWith] the reason and the rule ("matched_rule"), ask
// [hitl.AskUser] with the decision's timeout and [Decision.Details]. The
// call's arguments are read from their JSON form.
func (p *Policy) HITL() hitl.Policy {
	return hitlPolicy(func() *Policy { return p })
}

// HITL returns the policy in force as a [hitl.Policy]; a reload takes
// effect at the next call.
func (r *Reloadable) HITL() hitl.Policy {
	return hitlPolicy(r.Policy)
}

func hitlPolicy(current func() *Policy) hitl.Policy {
	return func(ctx context.Context, c *hitl.PolicyContext) hitl.ApprovalDecision {
		args, err := callArgs(c)
		if err != nil {
			return hitl.AskUser(hitl.AskOptions{Timeout: DefaultTimeout, Details: map[string]any{
				"matched_rule": RuleError, "impact": DefaultImpact, "policy_error": err.Error()}})
		}
		d := current().Evaluate(ctx, Call{Tool: c.Tool, Args: args, ThreadID: c.ThreadID, Annotations: c.Annotations, Dir: c.Dir})
		switch d.Action {
		case Allow:
			if lr := d.Learned; lr != nil {
				// The audit log names the learned rule and who taught it.
				return hitl.ApproveWith(lr.details())
			}
			return hitl.Approve()
		case Block:
			// The rule goes with the block, under the key an ask's details
			// use: people read "blocked by the policy (rule NAME: reason)".
			return hitl.DenyWith(d.Reason, map[string]any{"matched_rule": d.Rule})
		}
		return hitl.AskUser(hitl.AskOptions{Timeout: d.Timeout, Details: d.Details()})
	}
}

// callArgs returns the call's arguments as a JSON object decodes.
func callArgs(c *hitl.PolicyContext) (map[string]any, error) {
	raw := c.RawArgs
	if len(raw) == 0 {
		if c.Args == nil {
			return map[string]any{}, nil
		}
		var err error
		if raw, err = json.Marshal(c.Args); err != nil {
			return nil, fmt.Errorf("policy: encoding the arguments of %s: %w", c.Tool, err)
		}
	}
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, fmt.Errorf("policy: the arguments of %s are not a JSON object: %w", c.Tool, err)
	}
	if args == nil {
		args = map[string]any{}
	}
	return args, nil
}

// SandboxFor returns, for the bash tool's Decide option, the sandbox
// profile the policy requires of a call of tool about to run: the policy
// is evaluated again on the arguments the tool got (after any edit). An
// allowed call runs under [Decision.Sandbox] ("" when no rule requires a
// profile: the tool's own). A call the policy does not allow runs only if
// a person approved it (an answered approval question of the
// [hitl.ApprovalPolicyMiddleware] for the call, read from the tool call's
// context), under the tool's profile; otherwise, say when a reload made
// the policy stricter between the decision and the run, it is an error and
// the command is not run.
func (p *Policy) SandboxFor(tool string) func(ctx context.Context, args json.RawMessage) (string, error) {
	return sandboxFor(func() *Policy { return p }, tool)
}

// SandboxFor is [Policy.SandboxFor] with the policy in force.
func (r *Reloadable) SandboxFor(tool string) func(ctx context.Context, args json.RawMessage) (string, error) {
	return sandboxFor(r.Policy, tool)
}

func sandboxFor(current func() *Policy, tool string) func(ctx context.Context, args json.RawMessage) (string, error) {
	return func(ctx context.Context, raw json.RawMessage) (string, error) {
		var args map[string]any
		if err := json.Unmarshal(raw, &args); err != nil {
			return "", fmt.Errorf("policy: the arguments of %s are not a JSON object: %w", tool, err)
		}
		tc := agent.ToolCallFrom(ctx)
		call := Call{Tool: tool, Args: args}
		if tc != nil {
			call.ThreadID = tc.ThreadID
		}
		d := current().Evaluate(ctx, call)
		if d.Action == Allow {
			return d.Sandbox, nil
		}
		if tc != nil {
			q, err := approval(ctx, tc)
			if err == nil && q.Status == checkpoint.QuestionAnswered && approvedAnswer(q.Answer) {
				return "", nil
			}
		}
		return "", fmt.Errorf("the policy does not allow this call (%s by rule %s: %s) and no person approved it", d.Action, d.Rule, d.Reason)
	}
}

// approvalWait bounds how long the check of an approval waits for a
// store out of reach.
var approvalWait = 2 * time.Minute

// approval reads the call's approval question, waiting (while the run
// lasts, approvalWait at most) for a store out of reach: the answer was
// read a moment ago by the middleware, and a store away for a second must
// not turn an approved call into one refused for good.
func approval(ctx context.Context, tc *agent.ToolCallContext) (*checkpoint.Question, error) {
	giveUp := time.Now().Add(approvalWait)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		q, err := tc.Question(ctx, hitl.QuestionID(tc.Call.ID))
		if !errors.Is(err, checkpoint.ErrUnavailable) || time.Now().Add(wait).After(giveUp) {
			return q, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// approvedAnswer reports whether a stored approve answer lets the call run
// (approve or edit): a deny that reached the tool through other wiring must
// not count as an approval.
func approvedAnswer(raw json.RawMessage) bool {
	var a struct {
		Decision string `json:"decision"`
	}
	return json.Unmarshal(raw, &a) == nil && (a.Decision == hitl.DecisionApprove || a.Decision == hitl.DecisionEdit)
}
