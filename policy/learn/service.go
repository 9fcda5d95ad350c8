package learn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/policy"
)

// Service learns rules from answers, for whoever takes reviewers' answers
// (the server, the command line, the terminal of tollgate run). It checks
// everything a learned rule must be: made from a question of the policy's
// that asks and lets a learned rule answer, within the proposal's
// choices, bound to the answer (who, the question, the digest the
// reviewer saw). Who may ask it is the caller's business: only
// authenticated reviewers, never the gated agent.
type Service struct {
	// Store keeps the questions and the rules (a checkpoint.RuleStore).
	Store checkpoint.Store
	// Policy returns the policy file in force for a thread's calls: its
	// shell tools, what it asks about and lets learned rules answer,
	// whether a learned rule waits for a second reviewer.
	Policy func(threadID string) *policy.Policy
	// Answer records an approval as every answer of the caller's is
	// recorded (the host's, with its checks); it is given the approval
	// with the question's digest.
	Answer func(ctx context.Context, threadID, questionID string, answer json.RawMessage, by string) (*checkpoint.Question, error)
	// Now is the clock of expiry; nil: time.Now.
	Now func() time.Time
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) rules() (checkpoint.RuleStore, error) {
	rs, ok := s.Store.(checkpoint.RuleStore)
	if !ok {
		return nil, errors.New("learn: this store keeps no learned rules")
	}
	return rs, nil
}

// Propose makes the proposal for a question: the narrowest rule that
// covers its call. It fails with [ErrNotLearnable] when the policy in
// force does not ask about the call, or asks in a way no learned rule
// may answer for (learnable: false, secrets, destruction, what the shell
// analysis cannot vouch for).
func (s *Service) Propose(ctx context.Context, threadID, questionID string) (*Proposal, *checkpoint.Question, error) {
	q, err := s.Store.GetQuestion(ctx, threadID, questionID)
	if err != nil {
		return nil, nil, err
	}
	call, ok := CallOf(q)
	if !ok {
		return nil, q, fmt.Errorf("%w: question %s is not about a tool call (kind %s)", ErrNotLearnable, questionID, q.Kind)
	}
	p := s.Policy(threadID)
	if p == nil {
		return nil, q, fmt.Errorf("%w: no policy file decides this thread's calls", ErrNotLearnable)
	}
	d := p.EvaluateRules(ctx, call)
	switch {
	case d.Action != policy.Ask:
		return nil, q, fmt.Errorf("%w: the policy in force does not ask about it (%s by rule %s)", ErrNotLearnable, d.Action, d.Rule)
	case !d.Learnable:
		return nil, q, fmt.Errorf("%w: %s", ErrNotLearnable, d.NotLearnable)
	}
	shellArg, _ := p.ShellArg(call.Tool)
	prop, err := Propose(call, shellArg)
	return prop, q, err
}

// Request is a reviewer's "approve, and allow calls like this".
type Request struct {
	ThreadID, QuestionID string
	// Digest is the digest of the call the reviewer saw (the question's).
	Digest string
	// Spec is the proposal's spec, as the reviewer left it.
	Spec Spec
	// Scope is one of the proposal's scopes.
	Scope Scope
	// Expires is how long the rule lasts; zero: until revoked.
	Expires time.Duration
	// By is the reviewer.
	By string
}

// Learned is what [Service.Learn] did.
type Learned struct {
	Rule     *checkpoint.LearnedRule
	Question *checkpoint.Question
	// Waiting: the policy requires a second reviewer, and the rule takes
	// effect once one approves it.
	Waiting bool
}

// Errors of [Service.Learn].
var (
	// ErrDigest: the request's digest is not the question's: the
	// reviewer saw another call.
	ErrDigest = errors.New("learn: the digest is not the question's: the call changed since it was shown")
	// ErrNotApproved: the question was answered, but not approved by the
	// reviewer who learns from it.
	ErrNotApproved = errors.New("learn: the question was not approved by this reviewer")
)

// Learn approves the question (unless the reviewer already did) and saves
// the rule, bound to the question, its digest and the reviewer. The rule
// must be the proposal's within its choices, in one of its scopes. When
// the approval is given but the rule cannot be saved, the error says so
// and Learned.Question is the answered question: learning again from it
// saves the rule.
func (s *Service) Learn(ctx context.Context, req Request) (*Learned, error) {
	rs, err := s.rules()
	if err != nil {
		return nil, err
	}
	if req.By == "" {
		return nil, errors.New("learn: who learns the rule is not known")
	}
	if req.Expires < 0 {
		return nil, errors.New("learn: a rule cannot expire before it is made")
	}
	prop, q, err := s.Propose(ctx, req.ThreadID, req.QuestionID)
	if err != nil {
		return nil, err
	}
	if req.Digest == "" || req.Digest != q.Digest {
		return nil, ErrDigest
	}
	if _, _, err := prop.checked(&req.Spec, &req.Scope); err != nil {
		return nil, err
	}
	switch q.Status {
	case checkpoint.QuestionPending:
		answer, _ := json.Marshal(hitl.ApproveAnswer{Decision: hitl.DecisionApprove, Digest: req.Digest})
		if q, err = s.Answer(ctx, req.ThreadID, req.QuestionID, answer, req.By); err != nil {
			return nil, err
		}
	case checkpoint.QuestionAnswered:
		var a hitl.ApproveAnswer
		if json.Unmarshal(q.Answer, &a) != nil || a.Decision != hitl.DecisionApprove || q.AnsweredBy != req.By {
			return nil, fmt.Errorf("%w (%s by %s)", ErrNotApproved, a.Decision, q.AnsweredBy)
		}
	default:
		return nil, fmt.Errorf("%w (it %s)", ErrNotApproved, q.Status)
	}
	spec, err := json.Marshal(req.Spec)
	if err != nil {
		return nil, err
	}
	r := &checkpoint.LearnedRule{ID: NewID(), Tool: req.Spec.Tool, Spec: spec, Scope: req.Scope.Kind, ScopeKey: req.Scope.Key,
		ThreadID: q.ThreadID, QuestionID: q.ID, Digest: q.Digest, CreatedBy: req.By, CreatedAt: s.now()}
	if req.Expires > 0 {
		r.ExpiresAt = r.CreatedAt.Add(req.Expires)
	}
	out := &Learned{Question: q}
	if err := rs.CreateRule(ctx, r); err != nil {
		return out, fmt.Errorf("learn: the call is approved, but the rule was not saved (learn again from the answered question): %w", err)
	}
	out.Rule = r
	out.Waiting = s.Policy(req.ThreadID).SecondReviewer()
	return out, nil
}

// NewID returns a new rule id: "lr_" and 16 hex digits.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "lr_" + hex.EncodeToString(b[:])
}

// Statuses of a learned rule ([Status]).
const (
	StatusActive  = "active"
	StatusWaiting = "waiting" // for a second reviewer
	StatusExpired = "expired"
	StatusRevoked = "revoked"
)

// Status says where a rule is at now, under a policy that does or does
// not require a second reviewer: active, waiting (for a second
// reviewer), expired or revoked.
func Status(r *checkpoint.LearnedRule, second bool, now time.Time) string {
	switch {
	case !r.RevokedAt.IsZero():
		return StatusRevoked
	case !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt):
		return StatusExpired
	case second && !r.SecondApproved():
		return StatusWaiting
	}
	return StatusActive
}

// ParseExpiry reads how long a rule lasts: "" or "never" (until
// revoked), or a number and a unit, s, m, h or d ("30d", "12h").
func ParseExpiry(s string) (time.Duration, error) {
	switch s {
	case "", "never":
		return 0, nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseUint(n, 10, 16)
		if err == nil && days > 0 {
			return time.Duration(days) * 24 * time.Hour, nil
		}
	} else if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("learn: expiry %q: want never, or a duration such as 30d, 12h or 90m", s)
}

// ErrInvalidRule is wrapped by the errors that say a rule sent to be
// previewed or learned is not the proposal's within its choices, or has
// a scope it does not offer.
var ErrInvalidRule = errors.New("learn: the rule is not one the proposal allows")

// PreviewRequest asks for a proposal as a reviewer edits it.
type PreviewRequest struct {
	ThreadID, QuestionID string
	// Spec and Scope are the rule as edited (checked); nil: the
	// proposal's, and its narrowest scope.
	Spec  *Spec
	Scope *Scope
	// By names the reviewer in the YAML's comment.
	By string
	// ThreadOnly offers the thread scope only (a reviewer limited to
	// some threads).
	ThreadOnly bool
	// Radius says which questions the radius reads.
	Radius RadiusOptions
}

// Preview is a proposal as a reviewer edits it: the rule, its choices,
// its YAML and its blast radius.
type Preview struct {
	// Spec is the rule shown: the one sent, or the proposed one.
	Spec Spec `json:"spec"`
	// Proposed is the narrowest rule, as first proposed.
	Proposed Spec `json:"proposed"`
	// Choices are, for each command of a shell shape, each argument's
	// matches; Fields, each other argument's matches (and directories).
	Choices        [][][]Match            `json:"choices"`
	Fields         map[string]FieldChoice `json:"fields"`
	Scopes         []Scope                `json:"scopes"`
	Scope          Scope                  `json:"scope"`
	Summary        string                 `json:"summary"`
	YAML           string                 `json:"yaml"`
	Radius         *Radius                `json:"radius"`
	SecondReviewer bool                   `json:"second_reviewer"`
}

// FieldChoice is what an argument other than a command string may match.
type FieldChoice struct {
	Matches []Match  `json:"matches"`
	Dirs    []string `json:"dirs,omitempty"`
}

// Preview makes the question's proposal with the rule and scope asked
// for, its choices, YAML and blast radius.
func (s *Service) Preview(ctx context.Context, r PreviewRequest) (*Preview, *checkpoint.Question, error) {
	prop, q, err := s.Propose(ctx, r.ThreadID, r.QuestionID)
	if err != nil {
		return nil, q, err
	}
	if r.ThreadOnly {
		prop.Scopes = prop.Scopes[:1]
	}
	spec, scope, err := prop.checked(r.Spec, r.Scope)
	if err != nil {
		return nil, q, err
	}
	radius, err := Measure(ctx, s.Store, spec, scope, r.Radius)
	if err != nil {
		return nil, q, err
	}
	out := &Preview{Spec: *spec, Proposed: prop.Spec, Scopes: prop.Scopes, Scope: scope, Summary: spec.String(), Radius: radius,
		Fields: map[string]FieldChoice{}, Choices: [][][]Match{}}
	if sh := prop.Spec.Shell; sh != nil {
		for _, c := range sh.Commands {
			cs := [][]Match{}
			for _, a := range c.Args {
				cs = append(cs, a.Choices())
			}
			out.Choices = append(out.Choices, cs)
		}
	}
	for _, f := range prop.Spec.Args {
		m, dirs := prop.FieldChoices(f.Name)
		out.Fields[f.Name] = FieldChoice{Matches: m, Dirs: dirs}
	}
	out.YAML = RuleYAML(&checkpoint.LearnedRule{ID: "lr_new", Tool: spec.Tool, Scope: scope.Kind, ScopeKey: scope.Key,
		ThreadID: q.ThreadID, QuestionID: q.ID, Digest: q.Digest, CreatedBy: r.By, CreatedAt: s.now()}, spec)
	out.SecondReviewer = s.Policy(q.ThreadID).SecondReviewer()
	return out, q, nil
}

// checked are the spec and scope asked for, checked against the
// proposal; nil: the proposal's, and its narrowest scope.
func (p *Proposal) checked(spec *Spec, scope *Scope) (*Spec, Scope, error) {
	if spec == nil {
		spec = &p.Spec
	} else if err := p.Check(*spec); err != nil {
		return nil, Scope{}, fmt.Errorf("%w: %w", ErrInvalidRule, err)
	}
	if scope == nil {
		return spec, p.Scopes[0], nil
	}
	if err := p.CheckScope(*scope); err != nil {
		return nil, Scope{}, fmt.Errorf("%w: %w", ErrInvalidRule, err)
	}
	return spec, *scope, nil
}

// ErrBadStatus: a list of rules asked for a status there is not.
var ErrBadStatus = errors.New("learn: status must be live (active or waiting), active, waiting, expired, revoked or all")

// Statuses a list of rules may ask for ([Service.Rules]): one of a
// rule's, live (active or waiting), or all.
const (
	StatusLive = "live"
	StatusAll  = "all"
)

// Rules lists the rules of a status ("": live), a tool and a thread
// learned in ("": any), that may keeps ("nil": all), oldest first.
func (s *Service) Rules(ctx context.Context, status, tool, thread string, may func(*checkpoint.LearnedRule) bool) ([]*checkpoint.LearnedRule, error) {
	rs, err := s.rules()
	if err != nil {
		return nil, err
	}
	switch status {
	case "":
		status = StatusLive
	case StatusLive, StatusAll, StatusActive, StatusWaiting, StatusExpired, StatusRevoked:
	default:
		return nil, fmt.Errorf("%w, not %q", ErrBadStatus, status)
	}
	rules, err := rs.ListRules(ctx, checkpoint.RuleFilter{Tool: tool, ThreadID: thread, Unrevoked: status != StatusAll && status != StatusRevoked})
	if err != nil {
		return nil, err
	}
	out := rules[:0]
	for _, r := range rules {
		if may != nil && !may(r) {
			continue
		}
		st := s.StatusOf(r)
		if status == StatusAll || status == st || status == StatusLive && (st == StatusActive || st == StatusWaiting) {
			out = append(out, r)
		}
	}
	return out, nil
}

// StatusOf is the rule's [Status] now, under the policy of the thread it
// was learned in.
func (s *Service) StatusOf(r *checkpoint.LearnedRule) string {
	second := false
	if p := s.Policy(r.ThreadID); p != nil {
		second = p.SecondReviewer()
	}
	return Status(r, second, s.now())
}

// Change approves (as a second reviewer) or revokes a rule.
func (s *Service) Change(ctx context.Context, id string, c checkpoint.RuleChange) (*checkpoint.LearnedRule, error) {
	rs, err := s.rules()
	if err != nil {
		return nil, err
	}
	if c.At.IsZero() {
		c.At = s.now()
	}
	return rs.ChangeRule(ctx, id, c)
}

// Rule reads one rule.
func (s *Service) Rule(ctx context.Context, id string) (*checkpoint.LearnedRule, error) {
	rs, err := s.rules()
	if err != nil {
		return nil, err
	}
	return rs.GetRule(ctx, id)
}
