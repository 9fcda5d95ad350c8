package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/cluster"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/display"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
	"github.com/tollgate-ai/tollgate/internal/storeurl"
	"github.com/tollgate-ai/tollgate/provider/scripted"
	"github.com/tollgate-ai/tollgate/server"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

// This file is where the questions, threads and audit commands read and
// write: a store opened here, or a running server through its HTTP API
// (server/API.md). Both give the same records (checkpoint.Question,
// checkpoint.Thread, checkpoint.Event), so that every command prints the
// same thing whichever it is given.

// source is a store or a server, as the commands use it.
type source interface {
	// where names the source in messages: "the store sqlite:t.db", "the
	// server at http://127.0.0.1:8080".
	where() string
	// questions returns every question of the thread ("": all threads)
	// with the status ("": any), in the order they were asked.
	questions(ctx context.Context, thread string, status checkpoint.QuestionStatus) ([]*checkpoint.Question, error)
	// question returns one question; an error wrapping
	// checkpoint.ErrNotFound when there is none.
	question(ctx context.Context, thread, id string) (*checkpoint.Question, error)
	// answer records an answer to a question; a *refusal says why not.
	answer(ctx context.Context, thread, id string, answer json.RawMessage, by string) (*checkpoint.Question, error)
	// threads returns the threads with the status ("": any), newest
	// first, without their messages.
	threads(ctx context.Context, q threadQuery) ([]*threadInfo, error)
	// thread returns one thread with its messages; an error wrapping
	// checkpoint.ErrNotFound when there is none.
	thread(ctx context.Context, id string) (*threadInfo, error)
	// abort closes the thread's unfinished run (SPEC "Abort"); reason ""
	// lets the source name who aborted.
	abort(ctx context.Context, id, reason string) error
	// events returns up to limit events (0: all) of the thread ("": all
	// threads) after seq, in order.
	events(ctx context.Context, thread string, after int64, limit int) ([]*checkpoint.Event, error)
	close()
}

// threadInfo is a thread and what is known of its run.
type threadInfo struct {
	*checkpoint.Thread
	// RunState is host.RunState's: idle, active, parked or failed.
	RunState string
	RunError string
	// Pending are the thread's pending questions (thread only, not
	// threads).
	Pending []*checkpoint.Question
	// Open are the calls of the turn in progress, each with its result
	// once it has one (thread only).
	Open []agent.CallProgress
}

// refusal is why an answer was not recorded, in the terms of the API's
// errors whether a store or a server refused it.
type refusal struct {
	// code is one of the API's codes: not_found, already_answered,
	// expired, aborted, digest_mismatch, invalid_answer, ...
	code    string
	message string
	// problems lists what is wrong with an invalid answer.
	problems []agent.Problem
	// question is the question as it is now, when known.
	question *checkpoint.Question
}

func (r *refusal) Error() string { return r.message }

// sourceFlags choose the source: --store or --server with --token.
type sourceFlags struct {
	store         *string
	server, token string
	// writes is what the command does to the source, "answer" or
	// "abort"; "" for a command that only reads, which opens a store
	// read-only (writing nothing, and needing no write access).
	writes string
}

// sourceFlagsHelp is the examples block of the source flags, for every
// command's help.
const sourceFlagsHelp = `  --store sqlite:/var/lib/tollgate/tollgate.db   read the store (default $TOLLGATE_STORE, else serve's: sqlite:~/.local/state/tollgate/tollgate.db)
  --store postgres://tollgate@db/tollgate
  --server http://127.0.0.1:8080 --token "$SECRET"   ask a running tollgate serve (default $TOLLGATE_SERVER, $TOLLGATE_TOKEN)
`

func (f *sourceFlags) register(fs *flagSet) {
	f.store = storeFlag(fs, defaultStore())
	fs.StringVar(&f.server, "server", os.Getenv("TOLLGATE_SERVER"), "the `URL` of a running tollgate serve to ask instead of a store: http://HOST:PORT [TOLLGATE_SERVER]")
	fs.StringVar(&f.token, "token", os.Getenv("TOLLGATE_TOKEN"), "the API `token` for --server (prefer the variable: a flag shows in ps) [TOLLGATE_TOKEN]")
}

// onServer reports whether the commands go to a server: --server given,
// or TOLLGATE_SERVER set and --store not given.
func (f *sourceFlags) onServer(fs *flagSet) (bool, error) {
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	switch {
	case given["store"] && given["server"]:
		return false, errors.New("give --store or --server, not both")
	case given["store"]:
		return false, nil
	}
	return f.server != "", nil
}

// sourceCommand is the flag set of a command that reads a source, with
// the source flags.
func sourceCommand(name, help string, stderr io.Writer) (*flagSet, *sourceFlags) {
	fs := newFlagSet(name, help, stderr)
	fs.interspersed = true
	sf := &sourceFlags{}
	sf.register(fs)
	return fs, sf
}

// openFor checks that the command was given n arguments (-1: it checks
// them itself; 1 is a THREAD), then opens the source. When src is nil
// the command returns code: the error is on stderr.
func (f *sourceFlags) openFor(ctx context.Context, fs *flagSet, name string, stderr io.Writer, n int) (src source, code int) {
	switch {
	case n == 0 && fs.NArg() > 0:
		return nil, fs.usageError("unexpected argument %q", fs.Arg(0))
	case n == 1 && fs.NArg() != 1:
		return nil, fs.usageError("want one THREAD")
	}
	src, err := f.open(ctx, fs)
	if err != nil {
		return nil, fail(stderr, name, err)
	}
	return src, 0
}

// open opens the source the flags name.
func (f *sourceFlags) open(ctx context.Context, fs *flagSet) (source, error) {
	server, err := f.onServer(fs)
	if err != nil {
		return nil, err
	}
	if server {
		c, err := newAPIClient(f.server, f.token)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	src, err := openStoreSource(ctx, *f.store, f.writes != "")
	if errors.Is(err, storeurl.ErrReadOnly) {
		return nil, fmt.Errorf("cannot %s: %w", f.writes, err)
	}
	return src, err
}

// apiClient is a client of a tollgate server's HTTP API.
type apiClient struct {
	base string // scheme://host[:port][/prefix], no trailing slash
	// shown is base fit for a message: without a password.
	shown string
	token string
	http  *http.Client
}

var _ source = (*apiClient)(nil)

func newAPIClient(base, token string) (*apiClient, error) {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %s: want the address of a tollgate serve, such as http://127.0.0.1:8080", display.Line(storeurl.Redacted(base)))
	}
	base = strings.TrimSuffix(base, "/")
	// An abort may take the server up to 30 s.
	return &apiClient{base: base, shown: display.Line(storeurl.Redacted(base)), token: token, http: &http.Client{Timeout: time.Minute}}, nil
}

func (c *apiClient) where() string { return "the server at " + c.shown }
func (c *apiClient) close()        {}

// apiError is an error response of the API.
type apiError struct {
	status   int
	code     string
	message  string
	problems []agent.Problem
	question *checkpoint.Question
}

func (e *apiError) Error() string { return e.message }

// do sends a request and decodes a 2xx response's body into out (when
// not nil). Other responses are an *apiError, or an error that says the
// server could not be reached.
func (c *apiClient) do(ctx context.Context, method, path string, query url.Values, body []byte, out any) error {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		// Not err: it would show the URL, password and all.
		return fmt.Errorf("cannot ask the server at %s: the request's URL is not valid", c.shown)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("cannot reach the server at %s: %v", c.shown, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading the answer of the server at %s: %v", c.shown, err)
	}
	if res.StatusCode/100 == 2 {
		if out == nil {
			return nil
		}
		if b, ok := out.(*[]byte); ok {
			*b = raw // not JSON: a rules export's YAML
			return nil
		}
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("the server at %s sent what tollgate cannot read (is it a tollgate serve?): %v", c.shown, err)
		}
		return nil
	}
	return c.errorOf(res, raw)
}

// errorOf turns an error response into an *apiError whose message says
// what the server refused, in words.
func (c *apiClient) errorOf(res *http.Response, raw []byte) error {
	var body struct {
		Error struct {
			Code     string          `json:"code"`
			Message  string          `json:"message"`
			Problems []agent.Problem `json:"problems"`
		} `json:"error"`
		Question *wireQuestion `json:"question"`
	}
	e := &apiError{status: res.StatusCode}
	if json.Unmarshal(raw, &body) != nil || body.Error.Code == "" {
		// Not the API's error: a proxy, another program on the port.
		e.code = "http_" + strconv.Itoa(res.StatusCode)
		e.message = fmt.Sprintf("the server at %s answered %s", c.shown, display.Line(clip(res.Status, 100)))
		if text := serverText(raw, res.Header.Get("Content-Type")); text != "" {
			e.message += ": " + text
		}
		e.message += " (is it a tollgate serve?)"
		return e
	}
	// The server's words, shown as they are, never as escape sequences.
	e.code, e.message, e.problems = body.Error.Code, display.Line(clip(body.Error.Message, 2000)), body.Error.Problems
	if body.Question != nil {
		e.question = body.Question.question()
	}
	switch e.code {
	case "unauthenticated":
		if c.token == "" {
			e.message = fmt.Sprintf("the server at %s needs a token: give --token or set TOLLGATE_TOKEN", c.shown)
		} else {
			e.message = fmt.Sprintf("the server at %s does not know this token: check --token or TOLLGATE_TOKEN", c.shown)
		}
	case "forbidden":
		e.message = fmt.Sprintf("the server at %s refused: %s", c.shown, e.message)
	case "unavailable", "internal":
		e.message = fmt.Sprintf("the server at %s failed: %s", c.shown, e.message)
	}
	return e
}

// serverText is the body of a response that is not the API's, fit for one
// line of a message: its first line that is not blank (of an HTML page,
// the title, else the text without the markup), clipped to 200
// characters, with controls and invisible characters shown as
// display.Line shows them (never as escape sequences for the terminal).
func serverText(raw []byte, contentType string) string {
	text := string(raw)
	if strings.Contains(strings.ToLower(contentType), "html") || strings.HasPrefix(strings.TrimSpace(text), "<") {
		if m := htmlTitle.FindStringSubmatch(text); m != nil && strings.TrimSpace(m[1]) != "" {
			text = m[1]
		} else {
			text = htmlTag.ReplaceAllString(htmlHidden.ReplaceAllString(text, " "), " ")
		}
		text = html.UnescapeString(text)
	}
	for line := range strings.Lines(text) {
		if line = strings.Join(strings.Fields(line), " "); line != "" {
			return display.Line(clip(line, 200))
		}
	}
	return ""
}

var (
	htmlTitle  = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)
	htmlHidden = regexp.MustCompile(`(?is)<(script|style|head)\b.*?</(script|style|head)\s*>|<!--.*?-->`)
	htmlTag    = regexp.MustCompile(`(?s)<[^>]*>`)
)

// clip cuts s to at most n characters, marking the cut with "…". A string
// that is not UTF-8 is cut between bytes.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i < len(s) && count < n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		count++
	}
	return s[:i] + "…"
}

// notFound turns a 404 into an error wrapping checkpoint.ErrNotFound.
func notFound(err error, what string) error {
	var ae *apiError
	if errors.As(err, &ae) && ae.code == "not_found" {
		return fmt.Errorf("%s: %w", what, checkpoint.ErrNotFound)
	}
	return err
}

// apiTime is a time as the API writes it: RFC 3339, or null.
type apiTime time.Time

// apiTimeFormat is the API's: UTC with microseconds.
const apiTimeFormat = "2006-01-02T15:04:05.000000Z07:00"

func (t apiTime) MarshalJSON() ([]byte, error) {
	if time.Time(t).IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + time.Time(t).UTC().Format(apiTimeFormat) + `"`), nil
}

func (t *apiTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = apiTime{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	tt, err := time.Parse(time.RFC3339Nano, s)
	*t = apiTime(tt)
	return err
}

// wireJSON is stored JSON (payloads, answers, messages, event data) in
// the API's form: compact, <, > and & as themselves. Its keys come out
// sorted, the same from a store as from a server.
type wireJSON json.RawMessage

func (w wireJSON) MarshalJSON() ([]byte, error) {
	if len(bytes.TrimSpace(w)) == 0 {
		return []byte("null"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(w))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return json.Marshal(string(w))
	}
	return jsontext.Marshal(v)
}

func (w *wireJSON) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*w = nil
		return nil
	}
	*w = append((*w)[:0], b...)
	return nil
}

// printJSONLines prints each item, as conv makes it, as one line of
// JSON, unescaped, and returns the command's exit status.
func printJSONLines[T any](stdout, stderr io.Writer, name string, items []T, conv func(T) any) int {
	for _, it := range items {
		b, err := jsontext.Marshal(conv(it))
		if err == nil {
			_, err = stdout.Write(append(b, '\n'))
		}
		if err != nil {
			return fail(stderr, name, err)
		}
	}
	return 0
}

// wireQuestion is a question as the API shows it (API.md "Question"), and
// as --json prints it.
type wireQuestion struct {
	ThreadID       string   `json:"thread_id"`
	ID             string   `json:"id"`
	RunID          string   `json:"run_id"`
	CallID         string   `json:"call_id"`
	Kind           string   `json:"kind"`
	Tool           string   `json:"tool"`
	Status         string   `json:"status"`
	Payload        wireJSON `json:"payload"`
	Digest         string   `json:"digest"`
	CreatedAt      apiTime  `json:"created_at"`
	Deadline       apiTime  `json:"deadline"`
	TimeoutSeconds int64    `json:"timeout_seconds"`
	Answer         wireJSON `json:"answer"`
	AnsweredBy     string   `json:"answered_by"`
	Reason         string   `json:"reason"`
	ResolvedAt     apiTime  `json:"resolved_at"`
}

func wireOfQuestion(q *checkpoint.Question) wireQuestion {
	return wireQuestion{
		ThreadID: q.ThreadID, ID: q.ID, RunID: q.RunID, CallID: q.CallID, Kind: q.Kind, Tool: q.Tool,
		Status: string(q.Status), Payload: wireJSON(q.Payload), Digest: q.Digest,
		CreatedAt: apiTime(q.CreatedAt), Deadline: apiTime(q.Deadline),
		TimeoutSeconds: int64(q.Timeout().Round(time.Second) / time.Second),
		Answer:         wireJSON(q.Answer), AnsweredBy: q.AnsweredBy, Reason: q.Reason, ResolvedAt: apiTime(q.ResolvedAt),
	}
}

func (w *wireQuestion) question() *checkpoint.Question {
	return &checkpoint.Question{
		ThreadID: w.ThreadID, ID: w.ID, RunID: w.RunID, CallID: w.CallID, Kind: w.Kind, Tool: w.Tool,
		Status: checkpoint.QuestionStatus(w.Status), Payload: json.RawMessage(w.Payload), Digest: w.Digest,
		CreatedAt: time.Time(w.CreatedAt), Deadline: time.Time(w.Deadline),
		Answer: json.RawMessage(w.Answer), AnsweredBy: w.AnsweredBy, Reason: w.Reason, ResolvedAt: time.Time(w.ResolvedAt),
	}
}

// wireThread is a thread as the API shows it (API.md "Thread").
type wireThread struct {
	wireThreadHead
	Messages         wireJSON       `json:"messages,omitempty"`
	PendingQuestions []wireQuestion `json:"pending_questions,omitempty"`
	OpenCalls        []wireOpenCall `json:"open_calls,omitempty"`
}

// wireOpenCall is a call of the turn in progress (API.md "Thread").
type wireOpenCall struct {
	CallID    string            `json:"call_id"`
	Tool      string            `json:"tool"`
	State     string            `json:"state"`
	StartedAt apiTime           `json:"started_at"`
	Result    *agent.ToolResult `json:"result,omitempty"`
}

// wireThreadHead is a thread as the API lists it, without its messages.
type wireThreadHead struct {
	ID        string  `json:"id"`
	Status    string  `json:"status"`
	RunID     string  `json:"run_id"`
	RunState  string  `json:"run_state"`
	RunError  string  `json:"run_error,omitempty"`
	CreatedAt apiTime `json:"created_at"`
	UpdatedAt apiTime `json:"updated_at"`
}

func headOfThread(ti *threadInfo) wireThreadHead {
	return wireThreadHead{ID: ti.ID, Status: string(ti.Status), RunID: ti.RunID, RunState: ti.RunState, RunError: ti.RunError,
		CreatedAt: apiTime(ti.CreatedAt), UpdatedAt: apiTime(ti.UpdatedAt)}
}

func (w *wireThread) info() *threadInfo {
	ti := &threadInfo{Thread: &checkpoint.Thread{ID: w.ID, Status: checkpoint.ThreadStatus(w.Status), RunID: w.RunID,
		Messages: json.RawMessage(w.Messages), CreatedAt: time.Time(w.CreatedAt), UpdatedAt: time.Time(w.UpdatedAt)},
		RunState: w.RunState, RunError: w.RunError}
	for i := range w.PendingQuestions {
		ti.Pending = append(ti.Pending, w.PendingQuestions[i].question())
	}
	for _, c := range w.OpenCalls {
		ti.Open = append(ti.Open, agent.CallProgress{Call: agent.ToolCall{ID: c.CallID, Name: c.Tool}, State: c.State,
			StartedAt: time.Time(c.StartedAt), Result: c.Result})
	}
	return ti
}

func wireOfThread(ti *threadInfo) wireThread {
	w := wireThread{wireThreadHead: headOfThread(ti), Messages: wireJSON(ti.Messages)}
	for _, q := range ti.Pending {
		w.PendingQuestions = append(w.PendingQuestions, wireOfQuestion(q))
	}
	for _, c := range ti.Open {
		w.OpenCalls = append(w.OpenCalls, wireOpenCall{CallID: c.Call.ID, Tool: c.Call.Name, State: c.State, StartedAt: apiTime(c.StartedAt), Result: c.Result})
	}
	return w
}

// wireEvent is an event as the API shows it (API.md "Event").
type wireEvent struct {
	Seq      int64    `json:"seq"`
	ThreadID string   `json:"thread_id"`
	RunID    string   `json:"run_id"`
	Type     string   `json:"type"`
	Data     wireJSON `json:"data"`
	At       apiTime  `json:"at"`
}

func wireOfEvent(e *checkpoint.Event) wireEvent {
	return wireEvent{Seq: e.Seq, ThreadID: e.ThreadID, RunID: e.RunID, Type: e.Type, Data: wireJSON(e.Data), At: apiTime(e.At)}
}

func (c *apiClient) questions(ctx context.Context, thread string, status checkpoint.QuestionStatus) ([]*checkpoint.Question, error) {
	q := url.Values{"order": {"oldest"}, "limit": {"200"}, "status": {"all"}}
	if status != "" {
		q.Set("status", string(status))
	}
	if thread != "" {
		q.Set("thread", thread)
	}
	ws, err := listAll[wireQuestion](ctx, c, "/v1/questions", "questions", q)
	out := make([]*checkpoint.Question, len(ws))
	for i := range ws {
		out[i] = ws[i].question()
	}
	return out, err
}

// listAll reads every page of a list route: the items under key, and
// next_cursor until it is "".
func listAll[T any](ctx context.Context, c *apiClient, path, key string, q url.Values) ([]T, error) {
	var out []T
	for {
		var page map[string]json.RawMessage
		if err := c.do(ctx, "GET", path, q, nil, &page); err != nil {
			return nil, err
		}
		var items []T
		var next string
		if err := json.Unmarshal(page[key], &items); err != nil {
			return nil, fmt.Errorf("the server at %s sent a list tollgate cannot read: %v", c.shown, err)
		}
		_ = json.Unmarshal(page["next_cursor"], &next)
		out = append(out, items...)
		if next == "" {
			return out, nil
		}
		q.Set("cursor", next)
	}
}

func (c *apiClient) question(ctx context.Context, thread, id string) (*checkpoint.Question, error) {
	var w wireQuestion
	err := c.do(ctx, "GET", "/v1/questions/"+url.PathEscape(thread)+"/"+url.PathEscape(id), nil, nil, &w)
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("question %q of thread %q", id, thread))
	}
	return w.question(), nil
}

// answer posts the answer; the server records the token's name as who
// answered (by is not sent: the API takes no other name).
func (c *apiClient) answer(ctx context.Context, thread, id string, answer json.RawMessage, _ string) (*checkpoint.Question, error) {
	var w wireQuestion
	err := c.do(ctx, "POST", "/v1/questions/"+url.PathEscape(thread)+"/"+url.PathEscape(id)+"/answer", nil, answer, &w)
	var ae *apiError
	if errors.As(err, &ae) {
		switch ae.code {
		case "not_found", "already_answered", "expired", "aborted", "digest_mismatch", "digest_required", "invalid_answer":
			return nil, &refusal{code: ae.code, message: ae.message, problems: ae.problems, question: ae.question}
		}
	}
	if err != nil {
		return nil, err
	}
	return w.question(), nil
}

// threadQuery selects threads as GET /v1/threads does: status, state
// (server.ThreadState) and a text searched for.
type threadQuery struct {
	status checkpoint.ThreadStatus
	state  string
	search string
}

func (c *apiClient) threads(ctx context.Context, tq threadQuery) ([]*threadInfo, error) {
	q := url.Values{"limit": {"200"}}
	if tq.status != "" {
		q.Set("status", string(tq.status))
	}
	if tq.state != "" {
		q.Set("state", tq.state)
	}
	if tq.search != "" {
		q.Set("q", tq.search)
	}
	ws, err := listAll[wireThread](ctx, c, "/v1/threads", "threads", q)
	out := make([]*threadInfo, len(ws))
	for i := range ws {
		out[i] = ws[i].info()
	}
	return out, err
}

func (c *apiClient) thread(ctx context.Context, id string) (*threadInfo, error) {
	var w wireThread
	if err := c.do(ctx, "GET", "/v1/threads/"+url.PathEscape(id), nil, nil, &w); err != nil {
		return nil, notFound(err, fmt.Sprintf("thread %q", id))
	}
	return w.info(), nil
}

func (c *apiClient) abort(ctx context.Context, id, reason string) error {
	var body []byte
	if reason != "" {
		body, _ = jsontext.Marshal(map[string]string{"reason": reason})
	}
	err := c.do(ctx, "POST", "/v1/threads/"+url.PathEscape(id)+"/abort", nil, body, nil)
	return notFound(err, fmt.Sprintf("thread %q", id))
}

// events reads one thread's log, or every thread's: the API has no route
// for the whole log, so each thread's is read and merged in order.
func (c *apiClient) events(ctx context.Context, thread string, after int64, limit int) ([]*checkpoint.Event, error) {
	if thread != "" {
		return c.threadEvents(ctx, thread, after, limit)
	}
	ths, err := c.threads(ctx, threadQuery{})
	if err != nil {
		return nil, err
	}
	var all []*checkpoint.Event
	for _, th := range ths {
		evs, err := c.threadEvents(ctx, th.ID, after, limit)
		if err != nil {
			return nil, err
		}
		all = append(all, evs...)
	}
	sortEvents(all)
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

func (c *apiClient) threadEvents(ctx context.Context, thread string, after int64, limit int) ([]*checkpoint.Event, error) {
	var out []*checkpoint.Event
	for limit <= 0 || len(out) < limit {
		n := 1000
		if limit > 0 {
			n = min(n, limit-len(out))
		}
		var page struct {
			Events    []wireEvent `json:"events"`
			NextAfter int64       `json:"next_after"`
		}
		q := url.Values{"after": {strconv.FormatInt(after, 10)}, "limit": {strconv.Itoa(n)}}
		if err := c.do(ctx, "GET", "/v1/threads/"+url.PathEscape(thread)+"/events", q, nil, &page); err != nil {
			return nil, notFound(err, fmt.Sprintf("thread %q", thread))
		}
		for _, w := range page.Events {
			out = append(out, &checkpoint.Event{Seq: w.Seq, ThreadID: w.ThreadID, RunID: w.RunID, Type: w.Type,
				Data: json.RawMessage(w.Data), At: time.Time(w.At)})
		}
		if len(page.Events) < n {
			break
		}
		after = page.NextAfter
	}
	return out, nil
}

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
	if tq.state == "failed" {
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
	f, _ := server.ThreadState(tq.state)
	if tq.status != "" {
		if f.Status != "" && f.Status != tq.status {
			return nil, fmt.Errorf("--status %s and --state %s select nothing together", tq.status, tq.state)
		}
		f.Status = tq.status
	}
	f.Search, f.Limit = tq.search, 500
	var out []*threadInfo
	for {
		ths, next, err := s.store.ListThreads(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, th := range ths {
			if tq.state == "running" && waiting[th.ID] > 0 {
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
