package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/notify"
)

// Config builds a [Cluster]. Store is required.
type Config struct {
	// Store is the PostgreSQL store every replica shares. River's tables
	// are made in its schema, beside tollgate's.
	Store *postgres.Store
	// ID names this replica in leases and River's records. Zero: the
	// host name, the process id and a random suffix (a restarted replica
	// is a new one: its old leases expire and are rescued).
	ID string
	// LeaseTTL is how long a replica keeps a thread after it last
	// renewed the lease: the time another replica waits before it takes
	// over the runs of one that died. Renewed every LeaseTTL/4. Zero:
	// 15s.
	LeaseTTL time.Duration
	// Workers bounds the River jobs this replica works at once (they are
	// short: taking a lease). Zero: 100. The runs themselves are bounded
	// by the host's MaxResumes.
	Workers int
	// ReconcileEvery is how often one replica looks for runs nothing
	// would resume: an answer written by a program that did not insert
	// its job, runs that stopped with an error (retried). Also once at
	// start-up. Zero: 10m; negative: never
	// (for tests of what the jobs do alone).
	ReconcileEvery time.Duration
	// Retries is how many times in a row a run that stops with an error
	// (a model that fails, say) is run before it is left failed (resume
	// or abort it); each failure is recorded where every replica reads
	// it. Zero: 8; negative: never tried again by itself.
	Retries int
	// RetryAfter is the wait before a failed run is tried again the
	// first time; it doubles with each failure in a row, up to 5
	// minutes. Zero: 5s (the whole series of 8: about 15 minutes).
	RetryAfter time.Duration
	// PolicyDigest names the policy this replica decides by (package
	// policy's Digest of its file): replicas compare theirs and, when
	// they differ, say so loudly — an error in the log, PolicyMismatch
	// (tollgate serve's /readyz), the metric
	// tollgate_cluster_policy_mismatch. Zero: no policy named, compared
	// with nobody.
	PolicyDigest func() string
	// RequireSamePolicy makes Start refuse, with [ErrPolicyMismatch],
	// when a live replica decides by another policy (one that differs
	// later, a file edited on one replica, is warned about).
	RequireSamePolicy bool
	// Logger receives the cluster's messages (River's below Warn are
	// dropped). Zero: slog.Default().
	Logger *slog.Logger
	// Notifier, when set, tells people of questions: its deliveries are
	// River jobs committed with their events (see notify.go). Its Run is
	// not called.
	Notifier *notify.Notifier
}

// minConns is the smallest pool a replica works with: River holds one for
// LISTEN, and the rest is shared.
const minConns = 4

// The queue of tollgate's jobs, so that River jobs of other programs in
// the schema, if any, are not worked here.
const queue = "tollgate"

// How long a run found held by another replica waits before its job tries
// again: the holder goes on with the run, and the job only makes sure
// that someone does once it lets go. (A snoozed job is fetched at River's
// next poll, every 2 s, or sooner when another job's notice starts a
// fetch.)
const (
	heldFirstRetry = 100 * time.Millisecond
	heldMaxRetry   = 5 * time.Second
)

// Cluster is a [host.Coordinator] on PostgreSQL and River: with it,
// several tollgate replicas share one store's threads. See the package
// documentation.
type Cluster struct {
	store  *postgres.Store
	id     string
	ttl    time.Duration
	log    *slog.Logger
	river  *river.Client[pgx.Tx]
	every  time.Duration
	margin time.Duration
	// notifier: Config.Notifier.
	notifier *notify.Notifier
	// retries and retryAfter are Config's, for failed runs.
	retries    int
	retryAfter time.Duration
	// policyDigest and requireSame are Config's.
	policyDigest func() string
	requireSame  bool
	// insertNotice tells River's producers of a job committed.
	insertNotice postgres.Notice

	mu       sync.Mutex
	host     *host.Host
	leases   map[string]*lease // by thread
	started  bool
	renewing bool // the lease loops run (from the first lease on)
	// bg is the context of the cluster's loops, ended by Close.
	bg    context.Context
	stop  context.CancelFunc
	loops sync.WaitGroup

	stats Stats
	// mismatch: the live replicas deciding by another policy than
	// myDigest, this one's, at the last look (beat).
	mismatch []string
	myDigest string
}

// Stats counts what a replica's cluster did since it started.
type Stats struct {
	// Acquired leases, Released ones, Lost ones (taken over, or not
	// renewed in time).
	Acquired, Released, Lost int64
	// Rescued: expired leases of replicas that stopped, whose runs were
	// handed on.
	Rescued int64
	// HeldElsewhere: drive jobs that found the thread driven by another
	// replica and waited.
	HeldElsewhere int64
	// DeadlinesFired: questions this replica timed out.
	DeadlinesFired int64
}

// New readies the cluster on cfg.Store: River's tables are created or
// upgraded (under a lock, so replicas starting together do it once), and
// the store's commits get the hook that inserts the jobs. Pass it as
// host.Config.Coordinator; [host.Host.Start] starts it. A program that only
// answers (a command line) builds one too, and never starts it: its
// answers then commit with the jobs that resume their runs.
func New(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Store == nil {
		return nil, errors.New("cluster: Config.Store is required")
	}
	c := &Cluster{
		store: cfg.Store, id: cfg.ID, ttl: cfg.LeaseTTL, log: cfg.Logger,
		every: cfg.ReconcileEvery, leases: map[string]*lease{}, notifier: cfg.Notifier,
	}
	c.bg, c.stop = context.WithCancel(context.Background())
	if c.ttl <= 0 {
		c.ttl = 15 * time.Second
	}
	if c.ttl < 400*time.Millisecond {
		return nil, fmt.Errorf("cluster: LeaseTTL %s is too short: at least 400ms", c.ttl)
	}
	// A lease is trusted here until this long before the store lets
	// another replica take it: room for a renewal's round trip and for
	// the clocks' rates to differ.
	c.margin = c.ttl / 5
	if c.every == 0 {
		c.every = 10 * time.Minute
	}
	c.retries, c.retryAfter = cfg.Retries, cfg.RetryAfter
	c.policyDigest, c.requireSame = cfg.PolicyDigest, cfg.RequireSamePolicy
	switch {
	case c.retries == 0:
		c.retries = 8
	case c.retries < 0:
		c.retries = 0
	}
	if c.retryAfter <= 0 {
		c.retryAfter = 5 * time.Second
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.id == "" {
		c.id = replicaID()
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = 100
	}
	pool := cfg.Store.Pool()
	if n := pool.Config().MaxConns; n < minConns {
		return nil, fmt.Errorf("cluster: the store's pool allows %d connections; cluster mode needs at least %d (River listens and fetches, leases are renewed, runs write): raise pool_max_conns in the URL", n, minConns)
	}
	if err := migrateRiver(ctx, cfg.Store); err != nil {
		return nil, err
	}
	ws := river.NewWorkers()
	if err := river.AddWorkerSafely(ws, &driveWorker{c: c}); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(ws, &deadlineWorker{}); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(ws, &reconcileWorker{c: c}); err != nil {
		return nil, err
	}
	if c.notifier != nil {
		if err := river.AddWorkerSafely(ws, &deliverWorker{c: c}); err != nil {
			return nil, err
		}
		if err := river.AddWorkerSafely(ws, &nearWorker{c: c}); err != nil {
			return nil, err
		}
	}
	var periodic []*river.PeriodicJob
	if c.every > 0 {
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(c.every),
			func() (river.JobArgs, *river.InsertOpts) { return reconcileArgs{}, nil },
			&river.PeriodicJobOpts{ID: "tollgate_reconcile", RunOnStart: true}))
	}
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		ID:      c.id,
		Queues:  map[string]river.QueueConfig{queue: {MaxWorkers: workers}},
		Workers: ws,
		// A replica hears of every job at once: each commit that inserts
		// one is followed by a notification of River's kind (see
		// jobsCommitted; River's own is rate-limited per client, and a
		// job committed just after the fetch another's notice started
		// waited for the poll: bench/README.md, "Replicas"). Each notice
		// starts a fetch, at most one per FetchCooldown (those between
		// are merged into one after it). The poll only catches what a
		// notification missed (the listener reconnecting), and jobs
		// snoozed or retried coming due (a thread held elsewhere, whose
		// holder goes on with the run anyway), so it can be slow: it was
		// the bulk of an idle replica's cost at 50 ms (18 of its 21
		// transactions a second; bench/README.md, "Idle").
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 2 * time.Second,
		// The jobs are short (a lease taken); the runs they start are the
		// host's, under a lease, not River's.
		// A job a killed replica was working stays "running" until
		// River's rescuer finds it: soon, since the jobs take
		// milliseconds (a deadline fired 13 s late in the replicas test,
		// found only by a new leader's reconcile, with 2 minutes).
		JobTimeout:                  10 * time.Second,
		RescueStuckJobsAfter:        15 * time.Second,
		CompletedJobRetentionPeriod: time.Hour,
		MaxAttempts:                 100,
		RetryPolicy:                 retryPolicy{},
		PeriodicJobs:                periodic,
		Logger:                      slog.New(levelAtLeast{c.log.Handler(), slog.LevelWarn}),
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c.river = rc
	// River's listeners take the schema's insert channel (River's
	// notifier prefixes the schema); the payload names the queue.
	c.insertNotice = postgres.Notice{Channel: cfg.Store.Schema() + ".river_insert", Payload: `{"queue": "` + queue + `"}`}
	wants := wantsJobs
	if c.notifier != nil {
		wants = func(b *checkpoint.Batch) bool { return wantsJobs(b) || wantsNotify(b) }
	}
	cfg.Store.SetTxHook(&postgres.TxHook{Wants: wants, InTx: c.insertJobs, AfterCommit: c.jobsCommitted})
	return c, nil
}

// ID is the replica's name in leases and River's records.
func (c *Cluster) ID() string { return c.id }

// River is the cluster's River client (for its metrics, or to look at
// its jobs).
func (c *Cluster) River() *river.Client[pgx.Tx] { return c.river }

// Stats returns the cluster's counts.
func (c *Cluster) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

func replicaID() string {
	name, _ := os.Hostname()
	if name == "" {
		name = "replica"
	}
	b := make([]byte, 4)
	rand.Read(b)
	return name + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b)
}

// migrateRiver brings River's tables up to this River's version, once
// for replicas that start together (an advisory lock on the schema).
func migrateRiver(ctx context.Context, store *postgres.Store) error {
	pool := store.Pool()
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: slog.New(discard{})})
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	// Each of River's migrations is a transaction of its own (some add
	// an enum's value and use it), so the lock is a session's, on a
	// connection held for the purpose.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("cluster: migrating River's tables: %w", err)
	}
	defer conn.Release()
	key := store.Schema() + ".river"
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(1416588396, hashtext($1))", key); err != nil {
		return fmt.Errorf("cluster: migrating River's tables: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(1416588396, hashtext($1))", key)
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("cluster: migrating River's tables: %w", err)
	}
	return nil
}

// Start implements [host.Coordinator]: River's client works the jobs,
// and the replica renews its leases and rescues those of replicas that
// stopped.
func (c *Cluster) Start(ctx context.Context, h *host.Host) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("cluster: already started")
	}
	c.started, c.host = true, h
	c.mu.Unlock()
	// This replica's row, and the others' policies, before it works any
	// job: one that may not decide by another policy stops here.
	if err := c.beatNow(ctx); err != nil {
		return fmt.Errorf("cluster: registering the replica: %w", err)
	}
	if differ := c.PolicyMismatch(); c.requireSame && len(differ) > 0 {
		c.leave()
		return fmt.Errorf("%w (RequireSamePolicy): %s", ErrPolicyMismatch, strings.Join(differ, "; "))
	}
	if err := c.river.Start(c.bg); err != nil {
		return fmt.Errorf("cluster: starting River: %w", err)
	}
	c.ensureRenewing()
	c.loops.Add(1)
	go c.rescueLoop(c.bg)
	return nil
}

// ensureRenewing starts, once, the loops every lease needs: its renewal,
// and the listener that hears at once of a lease seized by an abort. A
// cluster never started (a command line that aborts) starts them with its
// first lease.
func (c *Cluster) ensureRenewing() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.renewing || c.bg.Err() != nil {
		return
	}
	c.renewing = true
	c.loops.Add(2)
	go c.renewLoop(c.bg)
	go c.listenSeized(c.bg)
}

// Stop implements [host.Coordinator]: no more jobs are fetched (those
// being worked finish); the leases of the runs still going on are kept,
// and renewed, until the host lets go of them.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	started := c.started
	c.mu.Unlock()
	if !started {
		return nil
	}
	return c.river.Stop(ctx)
}

// Close ends the lease renewal and the rescue loop, after the host's
// Shutdown. Leases still held (runs cut off) then expire and are
// rescued by other replicas.
func (c *Cluster) Close() {
	c.stop()
	c.loops.Wait()
	c.mu.Lock()
	started := c.started
	c.mu.Unlock()
	if started {
		c.leave()
	}
}

// levelAtLeast drops River's records below a level.
type levelAtLeast struct {
	slog.Handler
	min slog.Level
}

func (l levelAtLeast) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= l.min && l.Handler.Enabled(ctx, level)
}

type discard struct{}

func (discard) Enabled(context.Context, slog.Level) bool  { return false }
func (discard) Handle(context.Context, slog.Record) error { return nil }
func (d discard) WithAttrs([]slog.Attr) slog.Handler      { return d }
func (d discard) WithGroup(string) slog.Handler           { return d }

var _ host.Coordinator = (*Cluster)(nil)

// wantsJobs: the batches whose commit must insert a job — a resolution
// (the run resumes; an abort closes its run itself).
func wantsJobs(b *checkpoint.Batch) bool {
	r := b.Resolve
	return r != nil && r.Resolution.Status != checkpoint.QuestionAborted
}

// insertJobs is the store's hook: in the transaction of a resolution, the
// job that resumes the run. (A question's deadline needs no job: every
// replica's host fires deadlines from the store.)
func (c *Cluster) insertJobs(ctx context.Context, tx pgx.Tx, b *checkpoint.Batch, out *checkpoint.Committed) error {
	var params []river.InsertManyParams
	if r := b.Resolve; r != nil && r.Resolution.Status != checkpoint.QuestionAborted && out.Resolved != nil {
		params = append(params, river.InsertManyParams{Args: driveArgs{ThreadID: r.ThreadID}})
	}
	if c.notifier != nil {
		more, err := c.notifyJobs(b, out)
		if err != nil {
			return fmt.Errorf("notifications: %w", err)
		}
		params = append(params, more...)
	}
	if len(params) == 0 {
		return nil
	}
	if _, err := c.river.InsertManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("inserting the run's jobs: %w", err)
	}
	return nil
}

// jobsCommitted follows a hooked commit: the replicas hear of its job by
// a notification of River's own kind, sent after the commit, every time.
// (River's own, inside the transaction, is sent only if its client sent
// none in the last FetchCooldown: a job committed just after another's
// fetch would wait for the poll, which is slow, to cost little idle.)
func (c *Cluster) jobsCommitted(b *checkpoint.Batch, out *checkpoint.Committed) []postgres.Notice {
	if out.Resolved == nil {
		// A question asked, or a run that failed: its notifications'
		// deliveries are jobs too, to be sent now, not at the next poll.
		if c.notifier != nil && wantsNotify(b) {
			return []postgres.Notice{c.insertNotice}
		}
		return nil
	}
	if out.Resolved.Status == checkpoint.QuestionTimedOut {
		c.mu.Lock()
		c.stats.DeadlinesFired++
		c.mu.Unlock()
	}
	return []postgres.Notice{c.insertNotice}
}

// noticeJobs tells the replicas of jobs a transaction of the cluster's
// own committed (River's notification may have been held back by its
// rate limit); a failure only leaves them to the poll.
func (c *Cluster) noticeJobs(ctx context.Context) {
	if _, err := c.store.Pool().Exec(ctx, `SELECT pg_notify($1, $2)`, c.insertNotice.Channel, c.insertNotice.Payload); err != nil && ctx.Err() == nil {
		c.log.Warn("tollgate: telling the replicas of new jobs (they find them at their next poll)", "err", err)
	}
}

// InUse reports whether replicas have used the store in cluster mode
// (River's tables are there): a program that would drive the store's
// runs by itself, without a lease (tollgate run), must not.
func InUse(ctx context.Context, store *postgres.Store) (bool, error) {
	var in bool
	if err := store.Pool().QueryRow(ctx, `SELECT to_regclass('river_job') IS NOT NULL`).Scan(&in); err != nil {
		return false, fmt.Errorf("cluster: %w", err)
	}
	return in, nil
}

// retryPolicy retries a job that failed (the database away a moment) soon
// and often, not on River's default curve (1 s, 16 s, 81 s, 256 s...):
// an answer's resume and a deadline must not wait minutes for a blip.
// 100 ms doubling, at most 5 s apart; after MaxAttempts (about eight
// minutes) the job is discarded and the reconcile finds its run.
type retryPolicy struct{}

func (retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	d := 100 * time.Millisecond << min(max(job.Attempt-1, 0), 6)
	return time.Now().Add(min(d, 5*time.Second))
}
