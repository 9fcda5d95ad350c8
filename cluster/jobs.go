package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

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

// deadlineArgs: a question's deadline, a job of tollgate before every
// replica's host fired deadlines from the store. Such jobs left in a
// store are done with at once (the reconcile deletes those waiting).
type deadlineArgs struct {
	ThreadID   string `json:"thread_id"`
	QuestionID string `json:"question_id"`
}

func (deadlineArgs) Kind() string { return "tollgate_deadline" }

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
}

func (w *deadlineWorker) Work(context.Context, *river.Job[deadlineArgs]) error { return nil }

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
// error before its failure was recorded). A failed run is tried again at
// its retry_at by its own job — or not, once its retries are used up —
// unless that job is late by a minute (lost).
const orphans = `SELECT t.id FROM threads t
WHERE t.status = 'running' AND t.id > $1
AND NOT EXISTS (SELECT 1 FROM questions q WHERE q.thread_id = t.id AND q.status = 'pending')
AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.thread_id = t.id)
AND NOT EXISTS (SELECT 1 FROM run_failures f WHERE f.thread_id = t.id
	AND (f.retry_at IS NULL OR f.retry_at > now() - interval '1 minute'))
ORDER BY t.id LIMIT 1000`

// oldDeadlines are the deadline jobs of an older tollgate still waiting:
// the hosts fire those deadlines from the store now.
const oldDeadlines = `DELETE FROM river_job WHERE queue = $1 AND kind = 'tollgate_deadline'
AND state IN ('available', 'scheduled', 'retryable')`

// reconcile resumes the orphans, and deletes the deadline jobs an older
// tollgate left.
func (c *Cluster) reconcile(ctx context.Context) error {
	if _, err := c.store.Pool().Exec(ctx, oldDeadlines, queue); err != nil {
		return fmt.Errorf("cluster: deleting the deadline jobs of an older tollgate: %w", err)
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
		c.noticeJobs(ctx)
		c.log.Info("tollgate: resuming unfinished runs nothing was resuming", "runs", resumed)
	}
	return nil
}

func (c *Cluster) hostOf() *host.Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.host
}
