package notify_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/host"
)

// ask writes a pending approval of `cmd` as the agent does: the question
// and its question_asked event in one commit.
func ask(t *testing.T, store checkpoint.Store, thread, id, cmd string, created time.Time, timeout time.Duration, details map[string]any) *checkpoint.Question {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{"kind": "approve", "tool_name": "bash", "args": map[string]any{"cmd": cmd}, "details": details})
	q := &checkpoint.Question{ThreadID: thread, ID: id, RunID: "run1", CallID: "call_" + id, Tool: "bash", Kind: "approve",
		Payload: payload, Digest: "v2:sha256:" + id + "-" + cmd, CreatedAt: created, Deadline: created.Add(timeout)}
	ev, _ := json.Marshal(map[string]any{"question_id": id, "kind": "approve", "call_id": q.CallID, "digest": q.Digest})
	c, err := store.Commit(context.Background(), &checkpoint.Batch{Question: q,
		Events: []*checkpoint.Event{{ThreadID: thread, RunID: "run1", Type: "question_asked", Data: ev, At: created}}})
	if err != nil {
		t.Fatal(err)
	}
	return c.Question
}

// resolve answers q in the store as an answer from anywhere does.
func resolve(t *testing.T, store checkpoint.Store, q *checkpoint.Question, decision, by string, at time.Time) {
	t.Helper()
	ans, _ := json.Marshal(map[string]any{"decision": decision, "digest": q.Digest})
	if _, err := store.Commit(context.Background(), checkpoint.ResolveBatch(q, checkpoint.Resolution{
		Status: checkpoint.QuestionAnswered, Answer: ans, By: by, At: at})); err != nil {
		t.Fatal(err)
	}
}

// answerer takes answers as the host does, for what these tests need:
// the digest must match, the question be pending (the compare-and-set).
type answerer struct {
	store checkpoint.Store
	now   func() time.Time
}

func (a *answerer) AnswerWith(ctx context.Context, threadID, id string, answer json.RawMessage, o host.AnswerOptions) (*checkpoint.Question, error) {
	q, err := a.store.GetQuestion(ctx, threadID, id)
	if err != nil {
		return nil, err
	}
	var d struct {
		Digest string `json:"digest"`
	}
	if json.Unmarshal(answer, &d) != nil || d.Digest != q.Digest {
		return nil, errors.New("digest mismatch")
	}
	c, err := a.store.Commit(ctx, checkpoint.ResolveBatch(q, checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: answer, By: o.By, At: a.now()}))
	if err != nil {
		return nil, err
	}
	return c.Resolved, nil
}

// receiver is a webhook endpoint: it records each request, and fails
// the first `fail` ones with 500.
type receiver struct {
	mu   sync.Mutex
	fail int
	got  []received
	srv  *httptest.Server
	seen chan struct{}
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, fail int) *receiver {
	r := &receiver{fail: fail, seen: make(chan struct{}, 100)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{req.Header.Clone(), body})
		failing := r.fail > 0
		r.fail--
		r.mu.Unlock()
		r.seen <- struct{}{}
		if failing {
			http.Error(w, "down", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func (r *receiver) wait(t *testing.T, n int) []received {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for len(r.all()) < n {
		select {
		case <-r.seen:
		case <-deadline:
			t.Fatalf("the receiver got %d requests, want %d", len(r.all()), n)
		}
	}
	return r.all()
}

// fakeSlack is Slack's Web API as these tests need it: chat.postMessage,
// chat.update, and the response_url of presses.
type fakeSlack struct {
	mu       sync.Mutex
	posts    []url.Values
	updates  []url.Values
	replies  []string
	srv      *httptest.Server
	changed  chan struct{}
	tsCount  int
	failPost int
}

func newFakeSlack(t *testing.T) *fakeSlack {
	f := &fakeSlack{changed: make(chan struct{}, 100)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSlack) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	vals := url.Values{}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "application/json" {
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		for k, v := range m {
			if s, ok := v.(string); ok {
				vals.Set(k, s)
			} else {
				b, _ := json.Marshal(v)
				vals.Set(k, string(b))
			}
		}
	} else {
		vals, _ = url.ParseQuery(string(body))
	}
	f.mu.Lock()
	defer func() { f.mu.Unlock(); f.changed <- struct{}{} }()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/api/chat.postMessage":
		if f.failPost > 0 {
			f.failPost--
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		f.tsCount++
		ts := "1700000000.00010" + string(rune('0'+f.tsCount))
		vals.Set("ts", ts)
		f.posts = append(f.posts, vals)
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": vals.Get("channel"), "ts": ts})
	case "/api/chat.update":
		f.updates = append(f.updates, vals)
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": vals.Get("channel"), "ts": vals.Get("ts")})
	case "/hooks/response":
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		s, _ := m["text"].(string)
		f.replies = append(f.replies, s)
	default:
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "unknown_method"})
	}
}

func (f *fakeSlack) snapshot() (posts, updates []url.Values, replies []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]url.Values(nil), f.posts...), append([]url.Values(nil), f.updates...), append([]string(nil), f.replies...)
}

func waitFor(t *testing.T, what string, ch <-chan struct{}, cond func() bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for !cond() {
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// smtpServer is a mail server in the process: it takes every message
// (no TLS, no auth, on a loopback address) and keeps it.
type smtpServer struct {
	mu   sync.Mutex
	msgs []string
	rcpt [][]string
	ln   net.Listener
	got  chan struct{}
}

func newSMTP(t *testing.T) *smtpServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpServer{ln: ln, got: make(chan struct{}, 100)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.session(c)
		}
	}()
	return s
}

func (s *smtpServer) session(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	say := func(line string) { _, _ = io.WriteString(c, line+"\r\n") }
	say("220 localhost ESMTP test")
	var rcpts []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmd := strings.ToUpper(strings.TrimSpace(line))
		switch {
		case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
			say("250-localhost")
			say("250 8BITMIME")
		case strings.HasPrefix(cmd, "MAIL FROM"), strings.HasPrefix(cmd, "RSET"), strings.HasPrefix(cmd, "NOOP"):
			say("250 ok")
		case strings.HasPrefix(cmd, "RCPT TO"):
			rcpts = append(rcpts, strings.TrimSpace(line[len("RCPT TO:"):]))
			say("250 ok")
		case cmd == "DATA":
			say("354 go on")
			var b strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				b.WriteString(strings.TrimPrefix(l, "."))
			}
			s.mu.Lock()
			s.msgs = append(s.msgs, b.String())
			s.rcpt = append(s.rcpt, rcpts)
			s.mu.Unlock()
			rcpts = nil
			say("250 queued")
			s.got <- struct{}{}
		case cmd == "QUIT":
			say("221 bye")
			return
		default:
			say("502 not implemented")
		}
	}
}

func (s *smtpServer) messages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.msgs...)
}
