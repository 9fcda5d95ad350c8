package memory

import (
	"context"
	"fmt"
	"slices"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

func copyRule(r *checkpoint.LearnedRule) *checkpoint.LearnedRule {
	c := *r
	c.Spec = slices.Clone(r.Spec)
	return &c
}

func (s *Store) ruleLocked(id string) *checkpoint.LearnedRule {
	for _, r := range s.rules {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// CreateRule stores r with its audit event.
func (s *Store) CreateRule(ctx context.Context, r *checkpoint.LearnedRule) error {
	if err := checkpoint.CheckNewRule(r); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ruleLocked(r.ID) != nil {
		return fmt.Errorf("learned rule %q exists: %w", r.ID, checkpoint.ErrConflict)
	}
	now := s.now()
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	s.rules = append(s.rules, copyRule(r))
	s.appendEventLocked(checkpoint.RuleEvent(checkpoint.EventRuleLearned, r, r.CreatedBy, "", r.CreatedAt), now)
	return nil
}

// GetRule returns a copy of the rule.
func (s *Store) GetRule(ctx context.Context, id string) (*checkpoint.LearnedRule, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.ruleLocked(id)
	if r == nil {
		return nil, fmt.Errorf("learned rule %q: %w", id, checkpoint.ErrNotFound)
	}
	return copyRule(r), nil
}

// ListRules returns copies of the rules f selects, oldest first.
func (s *Store) ListRules(ctx context.Context, f checkpoint.RuleFilter) ([]*checkpoint.LearnedRule, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*checkpoint.LearnedRule
	for _, r := range s.rules {
		if f.Matches(r) {
			out = append(out, copyRule(r))
		}
	}
	return out, nil
}

// ChangeRule approves or revokes a rule with its audit event.
func (s *Store) ChangeRule(ctx context.Context, id string, c checkpoint.RuleChange) (*checkpoint.LearnedRule, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.ruleLocked(id)
	if r == nil {
		return nil, fmt.Errorf("learned rule %q: %w", id, checkpoint.ErrNotFound)
	}
	if err := checkpoint.CheckRuleChange(r, c); err != nil {
		return copyRule(r), err
	}
	now := s.now()
	at := c.At
	if at.IsZero() {
		at = now
	}
	checkpoint.ApplyRuleChange(r, c, at)
	typ := checkpoint.EventRuleRevoked
	if c.Approve {
		typ = checkpoint.EventRuleApproved
	}
	s.appendEventLocked(checkpoint.RuleEvent(typ, r, c.By, c.Reason, at), now)
	return copyRule(r), nil
}
