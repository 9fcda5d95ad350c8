package notify_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/notify"
)

// The Standard Webhooks spec's published vectors (the reference
// libraries' tests: Python's and Go's test_sign, Rust's test_sign).
func TestStandardWebhooksVectors(t *testing.T) {
	for _, v := range []struct {
		secret, id string
		ts         int64
		body, want string
	}{
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, `{"test": 2432232314}`,
			"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
		{"whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD", "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1649367553, `{"email":"test@example.com","username":"test_user"}`,
			"v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="},
	} {
		h, err := notify.Sign(v.secret, v.id, time.Unix(v.ts, 0), []byte(v.body))
		if err != nil {
			t.Fatal(err)
		}
		if got := h.Get("webhook-signature"); got != v.want {
			t.Errorf("signature of %s = %q, want %q", v.id, got, v.want)
		}
		if h.Get("webhook-id") != v.id || h.Get("webhook-timestamp") != strconv.FormatInt(v.ts, 10) {
			t.Errorf("headers %v", h)
		}
	}
	// A fresh one verifies, and an altered body, id or timestamp does not.
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	h, _ := notify.Sign(secret, "msg_1", time.Now(), []byte(`{"a":1}`))
	if err := notify.Verify(secret, h, []byte(`{"a":1}`)); err != nil {
		t.Fatalf("a fresh signature: %v", err)
	}
	if notify.Verify(secret, h, []byte(`{"a":2}`)) == nil {
		t.Error("an altered body verified")
	}
	h2 := h.Clone()
	h2.Set("webhook-id", "msg_2")
	if notify.Verify(secret, h2, []byte(`{"a":1}`)) == nil {
		t.Error("another id verified")
	}
	old, _ := notify.Sign(secret, "msg_1", time.Now().Add(-10*time.Minute), []byte(`{"a":1}`))
	if notify.Verify(secret, old, []byte(`{"a":1}`)) == nil {
		t.Error("a ten-minute-old timestamp verified")
	}
	if _, err := notify.Sign("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "m", time.Now(), nil); err == nil {
		t.Error("a secret without whsec_ was taken")
	}
}

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func webhookConfig(t *testing.T, url string, extra string) *notify.Config {
	t.Helper()
	cfg, err := notify.Parse("notify.yaml", []byte(`
base_url: https://tollgate.example.com
default: [team]
groups:
  team:
    webhooks: [{url: "`+url+`", secret_env: HOOK_SECRET}]
`+extra), func(k string) string {
		return map[string]string{"HOOK_SECRET": testSecret, "SLACK_TOKEN": "xoxb-test", "SLACK_SIGNING": "signing-secret",
			"ACTION_SECRET": strings.Repeat("k", 32)}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func start(t *testing.T, n *notify.Notifier) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// A question's webhook is signed per the spec, carries the call, what it
// will do and the link; a failed try is retried after a backoff with the
// same webhook-id and body; the answer is a question.resolved event.
func TestWebhookRetriedSignedAndResolved(t *testing.T) {
	store := memory.New()
	clk := clock.NewFake(time.Now())
	rcv := newReceiver(t, 1)
	n, err := notify.New(notify.Options{Config: webhookConfig(t, rcv.srv.URL, ""), Store: store, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	start(t, n)
	q := ask(t, store, "t1", "hitl_c1", "rm -r logs", clk.Now(), 3*time.Minute,
		map[string]any{"why": "no rule matched rm -r logs", "risk": "high", "matched_rule": "(default)"})
	n.Wake()
	rcv.wait(t, 1)
	for i := 0; len(rcv.all()) < 2 && i < 200; i++ {
		clk.Advance(time.Second) // the backoff after the 500
		n.Wake()
		time.Sleep(10 * time.Millisecond)
	}
	got := rcv.wait(t, 2)
	if got[0].header.Get("webhook-id") != got[1].header.Get("webhook-id") || string(got[0].body) != string(got[1].body) {
		t.Errorf("the retry is another message: %v / %v", got[0].header, got[1].header)
	}
	if err := notify.Verify(testSecret, got[1].header, got[1].body); err != nil {
		t.Errorf("the webhook does not verify: %v", err)
	}
	var p notify.Payload
	if err := json.Unmarshal(got[1].body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != notify.QuestionCreated || p.Data.Summary != "bash: rm -r logs" || p.Data.Details["why"] != "no rule matched rm -r logs" ||
		p.Data.URL != "https://tollgate.example.com/#q=t1/hitl_c1" || p.Data.Digest != q.Digest {
		t.Errorf("payload %s", got[1].body)
	}
	resolve(t, store, q, "approve", "alice", clk.Now())
	n.Wake()
	got = rcv.wait(t, 3)
	json.Unmarshal(got[2].body, &p)
	if p.Type != notify.QuestionResolved || p.Data.Resolution != "approved by alice" || p.Data.AnsweredBy != "alice" {
		t.Errorf("resolved payload %s", got[2].body)
	}
	var ds []*checkpoint.Delivery
	for i := 0; i < 1000 && len(ds) < 2; i++ {
		time.Sleep(5 * time.Millisecond)
		ds, _ = n.Deliveries(context.Background(), checkpoint.DeliveryDelivered, 10)
	}
	if len(ds) != 2 || ds[0].Attempts+ds[1].Attempts != 3 {
		t.Errorf("delivered: %+v", ds)
	}
}

// A receiver that keeps failing: the delivery is dead after MaxAttempts,
// listed, and its error names the URL but no query.
func TestDeadLetter(t *testing.T) {
	store := memory.New()
	clk := clock.NewFake(time.Now())
	rcv := newReceiver(t, 1000)
	cfg := webhookConfig(t, rcv.srv.URL+"/hook?token=abc", "max_attempts: 3\n")
	n, _ := notify.New(notify.Options{Config: cfg, Store: store, Clock: clk})
	start(t, n)
	ask(t, store, "t1", "q1", "touch x", clk.Now(), time.Hour, nil)
	n.Wake()
	var dead []*checkpoint.Delivery
	for i := 0; i < 500 && len(dead) == 0; i++ {
		clk.Advance(time.Second)
		n.Wake()
		time.Sleep(5 * time.Millisecond)
		dead, _ = n.Deliveries(context.Background(), checkpoint.DeliveryDead, 10)
	}
	if len(dead) != 1 || dead[0].Attempts != 3 || !strings.Contains(dead[0].LastError, "500") || strings.Contains(dead[0].LastError, "abc") {
		t.Fatalf("dead letters: %+v", dead)
	}
	if len(rcv.all()) != 3 {
		t.Errorf("%d tries, want 3", len(rcv.all()))
	}
}

// Only http and https webhooks; secrets from the environment or files,
// never in the file.
func TestConfigRefuses(t *testing.T) {
	env := func(k string) string { return map[string]string{"S": testSecret}[k] }
	for _, tc := range []struct{ name, yaml, want string }{
		{"file scheme", `groups: {g: {webhooks: [{url: "file:///etc/passwd", secret_env: S}]}}`, "only http and https"},
		{"unix", `groups: {g: {webhooks: [{url: "unix:///run/x.sock", secret_env: S}]}}`, "only http and https"},
		{"no secret", `groups: {g: {webhooks: [{url: "https://h.example/x"}]}}`, "secret_env"},
		{"literal secret", `groups: {g: {webhooks: [{url: "https://h.example/x", secret: "whsec_x"}]}}`, "unknown field"},
		{"unset env", `groups: {g: {webhooks: [{url: "https://h.example/x", secret_env: NOPE}]}}`, "NOPE is empty"},
		{"unknown default", `default: [nobody]
groups: {g: {webhooks: [{url: "https://h.example/x", secret_env: S}]}}`, `group "nobody"`},
		{"smtp in clear", `smtp: {host: mail.example.com, from: a@b.c, tls: none}`, "loopback"},
	} {
		_, err := notify.Parse("n.yaml", []byte(tc.yaml), env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// Events the notifier reads more than an hour after they happened (the
// notifications were off meanwhile) are not sent.
func TestStaleEventsNotSent(t *testing.T) {
	store := memory.New()
	clk := clock.NewFake(time.Now())
	rcv := newReceiver(t, 0)
	outbox := notify.NewMemoryOutbox()
	ask(t, store, "t1", "old", "touch old", clk.Now(), 3*time.Hour, nil)
	// The cursor was left before it, by an earlier run of the notifier.
	evs, _ := store.ListEvents(context.Background(), "", 0, 10)
	if err := outbox.AddDeliveries(context.Background(), nil, evs[0].Seq); err != nil {
		t.Fatal(err)
	}
	ask(t, store, "t1", "old2", "touch old2", clk.Now(), 3*time.Hour, nil)
	clk.Advance(2 * time.Hour)
	ask(t, store, "t1", "new", "touch new", clk.Now(), 3*time.Hour, nil)
	n, _ := notify.New(notify.Options{Config: webhookConfig(t, rcv.srv.URL, ""), Store: store, Clock: clk, Outbox: outbox})
	start(t, n)
	n.Wake()
	got := rcv.wait(t, 1)
	time.Sleep(50 * time.Millisecond)
	if len(rcv.all()) != 1 || !strings.Contains(string(got[0].body), `"question_id":"new"`) {
		t.Errorf("sent %d: %s", len(rcv.all()), got[0].body)
	}
}
