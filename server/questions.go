package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/apiclient"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/interrupt"
)

var orders = map[string]checkpoint.QuestionOrder{
	"oldest":   checkpoint.OldestFirst,
	"newest":   checkpoint.NewestFirst,
	"deadline": checkpoint.DeadlineFirst,
}

// GET /v1/questions
func (s *Server) listQuestions(w http.ResponseWriter, r *http.Request, id *identity) error {
	q := r.URL.Query()
	if err := checkParams(q, "status", "thread", "tool", "kind", "order", "cursor", "limit"); err != nil {
		return err
	}
	f := checkpoint.QuestionFilter{ThreadID: q.Get("thread"), Tool: q.Get("tool"), Kind: q.Get("kind"), After: q.Get("cursor")}
	switch st := q.Get("status"); st {
	case "", string(checkpoint.QuestionPending):
		f.Status = checkpoint.QuestionPending
	case string(checkpoint.QuestionAnswered), string(checkpoint.QuestionTimedOut), string(checkpoint.QuestionAborted):
		f.Status = checkpoint.QuestionStatus(st)
	case "all":
	default:
		return badRequest("status must be pending, answered, timed_out, aborted or all, not %q", st)
	}
	switch o := q.Get("order"); {
	case o == "" && f.Status == checkpoint.QuestionPending:
		f.Order = checkpoint.DeadlineFirst // the most urgent first
	case o == "":
		f.Order = checkpoint.NewestFirst // history: the latest first
	default:
		order, ok := orders[o]
		if !ok {
			return badRequest("order must be deadline, oldest or newest, not %q", o)
		}
		f.Order = order
	}
	limit, err := intParam(q, "limit", 50, 1, 200)
	if err != nil {
		return err
	}
	if f.ThreadID != "" && !id.sees(f.ThreadID) {
		return forbidden("token %q may not see thread %q", id.name, f.ThreadID)
	}
	scoped := f.ThreadID == "" && len(id.threads) > 0
	qs, next, err := scan(int(limit), f.After, func(limit int, after string) ([]*checkpoint.Question, string, error) {
		f.Limit, f.After = limit, after
		return s.store.ListQuestions(r.Context(), f)
	}, func(q *checkpoint.Question) bool { return id.sees(q.ThreadID) })
	if err != nil {
		return err
	}
	out := apiclient.QuestionList{Questions: make([]apiclient.Question, 0, len(qs)), NextCursor: next}
	for _, q := range qs {
		out.Questions = append(out.Questions, apiclient.QuestionOf(q))
	}
	if !scoped {
		n, err := s.counts.count(r.Context(), s.store, f)
		if err != nil {
			return err
		}
		out.Total = &n
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// loadQuestion returns a question the caller may see.
func (s *Server) loadQuestion(r *http.Request, id *identity) (*checkpoint.Question, error) {
	threadID, qid := r.PathValue("thread"), r.PathValue("id")
	if !id.sees(threadID) {
		return nil, forbidden("token %q may not see thread %q", id.name, threadID)
	}
	q, err := s.store.GetQuestion(r.Context(), threadID, qid)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return nil, notFound("question %q of thread %q does not exist", qid, threadID)
	}
	return q, err
}

// GET /v1/questions/{thread}/{id}
func (s *Server) getQuestion(w http.ResponseWriter, r *http.Request, id *identity) error {
	q, err := s.loadQuestion(r, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiclient.QuestionOf(q))
	return nil
}

// POST /v1/questions/{thread}/{id}/answer
//
// The body is the answer itself, whose shape depends on the question's
// kind (API.md); hitl and the host check it. The answer is recorded as
// given by the token's name.
func (s *Server) answerQuestion(w http.ResponseWriter, r *http.Request, id *identity) error {
	threadID, qid := r.PathValue("thread"), r.PathValue("id")
	if !id.sees(threadID) {
		return forbidden("token %q may not answer questions of thread %q", id.name, threadID)
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("the body is empty: send the answer as JSON (API.md lists the shapes by kind)")
	}
	if !json.Valid(body) {
		var v any
		return badRequest("%s", jsonProblem(json.Unmarshal(body, &v)))
	}
	// The answer must say which call it is about: the digest the
	// reviewer saw, never one this server fills in.
	q, err := s.host.AnswerWith(r.Context(), threadID, qid, body, host.AnswerOptions{By: id.name, RequireDigest: true})
	if err != nil {
		e := classify(err)
		switch e.code {
		case codeNotFound:
			e.message = "question " + strconv.Quote(qid) + " of thread " + strconv.Quote(threadID) + " does not exist"
		case codeDigestRequired:
			e.message = "the answer carries no digest: send the digest of the call the reviewer saw — GET /v1/questions/" +
				url.PathEscape(threadID) + "/" + url.PathEscape(qid) + " first and put its \"digest\" in the answer"
			if cur, gerr := s.store.GetQuestion(r.Context(), threadID, qid); gerr == nil && cur.Kind == interrupt.KindToolInterrupt {
				e.message += " (a tool_interrupt answer as an object: {\"action\": \"approve\", \"digest\": \"sha256:…\"})"
			}
		case codeAlreadyAnswered, codeExpired, codeAborted, codeDigestMismatch:
			// Who won, or what the question is now.
			if cur, gerr := s.store.GetQuestion(r.Context(), threadID, qid); gerr == nil {
				v := apiclient.QuestionOf(cur)
				e.question = &v
			}
		}
		return e
	}
	writeJSON(w, http.StatusOK, apiclient.QuestionOf(q))
	return nil
}

// countCache keeps the totals of question lists for a moment: a count
// reads every matching index entry (7 ms for 100,000 pending questions in
// SQLite, 28 ms in PostgreSQL), and every page open on the queue re-reads
// its first page on each event. A total may be up to countTTL old; the
// questions themselves never are.
type countCache struct {
	mu      sync.Mutex
	entries map[checkpoint.QuestionFilter]countEntry
}

type countEntry struct {
	n  int64
	at time.Time
}

const countTTL = time.Second

func (c *countCache) count(ctx context.Context, store checkpoint.Store, f checkpoint.QuestionFilter) (int64, error) {
	key := checkpoint.QuestionFilter{ThreadID: f.ThreadID, Status: f.Status, Tool: f.Tool, Kind: f.Kind}
	c.mu.Lock()
	if e, ok := c.entries[key]; ok && time.Since(e.at) < countTTL {
		c.mu.Unlock()
		return e.n, nil
	}
	c.mu.Unlock()
	n, err := store.CountQuestions(ctx, key)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) > 1000 {
		c.entries = map[checkpoint.QuestionFilter]countEntry{}
	}
	c.entries[key] = countEntry{n: n, at: time.Now()}
	return n, nil
}
