package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/cluster"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/storeurl"
	"github.com/tollgate-ai/tollgate/provider/scripted"
	"github.com/tollgate-ai/tollgate/server"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

// storeSource reads and writes a store directly. Answers and aborts go
// through a host that is never started: it checks an answer as the run
// would and leaves resuming to the process that drives the run.
type storeSource struct {
	store checkpoint.Store
	url   string
	// policyFile vets edits (--policy; "" is the built-in sandbox
	// policy), as the serving process does.
	policyFile string
	// hookPolicyFile vets edits of coding agents' calls (--hook-policy;
	// "" is the built-in coding-agent policy).
	hookPolicyFile string
	log            *slog.Logger
	// clusters made to answer or abort on a store replicas serve.
	clusters []*cluster.Cluster
}

var _ source = (*storeSource)(nil)

// openStoreSource opens an existing store: one that is not there is an
// error, never a new empty database. A store is opened read-only unless
// the command writes to it (answers, aborts): reading needs no write
// access, and writes nothing.
func openStoreSource(ctx context.Context, storeURL string, write bool) (*storeSource, error) {
	open := storeurl.OpenReadOnly
	if write {
		open = storeurl.OpenExisting
	}
	st, err := open(ctx, storeURL)
	if err != nil {
		return nil, err
	}
	return &storeSource{store: st, url: storeURL, log: slog.New(slog.DiscardHandler)}, nil
}

func (s *storeSource) where() string { return "the store " + storeurl.Redacted(s.url) }
func (s *storeSource) close() {
	for _, c := range s.clusters {
		c.Close() // its lease loops, before the store they use
	}
	s.store.Close()
}

func (s *storeSource) questions(ctx context.Context, thread string, status checkpoint.QuestionStatus) ([]*checkpoint.Question, error) {
	f := checkpoint.QuestionFilter{ThreadID: thread, Status: status, Order: checkpoint.OldestFirst, Limit: 500}
	var out []*checkpoint.Question
	for {
		qs, next, err := s.store.ListQuestions(ctx, f)
		if err != nil {
			return nil, err
		}
		out = append(out, qs...)
		if next == "" {
			return out, nil
		}
		f.After = next
	}
}

func (s *storeSource) question(ctx context.Context, thread, id string) (*checkpoint.Question, error) {
	return s.store.GetQuestion(ctx, thread, id)
}

// host is a host over the store that is never started, whose template
// has the tools and policy of a run, so that it checks answers as the run
// would. The model is never called.
func (s *storeSource) host(ctx context.Context) (*host.Host, error) {
	lp, err := loadPolicy(ctx, s.policyFile, s.log, policyWatch{}, nil)
	if err != nil {
		return nil, err
	}
	tmpl := bashAgent(s.store, scripted.Demo{}, agent.Model{ID: "demo", Provider: "scripted"}, &bash.Options{Dir: "."}, lp.approval, s.log)
	hooksSvc, _, err := hookService(ctx, s.store, s.hookPolicyFile, s.log, policyWatch{})
	if err != nil {
		return nil, err
	}
	return s.newHost(ctx, host.Config{Store: s.store, Agent: tmpl, Logger: s.log, Kinds: []host.Kind{hooksSvc.Kind()}})
}

// newHost is host.New, in a cluster's when replicas serve the store: an
// answer then commits with the job that resumes its run, and an abort
// takes the thread's lease. The host is never started.
func (s *storeSource) newHost(ctx context.Context, cfg host.Config) (*host.Host, error) {
	if pg, ok := s.store.(*postgres.Store); ok {
		in, err := cluster.InUse(ctx, pg)
		if err != nil {
			return nil, err
		}
		if in {
			c, err := cluster.New(ctx, cluster.Config{Store: pg, Logger: s.log})
			if err != nil {
				return nil, err
			}
			s.clusters = append(s.clusters, c)
			cfg.Coordinator = c
		}
	}
	return host.New(cfg)
}

func (s *storeSource) answer(ctx context.Context, thread, id string, answer json.RawMessage, by string) (*checkpoint.Question, error) {
	h, err := s.host(ctx)
	if err != nil {
		return nil, err
	}
	// As the server does: an answer says which call it is about.
	q, err := h.AnswerWith(ctx, thread, id, answer, host.AnswerOptions{By: by, RequireDigest: true})
	if err == nil {
		return q, nil
	}
	r := &refusal{message: err.Error()}
	// The API's codes for the same errors (server/errors.go), so that
	// both sources are explained alike.
	switch {
	case errors.Is(err, hitl.ErrUnknownQuestion):
		r.code = "not_found"
	case errors.Is(err, hitl.ErrAborted):
		r.code = "aborted"
	case errors.Is(err, hitl.ErrAlreadyAnswered):
		r.code = "already_answered"
	case errors.Is(err, hitl.ErrExpired):
		r.code = "expired"
	case errors.Is(err, hitl.ErrDigestMismatch):
		r.code = "digest_mismatch"
	case errors.Is(err, hitl.ErrDigestRequired):
		r.code = "digest_required"
	case errors.Is(err, hitl.ErrWrongKind), errors.Is(err, hitl.ErrInvalidAnswer):
		r.code = "invalid_answer"
		var ve *agent.ValidationError
		if errors.As(err, &ve) && len(ve.Problems) > 0 {
			r.problems = ve.Problems
		} else {
			r.problems = []agent.Problem{{Message: trimErrorPrefixes(err)}}
		}
	default:
		return nil, err
	}
	if cur, gerr := s.store.GetQuestion(ctx, thread, id); gerr == nil {
		r.question = cur
	}
	return nil, r
}

// trimErrorPrefixes is an error's message without the sentinel text and
// package names before it, as the server sends it.
func trimErrorPrefixes(err error) string {
	msg := err.Error()
	for _, p := range []string{hitl.ErrInvalidAnswer.Error() + ": ", hitl.ErrWrongKind.Error() + ": ", "hitl: ", "host: ", "agent: ", "policy: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// runState is what the store tells of a thread's run: parked while it
// waits for answers, else active. (A host knows more of the runs it drives
// itself: a store cannot tell a run in progress from one that stopped.)
func runState(th *checkpoint.Thread, pending int) string {
	switch {
	case th.Status != checkpoint.ThreadRunning:
		return string(host.RunIdle)
	case pending > 0:
		return string(host.RunParked)
	}
	return string(host.RunActive)
}

func (s *storeSource) threads(ctx context.Context, tq threadQuery) ([]*threadInfo, error) {
	if tq.State == "failed" {
		return nil, errors.New("a failed run is known to the server that drives it, not to its store: ask the server (--server URL)")
	}
	pending, err := s.questions(ctx, "", checkpoint.QuestionPending)
	if err != nil {
		return nil, err
	}
	waiting := map[string]int{}
	for _, q := range pending {
		waiting[q.ThreadID]++
	}
	f, _ := server.ThreadState(tq.State)
	if tq.Status != "" {
		if f.Status != "" && f.Status != tq.Status {
			return nil, fmt.Errorf("--status %s and --state %s select nothing together", tq.Status, tq.State)
		}
		f.Status = tq.Status
	}
	f.Search, f.Limit = tq.Search, 500
	var out []*threadInfo
	for {
		ths, next, err := s.store.ListThreads(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, th := range ths {
			if tq.State == "running" && waiting[th.ID] > 0 {
				continue // waiting for a person, not running
			}
			out = append(out, &threadInfo{Thread: th, RunState: runState(th, waiting[th.ID])})
		}
		if next == "" {
			return out, nil
		}
		f.After = next
	}
}

func (s *storeSource) thread(ctx context.Context, id string) (*threadInfo, error) {
	th, err := s.store.LoadThread(ctx, id)
	if err != nil {
		return nil, err
	}
	pending, err := s.questions(ctx, id, checkpoint.QuestionPending)
	if err != nil {
		return nil, err
	}
	open, err := agent.TurnProgress(ctx, s.store, th)
	if err != nil {
		return nil, err
	}
	return &threadInfo{Thread: th, RunState: runState(th, len(pending)), Pending: pending, Open: open}, nil
}

func (s *storeSource) abort(ctx context.Context, id, reason string) error {
	if _, err := s.store.LoadThread(ctx, id); err != nil {
		return err
	}
	if reason == "" {
		reason = "aborted by " + currentUser()
	}
	// Aborting needs no tools: the calls left are denied, not run.
	h, err := s.newHost(ctx, host.Config{Store: s.store, Agent: agent.Config{Provider: scripted.Demo{}, Logger: s.log}, Logger: s.log})
	if err != nil {
		return err
	}
	return h.Abort(ctx, id, reason)
}

func (s *storeSource) events(ctx context.Context, thread string, after int64, limit int) ([]*checkpoint.Event, error) {
	var out []*checkpoint.Event
	for limit <= 0 || len(out) < limit {
		n := 1000
		if limit > 0 {
			n = min(n, limit-len(out))
		}
		evs, err := s.store.ListEvents(ctx, thread, after, n)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
		if len(evs) < n {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	return out, nil
}
