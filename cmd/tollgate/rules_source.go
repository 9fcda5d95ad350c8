package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/tollgate-ai/tollgate/apiclient"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/examples/policies"
	"github.com/tollgate-ai/tollgate/hooks"
	"github.com/tollgate-ai/tollgate/internal/display"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/policy/learn"
)

// The rules commands' two sources: a server, through its API, and a
// store, through a learn service of its own.

// ---------- a server ----------

func (c *apiClient) preview(ctx context.Context, thread, id string, spec *learn.Spec, scope *learn.Scope, _ string) (*learn.Preview, error) {
	body, _ := json.Marshal(map[string]any{"spec": spec, "scope": scope})
	var out learn.Preview
	err := c.do(ctx, "POST", "/v1/questions/"+url.PathEscape(thread)+"/"+url.PathEscape(id)+"/proposal", nil, body, &out)
	return &out, err
}

func (c *apiClient) learn(ctx context.Context, thread, id string, req learnBody, _ string) (*wireRule, error) {
	body, _ := json.Marshal(req)
	var out struct {
		Rule wireRule `json:"rule"`
	}
	err := c.do(ctx, "POST", "/v1/questions/"+url.PathEscape(thread)+"/"+url.PathEscape(id)+"/learn", nil, body, &out)
	return &out.Rule, err
}

func (c *apiClient) rules(ctx context.Context, status string) ([]*wireRule, error) {
	var out struct {
		Rules []*wireRule `json:"rules"`
	}
	err := c.do(ctx, "GET", "/v1/rules", url.Values{"status": {status}}, nil, &out)
	return out.Rules, err
}

func (c *apiClient) rule(ctx context.Context, id string) (*wireRule, error) {
	var out wireRule
	err := c.do(ctx, "GET", "/v1/rules/"+url.PathEscape(id), nil, nil, &out)
	return &out, apiclient.NotFound(err, "learned rule "+display.Line(id))
}

func (c *apiClient) change(ctx context.Context, id string, approve bool, reason, _ string) (*wireRule, error) {
	verb, body := "revoke", []byte(`{}`)
	if approve {
		verb = "approve"
	} else {
		body, _ = json.Marshal(map[string]string{"reason": reason})
	}
	var out wireRule
	err := c.do(ctx, "POST", "/v1/rules/"+url.PathEscape(id)+"/"+verb, nil, body, &out)
	return &out, apiclient.NotFound(err, "learned rule "+display.Line(id))
}

func (c *apiClient) export(ctx context.Context, status string) ([]byte, error) {
	var out []byte
	err := c.do(ctx, "GET", "/v1/rules/export", url.Values{"status": {status}}, nil, &out)
	return out, err
}

// ---------- a store ----------

// learning is the learn service of a store, under the policy file of
// --policy (or the built-in sandbox policy), answering as questions
// answer does.
func (s *storeSource) learning() (*learn.Service, error) {
	p, err := s.policyInForce()
	if err != nil {
		return nil, err
	}
	hp, err := hookPolicyInForce(s.hookPolicyFile)
	if err != nil {
		return nil, fmt.Errorf("the coding agents' policy: %w", err)
	}
	return &learn.Service{Store: s.store, Policy: policyOfThread(func() *policy.Policy { return p }, func() *policy.Policy { return hp }),
		Now: cliNow, Answer: s.answer}, nil
}

// policyOfThread is the policy that decides a thread's calls: a coding
// agent's session's is the hooks' policy, every other's the agent's.
func policyOfThread(agentPolicy, hookPolicy func() *policy.Policy) func(threadID string) *policy.Policy {
	return func(threadID string) *policy.Policy {
		if hooks.IsThread(threadID) {
			return hookPolicy()
		}
		return agentPolicy()
	}
}

// policyInForce is the policy file of --policy, or the built-in one.
func (s *storeSource) policyInForce() (*policy.Policy, error) {
	if s.policyFile == "" || s.policyFile == builtinPolicy {
		return policy.Parse(policies.SandboxName, policies.Sandbox, policyOptions())
	}
	return policy.Load(s.policyFile, policyOptions())
}

func (s *storeSource) preview(ctx context.Context, thread, id string, spec *learn.Spec, scope *learn.Scope, by string) (*learn.Preview, error) {
	svc, err := s.learning()
	if err != nil {
		return nil, err
	}
	p, _, err := svc.Preview(ctx, learn.PreviewRequest{ThreadID: thread, QuestionID: id, Spec: spec, Scope: scope, By: by})
	return p, err
}

func (s *storeSource) learn(ctx context.Context, thread, id string, req learnBody, by string) (*wireRule, error) {
	svc, err := s.learning()
	if err != nil {
		return nil, err
	}
	expires, err := learn.ParseExpiry(req.Expires)
	if err != nil {
		return nil, err
	}
	prop, _, err := svc.Propose(ctx, thread, id)
	if err != nil {
		return nil, err
	}
	spec, scope := prop.Spec, prop.Scopes[0]
	if req.Spec != nil {
		spec = *req.Spec
	}
	if req.Scope != nil {
		scope = *req.Scope
	}
	out, err := svc.Learn(ctx, learn.Request{ThreadID: thread, QuestionID: id, Digest: req.Digest, Spec: spec, Scope: scope, Expires: expires, By: by})
	if err != nil {
		return nil, err
	}
	return wireOfRule(svc, out.Rule), nil
}

func (s *storeSource) rules(ctx context.Context, status string) ([]*wireRule, error) {
	svc, err := s.learning()
	if err != nil {
		return nil, err
	}
	rules, err := svc.Rules(ctx, status, "", "", nil)
	if err != nil {
		return nil, err
	}
	out := make([]*wireRule, len(rules))
	for i, r := range rules {
		out[i] = wireOfRule(svc, r)
	}
	return out, nil
}

func (s *storeSource) rule(ctx context.Context, id string) (*wireRule, error) {
	svc, err := s.learning()
	if err != nil {
		return nil, err
	}
	r, err := svc.Rule(ctx, id)
	if err != nil {
		return nil, err
	}
	return wireOfRule(svc, r), nil
}

func (s *storeSource) change(ctx context.Context, id string, approve bool, reason, by string) (*wireRule, error) {
	svc, err := s.learning()
	if err != nil {
		return nil, err
	}
	r, err := svc.Change(ctx, id, checkpoint.RuleChange{Approve: approve, By: by, Reason: reason})
	if err != nil {
		return nil, err
	}
	return wireOfRule(svc, r), nil
}

func (s *storeSource) export(ctx context.Context, status string) ([]byte, error) {
	svc, err := s.learning()
	if err != nil {
		return nil, err
	}
	rules, err := svc.Rules(ctx, status, "", "", nil)
	if err != nil {
		return nil, err
	}
	return learn.Export(rules)
}

// wireOfRule is a stored rule as the API shows it.
func wireOfRule(svc *learn.Service, r *checkpoint.LearnedRule) *wireRule {
	w := apiclient.RuleOf(r, svc.StatusOf(r))
	return &w
}
