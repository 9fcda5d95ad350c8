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
	if err := prop.Check(req.Spec); err != nil {
		return nil, err
	}
	if err := prop.CheckScope(req.Scope); err != nil {
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
	case second && r.ApprovedBy == "":
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
