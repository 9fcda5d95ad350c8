package host

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// reconcile finds the store's unfinished runs: those with a pending
// question are parked, the others are resumed.
func (h *Host) reconcile(ctx context.Context) error {
	waiting := map[string]bool{}
	cursor := ""
	for {
		qs, next, err := h.store.ListQuestions(ctx, checkpoint.QuestionFilter{Status: checkpoint.QuestionPending, After: cursor, Limit: 1000})
		if err != nil {
			return fmt.Errorf("host: listing pending questions: %w", err)
		}
		for _, q := range qs {
			waiting[q.ThreadID] = true
		}
		if next == "" {
			break
		}
		cursor = next
	}
	var resume []string
	cursor = ""
	for {
		ths, next, err := h.store.ListThreads(ctx, checkpoint.ThreadFilter{Status: checkpoint.ThreadRunning, After: cursor, Limit: 1000})
		if err != nil {
			return fmt.Errorf("host: listing unfinished runs: %w", err)
		}
		h.mu.Lock()
		for _, th := range ths {
			if h.only != nil && !h.only(th.ID) {
				continue // another host's
			}
			if waiting[th.ID] {
				h.parked[th.ID] = struct{}{}
			} else {
				resume = append(resume, th.ID)
			}
		}
		h.mu.Unlock()
		if next == "" {
			break
		}
		cursor = next
	}
	if len(resume) > 0 {
		h.log.Info("tollgate: resuming unfinished runs", "runs", len(resume))
	}
	for _, id := range resume {
		h.kick(id)
	}
	h.poke()
	return nil
}

func (h *Host) notificationLoop(notes <-chan checkpoint.Notification) {
	defer h.loops.Done()
	var lastResub time.Time
	for {
		select {
		case <-h.ctx.Done():
			return
		case n, ok := <-notes:
			if !ok {
				if h.ctx.Err() != nil {
					return
				}
				// The store ended the feed: subscribe again, and read
				// what may have been missed meanwhile.
				h.log.Warn("tollgate: store notifications ended; subscribing again")
				// A store that ends every feed at once (being closed) must
				// not turn this into a busy loop.
				if time.Since(lastResub) < time.Second {
					select {
					case <-h.ctx.Done():
						return
					case <-time.After(time.Second):
					}
				}
				lastResub = time.Now()
				notes = h.resubscribe()
				continue
			}
			switch n.Kind {
			case checkpoint.QuestionResolved:
				if h.coord != nil {
					// Whichever replica takes its job resumes it: it is no
					// longer parked as far as this host knows.
					h.forget(n.ThreadID, true)
				}
				if h.consumeSelfResolved(n.ThreadID, n.QuestionID) {
					continue
				}
				h.kick(n.ThreadID)
			case checkpoint.QuestionCreated:
				if h.coord != nil {
					// The run went on (here or on another replica): it did
					// not stay failed. (Parked it may be: by this host, the
					// notification coming after the park.)
					h.forget(n.ThreadID, false)
				}
				h.poke()
			case checkpoint.Resync:
				if h.coord != nil {
					// The coordinator has its own record of runs; a
					// question created meanwhile may have a deadline.
					h.poke()
					continue
				}
				// Read apart, not to hold up the notifications; waited for
				// by Shutdown with the loops.
				h.loops.Add(1)
				go func() {
					defer h.loops.Done()
					if err := h.reconcile(h.ctx); err != nil && h.ctx.Err() == nil {
						h.log.Error("tollgate: re-reading runs after a resync", "err", err)
					}
				}()
			}
		}
	}
}

func (h *Host) resubscribe() <-chan checkpoint.Notification {
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		notes, err := h.store.Subscribe(h.ctx)
		if err == nil {
			if h.coord != nil {
				return notes
			}
			if err := h.reconcile(h.ctx); err != nil && h.ctx.Err() == nil {
				h.log.Error("tollgate: re-reading runs after subscribing again", "err", err)
			}
			return notes
		}
		h.log.Error("tollgate: subscribing to the store", "err", err)
		select {
		case <-h.ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
}

// forget drops what this host knew of a thread's run that another host
// may be driving now (with a Coordinator), unless it drives it itself.
func (h *Host) forget(threadID string, parked bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.runs[threadID] != nil {
		return
	}
	if parked {
		delete(h.parked, threadID)
	}
	delete(h.failed, threadID)
}
