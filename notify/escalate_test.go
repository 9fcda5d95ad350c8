package notify_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/notify"
)

func types(rs []received) []string {
	var out []string
	for _, r := range rs {
		var p notify.Payload
		_ = json.Unmarshal(r.body, &p)
		out = append(out, p.Type)
	}
	return out
}

// escalate: {after: 2m, to: [oncall]}: at 2 minutes, not a moment
// before, the rule's group and oncall hear question.deadline_near, once,
// restarts included; a question answered before then is never
// escalated, and oncall hears of the answer to one that was.
func TestEscalationOnceAtTheRightTime(t *testing.T) {
	store := memory.New()
	outbox := notify.NewMemoryOutbox()
	start0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start0)
	team, oncall := newReceiver(t, 0), newReceiver(t, 0)
	cfg, err := notify.Parse("n.yaml", []byte(`
groups:
  team: {webhooks: [{url: "`+team.srv.URL+`", secret_env: S}]}
  oncall: {webhooks: [{url: "`+oncall.srv.URL+`", secret_env: S}]}
`), func(string) string { return testSecret })
	if err != nil {
		t.Fatal(err)
	}
	route := map[string]any{"notify": map[string]any{"to": []any{"team"}, "escalate": map[string]any{"after": "2m0s", "to": []any{"oncall"}}}}
	run := func() (*notify.Notifier, func()) {
		n, err := notify.New(notify.Options{Config: cfg, Store: store, Outbox: outbox, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = n.Run(ctx) }()
		return n, func() { cancel(); <-done }
	}
	n, stop := run()
	q := ask(t, store, "t1", "q1", "rm -r logs", clk.Now(), 3*time.Minute, route)
	early := ask(t, store, "t1", "q2", "rm -r tmp", clk.Now(), 3*time.Minute, route)
	n.Wake()
	team.wait(t, 2)
	resolve(t, store, early, "approve", "alice", clk.Now().Add(time.Minute))
	n.Wake()
	team.wait(t, 3)

	settle := func() {
		for i := 0; i < 20; i++ {
			n.Wake()
			time.Sleep(5 * time.Millisecond)
		}
	}
	clk.Advance(2*time.Minute - time.Millisecond)
	settle()
	if got := types(oncall.all()); len(got) != 0 {
		t.Fatalf("oncall heard before 2m: %v", got)
	}
	if q.Deadline.Sub(q.CreatedAt) != 3*time.Minute {
		t.Fatal("setup")
	}
	clk.Advance(time.Millisecond)
	got := oncall.wait(t, 1)
	if types(got)[0] != notify.DeadlineNear {
		t.Fatalf("oncall got %v", types(got))
	}
	var p notify.Payload
	json.Unmarshal(got[0].body, &p)
	if p.Data.QuestionID != "q1" || strings.Join(p.Data.EscalatedTo, ",") != "oncall" || !p.Timestamp.Equal(start0.Add(2*time.Minute)) {
		t.Errorf("near payload %s", got[0].body)
	}
	team.wait(t, 4)
	for i := 0; i < 1000; i++ {
		ds, _ := outbox.ListDeliveries(context.Background(), checkpoint.DeliveryPending, 10)
		if len(ds) == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A restart after the escalation: not sent again.
	stop()
	n, stop = run()
	defer func() { stop() }()
	settle()
	clk.Advance(10 * time.Second)
	settle()
	if got := types(oncall.all()); len(got) != 1 {
		t.Errorf("oncall after a restart: %v", got)
	}
	if got := types(team.all()); strings.Join(got, ",") != "question.created,question.created,question.resolved,question.deadline_near" {
		t.Errorf("team heard %v", got)
	}
	// The answer reaches oncall too: it was escalated.
	resolve(t, store, q, "deny", "bob", clk.Now())
	n.Wake()
	if got := types(oncall.wait(t, 2)); got[1] != notify.QuestionResolved {
		t.Errorf("oncall: %v", got)
	}
	ds, _ := outbox.ListDeliveries(context.Background(), "", 100)
	near := 0
	for _, d := range ds {
		if d.Event == notify.DeadlineNear {
			near++
			if d.QuestionID != "q1" {
				t.Errorf("an escalation of %s", d.QuestionID)
			}
		}
	}
	if near != 2 {
		t.Errorf("%d deadline_near deliveries, want 2 (team and oncall)", near)
	}
}
