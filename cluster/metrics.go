package cluster

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector is the replica's Prometheus metrics (tollgate serve serves
// them at /metrics): its leases, rescues and deadlines, and the jobs
// waiting in River's queue (one query a scrape). What to watch:
//   - tollgate_cluster_job_wait_seconds{state="available"}: how long the
//     oldest job that could run has waited. More than a second means the
//     replicas do not keep up (or none is running).
//   - tollgate_cluster_leases_lost_total: runs cut off because their
//     replica could not renew in time (the database slow or unreachable).
//   - tollgate_cluster_rescued_total: runs taken over from replicas that
//     stopped.
//   - tollgate_cluster_policy_mismatch: above 0, replicas decide by
//     different policies (see Config.PolicyDigest).
//   - tollgate_cluster_runs_failed{retry="given_up"}: runs that stopped
//     with an error as many times in a row as Config.Retries allows, left
//     for a person to resume or abort.
func (c *Cluster) Collector() prometheus.Collector { return &collector{c: c} }

var (
	descHeld     = prometheus.NewDesc("tollgate_cluster_leases_held", "Threads this replica drives now, under their leases.", nil, nil)
	descAcquired = prometheus.NewDesc("tollgate_cluster_leases_acquired_total", "Leases this replica took.", nil, nil)
	descLost     = prometheus.NewDesc("tollgate_cluster_leases_lost_total", "Leases this replica lost: taken over, or not renewed in time (its runs were cancelled).", nil, nil)
	descRescued  = prometheus.NewDesc("tollgate_cluster_rescued_total", "Expired leases of stopped replicas whose runs this replica handed on.", nil, nil)
	descHeldElse = prometheus.NewDesc("tollgate_cluster_held_elsewhere_total", "Jobs that found their thread driven by another replica and waited.", nil, nil)
	descFired    = prometheus.NewDesc("tollgate_cluster_deadlines_fired_total", "Questions this replica timed out.", nil, nil)
	descJobs     = prometheus.NewDesc("tollgate_cluster_jobs", "tollgate's River jobs by state (available: ready to run; scheduled: deadlines and retries to come).", []string{"state"}, nil)
	descJobWait  = prometheus.NewDesc("tollgate_cluster_job_wait_seconds", "How long the oldest job in the state has been due (available: waiting for a replica).", []string{"state"}, nil)
	descUp       = prometheus.NewDesc("tollgate_cluster_jobs_scrape_ok", "1 when the job counts and failed runs could be read from the database.", nil, nil)
	descPolicy   = prometheus.NewDesc("tollgate_cluster_policy_mismatch", "Live replicas that decide by another policy than this one (their policy digests differ): calls are decided by whichever replica drives the run.", nil, nil)
	descFailed   = prometheus.NewDesc("tollgate_cluster_runs_failed", "Unfinished runs that stopped with an error, all replicas' (retry: scheduled, or given_up once Config.Retries failures came in a row).", []string{"retry"}, nil)
)

const failedCounts = `SELECT count(*) FILTER (WHERE f.retry_at IS NOT NULL), count(*) FILTER (WHERE f.retry_at IS NULL)
FROM run_failures f JOIN threads t ON t.id = f.thread_id WHERE t.status = 'running'`

type collector struct{ c *Cluster }

func (k *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHeld, descAcquired, descLost, descRescued, descHeldElse, descFired, descJobs, descJobWait, descUp, descFailed, descPolicy} {
		ch <- d
	}
}

const jobCounts = `SELECT state::text, count(*), coalesce(extract(epoch FROM now() - min(scheduled_at)), 0)::float8
FROM river_job WHERE queue = $1 AND state IN ('available', 'running', 'retryable', 'scheduled')
GROUP BY state`

func (k *collector) Collect(ch chan<- prometheus.Metric) {
	c := k.c
	c.mu.Lock()
	s, held, differ := c.stats, len(c.leases), len(c.mismatch)
	c.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descPolicy, prometheus.GaugeValue, float64(differ))
	ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, float64(held))
	ch <- prometheus.MustNewConstMetric(descAcquired, prometheus.CounterValue, float64(s.Acquired))
	ch <- prometheus.MustNewConstMetric(descLost, prometheus.CounterValue, float64(s.Lost))
	ch <- prometheus.MustNewConstMetric(descRescued, prometheus.CounterValue, float64(s.Rescued))
	ch <- prometheus.MustNewConstMetric(descHeldElse, prometheus.CounterValue, float64(s.HeldElsewhere))
	ch <- prometheus.MustNewConstMetric(descFired, prometheus.CounterValue, float64(s.DeadlinesFired))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts := map[string]float64{"available": 0, "running": 0, "retryable": 0, "scheduled": 0}
	waits := map[string]float64{"available": 0, "running": 0, "retryable": 0, "scheduled": 0}
	ok := 1.0
	rows, err := c.store.Pool().Query(ctx, jobCounts, queue)
	if err == nil {
		for rows.Next() {
			var state string
			var n int64
			var wait float64
			if rows.Scan(&state, &n, &wait) == nil {
				counts[state], waits[state] = float64(n), max(wait, 0)
			}
		}
		rows.Close()
		err = rows.Err()
	}
	var scheduled, givenUp int64
	if err == nil {
		err = c.store.Pool().QueryRow(ctx, failedCounts).Scan(&scheduled, &givenUp)
	}
	if err != nil {
		ok = 0
	} else {
		ch <- prometheus.MustNewConstMetric(descFailed, prometheus.GaugeValue, float64(scheduled), "scheduled")
		ch <- prometheus.MustNewConstMetric(descFailed, prometheus.GaugeValue, float64(givenUp), "given_up")
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, ok)
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, n, state)
		if state != "scheduled" {
			ch <- prometheus.MustNewConstMetric(descJobWait, prometheus.GaugeValue, waits[state], state)
		}
	}
}
