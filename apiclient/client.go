package apiclient

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/display"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// Client is a client of a tollgate server's HTTP API. Its methods return
// the records of package checkpoint, the same a store gives, so that a
// program reads a server and a store alike.
type Client struct {
	base string // scheme://host[:port][/prefix], no trailing slash
	// shown is base fit for a message: without a password.
	shown string
	token string
	http  *http.Client
}

// Options are a client's options; nil is all defaults.
type Options struct {
	// HTTP sends the requests; nil: a client with a one-minute timeout
	// (an abort may take the server up to 30 s).
	HTTP *http.Client
	// Shown names the server in messages; "": the URL without its
	// password. It is shown as it is: the caller makes it safe.
	Shown string
}

// New returns a client of the server at base (http://HOST:PORT, or
// HOST:PORT) that sends token ("": none, for a server in dev mode).
func New(base, token string, opts *Options) (*Client, error) {
	if opts == nil {
		opts = &Options{}
	}
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	shown := opts.Shown
	u, err := url.Parse(base)
	if shown == "" {
		shown = "(a URL that is not valid)"
		if err == nil {
			shown = display.Line(u.Redacted())
		}
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: want the address of a tollgate serve, such as http://127.0.0.1:8080", shown)
	}
	hc := opts.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: time.Minute}
	}
	return &Client{base: strings.TrimSuffix(base, "/"), shown: shown, token: token, http: hc}, nil
}

// Shown is the server's URL as messages name it, without its password.
func (c *Client) Shown() string { return c.shown }

// HasToken reports whether the client sends a token.
func (c *Client) HasToken() bool { return c.token != "" }

// Error is an error response of the API.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is the API's code (not_found, already_answered, ...), or
	// http_STATUS for a response that is not the API's (a proxy, another
	// program on the port).
	Code string
	// Message says what the server refused, in words, fit to show: the
	// server's words never come out as escape sequences.
	Message string
	// Problems lists what is wrong with an invalid answer.
	Problems []agent.Problem
	// Question is the question as it is now, for a refused answer.
	Question *checkpoint.Question
}

func (e *Error) Error() string { return e.Message }

// Do sends a request to path (/v1/...) with the query and body (JSON;
// nil: none) and decodes a 2xx response's body into out: a pointer to a
// value JSON decodes into, a *[]byte for the body as it is, or nil.
// Other responses are an *[Error]; a server that cannot be reached is an
// error that says so.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body []byte, out any) error {
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

// errorOf turns an error response into an *Error whose message says what
// the server refused, in words.
func (c *Client) errorOf(res *http.Response, raw []byte) error {
	var body ErrorBody
	e := &Error{Status: res.StatusCode}
	if json.Unmarshal(raw, &body) != nil || body.Error.Code == "" {
		// Not the API's error: a proxy, another program on the port.
		e.Code = "http_" + strconv.Itoa(res.StatusCode)
		e.Message = fmt.Sprintf("the server at %s answered %s", c.shown, display.Line(Clip(res.Status, 100)))
		if text := serverText(raw, res.Header.Get("Content-Type")); text != "" {
			e.Message += ": " + text
		}
		e.Message += " (is it a tollgate serve?)"
		return e
	}
	// The server's words, shown as they are, never as escape sequences.
	e.Code, e.Message, e.Problems = body.Error.Code, display.Line(Clip(body.Error.Message, 2000)), body.Error.Problems
	if body.Question != nil {
		e.Question = body.Question.Record()
	}
	switch e.Code {
	case "unauthenticated":
		if c.token == "" {
			e.Message = fmt.Sprintf("the server at %s needs a token", c.shown)
		} else {
			e.Message = fmt.Sprintf("the server at %s does not know this token", c.shown)
		}
	case "forbidden":
		e.Message = fmt.Sprintf("the server at %s refused: %s", c.shown, e.Message)
	case "unavailable", "internal":
		e.Message = fmt.Sprintf("the server at %s failed: %s", c.shown, e.Message)
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
			return display.Line(Clip(line, 200))
		}
	}
	return ""
}

var (
	htmlTitle  = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)
	htmlHidden = regexp.MustCompile(`(?is)<(script|style|head)\b.*?</(script|style|head)\s*>|<!--.*?-->`)
	htmlTag    = regexp.MustCompile(`(?s)<[^>]*>`)
)

// Clip cuts s to at most n characters, marking the cut with "…". A string
// that is not UTF-8 is cut between bytes.
func Clip(s string, n int) string {
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

// NotFound turns a not_found error into one that wraps
// checkpoint.ErrNotFound and names what, as a store's does.
func NotFound(err error, what string) error {
	var ae *Error
	if errors.As(err, &ae) && ae.Code == "not_found" {
		return fmt.Errorf("%s: %w", what, checkpoint.ErrNotFound)
	}
	return err
}

// QuestionQuery selects questions: a thread's ("": every thread's), with
// a status ("": any).
type QuestionQuery struct {
	Thread string
	Status checkpoint.QuestionStatus
}

// Questions returns every question the query selects, in the order they
// were asked, reading every page.
func (c *Client) Questions(ctx context.Context, qq QuestionQuery) ([]*checkpoint.Question, error) {
	q := url.Values{"order": {"oldest"}, "limit": {"200"}, "status": {"all"}}
	if qq.Status != "" {
		q.Set("status", string(qq.Status))
	}
	if qq.Thread != "" {
		q.Set("thread", qq.Thread)
	}
	ws, err := listAll[Question](ctx, c, "/v1/questions", "questions", q)
	out := make([]*checkpoint.Question, len(ws))
	for i := range ws {
		out[i] = ws[i].Record()
	}
	return out, err
}

// listAll reads every page of a list route: the items under key, and
// next_cursor until it is "".
func listAll[T any](ctx context.Context, c *Client, path, key string, q url.Values) ([]T, error) {
	var out []T
	for {
		var page map[string]json.RawMessage
		if err := c.Do(ctx, "GET", path, q, nil, &page); err != nil {
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

// Question returns one question; an error wrapping checkpoint.ErrNotFound
// when there is none.
func (c *Client) Question(ctx context.Context, thread, id string) (*checkpoint.Question, error) {
	var w Question
	err := c.Do(ctx, "GET", questionPath(thread, id), nil, nil, &w)
	if err != nil {
		return nil, NotFound(err, fmt.Sprintf("question %q of thread %q", id, thread))
	}
	return w.Record(), nil
}

func questionPath(thread, id string) string {
	return "/v1/questions/" + url.PathEscape(thread) + "/" + url.PathEscape(id)
}

// Answer posts an answer (its shape depends on the question's kind: see
// package hitl and API.md) and returns the question answered. The server
// records the token's name as who answered. A refused answer is an
// *[Error] with the question as it is now.
func (c *Client) Answer(ctx context.Context, thread, id string, answer json.RawMessage) (*checkpoint.Question, error) {
	var w Question
	if err := c.Do(ctx, "POST", questionPath(thread, id)+"/answer", nil, answer, &w); err != nil {
		return nil, err
	}
	return w.Record(), nil
}

// ThreadQuery selects threads as GET /v1/threads does: status, state
// (waiting, running, failed, finished, timed_out) and a text searched
// for; "" selects all.
type ThreadQuery struct {
	Status checkpoint.ThreadStatus
	State  string
	Search string
}

// Threads returns every thread the query selects, newest first, without
// their messages, reading every page.
func (c *Client) Threads(ctx context.Context, tq ThreadQuery) ([]Thread, error) {
	q := url.Values{"limit": {"200"}}
	if tq.Status != "" {
		q.Set("status", string(tq.Status))
	}
	if tq.State != "" {
		q.Set("state", tq.State)
	}
	if tq.Search != "" {
		q.Set("q", tq.Search)
	}
	return listAll[Thread](ctx, c, "/v1/threads", "threads", q)
}

// Thread returns one thread with its messages, pending questions and open
// calls; an error wrapping checkpoint.ErrNotFound when there is none.
func (c *Client) Thread(ctx context.Context, id string) (*Thread, error) {
	var w Thread
	if err := c.Do(ctx, "GET", "/v1/threads/"+url.PathEscape(id), nil, nil, &w); err != nil {
		return nil, NotFound(err, fmt.Sprintf("thread %q", id))
	}
	return &w, nil
}

// Abort closes the thread's unfinished run (SPEC "Abort"): its pending
// questions are aborted and its calls left denied. reason "" lets the
// server name who aborted.
func (c *Client) Abort(ctx context.Context, id, reason string) error {
	var body []byte
	if reason != "" {
		body, _ = jsontext.Marshal(map[string]string{"reason": reason})
	}
	err := c.Do(ctx, "POST", "/v1/threads/"+url.PathEscape(id)+"/abort", nil, body, nil)
	return NotFound(err, fmt.Sprintf("thread %q", id))
}

// Events returns up to limit events (0: all) of the thread's audit log
// ("": every thread's) after seq, in order. The API has no route for the
// whole log: every thread's is read and merged.
func (c *Client) Events(ctx context.Context, thread string, after int64, limit int) ([]*checkpoint.Event, error) {
	if thread != "" {
		return c.threadEvents(ctx, thread, after, limit)
	}
	ths, err := c.Threads(ctx, ThreadQuery{})
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
	slices.SortFunc(all, func(a, b *checkpoint.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

func (c *Client) threadEvents(ctx context.Context, thread string, after int64, limit int) ([]*checkpoint.Event, error) {
	var out []*checkpoint.Event
	for limit <= 0 || len(out) < limit {
		n := 1000
		if limit > 0 {
			n = min(n, limit-len(out))
		}
		var page EventList
		q := url.Values{"after": {strconv.FormatInt(after, 10)}, "limit": {strconv.Itoa(n)}}
		if err := c.Do(ctx, "GET", "/v1/threads/"+url.PathEscape(thread)+"/events", q, nil, &page); err != nil {
			return nil, NotFound(err, fmt.Sprintf("thread %q", thread))
		}
		for i := range page.Events {
			out = append(out, page.Events[i].Record())
		}
		if len(page.Events) < n {
			break
		}
		after = page.NextAfter
	}
	return out, nil
}

// Deliveries returns up to limit deliveries of notifications in the state
// ("": any), as GET /v1/notify/deliveries lists them.
func (c *Client) Deliveries(ctx context.Context, state checkpoint.DeliveryState, limit int) ([]*checkpoint.Delivery, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}, "state": {cmp.Or(string(state), "all")}}
	var out struct {
		Deliveries []Delivery `json:"deliveries"`
	}
	if err := c.Do(ctx, http.MethodGet, "/v1/notify/deliveries", q, nil, &out); err != nil {
		return nil, err
	}
	ds := make([]*checkpoint.Delivery, 0, len(out.Deliveries))
	for i := range out.Deliveries {
		ds = append(ds, out.Deliveries[i].Record())
	}
	return ds, nil
}
