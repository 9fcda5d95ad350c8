package notify

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// MemoryOutbox is a [checkpoint.Outbox] in memory, for a store that has
// none of its own (the memory store): nothing outlives the process.
type MemoryOutbox struct {
	mu     sync.Mutex
	byID   map[string]*checkpoint.Delivery
	cursor int64
	clk    func() time.Time
}

var _ checkpoint.Outbox = (*MemoryOutbox)(nil)

// NewMemoryOutbox returns an empty outbox.
func NewMemoryOutbox() *MemoryOutbox {
	return &MemoryOutbox{byID: map[string]*checkpoint.Delivery{}, clk: time.Now}
}

func (o *MemoryOutbox) AddDeliveries(ctx context.Context, ds []*checkpoint.Delivery, cursor int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.clk()
	for _, d := range ds {
		if _, ok := o.byID[d.ID]; ok {
			continue
		}
		c := *d
		c.State = c.State.OrPending()
		c.CreatedAt, c.UpdatedAt = now, now
		o.byID[d.ID] = &c
	}
	o.cursor = max(o.cursor, cursor)
	return nil
}

func (o *MemoryOutbox) OutboxCursor(ctx context.Context) (int64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cursor, nil
}

func (o *MemoryOutbox) DueDeliveries(ctx context.Context, now time.Time, limit int) ([]*checkpoint.Delivery, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*checkpoint.Delivery
	for _, d := range o.byID {
		if d.State == checkpoint.DeliveryPending && !d.NextAt.After(now) {
			c := *d
			out = append(out, &c)
		}
	}
	slices.SortFunc(out, func(a, b *checkpoint.Delivery) int { return a.NextAt.Compare(b.NextAt) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (o *MemoryOutbox) UpdateDelivery(ctx context.Context, d *checkpoint.Delivery) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.byID[d.ID]
	if !ok {
		return fmt.Errorf("delivery %q: %w", d.ID, checkpoint.ErrNotFound)
	}
	s.State, s.Attempts, s.NextAt, s.LastError, s.Result, s.UpdatedAt = d.State.OrPending(), d.Attempts, d.NextAt, d.LastError, d.Result, o.clk()
	return nil
}

func (o *MemoryOutbox) GetDelivery(ctx context.Context, id string) (*checkpoint.Delivery, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	d, ok := o.byID[id]
	if !ok {
		return nil, fmt.Errorf("delivery %q: %w", id, checkpoint.ErrNotFound)
	}
	c := *d
	return &c, nil
}

func (o *MemoryOutbox) ListDeliveries(ctx context.Context, state checkpoint.DeliveryState, limit int) ([]*checkpoint.Delivery, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*checkpoint.Delivery
	for _, d := range o.byID {
		if state == "" || d.State == state {
			c := *d
			out = append(out, &c)
		}
	}
	slices.SortFunc(out, func(a, b *checkpoint.Delivery) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return 0
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
