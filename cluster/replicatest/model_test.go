package replicatest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// modelCall is one request a replica made to the fake model.
type modelCall struct {
	Replica int // 1-based, from the base URL's path
	Job     int // from the prompt, "job N"
	Turn    int // 1 + the assistant messages before the call
	Start   time.Time
	End     time.Time // the response was written (to the socket, not necessarily read)
	WriteOK bool
}

// fakeModel is an OpenAI-compatible Chat Completions server: the model of
// every replica. For a thread whose prompt is "job N", its first turn is
// one bash call, command(N); its second, once the conversation holds the
// call's result, a final text. It records every call.
type fakeModel struct {
	srv     *httptest.Server
	command func(job int) string
	delay   time.Duration // how long a call takes, so that a kill can catch one in flight
	// onCall, if set, is told of each call as it starts (before the delay).
	onCall func(replica, turn int)

	mu         sync.Mutex
	calls      []modelCall
	unexpected []string // requests it could not place: a bad path, no job, a third turn
}

var (
	replicaPath = regexp.MustCompile(`^/r([0-9]+)/v1/chat/completions$`)
	jobPrompt   = regexp.MustCompile(`^job ([0-9]+)\b`)
)

func newFakeModel(t *testing.T, command func(job int) string, delay time.Duration) *fakeModel {
	m := &fakeModel{command: command, delay: delay}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

// baseURL is replica n's OPENAI_BASE_URL.
func (m *fakeModel) baseURL(n int) string { return fmt.Sprintf("%s/r%d/v1", m.srv.URL, n) }

func callID(job int) string { return fmt.Sprintf("call_job_%d", job) }

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
}

func (m *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, _ := io.ReadAll(r.Body)
	sub := replicaPath.FindStringSubmatch(r.URL.Path)
	if r.Method != http.MethodPost || sub == nil {
		m.fail(w, fmt.Sprintf("%s %s: not a chat completion of a replica", r.Method, r.URL.Path))
		return
	}
	replica, _ := strconv.Atoi(sub[1])
	var req struct {
		Stream   bool          `json:"stream"`
		Messages []chatMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		m.fail(w, fmt.Sprintf("replica %d: body: %v", replica, err))
		return
	}
	job, turn, sawResult := 0, 1, false
	for _, msg := range req.Messages {
		switch msg.Role {
		case "user":
			var text string
			if json.Unmarshal(msg.Content, &text) == nil && job == 0 {
				if s := jobPrompt.FindStringSubmatch(text); s != nil {
					job, _ = strconv.Atoi(s[1])
				}
			}
		case "assistant":
			turn++
		case "tool":
			sawResult = sawResult || msg.ToolCallID == callID(job)
		}
	}
	if job == 0 {
		m.fail(w, fmt.Sprintf("replica %d: no \"job N\" prompt in %s", replica, body))
		return
	}
	if turn > 2 || turn == 2 && !sawResult {
		m.mu.Lock()
		m.unexpected = append(m.unexpected, fmt.Sprintf("replica %d, job %d: turn %d (tool result seen: %v)", replica, job, turn, sawResult))
		m.mu.Unlock()
	}
	if m.onCall != nil {
		m.onCall(replica, turn)
	}
	time.Sleep(m.delay)

	var out string
	if turn == 1 {
		args, _ := json.Marshal(map[string]string{"cmd": m.command(job)})
		out = completion(req.Stream, "", callID(job), string(args))
	} else {
		out = completion(req.Stream, fmt.Sprintf("done job %d", job), "", "")
	}
	if req.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	_, err := io.WriteString(w, out)
	m.mu.Lock()
	m.calls = append(m.calls, modelCall{Replica: replica, Job: job, Turn: turn, Start: start, End: time.Now(), WriteOK: err == nil})
	m.mu.Unlock()
}

func (m *fakeModel) fail(w http.ResponseWriter, what string) {
	m.mu.Lock()
	m.unexpected = append(m.unexpected, what)
	m.mu.Unlock()
	// 400: the SDK does not retry it, and the run stops with an error the
	// checks see.
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"message": "fake model: " + what}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	w.Write(b)
}

// completion is a Chat Completions reply, streamed (as SSE chunks) or not:
// a text, or one call of the bash tool.
func completion(stream bool, text, id, args string) string {
	finish := "stop"
	if id != "" {
		finish = "tool_calls"
	}
	if !stream {
		msg := map[string]any{"role": "assistant", "content": text}
		if id != "" {
			msg["content"] = nil
			msg["tool_calls"] = []any{map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": "bash", "arguments": args}}}
		}
		b, _ := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion", "created": 1, "model": "fake",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}})
		return string(b)
	}
	chunk := func(delta map[string]any, finish string) string {
		var f any
		if finish != "" {
			f = finish
		}
		b, _ := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "fake",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": f}}})
		return "data: " + string(b) + "\n\n"
	}
	var s string
	if id != "" {
		s = chunk(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": id, "type": "function",
			"function": map[string]any{"name": "bash", "arguments": ""}}}}, "") +
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": args}}}}, "")
	} else {
		s = chunk(map[string]any{"role": "assistant", "content": text}, "")
	}
	return s + chunk(map[string]any{}, finish) + "data: [DONE]\n\n"
}

// record returns a copy of the calls so far and what could not be placed.
func (m *fakeModel) record() ([]modelCall, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]modelCall(nil), m.calls...), append([]string(nil), m.unexpected...)
}
