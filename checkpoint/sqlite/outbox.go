package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

var _ checkpoint.Outbox = (*Store)(nil)

const deliveryCols = `id, event, thread_id, question_id, channel, target, payload, state, attempts, next_at, last_error, result, created_at, updated_at`

// AddDeliveries implements [checkpoint.Outbox]: the deliveries and the
// cursor in one transaction of the store's writer.
func (s *Store) AddDeliveries(ctx context.Context, ds []*checkpoint.Delivery, cursor int64) error {
	now := s.clk.Now()
	_, err := s.commit(ctx, &op{b: &checkpoint.Batch{}, outbox: func(t *wtx) error {
		for _, d := range ds {
			if _, err := t.tx.ExecContext(bg, `INSERT INTO notify_deliveries (`+deliveryCols+`)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
				d.ID, d.Event, d.ThreadID, d.QuestionID, d.Channel, d.Target, encJSON(d.Payload), string(d.State.OrPending()),
				d.Attempts, encTime(d.NextAt), d.LastError, d.Result, encTime(now), encTime(now)); err != nil {
				return fmt.Errorf("sqlite: add delivery %q: %w", d.ID, err)
			}
		}
		if cursor > 0 {
			if _, err := t.tx.ExecContext(bg, `INSERT INTO notify_cursor (one, seq) VALUES (1, ?)
ON CONFLICT (one) DO UPDATE SET seq = max(seq, excluded.seq)`, cursor); err != nil {
				return fmt.Errorf("sqlite: outbox cursor: %w", err)
			}
		}
		return nil
	}})
	return err
}

// OutboxCursor implements [checkpoint.Outbox].
func (s *Store) OutboxCursor(ctx context.Context) (int64, error) {
	var seq int64
	err := s.r.QueryRowContext(ctx, `SELECT seq FROM notify_cursor WHERE one = 1`).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: outbox cursor: %w", err)
	}
	return seq, nil
}

// DueDeliveries implements [checkpoint.Outbox].
func (s *Store) DueDeliveries(ctx context.Context, now time.Time, limit int) ([]*checkpoint.Delivery, error) {
	return s.deliveries(ctx, `SELECT `+deliveryCols+` FROM notify_deliveries
WHERE state = 'pending' AND (next_at IS NULL OR next_at <= ?) ORDER BY next_at LIMIT ?`, now.UnixMicro(), limit)
}

// ListDeliveries implements [checkpoint.Outbox].
func (s *Store) ListDeliveries(ctx context.Context, state checkpoint.DeliveryState, limit int) ([]*checkpoint.Delivery, error) {
	if state == "" {
		return s.deliveries(ctx, `SELECT `+deliveryCols+` FROM notify_deliveries ORDER BY updated_at DESC, id LIMIT ?`, limit)
	}
	return s.deliveries(ctx, `SELECT `+deliveryCols+` FROM notify_deliveries WHERE state = ? ORDER BY updated_at DESC, id LIMIT ?`, string(state), limit)
}

// GetDelivery implements [checkpoint.Outbox].
func (s *Store) GetDelivery(ctx context.Context, id string) (*checkpoint.Delivery, error) {
	ds, err := s.deliveries(ctx, `SELECT `+deliveryCols+` FROM notify_deliveries WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, fmt.Errorf("delivery %q: %w", id, checkpoint.ErrNotFound)
	}
	return ds[0], nil
}

// UpdateDelivery implements [checkpoint.Outbox].
func (s *Store) UpdateDelivery(ctx context.Context, d *checkpoint.Delivery) error {
	now := s.clk.Now()
	_, err := s.commit(ctx, &op{b: &checkpoint.Batch{}, outbox: func(t *wtx) error {
		res, err := t.tx.ExecContext(bg, `UPDATE notify_deliveries SET state = ?, attempts = ?, next_at = ?, last_error = ?, result = ?, updated_at = ?
WHERE id = ?`, string(d.State.OrPending()), d.Attempts, encTime(d.NextAt), d.LastError, d.Result, encTime(now), d.ID)
		if err != nil {
			return fmt.Errorf("sqlite: update delivery %q: %w", d.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("sqlite: update delivery %q: %w", d.ID, err)
		} else if n == 0 {
			return fmt.Errorf("delivery %q: %w", d.ID, checkpoint.ErrNotFound)
		}
		return nil
	}})
	if err == nil {
		d.UpdatedAt = kept(now)
	}
	return err
}

func (s *Store) deliveries(ctx context.Context, query string, args ...any) ([]*checkpoint.Delivery, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: deliveries: %w", err)
	}
	defer rows.Close()
	var out []*checkpoint.Delivery
	for rows.Next() {
		var d checkpoint.Delivery
		var payload sql.NullString
		var state string
		var next, created, updated sql.NullInt64
		if err := rows.Scan(&d.ID, &d.Event, &d.ThreadID, &d.QuestionID, &d.Channel, &d.Target, &payload, &state,
			&d.Attempts, &next, &d.LastError, &d.Result, &created, &updated); err != nil {
			return nil, fmt.Errorf("sqlite: deliveries: %w", err)
		}
		d.Payload, d.State = decJSON(payload), checkpoint.DeliveryState(state)
		d.NextAt, d.CreatedAt, d.UpdatedAt = decTime(next), decTime(created), decTime(updated)
		out = append(out, &d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: deliveries: %w", err)
	}
	return out, nil
}
