package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
	"github.com/tollgate-ai/tollgate/server"
)

func TestMetrics(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	q := f.ask("approved", "rm -r /tmp/a")
	f.ask("late", "rm -r /tmp/b")
	f.prompt("allowed", "$ ls -l")
	f.prompt("blocked", "$ dd if=/dev/zero of=/dev/sda")
	eventually(t, "two pending questions", func() bool { return f.metric("tollgate_questions_pending") == "2" })
	if v := f.metric("tollgate_runs_parked"); v != "2" {
		t.Errorf("runs parked %q", v)
	}

	f.clock.Advance(10 * time.Second)
	f.do("POST", "/v1/questions/approved/"+q.ID+"/answer", aliceSecret, map[string]string{"digest": q.Digest, "decision": "approve"}).want(t, http.StatusOK, "")
	f.settle("approved")
	f.clock.Advance(timeoutSeconds * time.Second)
	eventually(t, "the deadline to fire", func() bool {
		qs, _, _ := f.store.ListQuestions(context.Background(), checkpoint.QuestionFilter{Status: checkpoint.QuestionPending})
		return len(qs) == 0
	})
	f.settle("late")

	want := map[string]string{
		"tollgate_questions_pending":                        "0",
		`tollgate_answers_total{decision="approve"}`:        "1",
		`tollgate_answers_total{decision="timed_out"}`:      "1",
		`tollgate_answers_total{decision="deny"}`:           "0",
		"tollgate_answer_seconds_count":                     "1",
		"tollgate_answer_seconds_sum":                       "10",
		`tollgate_answer_seconds_bucket{le="5"}`:            "0",
		`tollgate_answer_seconds_bucket{le="15"}`:           "1",
		`tollgate_runs_total{outcome="parked"}`:             "2",
		`tollgate_runs_total{outcome="completed"}`:          "4",
		`tollgate_runs_total{outcome="failed"}`:             "0",
		`tollgate_tool_calls_total{decision="allowed"}`:     "2",
		`tollgate_tool_calls_total{decision="policy_deny"}`: "1",
		`tollgate_tool_calls_total{decision="timed_out"}`:   "1",
		"tollgate_runs_active":                              "0",
		"tollgate_runs_parked":                              "0",
		"tollgate_store_errors_total":                       "0",
		"tollgate_streams_open":                             "0",
	}
	eventually(t, "the counters", func() bool { return f.metric(`tollgate_runs_total{outcome="completed"}`) == "4" })
	for series, v := range want {
		if got := f.metric(series); got != v {
			t.Errorf("%s = %q, want %q", series, got, v)
		}
	}
	// Abort counts too.
	f.ask("aborted", "rm -r /tmp/c")
	f.do("POST", "/v1/threads/aborted/abort", adminSecret, nil).want(t, http.StatusOK, "")
	eventually(t, "the abort to be counted", func() bool {
		return f.metric(`tollgate_runs_total{outcome="aborted"}`) == "1" && f.metric(`tollgate_tool_calls_total{decision="aborted"}`) == "1"
	})
}

// The store goes away: requests fail with a clear 5xx, readiness says
// so, errors are counted, and nothing stored is lost.
func TestStoreGone(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tollgate.db")
	store, err := sqlite.Open(context.Background(), file, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := setup(t, &options{store: store})
	q := f.ask("t1", "rm -r /tmp/kept")
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		method, path, secret string
		body                 any
	}{
		{"GET", "/v1/threads", clientSecret, nil},
		{"GET", "/v1/threads/t1", clientSecret, nil},
		{"GET", "/v1/questions", aliceSecret, nil},
		{"POST", "/v1/threads/t2/messages", clientSecret, map[string]string{"text": "$ ls"}},
		{"POST", "/v1/questions/t1/" + q.ID + "/answer", aliceSecret, map[string]string{"digest": q.Digest, "decision": "approve"}},
	} {
		res := f.do(c.method, c.path, c.secret, c.body)
		if res.status != http.StatusInternalServerError && res.status != http.StatusServiceUnavailable {
			t.Errorf("%s %s: %d %s", c.method, c.path, res.status, res.body)
			continue
		}
		m := res.json(t)["error"].(map[string]any)
		if msg := m["message"].(string); !strings.Contains(msg, "store") || !strings.Contains(msg, "request "+res.header.Get("X-Request-Id")) {
			t.Errorf("%s %s: message %q", c.method, c.path, msg)
		}
	}
	if res := f.do("GET", "/readyz", "", nil); res.status != http.StatusServiceUnavailable {
		t.Errorf("readyz %d", res.status)
	}
	if res := f.do("GET", "/metrics", "", nil); res.status != http.StatusOK || strings.Contains(string(res.body), "tollgate_questions_pending ") {
		t.Errorf("metrics %d", res.status)
	}
	if n, _ := strconv.Atoi(f.metric("tollgate_store_errors_total")); n < 5 {
		t.Errorf("store errors %d", n)
	}
	// Nothing lost: the question waits in the file, unanswered.
	again, err := sqlite.Open(context.Background(), file, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	got, err := again.GetQuestion(context.Background(), "t1", q.ID)
	if err != nil || got.Status != checkpoint.QuestionPending {
		t.Errorf("question after the outage: %v %v", got, err)
	}
	if _, err := again.LoadThread(context.Background(), "t2"); err == nil {
		t.Errorf("a thread was half created during the outage")
	}
}

func TestMetricsRegistry(t *testing.T) {
	t.Parallel()
	// Without a registry the server makes its own, with the Go collectors.
	f := setup(t, &options{cfg: func(c *server.Config) { c.Registry = nil }})
	if f.metric("go_goroutines") == "" || f.metric("tollgate_questions_pending") != "0" {
		t.Errorf("own registry:\n%s", f.do("GET", "/metrics", "", nil).body)
	}
	// Two servers on one registry would mix their counts.
	g := setup(t, nil)
	if _, err := server.New(server.Config{Host: g.host, Tokens: testTokens(t), Registry: g.reg, Logger: slog.New(slog.DiscardHandler)}); err == nil || !strings.Contains(err.Error(), "registry") {
		t.Errorf("a second server on the registry: %v", err)
	}
	// Close takes the metrics off, so another server may take its place.
	_ = g.srv.Close()
	s, err := server.New(server.Config{Host: g.host, Tokens: testTokens(t), Registry: g.reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
}

// A host shutting down refuses new runs: 503, and the client tries again
// elsewhere.
func TestHostClosed(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := f.host.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	res := f.do("POST", "/v1/threads/t1/messages", clientSecret, map[string]string{"text": "$ ls"}).want(t, http.StatusServiceUnavailable, "unavailable")
	if m := res.json(t)["error"].(map[string]any); !strings.Contains(m["message"].(string), "shutting down") {
		t.Errorf("message %v", m["message"])
	}
}

// awayStore is a store whose reads cannot reach it.
type awayStore struct{ checkpoint.Store }

func (awayStore) LoadThread(context.Context, string) (*checkpoint.Thread, error) {
	return nil, fmt.Errorf("postgres: load thread: connection refused: %w", checkpoint.ErrUnavailable)
}

// A store out of reach for a moment is a 503 to try again, not a 500.
func TestStoreUnreachableIs503(t *testing.T) {
	t.Parallel()
	f := setup(t, &options{store: awayStore{memory.New()}})
	res := f.do("GET", "/v1/threads/t1", clientSecret, nil)
	if res.status != http.StatusServiceUnavailable {
		t.Fatalf("GET a thread with the store away: %d %s, want 503", res.status, res.body)
	}
	m := res.json(t)["error"].(map[string]any)
	if m["code"] != "unavailable" || !strings.Contains(m["message"].(string), "store") {
		t.Errorf("error %v", m)
	}
}
