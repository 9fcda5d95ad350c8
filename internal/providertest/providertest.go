// Package providertest runs fake model servers for the provider tests.
//
// A [Server] answers each request with the next scripted [Reply] and records
// every request, so a test can replay a wire capture (a JSON body, or a
// server-sent event stream, whole or cut short) and then check exactly what
// the provider sent.
package providertest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
)

// Request is one request the fake server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// JSON decodes the request body, failing the test if it is not a JSON object.
func (r *Request) JSON(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("request body is not a JSON object: %v\n%s", err, r.Body)
	}
	return v
}

// Reply writes one response.
type Reply func(w http.ResponseWriter, r *http.Request)

// Server is an httptest server that answers requests with scripted replies,
// in order. A request beyond the script fails the test.
type Server struct {
	// URL is the server's base URL, with no trailing slash.
	URL string

	t        testing.TB
	mu       sync.Mutex
	replies  []Reply
	requests []*Request
}

// New starts a server answering with replies, in order; it is closed when
// the test ends.
func New(t testing.TB, replies ...Reply) *Server {
	t.Helper()
	s := &Server{t: t, replies: replies}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, &Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	n := len(s.requests)
	var reply Reply
	if n <= len(s.replies) {
		reply = s.replies[n-1]
	}
	s.mu.Unlock()
	if reply == nil {
		s.t.Errorf("fake server: unexpected request %d: %s %s", n, r.Method, r.URL.Path)
		http.Error(w, `{"error":{"message":"no scripted reply"}}`, http.StatusTeapot)
		return
	}
	reply(w, r)
}

// Requests returns the requests received so far.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.requests...)
}

// Request returns the i-th request (from 0), failing the test if there is none.
func (s *Server) Request(i int) *Request {
	s.t.Helper()
	reqs := s.Requests()
	if i >= len(reqs) {
		s.t.Fatalf("fake server got %d requests, want at least %d", len(reqs), i+1)
	}
	return reqs[i]
}

// JSON replies with status and a JSON body; header holds name, value pairs.
func JSON(status int, body string, header ...string) Reply {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// SSE replies 200 with stream, a text/event-stream body, flushing after
// each event as a real server does.
func SSE(stream string) Reply {
	return func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, Events(stream))
	}
}

// Cut replies with the first n events of stream and then drops the
// connection, as a network failure in the middle of a reply would.
func Cut(stream string, n int) Reply {
	return func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, Events(stream)[:n])
		panic(http.ErrAbortHandler) // closes the connection without the final chunk
	}
}

// Truncated replies with the first n events of stream and then ends the
// body cleanly, as a proxy that gives up on a long reply might.
func Truncated(stream string, n int) Reply {
	return func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, Events(stream)[:n])
	}
}

// Hang replies with the first n events of stream, closes sent (if not nil)
// and then holds the connection open until the client goes away.
func Hang(stream string, n int, sent chan<- struct{}) Reply {
	return func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, Events(stream)[:n])
		if sent != nil {
			close(sent)
		}
		<-r.Context().Done()
	}
}

// Events splits an event stream into its events (each without the blank
// line that ends it).
func Events(stream string) []string {
	var out []string
	for ev := range strings.SplitSeq(strings.ReplaceAll(stream, "\r\n", "\n"), "\n\n") {
		if strings.TrimSpace(ev) != "" {
			out = append(out, ev)
		}
	}
	return out
}

func writeEvents(w http.ResponseWriter, events []string) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	for _, ev := range events {
		_, _ = io.WriteString(w, ev+"\n\n")
		if f != nil {
			f.Flush()
		}
	}
}

// File returns the contents of a test fixture.
func File(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Canon returns v as compact JSON with sorted keys and numbers in one form
// (1e3 and 1000 are the same): a JSON string, a json.RawMessage or []byte
// is re-encoded, anything else marshalled.
func Canon(t testing.TB, v any) string {
	t.Helper()
	var raw []byte
	switch x := v.(type) {
	case string:
		raw = []byte(x)
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	default:
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("canon: %v", err)
		}
		raw = b
	}
	var decoded any
	if err := json.Unmarshal(raw, &decoded); err != nil {
		t.Fatalf("canon: %v\n%s", err, raw)
	}
	out, err := json.Marshal(decoded)
	if err != nil {
		t.Fatalf("canon: %v", err)
	}
	return string(out)
}

// JSONEq fails the test unless got and want encode the same JSON value
// (see [Canon]).
func JSONEq(t testing.TB, what string, got, want any) {
	t.Helper()
	if g, w := Canon(t, got), Canon(t, want); g != w {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}
