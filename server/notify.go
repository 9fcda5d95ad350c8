package server

import (
	"context"
	"net/http"

	"github.com/tollgate-ai/tollgate/apiclient"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/notify"
)

// Notifications are what the server serves of package notify.
type Notifications struct {
	// Handler serves /notify/: Slack's interactivity requests and mail
	// links. They take no bearer token: a Slack request is checked by
	// Slack's signature, an answer by the action tollgate signed into
	// its message (notify.Notifier.Handler).
	Handler http.Handler
	// Deliveries lists deliveries by state, the latest first: the host's
	// outbox (notify.Notifier.Deliveries) or River's jobs
	// (cluster.Cluster.Deliveries).
	Deliveries func(ctx context.Context, state checkpoint.DeliveryState, limit int) ([]*checkpoint.Delivery, error)
}

// GET /v1/notify/deliveries?state=dead|pending|delivered|all&limit=N
func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request, id *identity) error {
	if s.notifications == nil || s.notifications.Deliveries == nil {
		return notFound("this server sends no notifications (serve --notify-config FILE)")
	}
	q := r.URL.Query()
	if err := checkParams(q, "state", "limit"); err != nil {
		return err
	}
	var state checkpoint.DeliveryState
	switch st := q.Get("state"); st {
	case "", "dead":
		state = checkpoint.DeliveryDead
	case "pending", "delivered":
		state = checkpoint.DeliveryState(st)
	case "all":
	default:
		return badRequest("state must be dead, pending, delivered or all, not %q", st)
	}
	limit, err := intParam(q, "limit", 50, 1, 500)
	if err != nil {
		return err
	}
	ds, err := s.notifications.Deliveries(r.Context(), state, int(limit))
	if err != nil {
		return err
	}
	out := struct {
		Deliveries []apiclient.Delivery `json:"deliveries"`
	}{Deliveries: []apiclient.Delivery{}}
	for _, d := range ds {
		// A reviewer limited to some threads sees theirs only.
		if d.ThreadID != "" && !id.sees(d.ThreadID) {
			continue
		}
		v := apiclient.DeliveryOf(d)
		v.Target = notify.Shown(d.Target)
		out.Deliveries = append(out.Deliveries, v)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
