package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/examples/policies"
	"github.com/tollgate-ai/tollgate/hooks"
	"github.com/tollgate-ai/tollgate/policy"
)

// hookPolicyFlag defines --hook-policy, the policy of coding agents' hook
// calls.
func hookPolicyFlag(fs flagDefiner) *string {
	p := new(string)
	fs.StringVar(p, "hook-policy", envDefault("TOLLGATE_HOOK_POLICY", ""),
		"policy `file` of coding agents' hooks (Claude Code, Codex), reloaded when it changes (default, or builtin: the built-in examples/policies/coding-agent.yaml), e.g. --hook-policy agents.yaml [TOLLGATE_HOOK_POLICY]")
	return p
}

// hookService builds the hooks' service on the store with the policy file
// (watched until ctx ends) or the built-in coding-agent policy. Its
// sandbox profiles are not checked against this machine's kernel: a
// confined call runs on the agent's machine, whose hook says what it
// enforces.
func hookService(ctx context.Context, store checkpoint.Store, file string, log *slog.Logger, w policyWatch) (*hooks.Service, string, error) {
	cfg := hooks.Config{Store: store, Logger: log}
	name := policies.CodingAgentName
	if file == "" || file == builtinPolicy {
		p, err := policy.Parse(policies.CodingAgentName, policies.CodingAgent, nil)
		if err != nil {
			return nil, "", err
		}
		cfg.Policy, cfg.Explain, cfg.MaxTimeout = p.HITL(), p.Evaluate, p.MaxTimeout
	} else {
		rp, err := watchedPolicyWith(ctx, file, nil, log, "tollgate: hook policy reloaded", w)
		if err != nil {
			return nil, "", err
		}
		cfg.Policy = rp.HITL()
		cfg.Explain = rp.Evaluate
		cfg.MaxTimeout = func() time.Duration { return rp.Policy().MaxTimeout() }
		name = file
	}
	svc, err := hooks.New(cfg)
	return svc, name, err
}
