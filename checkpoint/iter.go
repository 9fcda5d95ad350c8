package checkpoint

import (
	"context"
	"iter"
	"time"
)

// QuestionLister is the part of a [Store] that lists questions a page at a
// time.
type QuestionLister interface {
	ListQuestions(ctx context.Context, f QuestionFilter) ([]*Question, string, error)
}

// ThreadLister is the part of a [Store] that lists threads a page at a
// time.
type ThreadLister interface {
	ListThreads(ctx context.Context, f ThreadFilter) ([]*Thread, string, error)
}

// Questions yields every question f selects, from f.After on, reading
// pages of f.Limit: the cursor loop each caller would otherwise write.
// An error ends the sequence, yielded with a nil question; stopping the
// loop early reads no further page; an empty page ends it (a cursor that
// leads nowhere cannot spin).
//
//	for q, err := range checkpoint.Questions(ctx, store, checkpoint.QuestionFilter{Status: checkpoint.QuestionPending}) {
//		if err != nil {
//			return err
//		}
//		...
//	}
func Questions(ctx context.Context, store QuestionLister, f QuestionFilter) iter.Seq2[*Question, error] {
	return pages(func(after string) ([]*Question, string, error) {
		page := f // f stays as given: the sequence may be ranged again
		if after != "" {
			page.After = after
		}
		return store.ListQuestions(ctx, page)
	})
}

// Threads yields every thread f selects, as [Questions] does questions.
func Threads(ctx context.Context, store ThreadLister, f ThreadFilter) iter.Seq2[*Thread, error] {
	return pages(func(after string) ([]*Thread, string, error) {
		page := f
		if after != "" {
			page.After = after
		}
		return store.ListThreads(ctx, page)
	})
}

// pages yields the items of the pages list returns, each page read with
// the cursor the one before returned ("" for the first).
func pages[T any](list func(after string) ([]T, string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		for after := ""; ; {
			items, next, err := list(after)
			if err != nil {
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == "" || len(items) == 0 {
				return
			}
			after = next
		}
	}
}

// Subscriber is the part of a [Store] that sends notifications.
type Subscriber interface {
	Subscribe(ctx context.Context) (<-chan Notification, error)
}

// FollowOptions tune [Follow]. A nil *FollowOptions means all defaults.
type FollowOptions struct {
	// OnError hears each failed subscription (to log it, or count it).
	OnError func(error)
	// OnLost hears each end of the store's feed while ctx lasts.
	OnLost func()
	// Backoff is the first wait before subscribing again (default 100 ms);
	// it doubles after each failure, up to MaxBackoff (default 5 s).
	Backoff, MaxBackoff time.Duration
}

// Follow is a store's notifications for as long as ctx lasts: when the
// store's feed ends (its connection to the database dropped, say) or a
// subscription fails, it subscribes again — after Backoff, doubling to
// MaxBackoff while it keeps failing — and then sends a [Resync], since
// notifications may have been missed in between. Its channel closes only
// when ctx ends.
//
// The first subscription is made before Follow returns: what changes
// after it returns is notified. When that subscription fails, Follow
// returns its error with the channel, which subscribes again as above (a
// Resync follows the subscription that succeeds); a caller that cannot
// start without notifications ends ctx. A Resync is also what the store
// sends when it knows it dropped some.
func Follow(ctx context.Context, store Subscriber, opts *FollowOptions) (<-chan Notification, error) {
	var o FollowOptions
	if opts != nil {
		o = *opts
	}
	if o.Backoff <= 0 {
		o.Backoff = 100 * time.Millisecond
	}
	if o.MaxBackoff < o.Backoff {
		o.MaxBackoff = max(5*time.Second, o.Backoff)
	}
	out := make(chan Notification, 16)
	notes, first := store.Subscribe(ctx)
	if first != nil {
		notes = nil
	}
	go func() {
		var err error
		had := notes != nil // a feed ended, rather than never began
		defer close(out)
		send := func(n Notification) bool {
			select {
			case out <- n:
				return true
			case <-ctx.Done():
				return false
			}
		}
		delay := o.Backoff
		for {
			for notes != nil {
				select {
				case <-ctx.Done():
					return
				case n, ok := <-notes:
					if !ok {
						notes = nil
						break
					}
					delay = o.Backoff
					if !send(n) {
						return
					}
				}
			}
			// The feed ended, or was never had: subscribe again.
			if had && o.OnLost != nil && ctx.Err() == nil {
				o.OnLost()
			}
			had = true
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(delay):
				}
				delay = min(2*delay, o.MaxBackoff)
				if notes, err = store.Subscribe(ctx); err == nil {
					break
				}
				if ctx.Err() != nil {
					return
				}
				if o.OnError != nil {
					o.OnError(err)
				}
			}
			if !send(Notification{Kind: Resync}) {
				return
			}
		}
	}()
	return out, first
}
