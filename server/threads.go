package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/apiclient"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hooks"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/display"
)

// threadDetail is one thread with its conversation and open questions.
type threadDetail struct {
	apiclient.Thread
	// Outcomes says what happened to each call that has a result, by call
	// id, in the words of the command line (display.Outcome): the page
	// shows them as they are, so both always say the same.
	Outcomes map[string]string `json:"outcomes"`
}

func threadView(th *checkpoint.Thread, st host.RunStatus) apiclient.Thread {
	v := apiclient.Thread{ID: th.ID, Status: string(th.Status), RunID: th.RunID, RunState: string(st.State),
		RunAttempts: st.Attempts, CreatedAt: apiclient.Time(th.CreatedAt), UpdatedAt: apiclient.Time(th.UpdatedAt)}
	if st.Err != nil {
		v.RunError = st.Err.Error()
	}
	if !st.RetryAt.IsZero() {
		at := apiclient.Time(st.RetryAt)
		v.RunRetryAt = &at
	}
	return v
}

// maxPending bounds the pending questions shown with a thread.
const maxPending = 1000

func (s *Server) threadDetail(ctx context.Context, th *checkpoint.Thread) (*threadDetail, error) {
	d := &threadDetail{Thread: threadView(th, s.host.States(ctx, []*checkpoint.Thread{th})[0])}
	// The thread alone always has these three, empty or not.
	d.Messages, d.PendingQuestions, d.OpenCalls = apiclient.RawJSON(th.Messages), []apiclient.Question{}, []apiclient.OpenCall{}
	if len(d.Messages) == 0 {
		d.Messages = apiclient.RawJSON("[]")
	}
	progress, err := agent.TurnProgress(ctx, s.store, th)
	if err != nil {
		return nil, err
	}
	var results []agent.ToolResult
	for _, p := range progress {
		if p.Result != nil {
			results = append(results, *p.Result)
		}
		d.OpenCalls = append(d.OpenCalls, apiclient.OpenCallOf(p))
	}
	if d.Outcomes, err = s.outcomes(ctx, th, results); err != nil {
		return nil, err
	}
	for q, err := range checkpoint.Questions(ctx, s.store, checkpoint.QuestionFilter{ThreadID: th.ID,
		Status: checkpoint.QuestionPending, Limit: 200}) {
		if err != nil {
			return nil, err
		}
		d.PendingQuestions = append(d.PendingQuestions, apiclient.QuestionOf(q))
		if len(d.PendingQuestions) >= maxPending {
			break
		}
	}
	if d.RunState == string(host.RunParked) && len(d.PendingQuestions) == 0 {
		// Not waiting for anyone: about to resume, or driven by another
		// replica.
		d.RunState = string(host.RunActive)
	}
	return d, nil
}

// outcomes says what happened to each call of the thread that has a
// result (those of its messages, and more), by call id.
func (s *Server) outcomes(ctx context.Context, th *checkpoint.Thread, more []agent.ToolResult) (map[string]string, error) {
	var msgs []struct {
		Result *agent.ToolResult `json:"result"`
	}
	if len(th.Messages) > 0 {
		// Unreadable messages are shown as they are, without outcomes.
		_ = json.Unmarshal(th.Messages, &msgs)
	}
	for _, m := range msgs {
		if m.Result != nil {
			more = append(more, *m.Result)
		}
	}
	out := map[string]string{}
	if len(more) == 0 {
		return out, nil
	}
	byCall := map[string]*checkpoint.Question{}
	for q, err := range checkpoint.Questions(ctx, s.store, checkpoint.QuestionFilter{ThreadID: th.ID, Limit: 500}) {
		if err != nil {
			return nil, err
		}
		if q.CallID != "" {
			byCall[q.CallID] = q
		}
	}
	for _, r := range more {
		o := display.Outcome(r, byCall[r.CallID])
		if o == "" && byCall[r.CallID] == nil && !r.IsError {
			// No trace and no question: the policy let it run.
			o = display.AllowedByPolicy
		}
		if o != "" {
			out[r.CallID] = o
		}
	}
	return out, nil
}

// checkThreadID refuses ids the API cannot carry in a path, or that a
// person could misread.
func checkThreadID(id string) error {
	switch {
	case id == "":
		return badRequest("the thread id is empty")
	case len(id) > 200:
		return badRequest("the thread id is longer than 200 bytes")
	case !utf8.ValidString(id):
		return badRequest("the thread id is not valid UTF-8")
	case id == "." || id == "..":
		// A path segment a URL resolves away: the thread could not be
		// addressed.
		return badRequest("the thread id %q is a path step, not a name", id)
	case strings.ContainsFunc(id, func(r rune) bool {
		return r > unicode.MaxASCII || r == '/' || r == '%' || unicode.IsSpace(r) || !unicode.IsPrint(r)
	}):
		// ASCII only: a lookalike letter from another script (a
		// fullwidth 'ａ') would make two threads a person reads as one.
		return badRequest("the thread id %q may hold visible ASCII characters only: no space, '/', '%%' or letters of other scripts", id)
	}
	return nil
}

// loadThread returns a thread the caller may see.
func (s *Server) loadThread(ctx context.Context, id *identity, threadID string) (*checkpoint.Thread, error) {
	if !id.sees(threadID) {
		return nil, forbidden("token %q may not see thread %q", id.name, threadID)
	}
	th, err := s.store.LoadThread(ctx, threadID)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return nil, notFound("thread %q does not exist", threadID)
	}
	return th, err
}

// POST /v1/threads
func (s *Server) createThread(w http.ResponseWriter, r *http.Request, _ *identity) error {
	var req struct {
		ID string `json:"id"`
	}
	if err := s.decode(w, r, &req, true); err != nil {
		return err
	}
	if req.ID == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		req.ID = "t_" + hex.EncodeToString(b[:])
	}
	if err := checkThreadID(req.ID); err != nil {
		return err
	}
	th := &checkpoint.Thread{ID: req.ID, Status: checkpoint.ThreadIdle, Messages: []byte("[]")}
	if err := s.store.CreateThread(r.Context(), th); err != nil {
		if errors.Is(err, checkpoint.ErrConflict) {
			return newError(http.StatusConflict, codeConflict, "thread %q exists", req.ID)
		}
		return err
	}
	d, err := s.threadDetail(r.Context(), th)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/threads/"+url.PathEscape(th.ID))
	writeJSON(w, http.StatusCreated, d)
	return nil
}

// checkParams refuses query parameters a route does not take, so that a
// misspelt filter is an error rather than silently ignored.
func checkParams(q url.Values, allowed ...string) error {
	for k := range q {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return badRequest("unknown query parameter %q (this route takes %s)", k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// intParam reads an integer parameter in [min, max], def when absent.
func intParam(q url.Values, name string, def, min, max int64) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case (err != nil || n < min) && max == math.MaxInt64:
		return 0, badRequest("%s must be a whole number, %d or more, not %q", name, min, v)
	case err != nil || n < min || n > max:
		return 0, badRequest("%s must be a whole number from %d to %d, not %q", name, min, max, v)
	}
	return n, nil
}

// maxScan bounds the store pages one list request reads when it filters
// them for a reviewer limited to some threads; the page then holds fewer
// than limit, and next_cursor goes on.
const maxScan = 20

// scan reads store pages from after until limit items pass keep, the list
// ends, or maxScan pages were read. Each store page is asked for no more
// than the items still wanted and is taken whole, so the cursor it
// returns is exactly where the next request goes on.
func scan[T any](limit int, after string, page func(limit int, after string) ([]T, string, error), keep func(T) bool) ([]T, string, error) {
	var out []T
	for range maxScan {
		items, next, err := page(limit-len(out), after)
		if err != nil {
			return nil, "", err
		}
		for _, it := range items {
			if keep(it) {
				out = append(out, it)
			}
		}
		if after = next; next == "" || len(out) >= limit {
			break
		}
	}
	return out, after, nil
}

type threadList struct {
	Threads    []apiclient.Thread `json:"threads"`
	NextCursor string             `json:"next_cursor"`
}

// threadStates are the states GET /v1/threads?state= selects, as a store
// filter and what the host knows of each listed thread's run.
var threadStates = map[string]struct {
	f    checkpoint.ThreadFilter
	keep func(s *Server, ctx context.Context, th *checkpoint.Thread) (bool, error)
}{
	"waiting":   {f: checkpoint.ThreadFilter{Status: checkpoint.ThreadRunning, Questions: checkpoint.QuestionPending}},
	"finished":  {f: checkpoint.ThreadFilter{Status: checkpoint.ThreadIdle}},
	"timed_out": {f: checkpoint.ThreadFilter{Questions: checkpoint.QuestionTimedOut}},
	"failed": {f: checkpoint.ThreadFilter{Status: checkpoint.ThreadRunning}, keep: func(s *Server, _ context.Context, th *checkpoint.Thread) (bool, error) {
		st, _ := s.host.State(th)
		return st == host.RunFailed, nil
	}},
	// Running: driven now, or about to be; not waiting for anyone.
	"running": {f: checkpoint.ThreadFilter{Status: checkpoint.ThreadRunning}, keep: func(s *Server, ctx context.Context, th *checkpoint.Thread) (bool, error) {
		if st, _ := s.host.State(th); st == host.RunFailed {
			return false, nil
		}
		n, err := s.store.CountQuestions(ctx, checkpoint.QuestionFilter{ThreadID: th.ID, Status: checkpoint.QuestionPending})
		return n == 0, err
	}},
}

// ThreadState is the store filter of a state of GET /v1/threads?state=
// (waiting, running, failed, finished, timed_out), and whether it is one:
// what a command line reading the store selects by. Running and failed
// need what the driving host knows besides (failed: its run's error;
// running: no question waiting).
func ThreadState(state string) (checkpoint.ThreadFilter, bool) {
	st, ok := threadStates[state]
	return st.f, ok
}

// GET /v1/threads
func (s *Server) listThreads(w http.ResponseWriter, r *http.Request, id *identity) error {
	q := r.URL.Query()
	if err := checkParams(q, "status", "state", "q", "cursor", "limit"); err != nil {
		return err
	}
	f := checkpoint.ThreadFilter{After: q.Get("cursor")}
	var keep func(*Server, context.Context, *checkpoint.Thread) (bool, error)
	if st := q.Get("state"); st != "" {
		state, ok := threadStates[st]
		if !ok {
			return badRequest("state must be waiting, running, failed, finished or timed_out, not %q", st)
		}
		f.Status, f.Questions, keep = state.f.Status, state.f.Questions, state.keep
	}
	switch st := q.Get("status"); st {
	case "":
	case string(checkpoint.ThreadRunning), string(checkpoint.ThreadIdle):
		if f.Status != "" && f.Status != checkpoint.ThreadStatus(st) {
			return badRequest("status %s and state %s select nothing together", st, q.Get("state"))
		}
		f.Status = checkpoint.ThreadStatus(st)
	default:
		return badRequest("status must be running or idle, not %q", st)
	}
	if f.Search = strings.TrimSpace(q.Get("q")); len(f.Search) > 200 {
		return badRequest("q, the text to search for, is longer than 200 bytes")
	}
	if f.Search != "" && id.role == RoleClient {
		// A search reads every thread's messages until its page is full:
		// some 4 s for 200 MB of threads, and a few at once held a
		// reviewer's question list for 15 s. A client token is what a
		// gated agent holds (a coding agent's hook); the history is the
		// reviewers'.
		return forbidden("token %q is a client's: searching the threads' messages (q; threads list --search) is for reviewers and admins", id.name)
	}
	limit, err := intParam(q, "limit", 50, 1, 200)
	if err != nil {
		return err
	}
	var keepErr error
	ths, next, err := scan(int(limit), f.After, func(limit int, after string) ([]*checkpoint.Thread, string, error) {
		f.Limit, f.After = limit, after
		return s.store.ListThreads(r.Context(), f)
	}, func(th *checkpoint.Thread) bool {
		if !id.sees(th.ID) || keepErr != nil {
			return false
		}
		if keep == nil {
			return true
		}
		ok, err := keep(s, r.Context(), th)
		keepErr = err
		return ok
	})
	if err == nil {
		err = keepErr
	}
	if err != nil {
		return err
	}
	out := threadList{Threads: make([]apiclient.Thread, 0, len(ths)), NextCursor: next}
	states := s.host.States(r.Context(), ths)
	for i, th := range ths {
		out.Threads = append(out.Threads, threadView(th, states[i]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// GET /v1/threads/{id}
func (s *Server) getThread(w http.ResponseWriter, r *http.Request, id *identity) error {
	th, err := s.loadThread(r.Context(), id, r.PathValue("id"))
	if err != nil {
		return err
	}
	d, err := s.threadDetail(r.Context(), th)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

type runRef struct {
	ThreadID string `json:"thread_id"`
	RunID    string `json:"run_id"`
}

// POST /v1/threads/{id}/messages
func (s *Server) postMessage(w http.ResponseWriter, r *http.Request, id *identity) error {
	threadID := r.PathValue("id")
	if err := checkThreadID(threadID); err != nil {
		return err
	}
	if !id.sees(threadID) {
		return forbidden("token %q may not use thread %q", id.name, threadID)
	}
	if hooks.IsThread(threadID) {
		// Its runs relay a coding agent's calls, which only the agent's
		// hooks make.
		return newError(http.StatusConflict, codeConflict, "thread %q is a coding agent's session: it takes calls from the agent's hooks, not messages", threadID)
	}
	var req struct {
		Text string `json:"text"`
	}
	if err := s.decode(w, r, &req, false); err != nil {
		return err
	}
	if strings.TrimSpace(req.Text) == "" {
		return badRequest("text is missing")
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > 200 {
		return badRequest("the Idempotency-Key is longer than 200 bytes")
	}
	runID, existing, err := s.host.Prompt(r.Context(), threadID, req.Text, &host.PromptOptions{IdempotencyKey: key})
	if err != nil {
		return err
	}
	status := http.StatusAccepted
	if existing {
		status = http.StatusOK
	}
	writeJSON(w, status, runRef{ThreadID: threadID, RunID: runID})
	return nil
}

// abortTimeout bounds an abort once begun; it goes on if the caller
// hangs up, so that it is not left half done.
const abortTimeout = 30 * time.Second

// POST /v1/threads/{id}/abort
func (s *Server) abortThread(w http.ResponseWriter, r *http.Request, id *identity) error {
	var req struct {
		Reason string `json:"reason"`
	}
	if err := s.decode(w, r, &req, true); err != nil {
		return err
	}
	th, err := s.loadThread(r.Context(), id, r.PathValue("id"))
	if err != nil {
		return err
	}
	if req.Reason == "" {
		req.Reason = "aborted by " + id.name
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), abortTimeout)
	defer cancel()
	if err := s.host.Abort(ctx, th.ID, req.Reason); err != nil {
		return err
	}
	s.log.Info("tollgate: run aborted", "thread", th.ID, "by", id.name)
	if th, err = s.store.LoadThread(ctx, th.ID); err != nil {
		return err
	}
	d, err := s.threadDetail(ctx, th)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// POST /v1/threads/{id}/resume
func (s *Server) resumeThread(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := s.decode(w, r, &struct{}{}, true); err != nil {
		return err
	}
	th, err := s.loadThread(r.Context(), id, r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := s.host.Resume(r.Context(), th.ID); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, runRef{ThreadID: th.ID, RunID: th.RunID})
	return nil
}

// GET /v1/threads/{id}/events
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request, id *identity) error {
	q := r.URL.Query()
	if err := checkParams(q, "after", "limit"); err != nil {
		return err
	}
	after, err := intParam(q, "after", 0, 0, math.MaxInt64)
	if err != nil {
		return err
	}
	limit, err := intParam(q, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	th, err := s.loadThread(r.Context(), id, r.PathValue("id"))
	if err != nil {
		return err
	}
	evs, err := s.store.ListEvents(r.Context(), th.ID, after, int(limit))
	if err != nil {
		return err
	}
	out := apiclient.EventList{Events: make([]apiclient.Event, 0, len(evs)), NextAfter: after}
	for _, e := range evs {
		out.Events = append(out.Events, apiclient.EventOf(e))
		out.NextAfter = e.Seq
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
