package checkpoint

import (
	"context"
	"encoding/json"
	"time"
)

// DeliveryState is where a [Delivery] is: pending until it is delivered,
// or dead once its attempts are spent.
type DeliveryState string

const (
	DeliveryPending   DeliveryState = "pending"
	DeliveryDelivered DeliveryState = "delivered"
	// DeliveryDead: every attempt failed; nobody retries it (the dead
	// letters a reviewer is shown).
	DeliveryDead DeliveryState = "dead"
)

// OrPending is s, or DeliveryPending when s is empty (a new delivery's
// state).
func (s DeliveryState) OrPending() DeliveryState {
	if s == "" {
		return DeliveryPending
	}
	return s
}

// Delivery is one notification on its way to one destination (package
// notify): an event of the store's log (a question asked or resolved, a
// run that failed) or of a clock (a deadline near), for one webhook,
// Slack channel or mail address. It holds no secret: what it is sent with
// (signing keys, one-time links) is made when it is sent.
type Delivery struct {
	// ID is the delivery's idempotency key, the same however often it is
	// tried (a webhook's webhook-id): the event and the destination.
	ID string
	// Event is the event's type ("question.created", ...).
	Event      string
	ThreadID   string
	QuestionID string
	// Channel is "webhook", "slack" or "email"; Target names the
	// destination within it (a URL, a Slack channel, an address).
	Channel string
	Target  string
	// Payload is the event as it is sent (a webhook's body).
	Payload json.RawMessage
	State   DeliveryState
	// Attempts counts the tries so far; NextAt is when the next is due.
	Attempts  int
	NextAt    time.Time
	LastError string
	// Result is what the destination answered that a later delivery
	// needs (the Slack message to update when the question is answered).
	Result    string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Outbox is what a store offers, beside [Store], to keep notifications
// until they are delivered (an optional capability: checkpoint/sqlite has
// it; package notify keeps its own in memory for a store without it, and
// package cluster uses River's jobs). Its cursor is the sequence number of
// the last event of the store's log that was turned into deliveries:
// deliveries and cursor are written in one transaction, so an event is
// turned into deliveries once, and every event after the cursor is still
// to be — the log itself is the outbox's first half, committed with what
// the event records.
type Outbox interface {
	// AddDeliveries stores the deliveries whose ID is new (one that
	// exists is left as it is) and, when cursor is above the stored
	// cursor, stores it, in one transaction.
	AddDeliveries(ctx context.Context, ds []*Delivery, cursor int64) error
	// OutboxCursor returns the stored cursor (0 at first).
	OutboxCursor(ctx context.Context) (int64, error)
	// DueDeliveries returns up to limit pending deliveries whose NextAt
	// is not after now, the earliest due first.
	DueDeliveries(ctx context.Context, now time.Time, limit int) ([]*Delivery, error)
	// UpdateDelivery writes d's State, Attempts, NextAt, LastError and
	// Result. ErrNotFound when there is no delivery d.ID.
	UpdateDelivery(ctx context.Context, d *Delivery) error
	// GetDelivery returns the delivery, or ErrNotFound.
	GetDelivery(ctx context.Context, id string) (*Delivery, error)
	// ListDeliveries returns up to limit deliveries in state (all states
	// when ""), the latest updated first.
	ListDeliveries(ctx context.Context, state DeliveryState, limit int) ([]*Delivery, error)
}
