package host

import (
	"context"
	"fmt"

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

// follow is the store's notifications for the host's life
// ([checkpoint.Follow]): a feed that ends is subscribed again, with
// backoff, and a Resync follows, on which notificationLoop re-reads the
// runs. The channel closes once h.ctx ends; whoever drains it to the end
// has waited for the goroutine that feeds it.
func (h *Host) follow() (<-chan checkpoint.Notification, error) {
	return checkpoint.Follow(h.ctx, h.store, &checkpoint.FollowOptions{
		OnLost:  func() { h.log.Warn("tollgate: store notifications ended; subscribing again") },
		OnError: func(err error) { h.log.Error("tollgate: subscribing to the store", "err", err) },
	})
}

// notificationLoop acts on the store's notifications until follow's
// channel closes (h.ctx ended).
func (h *Host) notificationLoop(notes <-chan checkpoint.Notification) {
	defer h.loops.Done()
	for n := range notes {
		if h.ctx.Err() != nil {
			continue // shutting down: drained, not acted on
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
			// Sent by the store when it dropped notifications, and by
			// follow after subscribing again: anything may have been
			// missed meanwhile.
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
