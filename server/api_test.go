package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/provider/scripted"
	"github.com/tollgate-ai/tollgate/server"
)

// hostile is a command full of what HTML escaping, a careless page or a
// terminal would mangle.
const hostile = "rm -r /tmp/scratch && echo \"<script>alert('x')</script>\" > /tmp/log & true # \u202eevil\u202c \u200b"

// The whole review of one call, each response pinned by a golden file.
func TestReviewFlow(t *testing.T) {
	t.Parallel()
	model := scripted.New(
		scripted.Turn{Text: "Cleaning up.", ToolCalls: []agent.ToolCall{scripted.Call("call_1", "bash", bashArgs{Cmd: hostile, Cwd: "/tmp"})}},
		scripted.Turn{Text: "Done: the scratch files are gone."},
	)
	f := setup(t, &options{model: model})

	res := f.do("POST", "/v1/threads", clientSecret, map[string]string{"id": "t1"}).want(t, http.StatusCreated, "")
	if loc := res.header.Get("Location"); loc != "/v1/threads/t1" {
		t.Errorf("Location %q", loc)
	}
	golden(t, "thread_create", res.body)

	key := header{"Idempotency-Key", "k1"}
	res = f.do("POST", "/v1/threads/t1/messages", clientSecret, map[string]string{"text": "clean up <scratch> & logs"}, key).want(t, http.StatusAccepted, "")
	golden(t, "message_post", res.body)
	runID := res.json(t)["run_id"]
	qs := f.settle("t1")
	if len(qs) != 1 {
		t.Fatalf("%d pending questions", len(qs))
	}
	q := qs[0]

	// A retried request gets the same run, starting nothing.
	again := f.do("POST", "/v1/threads/t1/messages", clientSecret, map[string]string{"text": "clean up <scratch> & logs"}, key).want(t, http.StatusOK, "")
	if got := again.json(t)["run_id"]; got != runID {
		t.Errorf("retry run %v, want %v", got, runID)
	}
	// The host holds the thread as active for a moment while it finds the
	// retried run (reported to the lead): wait until it is parked again.
	f.settle("t1")

	res = f.do("GET", "/v1/threads/t1", clientSecret, nil).want(t, http.StatusOK, "")
	golden(t, "thread_get_parked", res.body)
	if th := res.json(t); th["run_state"] != "parked" || len(th["pending_questions"].([]any)) != 1 {
		t.Errorf("thread %v", th)
	}
	golden(t, "thread_list", f.do("GET", "/v1/threads", aliceSecret, nil).want(t, http.StatusOK, "").body)
	golden(t, "question_list", f.do("GET", "/v1/questions", aliceSecret, nil).want(t, http.StatusOK, "").body)

	res = f.do("GET", "/v1/questions/t1/"+q.ID, aliceSecret, nil).want(t, http.StatusOK, "")
	golden(t, "question_get", res.body)
	// The arguments come back as the model wrote them: no \u003c, the
	// quotes escaped as JSON must, bidi and zero-width characters as they are.
	wantArgs := `"args":{"cmd":"rm -r /tmp/scratch && echo \"<script>alert('x')</script>\" > /tmp/log & true # ` + "\u202eevil\u202c \u200b" + `","cwd":"/tmp"}`
	if !bytes.Contains(res.body, []byte(wantArgs)) || bytes.Contains(res.body, []byte(`\u003c`)) || bytes.Contains(res.body, []byte(`\u0026`)) {
		t.Errorf("arguments not returned intact and unescaped:\n%s", res.body)
	}

	res = f.do("POST", "/v1/questions/t1/"+q.ID+"/answer", aliceSecret, map[string]string{"decision": "approve", "digest": q.Digest}).want(t, http.StatusOK, "")
	golden(t, "answer_approve", res.body)
	if a := res.json(t); a["answered_by"] != "alice" || a["status"] != "answered" {
		t.Errorf("answer %v", a)
	}
	// The same answer twice: the first one won, and the body says who.
	res = f.do("POST", "/v1/questions/t1/"+q.ID+"/answer", adminSecret, map[string]string{"decision": "deny"}).want(t, http.StatusConflict, "already_answered")
	golden(t, "answer_already_answered", res.body)
	if won := res.json(t)["question"].(map[string]any); won["answered_by"] != "alice" {
		t.Errorf("who won: %v", won)
	}

	f.settle("t1")
	res = f.do("GET", "/v1/threads/t1", clientSecret, nil).want(t, http.StatusOK, "")
	golden(t, "thread_get_done", res.body)
	if !bytes.Contains(res.body, []byte(`"content":"ran: rm -r /tmp/scratch && echo \"<script>`)) {
		t.Errorf("the approved call did not run as shown:\n%s", res.body)
	}
	res = f.do("GET", "/v1/threads/t1/events", clientSecret, nil).want(t, http.StatusOK, "")
	golden(t, "thread_events", orderFree(t, res.body))
	var page struct {
		Events []struct {
			Seq  int64
			Type string
		}
		NextAfter int64 `json:"next_after"`
	}
	if err := json.Unmarshal(res.body, &page); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range page.Events {
		types = append(types, e.Type)
	}
	for _, want := range []string{"run_started", "question_asked", "run_parked", "question_resolved", "tool_result", "run_finished"} {
		if !strings.Contains(strings.Join(types, " "), want) {
			t.Errorf("events %v lack %s", types, want)
		}
	}
	// Paging: after the last one, nothing; next_after stays.
	res = f.do("GET", "/v1/threads/t1/events?after="+jsonNumber(page.NextAfter)+"&limit=5", clientSecret, nil).want(t, http.StatusOK, "")
	if m := res.json(t); len(m["events"].([]any)) != 0 || m["next_after"] != json.Number(jsonNumber(page.NextAfter)) {
		t.Errorf("page after the end: %v", m)
	}
}

func jsonNumber(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestThreadsListAndFilters(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	f.prompt("a", "$ ls")
	f.ask("b", "rm x")
	f.do("POST", "/v1/threads", adminSecret, nil).want(t, http.StatusCreated, "") // an id is made up

	ids := func(path string) []string {
		var out []string
		for _, th := range f.do("GET", path, clientSecret, nil).want(t, http.StatusOK, "").json(t)["threads"].([]any) {
			out = append(out, th.(map[string]any)["id"].(string))
		}
		return out
	}
	if got := ids("/v1/threads?status=running"); len(got) != 1 || got[0] != "b" {
		t.Errorf("running: %v", got)
	}
	if got := ids("/v1/threads?status=idle"); len(got) != 2 {
		t.Errorf("idle: %v", got)
	}
	// Pages of one, newest first, to the end.
	var all []string
	cursor := ""
	for range 5 {
		m := f.do("GET", "/v1/threads?limit=1&cursor="+cursor, clientSecret, nil).want(t, http.StatusOK, "").json(t)
		for _, th := range m["threads"].([]any) {
			all = append(all, th.(map[string]any)["id"].(string))
		}
		if cursor = m["next_cursor"].(string); cursor == "" {
			break
		}
	}
	if len(all) != 3 || all[1] != "b" || all[2] != "a" {
		t.Errorf("pages: %v", all)
	}
}

func TestQuestionsFilters(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	f.ask("q1", "rm one")
	f.ask("q2", "rm two")
	done := f.ask("q3", "rm three")
	f.do("POST", "/v1/questions/q3/"+done.ID+"/answer", aliceSecret, map[string]string{"digest": done.Digest, "decision": "deny", "reason": "no"}).want(t, http.StatusOK, "")
	f.settle("q3")

	list := func(query string) (ids []string, total any) {
		m := f.do("GET", "/v1/questions"+query, aliceSecret, nil).want(t, http.StatusOK, "").json(t)
		for _, q := range m["questions"].([]any) {
			ids = append(ids, q.(map[string]any)["thread_id"].(string))
		}
		return ids, m["total"]
	}
	if ids, total := list(""); len(ids) != 2 || total != json.Number("2") {
		t.Errorf("pending: %v total %v", ids, total)
	}
	if ids, _ := list("?order=newest"); len(ids) != 2 || ids[0] != "q2" {
		t.Errorf("newest first: %v", ids)
	}
	if ids, _ := list("?order=oldest"); len(ids) != 2 || ids[0] != "q1" {
		t.Errorf("oldest first: %v", ids)
	}
	if ids, total := list("?status=answered"); len(ids) != 1 || ids[0] != "q3" || total != json.Number("1") {
		t.Errorf("answered: %v total %v", ids, total)
	}
	if ids, total := list("?status=all&tool=bash&kind=approve"); len(ids) != 3 || total != json.Number("3") {
		t.Errorf("all bash approvals: %v total %v", ids, total)
	}
	if ids, total := list("?thread=q2"); len(ids) != 1 || total != json.Number("1") {
		t.Errorf("thread q2: %v total %v", ids, total)
	}
	if ids, total := list("?tool=nope"); len(ids) != 0 || total != json.Number("0") {
		t.Errorf("tool nope: %v total %v", ids, total)
	}
	// Pages of one.
	m := f.do("GET", "/v1/questions?limit=1&order=oldest", aliceSecret, nil).json(t)
	next := m["next_cursor"].(string)
	m = f.do("GET", "/v1/questions?limit=1&order=oldest&cursor="+next, aliceSecret, nil).want(t, http.StatusOK, "").json(t)
	if qs := m["questions"].([]any); len(qs) != 1 || qs[0].(map[string]any)["thread_id"] != "q2" || m["next_cursor"] != "" {
		t.Errorf("second page: %v", m)
	}
}

func TestAbortAndResume(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	q := f.ask("t1", "rm -r build")

	res := f.do("POST", "/v1/threads/t1/abort", clientSecret, map[string]string{"reason": "user closed tab"}).want(t, http.StatusOK, "")
	golden(t, "thread_abort", res.body)
	th := res.json(t)
	msgs := th["messages"].([]any)
	if last := msgs[len(msgs)-1].(map[string]any); th["status"] != "idle" || last["stop_reason"] != "aborted" {
		t.Errorf("after abort: %v", th)
	}
	res = f.do("POST", "/v1/questions/t1/"+q.ID+"/answer", aliceSecret, map[string]string{"decision": "approve"}).want(t, http.StatusGone, "aborted")
	if got := res.json(t)["question"].(map[string]any); got["status"] != "aborted" || got["reason"] != "user closed tab" {
		t.Errorf("question after abort: %v", got)
	}
	// Nothing to abort is not an error; nothing to resume is.
	f.do("POST", "/v1/threads/t1/abort", clientSecret, nil).want(t, http.StatusOK, "")
	f.do("POST", "/v1/threads/t1/resume", clientSecret, nil).want(t, http.StatusConflict, "no_run")

	// Resume goes on with a run that waits (it parks again at once).
	f.ask("t2", "rm -r dist")
	res = f.do("POST", "/v1/threads/t2/resume", adminSecret, nil).want(t, http.StatusAccepted, "")
	if m := res.json(t); m["thread_id"] != "t2" || !strings.HasPrefix(m["run_id"].(string), "run_") {
		t.Errorf("resume: %v", m)
	}
	if qs := f.settle("t2"); len(qs) != 1 {
		t.Errorf("after resume: %d pending", len(qs))
	}
}

func TestAnswerKinds(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	// Questions of other kinds, as other code asks them.
	for _, q := range []*checkpoint.Question{
		{ThreadID: "k", ID: "confirm_1", Kind: "confirm", Payload: json.RawMessage(`{"kind":"confirm","message":"Deploy <prod>?"}`)},
		{ThreadID: "k", ID: "ask_1", Kind: "ask", Payload: json.RawMessage(`{"kind":"ask","question":"Which branch?","choices":["main","dev"]}`)},
	} {
		q.CreatedAt = epoch
		if _, _, err := f.store.CreateQuestion(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	res := f.do("GET", "/v1/questions/k/confirm_1", aliceSecret, nil).want(t, http.StatusOK, "")
	if !bytes.Contains(res.body, []byte(`"message":"Deploy <prod>?"`)) {
		t.Errorf("payload: %s", res.body)
	}
	f.do("POST", "/v1/questions/k/confirm_1/answer", aliceSecret, `"yes"`).want(t, http.StatusUnprocessableEntity, "invalid_answer")
	res = f.do("POST", "/v1/questions/k/confirm_1/answer", aliceSecret, `{"yes": true}`).want(t, http.StatusOK, "")
	if m := res.json(t); string(mustJSON(t, m["answer"])) != `{"yes":true}` {
		t.Errorf("confirm answer: %v", m["answer"])
	}
	f.do("POST", "/v1/questions/k/ask_1/answer", aliceSecret, `"feature"`).want(t, http.StatusUnprocessableEntity, "invalid_answer")
	f.do("POST", "/v1/questions/k/ask_1/answer", aliceSecret, `"dev"`).want(t, http.StatusOK, "")
	eventually(t, "the answer to be counted", func() bool { return f.metric(`tollgate_answers_total{decision="yes"}`) == "1" })
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every error code of API.md, each body pinned in errors.golden.
func TestErrorCodes(t *testing.T) {
	t.Parallel()
	f := setup(t, &options{cfg: func(c *server.Config) { c.MaxBodyBytes = 4096 }})
	q := f.ask("t1", "rm -r /tmp/x")
	answer := "/v1/questions/t1/" + q.ID + "/answer"
	f.do("POST", "/v1/threads", adminSecret, map[string]string{"id": "idle"}).want(t, http.StatusCreated, "")

	cases := []struct {
		name         string
		method, path string
		secret       string
		body         any
		status       int
		code         string
		headers      []header
		problems     int
		messageHas   string
	}{
		{"malformed_json", "POST", "/v1/threads", adminSecret, `{"id":`, 400, "bad_request", nil, 0, "malformed JSON"},
		{"malformed_answer", "POST", answer, aliceSecret, `{"decision": approve}`, 400, "bad_request", nil, 0, "malformed JSON at byte"},
		{"empty_answer", "POST", answer, aliceSecret, ``, 400, "bad_request", nil, 0, "empty"},
		{"unknown_field", "POST", "/v1/threads", adminSecret, `{"id": "x", "colour": "red"}`, 400, "bad_request", nil, 0, `unknown field "colour"`},
		{"two_values", "POST", "/v1/threads", adminSecret, `{"id": "x"} {}`, 400, "bad_request", nil, 0, "more than one"},
		{"missing_text", "POST", "/v1/threads/t9/messages", clientSecret, `{}`, 400, "bad_request", nil, 0, "text is missing"},
		{"bad_thread_id", "POST", "/v1/threads", adminSecret, `{"id": "a b"}`, 400, "bad_request", nil, 0, "space"},
		{"bad_cursor", "GET", "/v1/questions?cursor=garbage", aliceSecret, nil, 400, "bad_request", nil, 0, "cursor"},
		{"bad_thread_cursor", "GET", "/v1/threads?cursor=garbage", aliceSecret, nil, 400, "bad_request", nil, 0, "cursor"},
		{"bad_order", "GET", "/v1/questions?order=random", aliceSecret, nil, 400, "bad_request", nil, 0, "order must be"},
		{"bad_status", "GET", "/v1/questions?status=open", aliceSecret, nil, 400, "bad_request", nil, 0, "status must be"},
		{"bad_thread_status", "GET", "/v1/threads?status=busy", aliceSecret, nil, 400, "bad_request", nil, 0, "status must be"},
		{"bad_limit", "GET", "/v1/questions?limit=500", aliceSecret, nil, 400, "bad_request", nil, 0, "from 1 to 200"},
		{"bad_after", "GET", "/v1/threads/t1/events?after=-1", aliceSecret, nil, 400, "bad_request", nil, 0, "after must be"},
		{"unknown_param", "GET", "/v1/questions?stauts=pending", aliceSecret, nil, 400, "bad_request", nil, 0, `"stauts"`},
		{"no_token", "GET", "/v1/threads", "", nil, 401, "unauthenticated", nil, 0, "Bearer"},
		{"unknown_token", "GET", "/v1/threads", "not-a-token-at-all", nil, 401, "unauthenticated", nil, 0, "unknown token"},
		{"basic_auth", "GET", "/v1/threads", "", nil, 401, "unauthenticated", []header{{"Authorization", "Basic YTpi"}}, 0, "Bearer"},
		{"client_answers", "POST", answer, clientSecret, map[string]string{"decision": "approve"}, 403, "forbidden", nil, 0, "reviewer or admin"},
		{"client_lists_questions", "GET", "/v1/questions", clientSecret, nil, 403, "forbidden", nil, 0, "reviewer or admin"},
		{"reviewer_prompts", "POST", "/v1/threads/t9/messages", aliceSecret, map[string]string{"text": "hi"}, 403, "forbidden", nil, 0, "client or admin"},
		{"reviewer_aborts", "POST", "/v1/threads/t1/abort", aliceSecret, nil, 403, "forbidden", nil, 0, "client or admin"},
		{"reviewer_outside", "GET", "/v1/questions/t1/" + q.ID, bobSecret, nil, 403, "forbidden", nil, 0, `"bob" may not see thread "t1"`},
		{"reviewer_outside_answer", "POST", answer, bobSecret, map[string]string{"decision": "approve"}, 403, "forbidden", nil, 0, "t1"},
		{"reviewer_outside_thread", "GET", "/v1/threads/t1", bobSecret, nil, 403, "forbidden", nil, 0, "t1"},
		{"reviewer_outside_filter", "GET", "/v1/questions?thread=t1", bobSecret, nil, 403, "forbidden", nil, 0, "t1"},
		{"unknown_thread", "GET", "/v1/threads/nope", clientSecret, nil, 404, "not_found", nil, 0, `thread "nope" does not exist`},
		{"unknown_question", "GET", "/v1/questions/t1/nope", aliceSecret, nil, 404, "not_found", nil, 0, "does not exist"},
		{"answer_unknown_question", "POST", "/v1/questions/t1/nope/answer", aliceSecret, map[string]string{"decision": "approve"}, 404, "not_found", nil, 0, "nope"},
		{"unknown_route", "GET", "/v1/nothing", clientSecret, nil, 404, "not_found", nil, 0, "no API route"},
		{"wrong_method", "DELETE", "/v1/threads", clientSecret, nil, 405, "method_not_allowed", nil, 0, "GET, POST"},
		{"thread_exists", "POST", "/v1/threads", adminSecret, map[string]string{"id": "t1"}, 409, "conflict", nil, 0, "exists"},
		{"run_active", "POST", "/v1/threads/t1/messages", clientSecret, map[string]string{"text": "more"}, 409, "run_active", nil, 0, "abort it"},
		{"no_run", "POST", "/v1/threads/idle/resume", clientSecret, nil, 409, "no_run", nil, 0, "no unfinished run"},
		{"digest_mismatch", "POST", answer, aliceSecret, map[string]string{"decision": "approve", "digest": "sha256:00"}, 409, "digest_mismatch", nil, 0, "digest"},
		{"digest_required", "POST", answer, aliceSecret, map[string]string{"decision": "approve"}, 422, "digest_required", nil, 0, "GET /v1/questions/t1/" + q.ID + " first"},
		{"wrong_kind", "POST", answer, aliceSecret, map[string]string{"decision": "maybe"}, 422, "invalid_answer", nil, 1, "maybe"},
		{"unknown_answer_field", "POST", answer, aliceSecret, map[string]any{"decision": "approve", "why": 1}, 422, "invalid_answer", nil, 1, "why"},
		{"edit_schema", "POST", answer, aliceSecret, map[string]any{"decision": "edit", "edited_args": map[string]any{"cmd": 5, "cwd": true, "extra": 1}}, 422, "invalid_answer", nil, 3, "invalid arguments"},
		{"edit_policy", "POST", answer, aliceSecret, map[string]any{"digest": q.Digest, "decision": "edit", "edited_args": map[string]any{"cmd": "dd if=/dev/zero of=/dev/sda"}}, 422, "invalid_answer", nil, 1, "destructive I/O"},
		{"too_large", "POST", "/v1/threads/t9/messages", clientSecret, map[string]string{"text": strings.Repeat("x", 5000)}, 413, "too_large", nil, 0, "4096"},
		{"answer_too_large", "POST", answer, aliceSecret, map[string]string{"decision": "deny", "reason": strings.Repeat("x", 5000)}, 413, "too_large", nil, 0, "4096"},
	}
	bodies := map[string]json.RawMessage{}
	for _, c := range cases {
		res := f.do(c.method, c.path, c.secret, c.body, c.headers...)
		if res.status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, res.status, c.status, res.body)
			continue
		}
		var body struct {
			Error struct {
				Code     string
				Message  string
				Problems []agent.Problem
			}
		}
		if err := json.Unmarshal(res.body, &body); err != nil {
			t.Errorf("%s: %v: %s", c.name, err, res.body)
			continue
		}
		if body.Error.Code != c.code || !strings.Contains(body.Error.Message, c.messageHas) || len(body.Error.Problems) != c.problems {
			t.Errorf("%s: got %+v, want code %s, message with %q, %d problems", c.name, body.Error, c.code, c.messageHas, c.problems)
		}
		if ct := res.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
			t.Errorf("%s: Content-Type %q", c.name, ct)
		}
		bodies[c.name] = res.body
	}
	all, _ := json.Marshal(bodies)
	golden(t, "errors", all)
	// The question is still open after every refusal.
	if got, _ := f.store.GetQuestion(context.Background(), "t1", q.ID); got.Status != checkpoint.QuestionPending {
		t.Errorf("question %s after the refusals", got.Status)
	}
}

// An answer after the deadline is refused, whether or not the host has
// recorded the timeout yet; once it has, the model sees the timeout.
func TestAnswerAfterDeadline(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	q := f.ask("t1", "rm -r /var/tmp/x")
	if q.Deadline.Sub(q.CreatedAt) != timeoutSeconds*time.Second {
		t.Fatalf("deadline %v after creation", q.Deadline.Sub(q.CreatedAt))
	}
	res := f.do("GET", "/v1/questions/t1/"+q.ID, aliceSecret, nil).want(t, http.StatusOK, "")
	if m := res.json(t); m["timeout_seconds"] != json.Number("180") || m["deadline"] != "2026-03-01T09:03:00.000000Z" {
		t.Errorf("countdown fields: %v %v", m["timeout_seconds"], m["deadline"])
	}
	f.clock.Advance(timeoutSeconds * time.Second)
	res = f.do("POST", "/v1/questions/t1/"+q.ID+"/answer", aliceSecret, map[string]string{"decision": "approve"}).want(t, http.StatusGone, "expired")
	if res.json(t)["question"] == nil {
		t.Errorf("no question in the body: %s", res.body)
	}
	eventually(t, "the timeout to be recorded", func() bool {
		got, err := f.store.GetQuestion(context.Background(), "t1", q.ID)
		return err == nil && got.Status == checkpoint.QuestionTimedOut
	})
	f.do("POST", "/v1/questions/t1/"+q.ID+"/answer", aliceSecret, map[string]string{"decision": "approve"}).want(t, http.StatusGone, "expired")
	f.settle("t1")
	res = f.do("GET", "/v1/threads/t1", clientSecret, nil).want(t, http.StatusOK, "")
	if !bytes.Contains(res.body, []byte(`"decision":"timed_out"`)) {
		t.Errorf("the model did not see the timeout:\n%s", res.body)
	}
}

func TestHealthAndReady(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	if res := f.do("GET", "/healthz", "", nil); res.status != 200 || string(res.body) != "ok\n" {
		t.Errorf("healthz %d %q", res.status, res.body)
	}
	if res := f.do("GET", "/readyz", "", nil); res.status != 200 {
		t.Errorf("readyz %d %q", res.status, res.body)
	}
	// No page configured: a plain 404 at /.
	if res := f.do("GET", "/", "", nil); res.status != 404 {
		t.Errorf("/ %d", res.status)
	}
	if res := f.do("GET", "/", "", nil); res.header.Get("X-Request-Id") == "" || res.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers %v", res.header)
	}
	// A proxy's request id is kept when it looks like one.
	if res := f.do("GET", "/v1/threads", clientSecret, nil, header{"X-Request-Id", "edge-42"}); res.header.Get("X-Request-Id") != "edge-42" || res.header.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", res.header)
	}
	if res := f.do("GET", "/healthz", "", nil, header{"X-Request-Id", "bad id <script>"}); res.header.Get("X-Request-Id") == "bad id <script>" {
		t.Errorf("a malformed request id was kept")
	}
	_ = f.srv.Close()
	if res := f.do("GET", "/readyz", "", nil); res.status != 503 {
		t.Errorf("readyz after Close %d", res.status)
	}
}

// What is wrong without stopping the server (replicas that disagree on
// the policy) is said by /readyz, which stays 200.
func TestReadyWarnings(t *testing.T) {
	t.Parallel()
	f := setup(t, &options{cfg: func(c *server.Config) {
		c.Warnings = func() []string { return []string{"replica r2 decides by policy bbbb (this replica: aaaa)"} }
	}})
	res := f.do("GET", "/readyz", "", nil)
	if want := "ok\nwarning: replica r2 decides by policy bbbb (this replica: aaaa)\n"; res.status != 200 || string(res.body) != want {
		t.Errorf("readyz %d %q, want 200 %q", res.status, res.body, want)
	}
}

func TestPageMounted(t *testing.T) {
	t.Parallel()
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<html>page</html>")) })
	f := setup(t, &options{cfg: func(c *server.Config) { c.Page = page }})
	if res := f.do("GET", "/", "", nil); res.status != 200 || string(res.body) != "<html>page</html>" {
		t.Errorf("page: %d %s", res.status, res.body)
	}
	if res := f.do("GET", "/app.js", "", nil); res.status != 200 {
		t.Errorf("page asset: %d", res.status)
	}
}
