//go:build linux

package main

import (
	"context"
	"sync/atomic"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// countingStore counts the calls made through it, by method. Every write
// method (and Commit) is one durable write request; a store without
// group commit makes each one its own transaction.
type countingStore struct {
	checkpoint.Store
	counts map[string]*atomic.Int64 // one per method, made by newCountingStore
}

// writeMethods are the methods that write; the others read.
var writeMethods = map[string]bool{
	"CreateThread": true, "SaveThread": true, "Commit": true, "PutToolCall": true,
	"CreateQuestion": true, "ResolveQuestion": true, "AppendEvent": true,
}

var readMethods = []string{"LoadThread", "ListThreads", "ListToolCalls", "GetQuestion", "ListQuestions", "CountQuestions", "ListEvents"}

func newCountingStore(s checkpoint.Store) *countingStore {
	c := &countingStore{Store: s, counts: map[string]*atomic.Int64{}}
	for m := range writeMethods {
		c.counts[m] = new(atomic.Int64)
	}
	for _, m := range readMethods {
		c.counts[m] = new(atomic.Int64)
	}
	return c
}

func (s *countingStore) count(method string) { s.counts[method].Add(1) }

// snapshot returns the counts so far.
func (s *countingStore) snapshot() map[string]int64 {
	out := make(map[string]int64, len(s.counts))
	for k, v := range s.counts {
		out[k] = v.Load()
	}
	return out
}

func (s *countingStore) CreateThread(ctx context.Context, t *checkpoint.Thread) error {
	s.count("CreateThread")
	return s.Store.CreateThread(ctx, t)
}

func (s *countingStore) LoadThread(ctx context.Context, id string) (*checkpoint.Thread, error) {
	s.count("LoadThread")
	return s.Store.LoadThread(ctx, id)
}

func (s *countingStore) SaveThread(ctx context.Context, t *checkpoint.Thread) error {
	s.count("SaveThread")
	return s.Store.SaveThread(ctx, t)
}

func (s *countingStore) ListThreads(ctx context.Context, f checkpoint.ThreadFilter) ([]*checkpoint.Thread, string, error) {
	s.count("ListThreads")
	return s.Store.ListThreads(ctx, f)
}

func (s *countingStore) Commit(ctx context.Context, b *checkpoint.Batch) (*checkpoint.Committed, error) {
	s.count("Commit")
	return s.Store.Commit(ctx, b)
}

func (s *countingStore) PutToolCall(ctx context.Context, tc *checkpoint.ToolCall) error {
	s.count("PutToolCall")
	return s.Store.PutToolCall(ctx, tc)
}

func (s *countingStore) ListToolCalls(ctx context.Context, threadID, runID string, callIDs ...string) ([]*checkpoint.ToolCall, error) {
	s.count("ListToolCalls")
	return s.Store.ListToolCalls(ctx, threadID, runID, callIDs...)
}

func (s *countingStore) CreateQuestion(ctx context.Context, q *checkpoint.Question) (*checkpoint.Question, bool, error) {
	s.count("CreateQuestion")
	return s.Store.CreateQuestion(ctx, q)
}

func (s *countingStore) GetQuestion(ctx context.Context, threadID, id string) (*checkpoint.Question, error) {
	s.count("GetQuestion")
	return s.Store.GetQuestion(ctx, threadID, id)
}

func (s *countingStore) ListQuestions(ctx context.Context, f checkpoint.QuestionFilter) ([]*checkpoint.Question, string, error) {
	s.count("ListQuestions")
	return s.Store.ListQuestions(ctx, f)
}

func (s *countingStore) CountQuestions(ctx context.Context, f checkpoint.QuestionFilter) (int64, error) {
	s.count("CountQuestions")
	return s.Store.CountQuestions(ctx, f)
}

func (s *countingStore) ResolveQuestion(ctx context.Context, threadID, id string, r checkpoint.Resolution) (*checkpoint.Question, error) {
	s.count("ResolveQuestion")
	return s.Store.ResolveQuestion(ctx, threadID, id, r)
}

func (s *countingStore) AppendEvent(ctx context.Context, e *checkpoint.Event) (int64, error) {
	s.count("AppendEvent")
	return s.Store.AppendEvent(ctx, e)
}

func (s *countingStore) ListEvents(ctx context.Context, threadID string, after int64, limit int) ([]*checkpoint.Event, error) {
	s.count("ListEvents")
	return s.Store.ListEvents(ctx, threadID, after, limit)
}
