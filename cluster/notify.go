package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/notify"
)

// Notifications in cluster mode are River jobs: each delivery a job
// inserted in the transaction that commits its event (a question asked or
// resolved, a run's failure), so that no event is committed without its
// deliveries; a question's deadline_near a job scheduled at its time.
// River retries a delivery with notify's backoff; one whose attempts are
// spent (discarded) or that failed for good (cancelled) is a dead letter.

// deliverArgs: send one delivery.
type deliverArgs struct {
	Delivery checkpoint.Delivery `json:"delivery"`
}

func (deliverArgs) Kind() string { return "tollgate_notify" }

// nearArgs: a question's deadline_near comes.
type nearArgs struct {
	ThreadID   string `json:"thread_id"`
	QuestionID string `json:"question_id"`
}

func (nearArgs) Kind() string { return "tollgate_notify_near" }

// InsertOpts: one per question, however often inserted.
func (nearArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queue, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

func (c *Cluster) deliverJobs(ds []*checkpoint.Delivery) []river.InsertManyParams {
	out := make([]river.InsertManyParams, len(ds))
	for i, d := range ds {
		out[i] = river.InsertManyParams{Args: deliverArgs{Delivery: *d}, InsertOpts: &river.InsertOpts{
			Queue: queue, MaxAttempts: c.notifier.MaxAttempts(),
			// By its id: a delivery made twice (a deadline_near job
			// worked again) is one job.
			UniqueOpts: river.UniqueOpts{ByArgs: true},
		}}
	}
	return out
}

// notifyJobs are the jobs of what b committed (see insertJobs).
func (c *Cluster) notifyJobs(b *checkpoint.Batch, out *checkpoint.Committed) ([]river.InsertManyParams, error) {
	n := c.notifier
	var ds []*checkpoint.Delivery
	var params []river.InsertManyParams
	if q := out.Question; q != nil && out.Created {
		more, err := n.FanoutQuestion(notify.QuestionCreated, q)
		if err != nil {
			return nil, err
		}
		ds = append(ds, more...)
		if at := n.NearAt(q); !at.IsZero() {
			p := river.InsertManyParams{Args: nearArgs{ThreadID: q.ThreadID, QuestionID: q.ID}}
			if at.After(time.Now()) {
				p.InsertOpts = &river.InsertOpts{ScheduledAt: at}
			}
			params = append(params, p)
		}
	}
	if q := out.Resolved; q != nil {
		more, err := n.FanoutQuestion(notify.QuestionResolved, q)
		if err != nil {
			return nil, err
		}
		ds = append(ds, more...)
	}
	for _, e := range b.Events {
		if e.Type == "run_finished" {
			more, err := n.Fanout(context.Background(), e)
			if err != nil {
				return nil, err
			}
			ds = append(ds, more...)
		}
	}
	return append(params, c.deliverJobs(ds)...), nil
}

// wantsNotify: a batch whose commit is an event of notify's.
func wantsNotify(b *checkpoint.Batch) bool {
	return b.Question != nil || b.Resolve != nil || slices.ContainsFunc(b.Events, func(e *checkpoint.Event) bool {
		return e.Type == "run_finished" && len(e.Data) > 0 && json.Valid(e.Data) && hasError(e.Data)
	})
}

func hasError(data json.RawMessage) bool {
	var p struct {
		Error string `json:"error"`
	}
	return json.Unmarshal(data, &p) == nil && p.Error != ""
}

type deliverWorker struct {
	river.WorkerDefaults[deliverArgs]
	c *Cluster
}

func (w *deliverWorker) Work(ctx context.Context, job *river.Job[deliverArgs]) error {
	_, err := w.c.notifier.Deliver(ctx, &job.Args.Delivery)
	if notify.Permanent(err) {
		return river.JobCancel(err)
	}
	return err
}

// NextRetry: notify's backoff (1 s doubling, at most 5 minutes), not the
// run jobs' quick one.
func (w *deliverWorker) NextRetry(job *river.Job[deliverArgs]) time.Time {
	return time.Now().Add(notify.Backoff(job.Attempt))
}

func (w *deliverWorker) Timeout(*river.Job[deliverArgs]) time.Duration { return 30 * time.Second }

type nearWorker struct {
	river.WorkerDefaults[nearArgs]
	c *Cluster
}

func (w *nearWorker) Work(ctx context.Context, job *river.Job[nearArgs]) error {
	ds, err := w.c.notifier.Near(ctx, job.Args.ThreadID, job.Args.QuestionID)
	if err != nil || len(ds) == 0 {
		return err
	}
	_, err = w.c.river.InsertMany(ctx, w.c.deliverJobs(ds))
	return err
}

// Deliveries lists the notifications' deliveries from River's jobs:
// dead (discarded after their attempts, or cancelled by a failure no
// retry changes), pending (to be tried, or retried), delivered
// (completed, kept an hour), or all; the latest first.
func (c *Cluster) Deliveries(ctx context.Context, state checkpoint.DeliveryState, limit int) ([]*checkpoint.Delivery, error) {
	states := map[checkpoint.DeliveryState][]rivertype.JobState{
		checkpoint.DeliveryDead:      {rivertype.JobStateDiscarded, rivertype.JobStateCancelled},
		checkpoint.DeliveryDelivered: {rivertype.JobStateCompleted},
		checkpoint.DeliveryPending:   {rivertype.JobStateAvailable, rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled},
	}
	params := river.NewJobListParams().Kinds(deliverArgs{}.Kind()).First(limit).OrderBy(river.JobListOrderByID, river.SortOrderDesc)
	if st, ok := states[state]; ok {
		params = params.States(st...)
	} else if state != "" {
		return nil, fmt.Errorf("cluster: no delivery state %q", state)
	}
	res, err := c.river.JobList(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("cluster: listing deliveries: %w", err)
	}
	var out []*checkpoint.Delivery
	for _, j := range res.Jobs {
		var a deliverArgs
		if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
			continue
		}
		d := a.Delivery
		d.Attempts, d.CreatedAt, d.UpdatedAt, d.NextAt = j.Attempt, j.CreatedAt, j.CreatedAt, j.ScheduledAt
		switch j.State {
		case rivertype.JobStateDiscarded, rivertype.JobStateCancelled:
			d.State = checkpoint.DeliveryDead
		case rivertype.JobStateCompleted:
			d.State = checkpoint.DeliveryDelivered
		default:
			d.State = checkpoint.DeliveryPending
		}
		if j.FinalizedAt != nil {
			d.UpdatedAt = *j.FinalizedAt
		}
		if len(j.Errors) > 0 {
			d.LastError = j.Errors[len(j.Errors)-1].Error
		}
		out = append(out, &d)
	}
	return out, nil
}
