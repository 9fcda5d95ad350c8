package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/internal/listsql"
)

var _ checkpoint.RuleStore = (*Store)(nil)

const ruleCols = `id, tool, spec::text, scope, scope_key, thread_id, question_id, digest, created_by, created_at, expires_at,
	approved_by, approved_at, revoked_by, revoked_at, revoke_reason`

func scanRule(row pgx.Row) (*checkpoint.LearnedRule, error) {
	r := &checkpoint.LearnedRule{}
	var spec, scope string
	var created, expires, approved, revoked pgtype.Timestamptz
	if err := row.Scan(&r.ID, &r.Tool, &spec, &scope, &r.ScopeKey, &r.ThreadID, &r.QuestionID, &r.Digest, &r.CreatedBy,
		&created, &expires, &r.ApprovedBy, &approved, &r.RevokedBy, &revoked, &r.RevokeReason); err != nil {
		return nil, err
	}
	r.Spec, r.Scope = []byte(spec), checkpoint.RuleScope(scope)
	r.CreatedAt, r.ExpiresAt, r.ApprovedAt, r.RevokedAt = decTime(created), decTime(expires), decTime(approved), decTime(revoked)
	return r, nil
}

// ruleTx runs write in a transaction that first takes the numbered
// writers' lock (events.go), then inserts the rule's audit event e:
// schema 10's triggers look for it at the commit.
func (s *Store) ruleTx(ctx context.Context, e *checkpoint.Event, write func(tx pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, writersLock, int32(lockClass), s.writersKey); err != nil {
		return fmt.Errorf("postgres: lock: %w", err)
	}
	if err := write(tx); err != nil {
		return err
	}
	row := [][]any{{e.ThreadID, e.RunID, e.Type, string(e.Data), e.At}}
	if _, err := tx.Exec(ctx, appendEvents.sql(1), rowArgs(row, eventColumns)...); err != nil {
		return fmt.Errorf("postgres: append event: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: commit: %w", err)
	}
	return nil
}

// CreateRule writes the rule and its rule_learned event in one
// transaction.
func (s *Store) CreateRule(ctx context.Context, r *checkpoint.LearnedRule) error {
	if err := checkpoint.CheckNewRule(r); err != nil {
		return err
	}
	created := r.CreatedAt
	if created.IsZero() {
		created = s.clk.Now()
	}
	if err := checkTimes("create learned rule "+strconv.Quote(r.ID), created, r.ExpiresAt); err != nil {
		return err
	}
	c := *r
	c.CreatedAt = created
	e := checkpoint.RuleEvent(checkpoint.EventRuleLearned, &c, c.CreatedBy, "", created)
	err := s.ruleTx(ctx, e, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO learned_rules (id, tool, spec, scope, scope_key, thread_id, question_id, digest,
	created_by, created_at, expires_at) VALUES ($1, $2, $3::json, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING`,
			c.ID, c.Tool, string(c.Spec), string(c.Scope), c.ScopeKey, c.ThreadID, c.QuestionID, c.Digest,
			c.CreatedBy, c.CreatedAt, encTime(c.ExpiresAt))
		if err != nil {
			return fmt.Errorf("postgres: create learned rule %q: %w", c.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("learned rule %q exists: %w", c.ID, checkpoint.ErrConflict)
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.CreatedAt = created
	return nil
}

// GetRule reads one rule.
func (s *Store) GetRule(ctx context.Context, id string) (*checkpoint.LearnedRule, error) {
	r, err := scanRule(s.pool.QueryRow(ctx, `SELECT `+ruleCols+` FROM learned_rules WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("learned rule %q: %w", id, checkpoint.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: get learned rule %q: %w", id, err)
	}
	return r, nil
}

// ListRules reads the rules f selects, in creation order.
func (s *Store) ListRules(ctx context.Context, f checkpoint.RuleFilter) ([]*checkpoint.LearnedRule, error) {
	q, args, ok := listsql.Rules(dialect, ruleCols, f)
	if !ok {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list learned rules: %w", err)
	}
	defer rows.Close()
	var out []*checkpoint.LearnedRule
	for rows.Next() {
		r, err := scanRule(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: list learned rules: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list learned rules: %w", err)
	}
	return out, nil
}

// ChangeRule approves or revokes a rule: the row is read FOR UPDATE and
// checked in the transaction that writes it and its event.
func (s *Store) ChangeRule(ctx context.Context, id string, c checkpoint.RuleChange) (*checkpoint.LearnedRule, error) {
	cur, err := s.GetRule(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := checkpoint.CheckRuleChange(cur, c); err != nil {
		return cur, err
	}
	at := c.At
	if at.IsZero() {
		at = s.clk.Now()
	}
	if err := checkTimes("change learned rule "+strconv.Quote(id), at); err != nil {
		return nil, err
	}
	typ := checkpoint.EventRuleRevoked
	if c.Approve {
		typ = checkpoint.EventRuleApproved
	}
	var stored *checkpoint.LearnedRule
	err = s.ruleTx(ctx, checkpoint.RuleEvent(typ, cur, c.By, c.Reason, at), func(tx pgx.Tx) error {
		r, err := scanRule(tx.QueryRow(ctx, `SELECT `+ruleCols+` FROM learned_rules WHERE id = $1 FOR UPDATE`, id))
		if err != nil {
			return fmt.Errorf("postgres: change learned rule %q: %w", id, err)
		}
		stored = r
		if err := checkpoint.CheckRuleChange(r, c); err != nil {
			return err
		}
		if c.Approve {
			_, err = tx.Exec(ctx, `UPDATE learned_rules SET approved_by = $1, approved_at = $2 WHERE id = $3`, c.By, at, id)
		} else {
			_, err = tx.Exec(ctx, `UPDATE learned_rules SET revoked_by = $1, revoked_at = $2, revoke_reason = $3 WHERE id = $4`, c.By, at, c.Reason, id)
		}
		if err != nil {
			return fmt.Errorf("postgres: change learned rule %q: %w", id, err)
		}
		checkpoint.ApplyRuleChange(r, c, at.Truncate(time.Microsecond))
		return nil
	})
	return stored, err
}
