package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

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

// ruleJSON is a learned rule as the API shows it.
type ruleJSON struct {
	ID           string      `json:"id"`
	Tool         string      `json:"tool"`
	Status       string      `json:"status"`
	Summary      string      `json:"summary"`
	Spec         rawJSON     `json:"spec"`
	Scope        learn.Scope `json:"scope"`
	ScopeText    string      `json:"scope_text"`
	ThreadID     string      `json:"thread_id"`
	QuestionID   string      `json:"question_id"`
	Digest       string      `json:"digest"`
	CreatedBy    string      `json:"created_by"`
	CreatedAt    jsonTime    `json:"created_at"`
	ExpiresAt    jsonTime    `json:"expires_at"`
	ApprovedBy   string      `json:"approved_by"`
	ApprovedAt   jsonTime    `json:"approved_at"`
	RevokedBy    string      `json:"revoked_by"`
	RevokedAt    jsonTime    `json:"revoked_at"`
	RevokeReason string      `json:"revoke_reason"`
	YAML         string      `json:"yaml"`
}

func (s *Server) ruleView(r *checkpoint.LearnedRule) ruleJSON {
	v := ruleJSON{ID: r.ID, Tool: r.Tool, Spec: rawJSON(r.Spec), Scope: learn.ScopeOf(r), ScopeText: learn.ScopeOf(r).String(),
		ThreadID: r.ThreadID, QuestionID: r.QuestionID, Digest: r.Digest, CreatedBy: r.CreatedBy, CreatedAt: jsonTime(r.CreatedAt),
		ExpiresAt: jsonTime(r.ExpiresAt), ApprovedBy: r.ApprovedBy, ApprovedAt: jsonTime(r.ApprovedAt), RevokedBy: r.RevokedBy,
		RevokedAt: jsonTime(r.RevokedAt), RevokeReason: r.RevokeReason}
	second := false
	if p := s.learn.Policy(r.ThreadID); p != nil {
		second = p.SecondReviewer()
	}
	v.Status = learn.Status(r, second, s.clock.Now())
	if spec, err := learn.ParseSpec(r.Spec); err == nil {
		v.Summary, v.YAML = spec.String(), learn.RuleYAML(r, spec)
	}
	return v
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
	Question questionJSON `json:"question"`
	// Spec is the rule shown: the one sent, or the proposed one.
	Spec learn.Spec `json:"spec"`
	// Proposed is the narrowest rule, as first proposed.
	Proposed learn.Spec `json:"proposed"`
	// Choices are, for each command of a shell shape, each argument's
	// matches; Fields, each other argument's matches (and directories).
	Choices        [][][]learn.Match      `json:"choices"`
	Fields         map[string]fieldChoice `json:"fields"`
	Scopes         []learn.Scope          `json:"scopes"`
	Scope          learn.Scope            `json:"scope"`
	Summary        string                 `json:"summary"`
	YAML           string                 `json:"yaml"`
	Radius         *learn.Radius          `json:"radius"`
	SecondReviewer bool                   `json:"second_reviewer"`
}

type fieldChoice struct {
	Matches []learn.Match `json:"matches"`
	Dirs    []string      `json:"dirs,omitempty"`
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

// proposal reads the request and makes the question's proposal, with the
// spec and scope the request names (checked) or the proposed ones.
func (s *Server) proposal(w http.ResponseWriter, r *http.Request, id *identity, emptyOK bool) (*learn.Proposal, *checkpoint.Question, *ruleRequest, error) {
	svc, err := s.learning()
	if err != nil {
		return nil, nil, nil, err
	}
	threadID, qid := r.PathValue("thread"), r.PathValue("id")
	if !id.sees(threadID) {
		return nil, nil, nil, forbidden("token %q may not see thread %q", id.name, threadID)
	}
	var req ruleRequest
	if err := s.decode(w, r, &req, emptyOK); err != nil {
		return nil, nil, nil, err
	}
	prop, q, err := svc.Propose(r.Context(), threadID, qid)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return nil, nil, nil, notFound("question %q of thread %q does not exist", qid, threadID)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if len(id.threads) > 0 {
		// A reviewer limited to some threads: one thread only.
		prop.Scopes = prop.Scopes[:1]
	}
	if req.Spec == nil {
		req.Spec = &prop.Spec
	} else if err := prop.Check(*req.Spec); err != nil {
		return nil, nil, nil, newError(http.StatusUnprocessableEntity, codeInvalidRule, "%s", trimLearn(err))
	}
	if req.Scope == nil {
		req.Scope = &prop.Scopes[0]
	} else if err := prop.CheckScope(*req.Scope); err != nil {
		return nil, nil, nil, newError(http.StatusUnprocessableEntity, codeInvalidRule, "%s", trimLearn(err))
	}
	return prop, q, &req, nil
}

func trimLearn(err error) string {
	msg := err.Error()
	for _, p := range []string{"learn: "} {
		if len(msg) > len(p) && msg[:len(p)] == p {
			msg = msg[len(p):]
		}
	}
	return msg
}

// POST /v1/questions/{thread}/{id}/proposal
//
// The narrowest rule that covers the question's call, or the rule the
// body sends (the proposal with its matches widened or narrowed), with
// its choices, its policy YAML and its blast radius.
func (s *Server) proposeRule(w http.ResponseWriter, r *http.Request, id *identity) error {
	prop, q, req, err := s.proposal(w, r, id, true)
	if err != nil {
		return err
	}
	radius, err := learn.Measure(r.Context(), s.store, req.Spec, *req.Scope, learn.RadiusOptions{Last: min(max(req.Last, 0), 5000), Sees: id.sees})
	if err != nil {
		return err
	}
	out := proposalJSON{Question: questionView(q), Spec: *req.Spec, Proposed: prop.Spec, Scopes: prop.Scopes, Scope: *req.Scope,
		Summary: req.Spec.String(), Radius: radius, Fields: map[string]fieldChoice{}, Choices: [][][]learn.Match{}}
	if sh := prop.Spec.Shell; sh != nil {
		for _, c := range sh.Commands {
			var cs [][]learn.Match
			for _, a := range c.Args {
				cs = append(cs, a.Choices())
			}
			out.Choices = append(out.Choices, cs)
		}
	}
	for _, f := range prop.Spec.Args {
		m, dirs := prop.FieldChoices(f.Name)
		out.Fields[f.Name] = fieldChoice{Matches: m, Dirs: dirs}
	}
	preview := &checkpoint.LearnedRule{ID: "lr_new", Tool: req.Spec.Tool, Scope: req.Scope.Kind, ScopeKey: req.Scope.Key,
		ThreadID: q.ThreadID, QuestionID: q.ID, Digest: q.Digest, CreatedBy: id.name, CreatedAt: s.clock.Now()}
	out.YAML = learn.RuleYAML(preview, req.Spec)
	if p := s.learn.Policy(q.ThreadID); p != nil {
		out.SecondReviewer = p.SecondReviewer()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type learnedJSON struct {
	Question questionJSON `json:"question"`
	Rule     ruleJSON     `json:"rule"`
}

// POST /v1/questions/{thread}/{id}/learn
//
// "Approve, and allow calls like this": the question is approved (the
// body carries its digest, as an answer does) and the rule saved, bound
// to it and to the caller.
func (s *Server) learnRule(w http.ResponseWriter, r *http.Request, id *identity) error {
	_, _, req, err := s.proposal(w, r, id, false)
	if err != nil {
		return err
	}
	if req.Digest == "" {
		return newError(http.StatusUnprocessableEntity, codeDigestRequired, "the request carries no digest: send the digest of the call the reviewer saw (GET the question first)")
	}
	if !id.mayRule(r.PathValue("thread"), *req.Scope) {
		return forbidden("token %q is limited to some threads: it learns rules for one of its threads only", id.name)
	}
	expires, err := learn.ParseExpiry(req.Expires)
	if err != nil {
		return badRequest("%s", trimLearn(err))
	}
	out, err := s.learn.Learn(r.Context(), learn.Request{ThreadID: r.PathValue("thread"), QuestionID: r.PathValue("id"), Digest: req.Digest,
		Spec: *req.Spec, Scope: *req.Scope, Expires: expires, By: id.name})
	if err != nil {
		return err
	}
	s.log.Info("tollgate: rule learned", "rule", out.Rule.ID, "by", id.name, "thread", out.Rule.ThreadID, "question", out.Rule.QuestionID,
		"scope", learn.ScopeOf(out.Rule).String())
	writeJSON(w, http.StatusOK, learnedJSON{Question: questionView(out.Question), Rule: s.ruleView(out.Rule)})
	return nil
}

// rulesFor lists the rules the caller may see: f's, with status one of
// statuses ("all": any), tool and thread as the query says.
func (s *Server) rulesFor(r *http.Request, id *identity) ([]*checkpoint.LearnedRule, error) {
	svc, err := s.learning()
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	if err := checkParams(q, "status", "tool", "thread"); err != nil {
		return nil, err
	}
	status := q.Get("status")
	switch status {
	case "":
		status = "live"
	case "live", "all", learn.StatusActive, learn.StatusWaiting, learn.StatusExpired, learn.StatusRevoked:
	default:
		return nil, badRequest("status must be live (active or waiting), active, waiting, expired, revoked or all, not %q", status)
	}
	rules, err := svc.Store.(checkpoint.RuleStore).ListRules(r.Context(), checkpoint.RuleFilter{Tool: q.Get("tool"), ThreadID: q.Get("thread"),
		Unrevoked: status != "all" && status != learn.StatusRevoked})
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	out := rules[:0]
	for _, rule := range rules {
		if !id.mayRule(rule.ThreadID, learn.ScopeOf(rule)) {
			continue
		}
		second := false
		if p := svc.Policy(rule.ThreadID); p != nil {
			second = p.SecondReviewer()
		}
		st := learn.Status(rule, second, now)
		if status == "all" || status == st || status == "live" && (st == learn.StatusActive || st == learn.StatusWaiting) {
			out = append(out, rule)
		}
	}
	return out, nil
}

// GET /v1/rules
func (s *Server) listRules(w http.ResponseWriter, r *http.Request, id *identity) error {
	rules, err := s.rulesFor(r, id)
	if err != nil {
		return err
	}
	out := struct {
		Rules []ruleJSON `json:"rules"`
	}{Rules: make([]ruleJSON, 0, len(rules))}
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
	rule, err := svc.Store.(checkpoint.RuleStore).GetRule(r.Context(), r.PathValue("rule"))
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
	c.At = s.clock.Now()
	changed, err := s.learn.Store.(checkpoint.RuleStore).ChangeRule(r.Context(), rule.ID, c)
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
