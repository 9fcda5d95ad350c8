package notify_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/notify"
)

const signingSecret = "signing-secret"

func slackSetup(t *testing.T) (*notify.Notifier, checkpoint.Store, *fakeSlack, *clock.Fake, http.Handler) {
	t.Helper()
	store := memory.New()
	clk := clock.NewFake(time.Now())
	fs := newFakeSlack(t)
	cfg, err := notify.Parse("n.yaml", []byte(`
base_url: https://tollgate.example.com
default: [team]
action_secret_env: ACTION_SECRET
slack:
  token_env: SLACK_TOKEN
  signing_secret_env: SLACK_SIGNING
  api_url: `+fs.srv.URL+`/api/
  reviewers: {U1: alice}
groups:
  team: {slack: [C1]}
  other: {slack: [C2]}
`), func(k string) string {
		return map[string]string{"SLACK_TOKEN": "xoxb-test", "SLACK_SIGNING": signingSecret, "ACTION_SECRET": strings.Repeat("k", 32)}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := notify.New(notify.Options{Config: cfg, Store: store, Clock: clk, Answerer: &answerer{store: store, now: clk.Now}})
	if err != nil {
		t.Fatal(err)
	}
	start(t, n)
	return n, store, fs, clk, n.Handler()
}

// button is the value (the signed action) of a button of a posted
// message, and the message's block id.
func button(t *testing.T, post url.Values, actionID string) (value, block string) {
	t.Helper()
	var blocks []map[string]any
	if err := json.Unmarshal([]byte(post.Get("blocks")), &blocks); err != nil {
		t.Fatalf("blocks %q: %v", post.Get("blocks"), err)
	}
	for _, b := range blocks {
		els, _ := b["elements"].([]any)
		for _, e := range els {
			m, _ := e.(map[string]any)
			if m["action_id"] == actionID {
				v, _ := m["value"].(string)
				id, _ := b["block_id"].(string)
				return v, id
			}
		}
	}
	return "", ""
}

// press sends Slack's interactivity request for a button, signed with
// secret at ts.
func press(t *testing.T, h http.Handler, fs *fakeSlack, secret string, ts time.Time, user, channel, block, actionID, value string) int {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "user": map[string]any{"id": user}, "channel": map[string]any{"id": channel},
		"container":    map[string]any{"type": "message", "channel_id": channel, "message_ts": "1700000000.000101"},
		"response_url": fs.srv.URL + "/hooks/response",
		"actions":      []map[string]any{{"type": "button", "action_id": actionID, "block_id": block, "value": value}},
	})
	body := "payload=" + url.QueryEscape(string(payload))
	stamp := strconv.FormatInt(ts.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + stamp + ":" + body))
	r := httptest.NewRequest(http.MethodPost, "/notify/slack", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("X-Slack-Request-Timestamp", stamp)
	r.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(m.Sum(nil)))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// The message: the call, what it will do, the rule, the countdown and
// buttons; Approve from a reviewer answers, bound to the digest, and the
// message then says who answered; a replay is refused.
func TestSlackApproveAndReplay(t *testing.T) {
	n, store, fs, clk, h := slackSetup(t)
	q := ask(t, store, "t1", "q1", "rm -r logs", clk.Now(), 3*time.Minute,
		map[string]any{"why": "no rule matched rm -r logs", "effects": []any{map[string]any{"text": "deletes logs recursively", "risk": "high"}}, "runs": "in your directory"})
	n.Wake()
	waitFor(t, "the post", fs.changed, func() bool { p, _, _ := fs.snapshot(); return len(p) == 1 })
	posts, _, _ := fs.snapshot()
	blocks := posts[0].Get("blocks")
	for _, want := range []string{"rm -r logs", "deletes logs recursively (high)", "no rule matched", "in your directory", "!date^", "Approve", "Deny", "#q=t1/q1"} {
		if !strings.Contains(blocks, want) {
			t.Errorf("the message lacks %q: %s", want, blocks)
		}
	}
	approve, block := button(t, posts[0], "tollgate_approve")
	if code := press(t, h, fs, signingSecret, time.Now(), "U1", "C1", block, "tollgate_approve", approve); code != 200 {
		t.Fatalf("press: %d", code)
	}
	got, _ := store.GetQuestion(context.Background(), "t1", "q1")
	if got.Status != checkpoint.QuestionAnswered || got.AnsweredBy != "alice (Slack)" || !strings.Contains(string(got.Answer), q.Digest) {
		t.Fatalf("after the press: %+v", got)
	}
	_, updates, _ := fs.snapshot()
	if len(updates) == 0 || !strings.Contains(updates[0].Get("blocks"), "approved by alice (Slack)") {
		t.Errorf("the message was not updated with who answered: %v", updates)
	}
	// Replayed (the same request again, and the same action): refused.
	press(t, h, fs, signingSecret, time.Now(), "U1", "C1", block, "tollgate_approve", approve)
	deny, _ := button(t, posts[0], "tollgate_deny")
	press(t, h, fs, signingSecret, time.Now(), "U1", "C1", block, "tollgate_deny", deny)
	_, _, replies := fs.snapshot()
	if len(replies) != 2 || !strings.Contains(replies[0], "Already approved by alice") || !strings.Contains(replies[1], "Already approved") {
		t.Errorf("replays: %q", replies)
	}
	got2, _ := store.GetQuestion(context.Background(), "t1", "q1")
	if string(got2.Answer) != string(got.Answer) {
		t.Errorf("the answer changed: %s", got2.Answer)
	}
}

// Altered, expired, cross-question, unsigned, someone else's, or
// with a stale Slack timestamp: nothing is answered.
func TestSlackRefusals(t *testing.T) {
	n, store, fs, clk, h := slackSetup(t)
	ask(t, store, "t1", "q1", "rm a", clk.Now(), 3*time.Minute, nil)
	ask(t, store, "t1", "q2", "rm b", clk.Now(), 3*time.Minute, nil)
	n.Wake()
	waitFor(t, "the posts", fs.changed, func() bool { p, _, _ := fs.snapshot(); return len(p) == 2 })
	posts, _, _ := fs.snapshot()
	byQ := map[string]url.Values{}
	for _, p := range posts {
		if strings.Contains(p.Get("blocks"), "rm a") {
			byQ["q1"] = p
		} else {
			byQ["q2"] = p
		}
	}
	a1, b1 := button(t, byQ["q1"], "tollgate_approve")
	_, b2 := button(t, byQ["q2"], "tollgate_approve")
	d1, _ := button(t, byQ["q1"], "tollgate_deny")
	body, sig, _ := strings.Cut(a1, ".")
	altered := body[:len(body)-2] + "x" + body[len(body)-1:] + "." + sig
	cases := []struct {
		name                             string
		secret                           string
		at                               time.Time
		user, channel, block, act, value string
		code                             int
		reply                            string
	}{
		{"altered action", signingSecret, time.Now(), "U1", "C1", b1, "tollgate_approve", altered, 200, "not signed by this tollgate"},
		{"cross-question", signingSecret, time.Now(), "U1", "C1", b2, "tollgate_approve", a1, 200, "does not belong"},
		{"deny action on approve", signingSecret, time.Now(), "U1", "C1", b1, "tollgate_approve", d1, 200, "does not belong"},
		{"another channel", signingSecret, time.Now(), "U1", "C2", b1, "tollgate_approve", a1, 200, "does not belong"},
		{"not a reviewer", signingSecret, time.Now(), "U9", "C1", b1, "tollgate_approve", a1, 200, "not one of the reviewers"},
		{"Slack signature wrong", "other", time.Now(), "U1", "C1", b1, "tollgate_approve", a1, 401, ""},
		{"Slack request stale", signingSecret, time.Now().Add(-6 * time.Minute), "U1", "C1", b1, "tollgate_approve", a1, 401, ""},
	}
	for _, c := range cases {
		_, _, before := fs.snapshot()
		if code := press(t, h, fs, c.secret, c.at, c.user, c.channel, c.block, c.act, c.value); code != c.code {
			t.Errorf("%s: status %d, want %d", c.name, code, c.code)
		}
		_, _, after := fs.snapshot()
		if c.reply != "" && (len(after) != len(before)+1 || !strings.Contains(after[len(after)-1], c.reply) || !strings.Contains(after[len(after)-1], "https://tollgate.example.com")) {
			t.Errorf("%s: replies %q, want one saying %q with the page's link", c.name, after[len(before):], c.reply)
		}
	}
	// Expired: the question's deadline passed.
	clk.Advance(3*time.Minute + time.Second)
	press(t, h, fs, signingSecret, time.Now(), "U1", "C1", b1, "tollgate_approve", a1)
	_, _, replies := fs.snapshot()
	if !strings.Contains(replies[len(replies)-1], "expired") {
		t.Errorf("expired: %q", replies[len(replies)-1])
	}
	for _, id := range []string{"q1", "q2"} {
		if q, _ := store.GetQuestion(context.Background(), "t1", id); q.Status != checkpoint.QuestionPending {
			t.Errorf("%s was answered: %+v", id, q)
		}
	}
}

// Answered elsewhere (the page, the API): the message is updated to say
// who answered, what and when, and loses its buttons; a timeout too.
func TestSlackUpdatedWhenAnsweredElsewhere(t *testing.T) {
	n, store, fs, clk, _ := slackSetup(t)
	q1 := ask(t, store, "t1", "q1", "rm a", clk.Now(), 3*time.Minute, nil)
	q2 := ask(t, store, "t1", "q2", "rm b", clk.Now(), 3*time.Minute, nil)
	n.Wake()
	waitFor(t, "the posts", fs.changed, func() bool { p, _, _ := fs.snapshot(); return len(p) == 2 })
	resolve(t, store, q1, "deny", "bob", clk.Now())
	clk.Advance(3 * time.Minute)
	if _, err := store.Commit(context.Background(), checkpoint.ResolveBatch(q2, checkpoint.Resolution{Status: checkpoint.QuestionTimedOut, By: "timeout", At: clk.Now()})); err != nil {
		t.Fatal(err)
	}
	n.Wake()
	waitFor(t, "the updates", fs.changed, func() bool { _, u, _ := fs.snapshot(); return len(u) == 2 })
	posts, updates, _ := fs.snapshot()
	tsOf := map[string]string{}
	for _, p := range posts {
		tsOf[p.Get("ts")] = p.Get("blocks")
	}
	for _, u := range updates {
		b := u.Get("blocks")
		if tsOf[u.Get("ts")] == "" {
			t.Errorf("an update of a message never posted: %v", u)
		}
		if strings.Contains(b, "tollgate_approve") {
			t.Errorf("an answered message keeps its buttons: %s", b)
		}
		if !strings.Contains(b, "denied by bob") && !strings.Contains(b, "timed out") {
			t.Errorf("update says neither: %s", b)
		}
		if !strings.Contains(b, "!date^") {
			t.Errorf("update says not when: %s", b)
		}
	}
}
