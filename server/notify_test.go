package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/server"
)

// GET /v1/notify/deliveries lists dead letters to reviewers (theirs only,
// a URL's query left out); /notify/ is the notifier's, with no token.
func TestNotifyRoutes(t *testing.T) {
	ds := []*checkpoint.Delivery{
		{ID: "msg_1", Event: "question.created", ThreadID: "team-b-1", QuestionID: "q", Channel: "webhook", Target: "https://h.example/x?token=s", State: checkpoint.DeliveryDead, Attempts: 12, LastError: "503"},
		{ID: "msg_2", Event: "question.created", ThreadID: "team-a-1", QuestionID: "q", Channel: "slack", Target: "C1", State: checkpoint.DeliveryDead},
	}
	var asked checkpoint.DeliveryState
	f := setup(t, &options{cfg: func(c *server.Config) {
		c.Notifications = &server.Notifications{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("notifier " + r.URL.Path)) }),
			Deliveries: func(ctx context.Context, st checkpoint.DeliveryState, limit int) ([]*checkpoint.Delivery, error) {
				asked = st
				return ds, nil
			},
		}
	}})
	body := f.do("GET", "/v1/notify/deliveries", aliceSecret, nil).want(t, 200, "").json(t)
	list := body["deliveries"].([]any)
	if len(list) != 2 || asked != checkpoint.DeliveryDead || list[0].(map[string]any)["target"] != "https://h.example/x?…" {
		t.Errorf("alice sees %v (asked %q)", body, asked)
	}
	body = f.do("GET", "/v1/notify/deliveries?state=all", bobSecret, nil).want(t, 200, "").json(t)
	if list := body["deliveries"].([]any); len(list) != 1 || list[0].(map[string]any)["thread_id"] != "team-b-1" || asked != "" {
		t.Errorf("bob sees %v", body)
	}
	f.do("GET", "/v1/notify/deliveries", clientSecret, nil).want(t, 403, "forbidden")
	f.do("GET", "/v1/notify/deliveries?state=lost", aliceSecret, nil).want(t, 400, "bad_request")
	if r := f.do("POST", "/notify/slack", "", nil); r.status != 200 || !strings.Contains(string(r.body), "notifier /notify/slack") {
		t.Errorf("/notify/slack: %d %s", r.status, r.body)
	}
}

func TestNotifyRoutesOff(t *testing.T) {
	f := setup(t, nil)
	f.do("GET", "/v1/notify/deliveries", aliceSecret, nil).want(t, 404, "not_found")
}
