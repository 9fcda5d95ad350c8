package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/apiclient"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/display"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
	"github.com/tollgate-ai/tollgate/internal/storeurl"
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
		return newAPIClient(f.server, f.token)
	}
	src, err := openStoreSource(ctx, *f.store, f.writes != "")
	if errors.Is(err, storeurl.ErrReadOnly) {
		return nil, fmt.Errorf("cannot %s: %w", f.writes, err)
	}
	return src, err
}

// apiClient is a running server as a source: package apiclient, with
// the command line's words for what it needs of the user.
type apiClient struct {
	*apiclient.Client
}

var _ source = (*apiClient)(nil)

func newAPIClient(base, token string) (*apiClient, error) {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	c, err := apiclient.New(base, token, &apiclient.Options{Shown: display.Line(storeurl.Redacted(base))})
	if err != nil {
		return nil, fmt.Errorf("--server %w", err)
	}
	return &apiClient{c}, nil
}

func (c *apiClient) where() string { return "the server at " + c.Shown() }
func (c *apiClient) close()        {}

// do is apiclient.Client.Do, its errors in the command line's words.
func (c *apiClient) do(ctx context.Context, method, path string, query url.Values, body []byte, out any) error {
	return c.words(c.Do(ctx, method, path, query, body, out))
}

// words says where the token comes from when the server did not take it.
func (c *apiClient) words(err error) error {
	var ae *apiclient.Error
	if errors.As(err, &ae) && ae.Code == "unauthenticated" && !strings.Contains(ae.Message, "TOLLGATE_TOKEN") {
		if c.HasToken() {
			ae.Message += ": check --token or TOLLGATE_TOKEN"
		} else {
			ae.Message += ": give --token or set TOLLGATE_TOKEN"
		}
	}
	return err
}

func (c *apiClient) questions(ctx context.Context, thread string, status checkpoint.QuestionStatus) ([]*checkpoint.Question, error) {
	qs, err := c.Questions(ctx, apiclient.QuestionQuery{Thread: thread, Status: status})
	return qs, c.words(err)
}

func (c *apiClient) question(ctx context.Context, thread, id string) (*checkpoint.Question, error) {
	q, err := c.Question(ctx, thread, id)
	return q, c.words(err)
}

// answer posts the answer; the server records the token's name as who
// answered (by is not sent: the API takes no other name).
func (c *apiClient) answer(ctx context.Context, thread, id string, answer json.RawMessage, _ string) (*checkpoint.Question, error) {
	q, err := c.Answer(ctx, thread, id, answer)
	var ae *apiclient.Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case "not_found", "already_answered", "expired", "aborted", "digest_mismatch", "digest_required", "invalid_answer":
			return nil, &refusal{code: ae.Code, message: ae.Message, problems: ae.Problems, question: ae.Question}
		}
	}
	return q, c.words(err)
}

// threadQuery selects threads as GET /v1/threads does: status, state
// (server.ThreadState) and a text searched for.
type threadQuery = apiclient.ThreadQuery

func (c *apiClient) threads(ctx context.Context, tq threadQuery) ([]*threadInfo, error) {
	ws, err := c.Threads(ctx, tq)
	out := make([]*threadInfo, len(ws))
	for i := range ws {
		out[i] = infoOf(&ws[i])
	}
	return out, c.words(err)
}

func (c *apiClient) thread(ctx context.Context, id string) (*threadInfo, error) {
	w, err := c.Thread(ctx, id)
	if err != nil {
		return nil, c.words(err)
	}
	return infoOf(w), nil
}

// infoOf is a thread the API shows, as the commands use it.
func infoOf(w *apiclient.Thread) *threadInfo {
	ti := &threadInfo{Thread: w.Record(), RunState: w.RunState, RunError: w.RunError}
	for i := range w.PendingQuestions {
		ti.Pending = append(ti.Pending, w.PendingQuestions[i].Record())
	}
	for i := range w.OpenCalls {
		ti.Open = append(ti.Open, w.OpenCalls[i].Progress())
	}
	return ti
}

func (c *apiClient) abort(ctx context.Context, id, reason string) error {
	return c.words(c.Abort(ctx, id, reason))
}

func (c *apiClient) events(ctx context.Context, thread string, after int64, limit int) ([]*checkpoint.Event, error) {
	evs, err := c.Events(ctx, thread, after, limit)
	return evs, c.words(err)
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

// sortedJSON is stored JSON as --json prints it: its keys sorted, so that
// it comes out the same from a store as from a server.
func sortedJSON(raw json.RawMessage) apiclient.RawJSON {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return apiclient.RawJSON(raw) // shown as the text it is
	}
	b, err := jsontext.Marshal(v)
	if err != nil {
		return apiclient.RawJSON(raw)
	}
	return b
}

// questionLine is a question as --json prints it: the API's Question.
func questionLine(q *checkpoint.Question) any {
	w := apiclient.QuestionOf(q)
	w.Payload, w.Answer = sortedJSON(q.Payload), sortedJSON(q.Answer)
	return w
}

// eventLine is an event as --json prints it: the API's Event.
func eventLine(e *checkpoint.Event) any {
	w := apiclient.EventOf(e)
	w.Data = sortedJSON(e.Data)
	return w
}

// headOfThread is the API's Thread as lists show it, without messages.
func headOfThread(ti *threadInfo) apiclient.Thread {
	return apiclient.Thread{ID: ti.ID, Status: string(ti.Status), RunID: ti.RunID, RunState: ti.RunState, RunError: ti.RunError,
		CreatedAt: apiclient.Time(ti.CreatedAt), UpdatedAt: apiclient.Time(ti.UpdatedAt)}
}

// threadOut is a thread as threads show --json prints it: the API's
// Thread with its messages.
func threadOut(ti *threadInfo) any {
	w := headOfThread(ti)
	w.Messages = sortedJSON(ti.Messages)
	for _, q := range ti.Pending {
		w.PendingQuestions = append(w.PendingQuestions, questionLine(q).(apiclient.Question))
	}
	for _, c := range ti.Open {
		w.OpenCalls = append(w.OpenCalls, apiclient.OpenCallOf(c))
	}
	return w
}
