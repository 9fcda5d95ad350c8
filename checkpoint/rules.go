package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// LearnedRule is a rule a reviewer learned from an answer ("approve, and
// allow calls like this"): it lets a policy allow calls like the one the
// reviewer approved, where the policy would have asked. It is bound as
// an answer is: who learned it and when, from which question of which
// thread, and the digest of the call the reviewer saw. Package
// policy/learn makes, matches and shows them; stores keep them.
type LearnedRule struct {
	// ID is "lr_" and a random suffix, unique in the store.
	ID string
	// Tool is the tool the rule allows calls of.
	Tool string
	// Spec is what the rule allows, as package policy/learn writes it:
	// JSON, kept byte for byte like the other JSON fields of a store.
	Spec json.RawMessage
	// Scope says where the rule applies, with ScopeKey: a thread (its
	// id), a project directory (an absolute path), or everyone ("").
	Scope    RuleScope
	ScopeKey string
	// ThreadID, QuestionID and Digest are the question the rule was
	// learned from and the digest of the call the reviewer approved.
	ThreadID, QuestionID, Digest string
	// CreatedBy is the reviewer who learned it; CreatedAt when (set by
	// the store when zero).
	CreatedBy string
	CreatedAt time.Time
	// ExpiresAt is when the rule stops applying; zero: never.
	ExpiresAt time.Time
	// ApprovedBy and ApprovedAt are the second reviewer's approval, for
	// a policy that requires one (learn: second_reviewer).
	ApprovedBy string
	ApprovedAt time.Time
	// RevokedBy, RevokedAt and RevokeReason: a revoked rule never
	// applies again.
	RevokedBy    string
	RevokedAt    time.Time
	RevokeReason string
}

// RuleScope is where a learned rule applies.
type RuleScope string

const (
	// ScopeThread: the thread whose id is the rule's ScopeKey (and the
	// further threads a coding agent's session takes, ID~2, ID~3, ...).
	ScopeThread RuleScope = "thread"
	// ScopeDir: calls that work in the directory ScopeKey or below it
	// (a project).
	ScopeDir RuleScope = "dir"
	// ScopeEveryone: every call the policy asks about.
	ScopeEveryone RuleScope = "everyone"
)

// Valid reports whether s is one of the scopes.
func (s RuleScope) Valid() bool {
	return s == ScopeThread || s == ScopeDir || s == ScopeEveryone
}

// Live reports whether r applies at now: not revoked, not expired.
func (r *LearnedRule) Live(now time.Time) bool {
	return r.RevokedAt.IsZero() && (r.ExpiresAt.IsZero() || now.Before(r.ExpiresAt))
}

// SecondApproved reports whether a second reviewer approved r: an
// approval with its time, by someone else than its author. A row that
// names an approver without the time, or its author, was not approved
// through [RuleStore.ChangeRule] and counts as no approval.
func (r *LearnedRule) SecondApproved() bool {
	return r.ApprovedBy != "" && !r.ApprovedAt.IsZero() && r.ApprovedBy != r.CreatedBy
}

// ScopeRef is one (scope, key) a [RuleFilter] selects.
type ScopeRef struct {
	Scope RuleScope
	Key   string
}

// RuleFilter selects learned rules. Zero fields do not filter.
type RuleFilter struct {
	Tool string
	// Unrevoked keeps the rules not revoked. (Expiry is the reader's to
	// check, at the time it reads: [LearnedRule.Live].)
	Unrevoked bool
	// Scopes keeps the rules whose scope and key are one of these.
	Scopes []ScopeRef
	// ThreadID keeps the rules learned from a question of this thread.
	ThreadID string
}

// Matches reports whether r passes f (what a store's query selects).
func (f RuleFilter) Matches(r *LearnedRule) bool {
	return (f.Tool == "" || r.Tool == f.Tool) &&
		(!f.Unrevoked || r.RevokedAt.IsZero()) &&
		(f.Scopes == nil || slices.Contains(f.Scopes, ScopeRef{r.Scope, r.ScopeKey})) &&
		(f.ThreadID == "" || r.ThreadID == f.ThreadID)
}

// RuleChange is what [RuleStore.ChangeRule] does to a rule: a second
// reviewer's approval, or its revocation.
type RuleChange struct {
	// Approve: By approves the rule as its second reviewer. Otherwise By
	// revokes it, for Reason.
	Approve bool
	By      string
	Reason  string
	// At is when; zero: the store's current time.
	At time.Time
}

// Errors of [RuleStore.ChangeRule].
var (
	// ErrSelfApproval: a rule's author approves it as its second
	// reviewer, which would make one person two.
	ErrSelfApproval = errors.New("checkpoint: a learned rule's second reviewer must be another reviewer than its author")
)

// RuleStore keeps learned rules: every store of tollgate's (memory,
// sqlite, postgres) implements it, and checkpoint/checkpointtest is its
// definition; a wrapper of a [Store] that does not is found out by a type
// assertion, and then nothing is learned. Each write commits with its
// audit event ([RuleEvent]) in one transaction.
type RuleStore interface {
	// CreateRule stores r with its rule_learned event, or returns
	// ErrConflict when a rule with its id exists. It sets CreatedAt when
	// zero. r must not be revoked or approved.
	CreateRule(ctx context.Context, r *LearnedRule) error
	// GetRule returns the rule, or ErrNotFound.
	GetRule(ctx context.Context, id string) (*LearnedRule, error)
	// ListRules returns the rules f selects, oldest first.
	ListRules(ctx context.Context, f RuleFilter) ([]*LearnedRule, error)
	// ChangeRule approves or revokes a rule, a compare-and-set, with its
	// rule_approved or rule_revoked event; it returns the rule as changed.
	// ErrNotFound; ErrConflict (with the stored rule) when the rule is
	// revoked, or approved already for an approval; ErrSelfApproval.
	ChangeRule(ctx context.Context, id string, c RuleChange) (*LearnedRule, error)
}

// Types of the audit events of learned rules.
const (
	EventRuleLearned  = "rule_learned"
	EventRuleApproved = "rule_approved"
	EventRuleRevoked  = "rule_revoked"
)

// CheckNewRule is what every store checks of a rule before it creates it.
func CheckNewRule(r *LearnedRule) error {
	switch {
	case r.ID == "" || r.Tool == "" || r.CreatedBy == "":
		return errors.New("checkpoint: a learned rule needs an id, a tool and its author")
	case r.ThreadID == "" || r.QuestionID == "" || r.Digest == "":
		return fmt.Errorf("checkpoint: learned rule %q needs the question it was learned from: its thread, id and digest", r.ID)
	case !r.Scope.Valid():
		return fmt.Errorf("checkpoint: learned rule %q: unknown scope %q", r.ID, r.Scope)
	case (r.Scope == ScopeEveryone) != (r.ScopeKey == ""):
		return fmt.Errorf("checkpoint: learned rule %q: scope %s with key %q", r.ID, r.Scope, r.ScopeKey)
	case !json.Valid(r.Spec):
		return fmt.Errorf("checkpoint: learned rule %q: its spec is not JSON", r.ID)
	case !r.RevokedAt.IsZero() || r.RevokedBy != "" || !r.ApprovedAt.IsZero() || r.ApprovedBy != "":
		return fmt.Errorf("checkpoint: learned rule %q is created revoked or approved", r.ID)
	}
	return nil
}

// CheckRuleChange is the compare-and-set rule of [RuleStore.ChangeRule]
// on r as stored.
func CheckRuleChange(r *LearnedRule, c RuleChange) error {
	switch {
	case c.By == "":
		return errors.New("checkpoint: a change of a learned rule needs who makes it")
	case !r.RevokedAt.IsZero():
		return fmt.Errorf("learned rule %q was revoked by %s: %w", r.ID, r.RevokedBy, ErrConflict)
	case c.Approve && !r.ApprovedAt.IsZero():
		return fmt.Errorf("learned rule %q was approved by %s: %w", r.ID, r.ApprovedBy, ErrConflict)
	case c.Approve && c.By == r.CreatedBy:
		return fmt.Errorf("learned rule %q: %w", r.ID, ErrSelfApproval)
	}
	return nil
}

// ApplyRuleChange sets c, made at at, on r.
func ApplyRuleChange(r *LearnedRule, c RuleChange, at time.Time) {
	if c.Approve {
		r.ApprovedBy, r.ApprovedAt = c.By, at
		return
	}
	r.RevokedBy, r.RevokedAt, r.RevokeReason = c.By, at, c.Reason
}

// RuleEvent is the audit event of a learned rule's creation or change
// (typ: EventRuleLearned, EventRuleApproved, EventRuleRevoked), in the
// thread the rule was learned in: its data names the rule, its tool and
// scope, who, the question and digest it came from, and a revocation's
// reason.
func RuleEvent(typ string, r *LearnedRule, by, reason string, at time.Time) *Event {
	entry := map[string]any{"rule_id": r.ID, "tool": r.Tool, "scope": string(r.Scope), "by": by,
		"question_id": r.QuestionID, "digest": r.Digest}
	if r.ScopeKey != "" {
		entry["scope_key"] = r.ScopeKey
	}
	if !r.ExpiresAt.IsZero() {
		entry["expires_at"] = r.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if reason != "" {
		entry["reason"] = reason
	}
	raw, err := jsontext.Marshal(entry)
	if err != nil {
		raw, _ = json.Marshal(map[string]string{"rule_id": r.ID, "by": by, "encoding_error": err.Error()})
	}
	return &Event{ThreadID: r.ThreadID, Type: typ, Data: raw, At: at}
}
