package agent

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/resolution"
)

// StoreChannel waits for questions by watching a store's notifications. All
// the runs of a process that wait on one store share one subscription and
// one ticker: a notification wakes only the waiters of its question, and
// each tick (every PollInterval, the bound on how long a missed
// notification can delay a waiter) wakes every waiter to read its question
// once. A waiting run costs a map entry and its goroutine; no goroutine or
// subscription per run. (Runs hosted by package host park instead, and
// cost nothing while they wait.)
type StoreChannel struct {
	Store checkpoint.Store
	// PollInterval bounds how long a missed notification can delay a
	// waiter. Zero: 2s.
	PollInterval time.Duration
}

func (c *StoreChannel) Wait(ctx context.Context, threadID, questionID string) (*checkpoint.Question, error) {
	poll := c.PollInterval
	if poll <= 0 {
		poll = 2 * time.Second
	}
	wake, subscribed, handed, leave := watch(c.Store, poll, threadID, questionID)
	defer leave()
	// Subscribed (or failed to) before the first read, so that no
	// resolution after that read goes unheard.
	select {
	case <-subscribed:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	failures := 0
	for {
		q, err := c.Store.GetQuestion(ctx, threadID, questionID)
		switch {
		case err == nil:
			failures = 0
			if q.Status != checkpoint.QuestionPending {
				return q, nil
			}
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, checkpoint.ErrNotFound) || failures >= 5:
			return nil, err
		default:
			// A store that hiccups (a dropped connection, a busy file) is
			// tried again, with backoff, before the wait gives up.
			failures++
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(failures*failures) * 100 * time.Millisecond):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
			if q := handed(); q != nil {
				return q, nil
			}
		}
	}
}

func init() { resolution.Handle(resolved) }

// resolved tells the waits on store in this process ([StoreChannel.Wait])
// for q that it is resolved, as q says: they return q instead of reading
// it. Whoever resolves a question in the process calls it (through
// internal/resolution) with the Question its Commit returned, after the
// commit: a resolution is never changed, so q is what a read would return.
// A pending q is ignored.
func resolved(store checkpoint.Store, q *checkpoint.Question) {
	if q == nil || q.Status == checkpoint.QuestionPending {
		return
	}
	k := waitKey{q.ThreadID, q.ID}
	watchersMu.Lock()
	defer watchersMu.Unlock()
	for wk, w := range watchers {
		if wk.store != store {
			continue
		}
		w.mu.Lock()
		if len(w.waiters[k]) > 0 {
			w.handed[k] = q
			for ch := range w.waiters[k] {
				signal(ch)
			}
		}
		w.mu.Unlock()
	}
}

// A watcher serves every waiter on one store (and poll interval): one
// subscription, one ticker. It lives while it has waiters.
type watcher struct {
	store checkpoint.Store
	poll  time.Duration
	stop  context.CancelFunc
	// subscribed is closed once the first Subscribe has returned.
	subscribed chan struct{}

	mu      sync.Mutex
	waiters map[waitKey]map[chan struct{}]struct{}
	// handed: questions resolved in this process (resolved) that have
	// waiters, kept while they do.
	handed map[waitKey]*checkpoint.Question
	count  int
}

type waitKey struct{ thread, question string }

type watcherKey struct {
	store checkpoint.Store
	poll  time.Duration
}

var (
	watchersMu sync.Mutex
	watchers   = map[watcherKey]*watcher{}
)

// watch registers a waiter for one question: wake receives (coalesced)
// when the question may have changed, once subscribed is closed; handed
// returns the question if it was resolved in this process (resolved).
// leave unregisters it.
func watch(store checkpoint.Store, poll time.Duration, thread, question string) (wake, subscribed <-chan struct{}, handed func() *checkpoint.Question, leave func()) {
	ch := make(chan struct{}, 1)
	k := waitKey{thread, question}
	watchersMu.Lock()
	w := watchers[watcherKey{store, poll}]
	if w == nil {
		ctx, cancel := context.WithCancel(context.Background())
		w = &watcher{store: store, poll: poll, stop: cancel, subscribed: make(chan struct{}),
			waiters: map[waitKey]map[chan struct{}]struct{}{}, handed: map[waitKey]*checkpoint.Question{}}
		watchers[watcherKey{store, poll}] = w
		// Subscribing may take a while (a database far away): not under
		// the lock every waiter of every store takes.
		go w.run(ctx)
	}
	w.mu.Lock()
	if w.waiters[k] == nil {
		w.waiters[k] = map[chan struct{}]struct{}{}
	}
	w.waiters[k][ch] = struct{}{}
	w.count++
	w.mu.Unlock()
	watchersMu.Unlock()
	handed = func() *checkpoint.Question {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.handed[k]
	}
	return ch, w.subscribed, handed, func() {
		watchersMu.Lock()
		defer watchersMu.Unlock()
		w.mu.Lock()
		delete(w.waiters[k], ch)
		if len(w.waiters[k]) == 0 {
			delete(w.waiters, k)
			delete(w.handed, k)
		}
		w.count--
		last := w.count == 0
		w.mu.Unlock()
		if last {
			delete(watchers, watcherKey{store, poll})
			w.stop()
		}
	}
}

// run serves the waiters until ctx ends (the last waiter left) and
// [checkpoint.Follow]'s channel closes after it.
func (w *watcher) run(ctx context.Context) {
	// A feed that ends (the store lost its connection, or is closing)
	// wakes everyone to re-read, and is subscribed again with backoff; the
	// Resync that follows wakes everyone again. A store that cannot
	// subscribe now is tried again likewise: its error is not the
	// waiters' (they read the question at every tick meanwhile).
	notes, _ := checkpoint.Follow(ctx, w.store, &checkpoint.FollowOptions{OnLost: w.wakeAll})
	close(w.subscribed)
	ticker := time.NewTicker(w.poll)
	defer ticker.Stop()
	for {
		select {
		case n, ok := <-notes:
			switch {
			case !ok:
				return // ctx ended
			case n.QuestionID == "":
				w.wakeAll() // a resync: anything may have changed
			case n.Kind == checkpoint.QuestionCreated:
				// A waiter waits for a resolution; the creation of its
				// question (heard after the waiter's first read, as the
				// asking run's own often is) changes nothing it waits for.
			default:
				w.wake(waitKey{n.ThreadID, n.QuestionID})
			}
		case <-ticker.C:
			w.wakeAll()
		}
	}
}

func (w *watcher) wake(k waitKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.waiters[k] {
		signal(ch)
	}
}

func (w *watcher) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, chs := range w.waiters {
		for ch := range chs {
			signal(ch)
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
