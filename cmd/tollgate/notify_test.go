package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
	"github.com/tollgate-ai/tollgate/notify"
)

// hookReceiver is a webhook endpoint whose answers the test sets: hang
// (never answers: the sender is killed mid-request), fail (500) or ok.
type hookReceiver struct {
	mu       sync.Mutex
	mode     string
	attempts map[string]int // by webhook-id
	accepted map[string]string
	events   map[string]string // webhook-id -> type and question, which must never change
	bad      []string
}

func newHookReceiver(t *testing.T, secret string) (*hookReceiver, *httptest.Server) {
	h := &hookReceiver{mode: "hang", attempts: map[string]int{}, accepted: map[string]string{}, events: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get("webhook-id")
		var p notify.Payload
		_ = json.Unmarshal(body, &p)
		what := p.Type + " " + p.Data.ThreadID + "/" + p.Data.QuestionID
		h.mu.Lock()
		if err := notify.Verify(secret, r.Header, body); err != nil {
			h.bad = append(h.bad, "signature: "+err.Error())
		}
		if prev, ok := h.events[id]; ok && prev != what {
			h.bad = append(h.bad, fmt.Sprintf("id %s was %s, now %s", id, prev, what))
		}
		h.events[id] = what
		h.attempts[id]++
		mode := h.mode
		if mode == "ok" {
			h.accepted[id] = what
		}
		h.mu.Unlock()
		switch mode {
		case "hang":
			<-r.Context().Done() // until the sender dies
		case "fail":
			http.Error(w, "down", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	return h, srv
}

func (h *hookReceiver) set(mode string) {
	h.mu.Lock()
	h.mode = mode
	h.mu.Unlock()
}

// tries counts the attempts at the event named what ("question.created t1/...").
func (h *hookReceiver) tries(what string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for id, w := range h.events {
		if strings.HasPrefix(w, what) {
			n += h.attempts[id]
		}
	}
	return n
}

// Delivery survives SIGKILL: serve is killed while a question's webhook
// is being sent (committed, not delivered), then a second serve while it
// retries another; the third delivers both. Each event is received at
// least once, every try of it with one webhook-id, signed.
func TestNotifySurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills tollgate serve processes")
	}
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	rcv, srv := newHookReceiver(t, secret)
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o755)
	cfgFile := filepath.Join(dir, "notify.yaml")
	os.WriteFile(cfgFile, []byte(`default: [team]
groups:
  team:
    webhooks: [{url: "`+srv.URL+`/hook", secret_env: TEST_HOOK_SECRET}]
`), 0o600)
	t.Setenv("TEST_HOOK_SECRET", secret)
	args := []string{"--store", "sqlite:" + filepath.Join(dir, "t.db"), "--dir", work, "--notify-config", cfgFile}
	kill := func(p *serveProc) {
		t.Helper()
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.cmd.Wait()
	}
	post := func(p *serveProc, thread string) {
		t.Helper()
		if code, out := p.do(t, "POST", "/v1/threads/"+thread+"/messages", `{"text": "$ touch `+thread+`"}`); code != 202 {
			t.Fatalf("post to %s: %d %v", thread, code, out)
		}
	}

	a := startServe(t, args...)
	post(a, "t1")
	waitFor(t, "t1's webhook to be on its way", 20*time.Second, func() bool { return rcv.tries("question.created t1/") == 1 })
	kill(a)

	rcv.set("fail")
	b := startServe(t, args...)
	post(b, "t2")
	waitFor(t, "t2's webhook to be retried", 30*time.Second, func() bool { return rcv.tries("question.created t2/") >= 2 })
	kill(b)

	rcv.set("ok")
	c := startServe(t, args...)
	waitFor(t, "both webhooks to be delivered", 60*time.Second, func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		got := map[string]bool{}
		for _, w := range rcv.accepted {
			got[strings.SplitN(w, "/", 2)[0]] = true
		}
		return got["question.created t1"] && got["question.created t2"]
	})
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.bad) > 0 {
		t.Errorf("bad webhooks: %q", rcv.bad)
	}
	if len(rcv.accepted) != 2 {
		t.Errorf("accepted %v, want one id for each of the two events", rcv.accepted)
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	c.cmd.Wait()
}

// notify list reads the dead letters from the store: what, where to
// (a URL's query left out), how often tried, why it failed.
func TestNotifyList(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.db")
	st, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddDeliveries(context.Background(), []*checkpoint.Delivery{
		{ID: "msg_1", Event: "question.created", ThreadID: "t1", QuestionID: "hitl_call_1_1", Channel: "webhook",
			Target: "https://hooks.example.com/x?token=secret", State: checkpoint.DeliveryDead, Attempts: 12, LastError: "answered 503"},
		{ID: "msg_2", Event: "question.created", ThreadID: "t1", QuestionID: "hitl_call_1_1", Channel: "slack", Target: "C1", State: checkpoint.DeliveryDelivered},
	}, 0); err != nil {
		t.Fatal(err)
	}
	st.Close()
	run := func(args ...string) string {
		cmd := exec.Command(os.Args[0], append([]string{"notify", "list", "--store", "sqlite:" + path}, args...)...)
		cmd.Env = append(os.Environ(), "TOLLGATE_TEST_AS_CLI=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("notify list %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := run()
	if !strings.Contains(out, "https://hooks.example.com/x?…") || strings.Contains(out, "secret") || !strings.Contains(out, "answered 503") ||
		!strings.Contains(out, "12") || strings.Contains(out, "C1") {
		t.Errorf("notify list:\n%s", out)
	}
	if out := run("--state", "all"); !strings.Contains(out, "C1") || !strings.Contains(out, "delivered") {
		t.Errorf("notify list --state all:\n%s", out)
	}
}

// serve refuses a notifications file, or a secret file it names, inside
// the bash tool's directory (a command there could rewrite whom it tells
// or sign its own answers), and a policy naming a group it lacks.
func TestServeRefusesNotifyConfig(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o755)
	os.WriteFile(filepath.Join(work, "action.key"), []byte(strings.Repeat("k", 40)), 0o600)
	outside := filepath.Join(dir, "notify.yaml")
	os.WriteFile(outside, []byte("action_secret_file: "+filepath.Join(work, "action.key")+"\ngroups: {team: {}}\n"), 0o600)
	inside := filepath.Join(work, "notify.yaml")
	os.WriteFile(inside, []byte("groups: {team: {}}\n"), 0o600)
	okFile := filepath.Join(dir, "ok.yaml")
	os.WriteFile(okFile, []byte("groups: {team: {}}\n"), 0o600)
	policyFile := filepath.Join(dir, "policy.yaml")
	os.WriteFile(policyFile, []byte("version: 1\nrules:\n  - name: r\n    tool: bash\n    action: ask\n    notify: [oncall]\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--notify-config", inside}, "notify.yaml is inside the bash tool's working directory"},
		{[]string{"--notify-config", outside}, "action.key is inside the bash tool's working directory"},
		{[]string{"--notify-config", okFile, "--policy", policyFile}, "does not define: oncall"},
	} {
		cmd := exec.Command(os.Args[0], append([]string{"serve", "--addr", "127.0.0.1:0", "--store", "sqlite:" + filepath.Join(dir, "t.db"), "--dir", work}, tc.args...)...)
		cmd.Env = append(os.Environ(), "TOLLGATE_TEST_AS_CLI=1", "TOLLGATE_TOKENS=", "TOLLGATE_TOKENS_FILE=")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("serve %v: %v\n%s\nwant exit 2 saying %q", tc.args, err, out, tc.want)
		}
	}
}
