//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/cluster"
)

type tableSize struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	Rows  int64  `json:"rows"`
}

type memoryResult struct {
	Binary   string `json:"binary"`
	Replicas int    `json:"replicas"`
	Parked   int    `json:"parked"`
	// Idle: one replica on the empty store, settled; IdleAfterCycle: the
	// same after one approval cycle (the template run).
	Idle           procMem `json:"idle"`
	IdleAfterCycle procMem `json:"idle_after_one_cycle"`
	// The seeding: one Commit per run, from SeedLoops goroutines, on a
	// store with a cluster built on it (never started), so that each
	// commits as a replica's would; raw single-row inserts from as many
	// loops just before and after. DeadlineJobs: the deadline jobs the
	// seeding left scheduled (none since questions need none; one a
	// question before).
	SeedLoops     int       `json:"seed_loops"`
	SeedSeconds   float64   `json:"seed_seconds"`
	SeedPerS      float64   `json:"seeded_per_s"`
	RawSeed       rawResult `json:"raw_before_seed"`
	RawSeedAfter  rawResult `json:"raw_after_seed"`
	DeadlineJobs  int64     `json:"deadline_jobs"`
	DBBytesBefore int64     `json:"database_bytes_before"`
	DBBytes       int64     `json:"database_bytes"`
	// The schema tollgate serve uses (tables, their indexes and TOAST),
	// before and after seeding.
	SchemaBytesBefore int64       `json:"schema_bytes_before"`
	SchemaBytes       int64       `json:"schema_bytes"`
	Tables            []tableSize `json:"tables"`
	// The replicas after starting on the seeded store and settling, then
	// after the answers finished and they settled again.
	Start     []procMem `json:"start"`
	Reconcile string    `json:"reconcile"`
	// The answers: through the HTTP API of random replicas, AnswerLoops at
	// once; every answered run then finished (the thread idle), with a
	// tool result each.
	Answered      int      `json:"answered"`
	AnswerLoops   int      `json:"answer_loops"`
	AnswerSeconds float64  `json:"answer_seconds"`
	FinishSeconds float64  `json:"finish_seconds"`
	Finished      int64    `json:"finished"`
	ToolResults   int64    `json:"tool_results"`
	AnswersBy     []int64  `json:"answers_by_replica"`
	AnswerRequest durStats `json:"answer_request"`
	// Healthz: GET /healthz round trips on the replicas just before the
	// answers, the HTTP request's own cost.
	Healthz durStats `json:"healthz"`
	// Queue: the reviewers' first page, GET /v1/questions (pending, the
	// most urgent first, 50, with the total), on random replicas, every
	// seeded run pending.
	Queue      durStats  `json:"queue_first_page"`
	After      []procMem `json:"after"`
	LoadBefore string    `json:"load_before"`
	LoadSeeded string    `json:"load_seeded"`
	LoadAfter  string    `json:"load_after"`
}

func databaseSize(ctx context.Context, store *postgres.Store) (int64, []tableSize, error) {
	var size int64
	if err := store.Pool().QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&size); err != nil {
		return 0, nil, err
	}
	rows, err := store.Pool().Query(ctx, `SELECT c.relname, pg_total_relation_size(c.oid), c.reltuples::bigint FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'tollgate' AND c.relkind = 'r'
		ORDER BY pg_total_relation_size(c.oid) DESC`)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	var ts []tableSize
	for rows.Next() {
		var t tableSize
		if err := rows.Scan(&t.Name, &t.Bytes, &t.Rows); err != nil {
			return 0, nil, err
		}
		ts = append(ts, t)
	}
	return size, ts, rows.Err()
}

// measureMemory runs tollgate serve replicas as processes: one on the
// empty store (the comparison, and the template run), then o.replicas on
// the store seeded with o.parked parked runs, before and after answering
// o.answers of them through random replicas.
func measureMemory(ctx context.Context, b *backend, dsn string, o clusterOptions, progress func(string, ...any)) (*memoryResult, error) {
	res := &memoryResult{Replicas: o.replicas, Parked: o.parked, SeedLoops: o.seedLoops, AnswerLoops: o.answerLoops, LoadBefore: loadAvg()}
	f, err := newServeFleet(ctx, dsn, o.bin, "memory", progress)
	if err != nil {
		return nil, err
	}
	defer f.close()
	res.Binary = f.binLabel

	// One replica on the empty store.
	r0, err := f.start(ctx, 0)
	if err != nil {
		return nil, err
	}
	st, err := settleReplicas(ctx, []*serveReplica{r0}, o.settleMax)
	if err != nil {
		return nil, err
	}
	res.Idle = f.measureSettled(r0, st[0])
	progress("memory: one replica, 0 parked runs: VmRSS %s (RssAnon %s), VmHWM %s", kbStr(res.Idle.RSSKB), kbStr(res.Idle.AnonKB), kbStr(res.Idle.HWMKB))
	store, err := postgres.Open(ctx, withParam(dsn, "application_name", appName+"-seed"), &postgres.Options{Schema: "tollgate", MustExist: true, MaxConns: int32(max(4, o.seedLoops))})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	// The template: one real prompt through the replica's API.
	tpl, err := f.templateCycle(ctx, store, r0)
	if err != nil {
		return nil, err
	}
	if st, err = settleReplicas(ctx, []*serveReplica{r0}, o.settleMax); err != nil {
		return nil, err
	}
	res.IdleAfterCycle = f.measureSettled(r0, st[0])
	r0.stop()
	f.replicas = nil

	ids, err := res.seed(ctx, b, store, tpl, o, progress)
	if err != nil {
		return nil, err
	}

	// The replicas on the seeded store.
	started := time.Now()
	for i := range o.replicas {
		if _, err := f.start(ctx, i+1); err != nil {
			return nil, err
		}
	}
	if st, err = settleReplicas(ctx, f.replicas, o.settleMax); err != nil {
		return nil, err
	}
	res.Reconcile = reconcileSeen(ctx, store, started)
	for i, r := range f.replicas {
		m := f.measureSettled(r, st[i])
		res.Start = append(res.Start, m)
		progress("memory: replica %d, %d parked runs in the store: VmRSS %s (RssAnon %s), VmHWM %s, settled in %.0fs", r.n, o.parked, kbStr(m.RSSKB), kbStr(m.AnonKB), kbStr(m.HWMKB), st[i])
	}

	// The answers, after the HTTP round trip's own cost.
	if res.Healthz, err = f.healthzTimes(); err != nil {
		return nil, err
	}
	if res.Queue, err = f.queueTimes(o.parked); err != nil {
		return nil, err
	}
	if err := res.answer(ctx, f, store, tpl, ids, o, progress); err != nil {
		return nil, err
	}
	if st, err = settleReplicas(ctx, f.replicas, o.settleMax); err != nil {
		return nil, err
	}
	for i, r := range f.replicas {
		m := f.measureSettled(r, st[i])
		res.After = append(res.After, m)
		progress("memory: replica %d after the answers: VmRSS %s (RssAnon %s), VmHWM %s", r.n, kbStr(m.RSSKB), kbStr(m.AnonKB), kbStr(m.HWMKB))
	}
	f.stopAll()
	res.LoadAfter = loadAvg()
	return res, nil
}

// measureSettled is r's memory, with the time it took to settle.
func (f *serveFleet) measureSettled(r *serveReplica, settle float64) procMem {
	m := f.measure(r)
	m.Settle = settle
	return m
}

// templateCycle makes the template: one real prompt through r's API,
// read from the store once parked, then answered.
func (f *serveFleet) templateCycle(ctx context.Context, store *postgres.Store, r *serveReplica) (*runTemplate, error) {
	tplThread := "clusterbench-template-" + randomHex(4)
	if code, body, err := f.post(r.addr, "/v1/threads/"+tplThread+"/messages", map[string]string{"text": "$ " + templateCommand}); err != nil || code != http.StatusOK && code != http.StatusCreated && code != http.StatusAccepted {
		return nil, fmt.Errorf("posting the template prompt: %d %s %v", code, body, err)
	}
	var tpl *runTemplate
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		tpl, err = readTemplate(ctx, store, tplThread)
		if err == nil && len(tpl.events) > 0 && tpl.events[len(tpl.events)-1].Type == "run_parked" {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the template run did not park: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(string(tpl.question.Payload), templateCommand) {
		return nil, fmt.Errorf("the template question is not about %q: %s", templateCommand, tpl.question.Payload)
	}
	// Answered, so that it is one cycle through the replica, and the
	// template's command is known to run here.
	if code, body, err := f.post(r.addr, "/v1/questions/"+tplThread+"/"+tpl.question.ID+"/answer", answerBody(tpl.question)); err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("answering the template: %d %s %v", code, body, err)
	}
	if _, results, err := waitIdle(ctx, store, []string{tplThread}, time.Minute); err != nil || results != 1 {
		return nil, fmt.Errorf("the template run after its answer: %d tool results, %v", results, err)
	}
	return tpl, nil
}

// seed writes o.parked copies of the template's parked run into store,
// with the database's size and the raw insert rate around it, and
// returns their thread ids.
func (res *memoryResult) seed(ctx context.Context, b *backend, store *postgres.Store, tpl *runTemplate, o clusterOptions, progress func(string, ...any)) ([]string, error) {
	var tables []tableSize
	var err error
	if res.DBBytesBefore, tables, err = databaseSize(ctx, store); err != nil {
		return nil, err
	}
	for _, t := range tables {
		res.SchemaBytesBefore += t.Bytes
	}
	if res.RawSeed, err = b.raw(ctx, o.seedLoops, o.rawTime); err != nil {
		return nil, err
	}
	if _, err := cluster.New(ctx, cluster.Config{Store: store, Logger: quiet}); err != nil {
		return nil, err
	}
	progress("memory: seeding %d parked runs from %d goroutines (raw %.0f tx/s from %d)", o.parked, o.seedLoops, res.RawSeed.PerSecond, o.seedLoops)
	ids := make([]string, o.parked)
	for i := range ids {
		ids[i] = fmt.Sprintf("seed-%07d", i)
	}
	start := time.Now()
	err = eachOf(o.seedLoops, len(ids), func(i int) error {
		if _, err := store.Commit(ctx, tpl.batch(ids[i], "run_"+randomHex(12))); err != nil {
			return fmt.Errorf("seeding %s: %w", ids[i], err)
		}
		if i > 0 && i%(max(1, len(ids)/10)) == 0 {
			progress("memory: %d seeded in %.1fs", i, time.Since(start).Seconds())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.SeedSeconds = time.Since(start).Seconds()
	res.SeedPerS = float64(o.parked) / res.SeedSeconds
	if res.RawSeedAfter, err = b.raw(ctx, o.seedLoops, o.rawTime); err != nil {
		return nil, err
	}
	if _, err := store.Pool().Exec(ctx, `ANALYZE`); err != nil {
		return nil, err
	}
	if res.DBBytes, res.Tables, err = databaseSize(ctx, store); err != nil {
		return nil, err
	}
	for _, t := range res.Tables {
		res.SchemaBytes += t.Bytes
	}
	if err := store.Pool().QueryRow(ctx, `SELECT count(*) FROM tollgate.river_job WHERE kind = 'tollgate_deadline' AND state = 'scheduled'`).Scan(&res.DeadlineJobs); err != nil {
		return nil, err
	}
	res.LoadSeeded = loadAvg()
	progress("memory: seeded %d in %.1fs (%.0f/s); database %s; load average %s", o.parked, res.SeedSeconds, res.SeedPerS, sizeStr(float64(res.DBBytes)), res.LoadSeeded)
	return ids, nil
}

// eachOf calls fn(i) for every i below n from loops goroutines, and
// stops at the first error, which it returns.
func eachOf(loops, n int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, loops)
	for range loops {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					errs <- err
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// healthzTimes is 200 GET /healthz round trips on the replicas in turn:
// the HTTP request's own cost.
func (f *serveFleet) healthzTimes() (durStats, error) {
	var hz []time.Duration
	for i := range 200 {
		r := f.replicas[i%len(f.replicas)]
		t0 := time.Now()
		resp, err := f.client.Get("http://" + r.addr + "/healthz")
		if err != nil {
			return durStats{}, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		hz = append(hz, time.Since(t0))
	}
	return statsOf(hz), nil
}

// queueTimes is the reviewers' first page fetched from random replicas,
// checked to hold the parked runs, after 10 fetches that warm the
// replicas' statements up.
func (f *serveFleet) queueTimes(parked int) (durStats, error) {
	var qt []time.Duration
	for i := range 60 {
		r := f.replicas[rand.IntN(len(f.replicas))]
		t0 := time.Now()
		resp, err := f.client.Get("http://" + r.addr + "/v1/questions?status=pending&limit=50")
		if err != nil {
			return durStats{}, err
		}
		var page struct {
			Questions []json.RawMessage `json:"questions"`
			Total     int64             `json:"total"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || len(page.Questions) != min(50, parked) || page.Total < int64(parked) {
			return durStats{}, fmt.Errorf("the queue's first page on replica %d: %d questions of %d, %v", r.n, len(page.Questions), page.Total, err)
		}
		if i >= 10 { // the first ones warm the replicas' statements up
			qt = append(qt, time.Since(t0))
		}
	}
	return statsOf(qt), nil
}

// answer approves o.answers of the seeded runs ids through random
// replicas, o.answerLoops at once, and waits for every answered run to
// finish.
func (res *memoryResult) answer(ctx context.Context, f *serveFleet, store *postgres.Store, tpl *runTemplate, ids []string, o clusterOptions, progress func(string, ...any)) error {
	chosen := make([]string, 0, o.answers)
	for _, i := range rand.Perm(len(ids))[:o.answers] {
		chosen = append(chosen, ids[i])
	}
	res.AnswersBy = make([]int64, len(f.replicas))
	var reqTimes []time.Duration
	var mu sync.Mutex
	start := time.Now()
	err := eachOf(o.answerLoops, len(chosen), func(i int) error {
		k := rand.IntN(len(f.replicas))
		r := f.replicas[k]
		t0 := time.Now()
		code, body, err := f.post(r.addr, "/v1/questions/"+chosen[i]+"/"+tpl.question.ID+"/answer", tpl.answerIn(chosen[i]))
		d := time.Since(t0)
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("answering %s on replica %d: %d %s %v", chosen[i], r.n, code, body, err)
		}
		mu.Lock()
		res.AnswersBy[k]++
		reqTimes = append(reqTimes, d)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return err
	}
	res.AnswerSeconds = time.Since(start).Seconds()
	res.AnswerRequest = statsOf(reqTimes)
	res.Answered = len(chosen)
	res.Finished, res.ToolResults, err = waitIdle(ctx, store, chosen, 10*time.Minute)
	res.FinishSeconds = time.Since(start).Seconds()
	if err != nil {
		return err
	}
	progress("memory: %d answered in %.1fs, all finished in %.1fs", len(chosen), res.AnswerSeconds, res.FinishSeconds)
	return nil
}

// reconcileSeen says whether a start-up reconcile of the cluster ran
// since the replicas started, and how long it took. (River's periodic
// job is unique by the minute: one due in the same minute as an earlier
// one, such as the comparison replica's, is not run again.)
func reconcileSeen(ctx context.Context, store *postgres.Store, since time.Time) string {
	var created, attempted, finalized pgtype.Timestamptz
	var by []string
	err := store.Pool().QueryRow(ctx, `SELECT created_at, attempted_at, finalized_at, coalesce(attempted_by, '{}') FROM tollgate.river_job
		WHERE kind = 'tollgate_reconcile' ORDER BY id DESC LIMIT 1`).Scan(&created, &attempted, &finalized, &by)
	switch {
	case err != nil:
		return "no reconcile job found (" + err.Error() + ")"
	case created.Time.Before(since):
		return fmt.Sprintf("no start-up reconcile ran after the replicas started: River's periodic job is unique by the minute, and the last one was inserted at %s, before them", created.Time.Format(time.TimeOnly))
	case !attempted.Valid || !finalized.Valid:
		return "the start-up reconcile did not finish while the replicas settled"
	}
	return fmt.Sprintf("the start-up reconcile took %s on %s", ms(finalized.Time.Sub(attempted.Time)), strings.Join(by, ","))
}

func kbStr(kb int64) string { return fmt.Sprintf("%.1f MB", float64(kb)/1024) }

func (m *memoryResult) print(w io.Writer) {
	fmt.Fprintf(w, "\nMemory: tollgate serve replicas as processes (%s), --dev, the demo model, a policy that asks about every call.\n", m.Binary)
	fmt.Fprintf(w, "load average %s at the start, %s after seeding, %s at the end\n", m.LoadBefore, m.LoadSeeded, m.LoadAfter)
	fmt.Fprintf(w, "%-44s %10s %10s %10s %10s %10s %8s %8s\n", "", "VmRSS", "VmHWM", "RssAnon", "RssFile", "Go heap", "gorout.", "settled")
	row := func(label string, p procMem) {
		fmt.Fprintf(w, "%-44s %10s %10s %10s %10s %10s %8.0f %7.0fs\n", label, kbStr(p.RSSKB), kbStr(p.HWMKB), kbStr(p.AnonKB), kbStr(p.FileKB),
			sizeStr(p.HeapInuse), p.Goroutines, p.Settle)
	}
	row("one replica, empty store (the comparison)", m.Idle)
	row("  the same, after one approval cycle", m.IdleAfterCycle)
	for _, p := range m.Start {
		row(fmt.Sprintf("replica %d of %d, %d parked runs", p.Replica, m.Replicas, m.Parked), p)
	}
	for _, p := range m.After {
		row(fmt.Sprintf("replica %d after %d answered", p.Replica, m.Answered), p)
	}
	fmt.Fprintf(w, "%s\n", m.Reconcile)
	fmt.Fprintf(w, "seeding: %d parked runs, one Commit each (thread, messages, question, audit entries) from %d goroutines,\n"+
		"in %.1fs = %.0f runs/s; raw single-row inserts from %d loops: %.0f tx/s before, %.0f tx/s after; %d deadline jobs scheduled\n",
		m.Parked, m.SeedLoops, m.SeedSeconds, m.SeedPerS, m.SeedLoops, m.RawSeed.PerSecond, m.RawSeedAfter.PerSecond, m.DeadlineJobs)
	per := float64(m.SchemaBytes-m.SchemaBytesBefore) / float64(max(1, m.Parked))
	fmt.Fprintf(w, "database: %s, of which the schema tollgate %s (%s before seeding; %s a parked run):", sizeStr(float64(m.DBBytes)),
		sizeStr(float64(m.SchemaBytes)), sizeStr(float64(m.SchemaBytesBefore)), sizeStr(per))
	for i, t := range m.Tables {
		if i >= 8 {
			break
		}
		fmt.Fprintf(w, " %s %s", t.Name, sizeStr(float64(t.Bytes)))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "the reviewers' first page, GET /v1/questions?status=pending&limit=50 (with the total of %d pending), on random replicas: p50/p90/p99/max %s\n",
		m.Parked, m.Queue)
	fmt.Fprintf(w, "answers: %d approved through random replicas (%v by replica), %d at once, in %.1fs; request p50/p90/p99/max %s\n"+
		"(GET /healthz, the raw limit: %s); every answered run finished %.1fs after the first answer (%d idle, %d tool results)\n",
		m.Answered, m.AnswersBy, m.AnswerLoops, m.AnswerSeconds, m.AnswerRequest, m.Healthz, m.FinishSeconds, m.Finished, m.ToolResults)
}
