package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/server"
)

// sseEvent is one event of a stream, or a comment.
type sseEvent struct {
	ID, Event, Data string
	Comment         string `json:"-"`
}

type stream struct {
	t      *testing.T
	events chan sseEvent
	done   chan struct{} // closed when the body ends
	cancel context.CancelFunc
	header http.Header
}

// openStream opens an event stream; it is closed at the end of the test.
func (f *fixture) openStream(path, secret string, headers ...header) *stream {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	res := f.getStream(ctx, path, secret, headers...)
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		f.t.Fatalf("stream %s: status %d", path, res.StatusCode)
	}
	s := &stream{t: f.t, events: make(chan sseEvent, 1000), done: make(chan struct{}), cancel: cancel, header: res.Header}
	go func() {
		defer close(s.done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var e sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e != (sseEvent{}) {
					s.events <- e
				}
				e = sseEvent{}
			case strings.HasPrefix(line, ":"):
				s.events <- sseEvent{Comment: strings.TrimSpace(line[1:])}
			default:
				k, v, _ := strings.Cut(line, ": ")
				switch k {
				case "id":
					e.ID = v
				case "event":
					e.Event = v
				case "data":
					e.Data = v
				}
			}
		}
	}()
	f.t.Cleanup(cancel)
	return s
}

// getStream sends the GET of a stream; the response's body is the stream.
func (f *fixture) getStream(ctx context.Context, path, secret string, headers ...header) *http.Response {
	f.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", f.ts.URL+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	for _, h := range headers {
		req.Header.Set(h.k, h.v)
	}
	res, err := f.ts.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

// next returns the next event that is not a comment.
func (s *stream) next() sseEvent {
	s.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-s.events:
			if e.Comment == "" {
				return e
			}
		case <-s.done:
			s.t.Fatal("the stream ended")
		case <-timeout:
			s.t.Fatal("no event within 10s")
		}
	}
}

// until returns the events up to and including the first of type typ.
func (s *stream) until(typ string) []sseEvent {
	s.t.Helper()
	var out []sseEvent
	for {
		e := s.next()
		out = append(out, e)
		if e.Event == typ {
			return out
		}
	}
}

// untilAll returns the events up to the first moment every one of typs has
// come.
func (s *stream) untilAll(typs ...string) []sseEvent {
	s.t.Helper()
	missing := map[string]bool{}
	for _, typ := range typs {
		missing[typ] = true
	}
	var out []sseEvent
	for len(missing) > 0 {
		e := s.next()
		out = append(out, e)
		delete(missing, e.Event)
	}
	return out
}

func types(evs []sseEvent) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Event)
	}
	return strings.Join(out, " ")
}

func TestThreadStream(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	f.do("POST", "/v1/threads", clientSecret, map[string]string{"id": "t1"}).want(t, http.StatusCreated, "")
	s := f.openStream("/v1/threads/t1/stream", clientSecret)
	if ct := s.header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	q := f.ask("t1", `rm -r "<tmp>" && echo done`)
	first := s.until("run_parked")
	if got := types(first); got != "run_started question_asked run_parked" {
		t.Errorf("events %q", got)
	}
	f.do("POST", "/v1/questions/t1/"+q.ID+"/answer", aliceSecret, map[string]string{"digest": q.Digest, "decision": "approve"}).want(t, http.StatusOK, "")
	// question_resolved may come after the resumed run's events (see
	// orderFree): read until both are in.
	rest := s.untilAll("run_finished", "question_resolved")
	all := append(first, rest...)
	if got := types(rest); !strings.Contains(got, "question_resolved") || !strings.Contains(got, "tool_result") {
		t.Errorf("events after the answer %q", got)
	}
	last := int64(0)
	for _, e := range all {
		id, err := strconv.ParseInt(e.ID, 10, 64)
		if err != nil || id <= last {
			t.Errorf("ids not increasing: %q after %d", e.ID, last)
		}
		last = id
		var data struct {
			Seq      int64  `json:"seq"`
			ThreadID string `json:"thread_id"`
			Type     string `json:"type"`
		}
		if err := json.Unmarshal([]byte(e.Data), &data); err != nil || data.Seq != id || data.Type != e.Event || data.ThreadID != "t1" {
			t.Errorf("data %s of event %s %s: %v", e.Data, e.ID, e.Event, err)
		}
	}
	if !strings.Contains(first[0].Data, `"prompt":"$ rm -r \"<tmp>\" && echo done"`) {
		t.Errorf("run_started data escaped: %s", first[0].Data)
	}
	var transcript []json.RawMessage
	for _, e := range all {
		transcript = append(transcript, json.RawMessage(`{"event":`+strconv.Quote(e.Event)+`,"data":`+e.Data+`}`))
	}
	raw, _ := json.Marshal(transcript)
	golden(t, "stream_thread", orderFree(t, raw))

	// Reconnecting with Last-Event-ID replays what came after it.
	again := f.openStream("/v1/threads/t1/stream", clientSecret, header{"Last-Event-ID", first[1].ID})
	if e := again.next(); e.ID != first[2].ID {
		t.Errorf("resumed at %s %s, want %s", e.ID, e.Event, first[2].ID)
	}
	byQuery := f.openStream("/v1/threads/t1/stream?after="+all[len(all)-2].ID, clientSecret)
	if e := byQuery.next(); e.ID != all[len(all)-1].ID {
		t.Errorf("?after resumed at %s", e.ID)
	}
}

func TestQueueStream(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	f.ask("old", "rm before")
	bob := f.openStream("/v1/stream", bobSecret)
	alice := f.openStream("/v1/stream", aliceSecret)
	f.ask("t1", "rm a")
	f.ask("team-b-1", "rm b")
	// The queue starts now: nothing of "old" comes.
	for _, e := range alice.until("run_parked") {
		if !strings.Contains(e.Data, `"thread_id":"t1"`) {
			t.Errorf("alice got %s", e.Data)
		}
	}
	if e := alice.until("run_parked"); !strings.Contains(e[0].Data, `"thread_id":"team-b-1"`) {
		t.Errorf("alice got %s", e[0].Data)
	}
	// bob sees only his threads.
	for _, e := range bob.until("run_parked") {
		if !strings.Contains(e.Data, `"thread_id":"team-b-1"`) {
			t.Errorf("bob got %s", e.Data)
		}
	}
	// From the start when asked.
	if e := f.openStream("/v1/stream?after=0", aliceSecret).next(); !strings.Contains(e.Data, `"thread_id":"old"`) {
		t.Errorf("replay from 0 began with %s", e.Data)
	}
	f.do("GET", "/v1/stream", clientSecret, nil).want(t, http.StatusForbidden, "forbidden")
	f.do("GET", "/v1/stream", "", nil, header{"Last-Event-ID", "x"}).want(t, http.StatusUnauthorized, "unauthenticated")
	f.do("GET", "/v1/stream", aliceSecret, nil, header{"Last-Event-ID", "twelve"}).want(t, http.StatusBadRequest, "bad_request")
	f.do("GET", "/v1/stream?after=-3", aliceSecret, nil).want(t, http.StatusBadRequest, "bad_request")
	f.do("GET", "/v1/threads/nope/stream", aliceSecret, nil).want(t, http.StatusNotFound, "not_found")
}

// An event another process writes (no host event, no notification) comes
// through the poll of the log.
func TestStreamSeesOtherProcesses(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	f.do("POST", "/v1/threads", clientSecret, map[string]string{"id": "t1"}).want(t, http.StatusCreated, "")
	thread := f.openStream("/v1/threads/t1/stream", clientSecret)
	queue := f.openStream("/v1/stream", aliceSecret)
	if _, err := f.store.AppendEvent(context.Background(), &checkpoint.Event{ThreadID: "t1", Type: "note",
		Data: json.RawMessage(`{"text":"from \u003celsewhere\u003e"}`), At: epoch}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*stream{thread, queue} {
		if e := s.next(); e.Event != "note" || !strings.Contains(e.Data, `{"text":"from <elsewhere>"}`) {
			t.Errorf("got %+v", e)
		}
	}
}

// eventReads counts the store's reads of the event log.
type eventReads struct {
	checkpoint.Store
	n atomic.Int64
}

func (s *eventReads) ListEvents(ctx context.Context, thread string, after int64, limit int) ([]*checkpoint.Event, error) {
	s.n.Add(1)
	return s.Store.ListEvents(ctx, thread, after, limit)
}

// A server nobody streams from does not poll the log (issue 22 item 9:
// the poll was three of an idle replica's transactions a second); a
// stream that opens starts it again, and finds what another process
// wrote meanwhile.
func TestNoStreamNoPoll(t *testing.T) {
	t.Parallel()
	store := &eventReads{Store: memory.New()}
	f := setup(t, &options{store: store})
	f.do("POST", "/v1/threads", clientSecret, map[string]string{"id": "t1"}).want(t, http.StatusCreated, "")
	time.Sleep(400 * time.Millisecond) // eight polls' time (PollInterval 50 ms)
	if n := store.n.Load(); n != 0 {
		t.Errorf("%d reads of the event log with no stream open, want none", n)
	}
	s := f.openStream("/v1/stream", aliceSecret)
	eventually(t, "the stream to be counted", func() bool { return f.metric("tollgate_streams_open") == "1" })
	if _, err := store.AppendEvent(context.Background(), &checkpoint.Event{ThreadID: "t1", Type: "note", Data: json.RawMessage(`{}`), At: epoch}); err != nil {
		t.Fatal(err)
	}
	if e := s.next(); e.Event != "note" {
		t.Errorf("got %+v", e)
	}
	s.cancel()
	<-s.done
	eventually(t, "the stream to end", func() bool { return f.metric("tollgate_streams_open") == "0" })
	time.Sleep(100 * time.Millisecond) // a poll under way ends
	before := store.n.Load()
	time.Sleep(400 * time.Millisecond)
	if n := store.n.Load() - before; n != 0 {
		t.Errorf("%d reads of the event log after the last stream closed, want none", n)
	}
}

// HEAD gets the stream's headers and ends.
func TestStreamHead(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	res := f.do("HEAD", "/v1/stream", aliceSecret, nil)
	if res.status != http.StatusOK || res.header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Errorf("HEAD: %d %v", res.status, res.header)
	}
}

func TestStreamPing(t *testing.T) {
	t.Parallel()
	f := setup(t, &options{cfg: func(c *server.Config) { c.PingInterval = 20 * time.Millisecond }})
	s := f.openStream("/v1/stream", aliceSecret)
	select {
	case e := <-s.events:
		if e.Comment != "ping" {
			t.Errorf("got %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no ping")
	}
}

func TestCloseEndsStreams(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	s := f.openStream("/v1/stream", aliceSecret)
	eventually(t, "the stream to be counted", func() bool { return f.metric("tollgate_streams_open") == "1" })
	_ = f.srv.Close()
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end on Close")
	}
	f.do("GET", "/v1/stream", aliceSecret, nil).want(t, http.StatusServiceUnavailable, "unavailable")
}

// A client that goes away mid-stream leaves nothing behind. Not parallel:
// it counts goroutines.
func TestStreamClientDisconnects(t *testing.T) {
	f := setup(t, nil)
	f.do("POST", "/v1/threads", clientSecret, map[string]string{"id": "t1"}).want(t, http.StatusCreated, "")
	f.ts.Client().CloseIdleConnections()
	before := runtime.NumGoroutine()
	var streams []*stream
	for range 5 {
		streams = append(streams, f.openStream("/v1/threads/t1/stream", clientSecret), f.openStream("/v1/stream", aliceSecret))
	}
	eventually(t, "ten open streams", func() bool { return f.metric("tollgate_streams_open") == "10" })
	f.ask("t1", "rm x") // events flow while they go
	for _, s := range streams {
		s.cancel()
		<-s.done
	}
	eventually(t, "the streams to close", func() bool { return f.metric("tollgate_streams_open") == "0" })
	f.ts.Client().CloseIdleConnections()
	eventually(t, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

// One token holds at most MaxStreamsPerToken event streams, by bearer and
// through the page sessions it signed in together; one more is refused
// with 429 too_many_streams and says what to do, other tokens are not
// touched, and a stream that closes makes room.
func TestStreamsPerToken(t *testing.T) {
	t.Parallel()
	f := setup(t, &options{cfg: func(c *server.Config) { c.MaxStreamsPerToken = 2 }})
	f.do("POST", "/v1/threads", clientSecret, map[string]string{"id": "t1"}).want(t, http.StatusCreated, "")
	// refused opens a stream that must be refused: an open one fails
	// the test rather than hang it.
	refused := func(path, secret string, headers ...header) *response {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		res := f.getStream(ctx, path, secret, headers...)
		defer res.Body.Close()
		if res.StatusCode == http.StatusOK {
			t.Fatalf("stream %s opened beyond the cap", path)
		}
		body, _ := io.ReadAll(res.Body)
		return (&response{status: res.StatusCode, header: res.Header, body: body}).want(t, http.StatusTooManyRequests, "too_many_streams")
	}
	first := f.openStream("/v1/stream", aliceSecret)
	cookie, _ := f.signIn(aliceSecret)
	f.openStream("/v1/threads/t1/stream", "", cookie)
	res := refused("/v1/stream", aliceSecret)
	if msg := res.json(t)["error"].(map[string]any)["message"].(string); !strings.Contains(msg, `token "alice" has 2 event streams open`) || !strings.Contains(msg, "close one") {
		t.Errorf("message %q", msg)
	}
	if res.header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	refused("/v1/threads/t1/stream", "", cookie)
	// Another token has its own count.
	f.openStream("/v1/stream", adminSecret)
	first.cancel()
	<-first.done
	// (A HEAD of a stream is counted for its headers' time only.)
	eventually(t, "room for a stream of alice's", func() bool { return f.do("HEAD", "/v1/stream", aliceSecret, nil).status == http.StatusOK })
	f.openStream("/v1/stream", aliceSecret)
}
