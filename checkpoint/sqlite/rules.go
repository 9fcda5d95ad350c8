package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/listsql"
)

var _ checkpoint.RuleStore = (*Store)(nil)

const ruleCols = `id, tool, spec, scope, scope_key, thread_id, question_id, digest, created_by, created_at, expires_at,
	approved_by, approved_at, revoked_by, revoked_at, revoke_reason`

func scanRule(row scanner) (*checkpoint.LearnedRule, error) {
	r := &checkpoint.LearnedRule{}
	var spec, scope string
	var created, expires, approved, revoked sql.NullInt64
	if err := row.Scan(&r.ID, &r.Tool, &spec, &scope, &r.ScopeKey, &r.ThreadID, &r.QuestionID, &r.Digest, &r.CreatedBy,
		&created, &expires, &r.ApprovedBy, &approved, &r.RevokedBy, &revoked, &r.RevokeReason); err != nil {
		return nil, err
	}
	r.Spec, r.Scope = []byte(spec), checkpoint.RuleScope(scope)
	r.CreatedAt, r.ExpiresAt, r.ApprovedAt, r.RevokedAt = decTime(created), decTime(expires), decTime(approved), decTime(revoked)
	return r, nil
}

// CreateRule commits the rule with its rule_learned event through the
// store's writer: the event, then the row (schema 9's trigger ties them).
func (s *Store) CreateRule(ctx context.Context, r *checkpoint.LearnedRule) error {
	if err := checkpoint.CheckNewRule(r); err != nil {
		return err
	}
	now := s.clk.Now()
	created := r.CreatedAt
	if created.IsZero() {
		created = now
	}
	if err := checkTimes("create learned rule "+strconv.Quote(r.ID), created, r.ExpiresAt); err != nil {
		return err
	}
	c := *r
	c.CreatedAt = kept(created)
	c.ExpiresAt = kept(r.ExpiresAt)
	e := checkpoint.RuleEvent(checkpoint.EventRuleLearned, &c, c.CreatedBy, "", c.CreatedAt)
	o := &op{b: &checkpoint.Batch{Events: []*checkpoint.Event{e}}}
	o.rule = func(t *wtx) error {
		res, err := t.tx.ExecContext(bg, `INSERT INTO learned_rules (id, tool, spec, scope, scope_key, thread_id, question_id, digest,
	created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			c.ID, c.Tool, string(c.Spec), string(c.Scope), c.ScopeKey, c.ThreadID, c.QuestionID, c.Digest,
			c.CreatedBy, encTime(c.CreatedAt), encTime(c.ExpiresAt))
		if err != nil {
			return fmt.Errorf("sqlite: create learned rule %q: %w", c.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("learned rule %q exists: %w", c.ID, checkpoint.ErrConflict)
		}
		return nil
	}
	if _, err := s.commit(ctx, o); err != nil {
		return err
	}
	r.CreatedAt = c.CreatedAt
	return nil
}

// GetRule reads one rule.
func (s *Store) GetRule(ctx context.Context, id string) (*checkpoint.LearnedRule, error) {
	r, err := scanRule(s.r.QueryRowContext(ctx, `SELECT `+ruleCols+` FROM learned_rules WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("learned rule %q: %w", id, checkpoint.ErrNotFound)
	}
	return r, err
}

// ListRules reads the rules f selects, in creation order.
func (s *Store) ListRules(ctx context.Context, f checkpoint.RuleFilter) ([]*checkpoint.LearnedRule, error) {
	q, args, ok := listsql.Rules(dialect, ruleCols, f)
	if !ok {
		return nil, nil
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list learned rules: %w", err)
	}
	defer rows.Close()
	var out []*checkpoint.LearnedRule
	for rows.Next() {
		r, err := scanRule(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ChangeRule approves or revokes a rule: read and checked under the write
// lock, written after its event.
func (s *Store) ChangeRule(ctx context.Context, id string, c checkpoint.RuleChange) (*checkpoint.LearnedRule, error) {
	cur, err := s.GetRule(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := checkpoint.CheckRuleChange(cur, c); err != nil {
		return cur, err
	}
	now := s.clk.Now()
	at := c.At
	if at.IsZero() {
		at = now
	}
	if err := checkTimes("change learned rule "+strconv.Quote(id), at); err != nil {
		return nil, err
	}
	at = kept(at)
	typ := checkpoint.EventRuleRevoked
	if c.Approve {
		typ = checkpoint.EventRuleApproved
	}
	var stored *checkpoint.LearnedRule
	o := &op{b: &checkpoint.Batch{Events: []*checkpoint.Event{checkpoint.RuleEvent(typ, cur, c.By, c.Reason, at)}}}
	o.rule = func(t *wtx) error {
		r, err := scanRule(t.tx.QueryRowContext(bg, `SELECT `+ruleCols+` FROM learned_rules WHERE id = ?`, id))
		if err != nil {
			return fmt.Errorf("sqlite: change learned rule %q: %w", id, err)
		}
		stored = r
		if err := checkpoint.CheckRuleChange(r, c); err != nil {
			return err
		}
		if c.Approve {
			_, err = t.tx.ExecContext(bg, `UPDATE learned_rules SET approved_by = ?, approved_at = ? WHERE id = ?`, c.By, encTime(at), id)
		} else {
			_, err = t.tx.ExecContext(bg, `UPDATE learned_rules SET revoked_by = ?, revoked_at = ?, revoke_reason = ? WHERE id = ?`, c.By, encTime(at), c.Reason, id)
		}
		if err != nil {
			return fmt.Errorf("sqlite: change learned rule %q: %w", id, err)
		}
		checkpoint.ApplyRuleChange(r, c, at)
		return nil
	}
	if _, err := s.commit(ctx, o); err != nil {
		return stored, err
	}
	return stored, nil
}
