package policy

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tollgate-ai/tollgate/hitl"
)

// HITL returns the policy as a [hitl.Policy] for
// [hitl.NewApprovalPolicyMiddleware]: allow becomes [hitl.Approve], block
// [hitl.Deny] with the reason, ask [hitl.AskUser] with the decision's
// timeout and [Decision.Details]. The call's arguments are read from their JSON form.
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
		d := current().Evaluate(ctx, Call{Tool: c.Tool, Args: args, ThreadID: c.ThreadID})
		switch d.Action {
		case Allow:
			return hitl.Approve()
		case Block:
			return hitl.Deny(d.Reason)
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
