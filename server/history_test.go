package server_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// failingModel is the demo model, but a message that says "model fails"
// fails the run, as a model without its key does.
type failingModel struct{ scripted.Demo }

func (m failingModel) Complete(ctx context.Context, req *agent.Request, onText func(string)) (*agent.Message, error) {
	if n := len(req.Messages); n > 0 && strings.Contains(req.Messages[n-1].Text, "model fails") {
		return nil, errors.New("the model's key is not set")
	}
	return m.Demo.Complete(ctx, req, onText)
}

// TestThreadHistory: GET /v1/threads by state (waiting, running,
// failed, finished, timed out) and by a text in the id, the messages or
// a question's tool; a run started through the API that failed is listed
// as failed, with its error.
func TestThreadHistory(t *testing.T) {
	t.Parallel()
	f := setup(t, &options{model: failingModel{}})
	f.ask("h-late", "touch notes.txt")
	f.clock.Advance(timeoutSeconds * time.Second)
	eventually(t, "the timeout", func() bool {
		qs, _, _ := f.store.ListQuestions(context.Background(), checkpoint.QuestionFilter{ThreadID: "h-late", Status: checkpoint.QuestionTimedOut})
		return len(qs) == 1
	})
	f.settle("h-late")
	f.ask("h-waiting", "rm -r build")
	f.prompt("h-finished", "$ ls -la")
	f.do("POST", "/v1/threads/h-failed/messages", clientSecret, map[string]string{"text": "model fails"}).want(t, http.StatusAccepted, "")
	eventually(t, "the failed run", func() bool {
		th, err := f.store.LoadThread(context.Background(), "h-failed")
		if err != nil {
			return false
		}
		st, _ := f.host.State(th)
		return st == "failed"
	})

	list := func(query string) []string {
		t.Helper()
		m := f.do("GET", "/v1/threads?"+query, aliceSecret, nil).want(t, http.StatusOK, "").json(t)
		var ids []string
		for _, th := range m["threads"].([]any) {
			ids = append(ids, th.(map[string]any)["id"].(string))
		}
		return ids
	}
	for query, want := range map[string][]string{
		"":                       {"h-failed", "h-finished", "h-waiting", "h-late"},
		"state=waiting":          {"h-waiting"},
		"state=failed":           {"h-failed"},
		"state=finished":         {"h-finished", "h-late"},
		"state=timed_out":        {"h-late"},
		"state=running":          nil,
		"q=H-FIN":                {"h-finished"},
		"q=notes.txt":            {"h-late"},
		"q=bash&state=waiting":   {"h-waiting"},
		"q=no+such+text":         nil,
		"state=finished&limit=1": {"h-finished"},
	} {
		if got := list(query); !slices.Equal(got, want) {
			t.Errorf("GET /v1/threads?%s = %q, want %q", query, got, want)
		}
	}
	m := f.do("GET", "/v1/threads/h-failed", aliceSecret, nil).want(t, http.StatusOK, "").json(t)
	if m["run_state"] != "failed" || !strings.Contains(m["run_error"].(string), "the model's key is not set") {
		t.Errorf("the failed thread: run_state %v, run_error %v", m["run_state"], m["run_error"])
	}
	f.do("GET", "/v1/threads?state=stuck", aliceSecret, nil).want(t, http.StatusBadRequest, "bad_request")
	f.do("GET", "/v1/threads?state=finished&status=running", aliceSecret, nil).want(t, http.StatusBadRequest, "bad_request")
	// A search reads every thread's messages: not for a client token,
	// which is what a gated agent holds (before, a coding agent's hook
	// token could keep the store busy scanning and the reviewers' list of
	// questions took seconds). A client lists threads without one.
	// The refusal names the CLI's flag too: its user never wrote q.
	if r := f.do("GET", "/v1/threads?q=notes.txt", clientSecret, nil).want(t, http.StatusForbidden, "forbidden"); !strings.Contains(string(r.body), "threads list --search") {
		t.Errorf("a client's search refused with %s", r.body)
	}
	f.do("GET", "/v1/threads?state=waiting", clientSecret, nil).want(t, http.StatusOK, "")
	// bob sees the team-b threads only.
	if m := f.do("GET", "/v1/threads?state=waiting", bobSecret, nil).want(t, http.StatusOK, "").json(t); len(m["threads"].([]any)) != 0 {
		t.Errorf("bob sees %v", m["threads"])
	}
}
