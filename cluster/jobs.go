package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/host"
)

// driveArgs: make the thread's run go on (after an answer or a deadline,
// or a replica that stopped). Any number of them for one thread is
// harmless: the lease lets one replica drive it, and a run with nothing
// to do resumes to nothing.
type driveArgs struct {
	ThreadID string `json:"thread_id"`
}

func (driveArgs) Kind() string { return "tollgate_drive" }

func (driveArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: queue} }

// driveJobs are the drive jobs of the threads, for one InsertMany.
func driveJobs(ids []string) []river.InsertManyParams {
	params := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		params[i] = river.InsertManyParams{Args: driveArgs{ThreadID: id}}
	}
	return params
}

// deadlineArgs: the question's deadline passes (the job is scheduled
// deadlineEarly before it).
type deadlineArgs struct {
	ThreadID   string `json:"thread_id"`
	QuestionID string `json:"question_id"`
}

func (deadlineArgs) Kind() string { return "tollgate_deadline" }

// InsertOpts: one job per question, however often it is inserted (by
// the question's commit and by reconcile); a fired one is kept an hour.
func (deadlineArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queue, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// deadlineJob is q's deadline job, scheduled deadlineEarly before it. A
// scheduled job waits for River's scheduler (every 5 s), so one due
// sooner than that is inserted ready, to snooze until the deadline.
func deadlineJob(q *checkpoint.Question, now time.Time) river.InsertManyParams {
	p := river.InsertManyParams{Args: deadlineArgs{ThreadID: q.ThreadID, QuestionID: q.ID}}
	if at := q.Deadline.Add(-deadlineEarly); at.After(now) {
		p.InsertOpts = &river.InsertOpts{ScheduledAt: at}
	}
	return p
}

// reconcileArgs: look for runs nothing would resume (periodic, on one
// replica).
type reconcileArgs struct{}

func (reconcileArgs) Kind() string { return "tollgate_reconcile" }

// InsertOpts: not unique. Each new leader runs one at its start (River's
// RunOnStart): replicas restarted together within a minute must not skip
// it, and two at once do nothing twice (they only insert jobs that are
// harmless doubled).
func (reconcileArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: queue} }

type driveWorker struct {
	river.WorkerDefaults[driveArgs]
	c *Cluster
}

func (w *driveWorker) Work(ctx context.Context, job *river.Job[driveArgs]) error {
	h := w.c.hostOf()
	err := h.Drive(ctx, job.Args.ThreadID)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, host.ErrHeldElsewhere):
		// The replica that holds it goes on with the run (it hears of
		// answers too); this job makes sure someone does once it lets
		// go, when there is something left.
		w.c.mu.Lock()
		w.c.stats.HeldElsewhere++
		w.c.mu.Unlock()
		return river.JobSnooze(backoff(job))
	case errors.Is(err, host.ErrBusy), errors.Is(err, host.ErrClosed):
		// To another replica, or here later.
		return river.JobSnooze(heldFirstRetry)
	default:
		return err
	}
}

// backoff doubles the wait with each snooze, up to heldMaxRetry.
func backoff(job *river.Job[driveArgs]) time.Duration {
	var m struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(job.Metadata, &m)
	d := heldFirstRetry << min(max(m.Snoozes, 0), 10)
	return min(d, heldMaxRetry)
}

type deadlineWorker struct {
	river.WorkerDefaults[deadlineArgs]
	c *Cluster
}

func (w *deadlineWorker) Work(ctx context.Context, job *river.Job[deadlineArgs]) error {
	q, err := w.c.store.GetQuestion(ctx, job.Args.ThreadID, job.Args.QuestionID)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	_, wait, err := w.c.fire(ctx, q)
	if err != nil {
		return err
	}
	if wait > 0 {
		return river.JobSnooze(wait)
	}
	return nil
}

// fire times q out when it is pending and its deadline passed, by the
// compare-and-set an answer makes (one of them wins); its commit inserts
// the job that resumes the run. wait > 0: not due yet, by that much.
func (c *Cluster) fire(ctx context.Context, q *checkpoint.Question) (fired bool, wait time.Duration, err error) {
	if q.Status != checkpoint.QuestionPending || q.Deadline.IsZero() {
		return false, 0, nil
	}
	now := c.clk.Now()
	if d := q.Deadline.Sub(now); d > 0 {
		// In steps River makes available at once (a longer snooze waits
		// for its scheduler, up to 5 s late).
		return false, min(d+time.Millisecond, 4*time.Second), nil
	}
	var won bool
	if h := c.hostOf(); h != nil {
		_, won, err = h.TimeOut(ctx, q)
	} else {
		_, won, err = agent.TimeOut(ctx, c.store, q, now)
	}
	if err != nil {
		return false, 0, fmt.Errorf("cluster: timing out question %s of thread %s: %w", q.ID, q.ThreadID, err)
	}
	if won {
		c.mu.Lock()
		c.stats.DeadlinesFired++
		c.mu.Unlock()
	}
	return won, 0, nil
}

type reconcileWorker struct {
	river.WorkerDefaults[reconcileArgs]
	c *Cluster
}

func (w *reconcileWorker) Work(ctx context.Context, job *river.Job[reconcileArgs]) error {
	return w.c.reconcile(ctx)
}

func (w *reconcileWorker) Timeout(*river.Job[reconcileArgs]) time.Duration { return 10 * time.Minute }

// orphans are unfinished runs that wait for nothing and that no replica
// holds: cut off with nothing to resume them (an answer written without
// its job by a program that is not a replica, a run that stopped with an
// error).
const orphans = `SELECT t.id FROM threads t
WHERE t.status = 'running' AND t.id > $1
AND NOT EXISTS (SELECT 1 FROM questions q WHERE q.thread_id = t.id AND q.status = 'pending')
AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.thread_id = t.id)
ORDER BY t.id LIMIT 1000`

// reconcile fires the deadlines that passed without their job (questions
// asked before the cluster ran, or by a program that is not a replica;
// jobs discarded), makes sure every deadline due before the next
// reconcile has its job (deadline jobs are unique by question, so one
// that exists is not doubled), and resumes the orphans.
func (c *Cluster) reconcile(ctx context.Context) error {
	horizon := c.clk.Now().Add(c.every + deadlineEarly)
	f := checkpoint.QuestionFilter{Status: checkpoint.QuestionPending, Order: checkpoint.DeadlineFirst, Limit: 200}
	for {
		qs, next, err := c.store.ListQuestions(ctx, f)
		if err != nil {
			return fmt.Errorf("cluster: listing pending deadlines: %w", err)
		}
		var soon []river.InsertManyParams
		done := next == ""
		for _, q := range qs {
			if q.Deadline.IsZero() || q.Deadline.After(horizon) {
				done = true
				break
			}
			if !q.Deadline.After(c.clk.Now()) {
				if _, _, err := c.fire(ctx, q); err != nil {
					return err
				}
				continue
			}
			soon = append(soon, deadlineJob(q, c.clk.Now()))
		}
		if len(soon) > 0 {
			if _, err := c.river.InsertMany(ctx, soon); err != nil {
				return fmt.Errorf("cluster: scheduling deadlines: %w", err)
			}
		}
		if done {
			break
		}
		f.After = next
	}
	after, resumed := "", 0
	for {
		rows, err := c.store.Pool().Query(ctx, orphans, after)
		if err != nil {
			return fmt.Errorf("cluster: looking for runs to resume: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("cluster: looking for runs to resume: %w", err)
		}
		if len(ids) == 0 {
			break
		}
		params := driveJobs(ids)
		if _, err := c.river.InsertMany(ctx, params); err != nil {
			return fmt.Errorf("cluster: resuming runs: %w", err)
		}
		resumed += len(ids)
		after = ids[len(ids)-1]
	}
	if resumed > 0 {
		c.log.Info("tollgate: resuming unfinished runs nothing was resuming", "runs", resumed)
	}
	return nil
}

func (c *Cluster) hostOf() *host.Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.host
}
