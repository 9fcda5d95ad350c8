package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/examples/policies"
	"github.com/tollgate-ai/tollgate/hooks"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/policy/learn"
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
// (watched until ctx ends) or the built-in coding-agent policy, and
// returns it with its name and the policy in force. Its sandbox profiles
// are not checked against this machine's kernel: a confined call runs on
// the agent's machine, whose hook says what it enforces. The rules
// learned from answers in the store answer for its asks, in the session's
// project (the call's directory) as a reviewer scoped them.
func hookService(ctx context.Context, store checkpoint.Store, file string, log *slog.Logger, w policyWatch) (*hooks.Service, *loadedPolicy, error) {
	cfg := hooks.Config{Store: store, Logger: log}
	opts := &policy.Options{}
	if src, err := learn.NewSource(store); err == nil {
		opts.Learned = src
	}
	lp := &loadedPolicy{name: policies.CodingAgentName}
	if file == "" || file == builtinPolicy {
		p, err := policy.Parse(policies.CodingAgentName, policies.CodingAgent, opts)
		if err != nil {
			return nil, nil, err
		}
		cfg.Policy, cfg.Explain, cfg.MaxTimeout = p.HITL(), p.Evaluate, p.MaxTimeout
		lp.current, lp.digest = func() *policy.Policy { return p }, p.Digest
	} else {
		rp, err := watchedPolicyWith(ctx, file, opts, log, "tollgate: hook policy reloaded", w)
		if err != nil {
			return nil, nil, err
		}
		cfg.Policy = rp.HITL()
		cfg.Explain = rp.Evaluate
		cfg.MaxTimeout = func() time.Duration { return rp.Policy().MaxTimeout() }
		lp.name, lp.current, lp.digest = file, rp.Policy, rp.Digest
	}
	lp.approval = cfg.Policy
	svc, err := hooks.New(cfg)
	return svc, lp, err
}

// hookPolicyInForce is the coding agents' policy file of a store source
// (--hook-policy), or the built-in one.
func hookPolicyInForce(file string) (*policy.Policy, error) {
	if file == "" || file == builtinPolicy {
		return policy.Parse(policies.CodingAgentName, policies.CodingAgent, nil)
	}
	return policy.Load(file, nil)
}
