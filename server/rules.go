package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/tollgate-ai/tollgate/apiclient"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/policy/learn"
)

// Rules learned from answers ("approve, and allow calls like this"):
// proposals with their blast radius, learning, and the rules' list,
// approval by a second reviewer, revocation and export. Reviewers and
// admins only; a reviewer limited to some threads learns, sees and
// changes only rules scoped to one of those threads, learned there.

const (
	codeNotLearnable = "not_learnable"
	codeLearningOff  = "learning_off"
	codeInvalidRule  = "invalid_rule"
)

func (s *Server) ruleRoutes() {
	s.api("POST /v1/questions/{thread}/{id}/proposal", review, s.proposeRule)
	s.api("POST /v1/questions/{thread}/{id}/learn", review, s.learnRule)
	s.api("GET /v1/rules", review, s.listRules)
	s.api("GET /v1/rules/export", review, s.exportRules)
	s.api("GET /v1/rules/{rule}", review, s.getRule)
	s.api("POST /v1/rules/{rule}/revoke", review, s.revokeRule)
	s.api("POST /v1/rules/{rule}/approve", review, s.approveRule)
}

// newLearning is the learn service of a server whose Config.Learning is
// set: it answers through the host, with the digest required, as the
// API's answers are.
func (s *Server) newLearning(policyFor func(threadID string) *policy.Policy) *learn.Service {
	if policyFor == nil {
		return nil
	}
	if _, ok := s.store.(checkpoint.RuleStore); !ok {
		s.log.Warn("tollgate: the store keeps no learned rules: approve, and allow calls like this is off")
		return nil
	}
	return &learn.Service{Store: s.store, Policy: policyFor, Now: s.clock.Now,
		Answer: func(ctx context.Context, threadID, questionID string, answer json.RawMessage, by string) (*checkpoint.Question, error) {
			return s.host.AnswerWith(ctx, threadID, questionID, answer, host.AnswerOptions{By: by, RequireDigest: true})
		}}
}

func (s *Server) learning() (*learn.Service, error) {
	if s.learn == nil {
		return nil, newError(http.StatusNotFound, codeLearningOff, "this server learns no rules from answers")
	}
	return s.learn, nil
}

func (s *Server) ruleView(r *checkpoint.LearnedRule) apiclient.Rule {
	return apiclient.RuleOf(r, s.learn.StatusOf(r))
}

// mayRule says whether the caller may learn, see or change a rule of
// scope learned in thread: every reviewer when unlimited; one limited to
// some threads, for a rule scoped to one of them.
func (id *identity) mayRule(thread string, scope learn.Scope) bool {
	if len(id.threads) == 0 {
		return true
	}
	return id.sees(thread) && scope.Kind == checkpoint.ScopeThread && scope.Key == thread
}

// proposalJSON is a proposal with its blast radius.
type proposalJSON struct {
	Question apiclient.Question `json:"question"`
	*learn.Preview
}

type ruleRequest struct {
	Spec  *learn.Spec  `json:"spec"`
	Scope *learn.Scope `json:"scope"`
	// Last: how many of the tool's latest questions the radius reads.
	Last int `json:"last"`
	// Learn only: the digest of the call shown, and how long the rule
	// lasts ("30d", "12h", "never").
	Digest  string `json:"digest"`
	Expires string `json:"expires"`
}

func trimLearn(err error) string {
	return strings.TrimPrefix(err.Error(), "learn: ")
}

// POST /v1/questions/{thread}/{id}/proposal
//
// The narrowest rule that covers the question's call, or the rule the
// body sends (the proposal with its matches widened or narrowed), with
// its choices, its policy YAML and its blast radius.
func (s *Server) proposeRule(w http.ResponseWriter, r *http.Request, id *identity) error {
	svc, err := s.learning()
	if err != nil {
		return err
	}
	threadID, qid := r.PathValue("thread"), r.PathValue("id")
	if !id.sees(threadID) {
		return forbidden("token %q may not see thread %q", id.name, threadID)
	}
	var req ruleRequest
	if err := s.decode(w, r, &req, true); err != nil {
		return err
	}
	p, q, err := svc.Preview(r.Context(), learn.PreviewRequest{ThreadID: threadID, QuestionID: qid, Spec: req.Spec, Scope: req.Scope,
		By: id.name, ThreadOnly: len(id.threads) > 0, Radius: learn.RadiusOptions{Last: min(max(req.Last, 0), 5000), Sees: id.sees}})
	if err != nil {
		return s.learnError(err, threadID, qid)
	}
	writeJSON(w, http.StatusOK, proposalJSON{Question: apiclient.QuestionOf(q), Preview: p})
	return nil
}

// learnError says a learning error in the API's terms.
func (s *Server) learnError(err error, threadID, qid string) error {
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		return notFound("question %q of thread %q does not exist", qid, threadID)
	case errors.Is(err, learn.ErrInvalidRule):
		return newError(http.StatusUnprocessableEntity, codeInvalidRule, "%s", trimLearn(errors.New(strings.TrimPrefix(err.Error(), learn.ErrInvalidRule.Error()+": "))))
	}
	return err
}

type learnedJSON struct {
	Question apiclient.Question `json:"question"`
	Rule     apiclient.Rule     `json:"rule"`
}

// POST /v1/questions/{thread}/{id}/learn
//
// "Approve, and allow calls like this": the question is approved (the
// body carries its digest, as an answer does) and the rule saved, bound
// to it and to the caller.
func (s *Server) learnRule(w http.ResponseWriter, r *http.Request, id *identity) error {
	svc, err := s.learning()
	if err != nil {
		return err
	}
	threadID, qid := r.PathValue("thread"), r.PathValue("id")
	if !id.sees(threadID) {
		return forbidden("token %q may not see thread %q", id.name, threadID)
	}
	var req ruleRequest
	if err := s.decode(w, r, &req, false); err != nil {
		return err
	}
	if req.Digest == "" {
		return newError(http.StatusUnprocessableEntity, codeDigestRequired, "the request carries no digest: send the digest of the call the reviewer saw (GET the question first)")
	}
	expires, err := learn.ParseExpiry(req.Expires)
	if err != nil {
		return badRequest("%s", trimLearn(err))
	}
	prop, _, err := svc.Propose(r.Context(), threadID, qid)
	if err != nil {
		return s.learnError(err, threadID, qid)
	}
	spec, scope := prop.Spec, prop.Scopes[0]
	if req.Spec != nil {
		spec = *req.Spec
	}
	if req.Scope != nil {
		scope = *req.Scope
	}
	if !id.mayRule(threadID, scope) {
		return newError(http.StatusUnprocessableEntity, codeInvalidRule, "token %q is limited to some threads: it learns rules for its thread %s only", id.name, threadID)
	}
	out, err := svc.Learn(r.Context(), learn.Request{ThreadID: threadID, QuestionID: qid, Digest: req.Digest,
		Spec: spec, Scope: scope, Expires: expires, By: id.name})
	if err != nil {
		return s.learnError(err, threadID, qid)
	}
	s.log.Info("tollgate: rule learned", "rule", out.Rule.ID, "by", id.name, "thread", out.Rule.ThreadID, "question", out.Rule.QuestionID,
		"scope", learn.ScopeOf(out.Rule).String())
	writeJSON(w, http.StatusOK, learnedJSON{Question: apiclient.QuestionOf(out.Question), Rule: s.ruleView(out.Rule)})
	return nil
}

// rulesFor lists the rules the caller may see, of the status, tool and
// thread the query names.
func (s *Server) rulesFor(r *http.Request, id *identity) ([]*checkpoint.LearnedRule, error) {
	svc, err := s.learning()
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	if err := checkParams(q, "status", "tool", "thread"); err != nil {
		return nil, err
	}
	rules, err := svc.Rules(r.Context(), q.Get("status"), q.Get("tool"), q.Get("thread"), func(rule *checkpoint.LearnedRule) bool {
		return id.mayRule(rule.ThreadID, learn.ScopeOf(rule))
	})
	if errors.Is(err, learn.ErrBadStatus) {
		return nil, badRequest("%s", trimLearn(err))
	}
	return rules, err
}

// GET /v1/rules
func (s *Server) listRules(w http.ResponseWriter, r *http.Request, id *identity) error {
	rules, err := s.rulesFor(r, id)
	if err != nil {
		return err
	}
	out := struct {
		Rules []apiclient.Rule `json:"rules"`
	}{Rules: make([]apiclient.Rule, 0, len(rules))}
	for _, rule := range rules {
		out.Rules = append(out.Rules, s.ruleView(rule))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// GET /v1/rules/export: the rules as a policy file's rules (YAML).
func (s *Server) exportRules(w http.ResponseWriter, r *http.Request, id *identity) error {
	rules, err := s.rulesFor(r, id)
	if err != nil {
		return err
	}
	body, err := learn.Export(rules)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
	_, _ = w.Write(body)
	return nil
}

// rule loads a rule the caller may see.
func (s *Server) rule(r *http.Request, id *identity) (*checkpoint.LearnedRule, error) {
	svc, err := s.learning()
	if err != nil {
		return nil, err
	}
	rule, err := svc.Rule(r.Context(), r.PathValue("rule"))
	if errors.Is(err, checkpoint.ErrNotFound) || err == nil && !id.mayRule(rule.ThreadID, learn.ScopeOf(rule)) {
		return nil, notFound("learned rule %q does not exist", r.PathValue("rule"))
	}
	return rule, err
}

// GET /v1/rules/{rule}
func (s *Server) getRule(w http.ResponseWriter, r *http.Request, id *identity) error {
	rule, err := s.rule(r, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.ruleView(rule))
	return nil
}

// POST /v1/rules/{rule}/revoke
func (s *Server) revokeRule(w http.ResponseWriter, r *http.Request, id *identity) error {
	var req struct {
		Reason string `json:"reason"`
	}
	if err := s.decode(w, r, &req, true); err != nil {
		return err
	}
	return s.changeRule(w, r, id, checkpoint.RuleChange{By: id.name, Reason: req.Reason})
}

// POST /v1/rules/{rule}/approve: a second reviewer's approval.
func (s *Server) approveRule(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := s.decode(w, r, &struct{}{}, true); err != nil {
		return err
	}
	return s.changeRule(w, r, id, checkpoint.RuleChange{Approve: true, By: id.name})
}

func (s *Server) changeRule(w http.ResponseWriter, r *http.Request, id *identity, c checkpoint.RuleChange) error {
	rule, err := s.rule(r, id)
	if err != nil {
		return err
	}
	changed, err := s.learn.Change(r.Context(), rule.ID, c)
	if err != nil {
		e := classify(err)
		if changed != nil && errors.Is(err, checkpoint.ErrConflict) {
			e.status, e.code = http.StatusConflict, codeConflict
		}
		return e
	}
	what := "revoked"
	if c.Approve {
		what = "approved"
	}
	s.log.Info("tollgate: learned rule "+what, "rule", rule.ID, "by", id.name)
	writeJSON(w, http.StatusOK, s.ruleView(changed))
	return nil
}
