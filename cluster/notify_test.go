package cluster_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/cluster"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/notify"
)

// In cluster mode a question's notifications are River jobs committed
// with it: the webhook receives question.created, signed, then
// question.resolved once answered; a receiver that keeps failing leaves
// a dead letter, listed.
func TestNotifyThroughRiver(t *testing.T) {
	w := newWorld(t)
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	var mu sync.Mutex
	var got []notify.Payload
	ok := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := notify.Verify(secret, r.Header, body); err != nil {
			t.Errorf("a webhook that does not verify: %v", err)
		}
		var p notify.Payload
		_ = json.Unmarshal(body, &p)
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	}))
	defer ok.Close()
	down := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { http.Error(rw, "down", http.StatusServiceUnavailable) }))
	defer down.Close()
	cfg, err := notify.Parse("n.yaml", []byte(`
default: [team, broken]
max_attempts: 2
groups:
  team: {webhooks: [{url: "`+ok.URL+`", secret_env: S}]}
  broken: {webhooks: [{url: "`+down.URL+`", secret_env: S}]}
`), func(string) string { return secret })
	if err != nil {
		t.Fatal(err)
	}
	store, err := postgres.Open(context.Background(), w.dsn, &postgres.Options{Schema: w.schema})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	n, err := notify.New(notify.Options{Config: cfg, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	r := w.replicaWith(t, cluster.Config{LeaseTTL: 2 * time.Second, ReconcileEvery: -1, Notifier: n}, time.Minute)
	n.SetAnswerer(r.h)
	if _, _, err := r.h.Prompt(context.Background(), "t1", "t1\n$ rm -r logs", nil); err != nil {
		t.Fatal(err)
	}
	qs := pending(t, r.store, "t1", 1)
	types := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, p := range got {
			out = append(out, p.Type)
		}
		return out
	}
	eventually(t, "question.created", 15*time.Second, func() (bool, error) { return len(types()) == 1, nil })
	a, _ := json.Marshal(hitl.ApproveAnswer{Decision: "approve", Digest: qs[0].Digest})
	if _, err := r.h.Answer(context.Background(), "t1", qs[0].ID, a, "alice"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "question.resolved", 15*time.Second, func() (bool, error) { return len(types()) == 2, nil })
	if ts := types(); ts[0] != notify.QuestionCreated || ts[1] != notify.QuestionResolved || got[1].Data.Resolution != "approved by alice" {
		t.Errorf("got %v %+v", ts, got[1].Data)
	}
	eventually(t, "two dead letters", 30*time.Second, func() (bool, error) {
		dead, err := r.c.Deliveries(context.Background(), checkpoint.DeliveryDead, 10)
		return len(dead) == 2 && dead[0].Target == down.URL && dead[0].Attempts == 2 && dead[0].LastError != "", err
	})
	delivered, _ := r.c.Deliveries(context.Background(), checkpoint.DeliveryDelivered, 10)
	if len(delivered) != 2 {
		t.Errorf("delivered: %d, want 2", len(delivered))
	}
}
