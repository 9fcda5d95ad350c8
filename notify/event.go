package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/display"
)

// Event types, as webhooks receive them in "type".
const (
	QuestionCreated  = "question.created"
	QuestionResolved = "question.resolved"
	// DeadlineNear: a question still waits as its deadline nears (at the
	// rule's escalate.after, or near_deadline before the deadline); its
	// escalation groups are told too.
	DeadlineNear = "question.deadline_near"
	RunFailed    = "run.failed"
)

// Channels of a delivery.
const (
	ChannelWebhook = "webhook"
	ChannelSlack   = "slack"
	ChannelEmail   = "email"
)

// Route is whom a question's rule tells (the policy's notify: and
// escalate:, kept in the question's details under "notify").
type Route struct {
	To       []string `json:"to,omitempty"`
	Escalate *struct {
		After string   `json:"after"`
		To    []string `json:"to"`
	} `json:"escalate,omitempty"`
}

// escalateAfter is the escalation's delay (zero: none).
func (r *Route) escalateAfter() time.Duration {
	if r == nil || r.Escalate == nil {
		return 0
	}
	d, _ := time.ParseDuration(r.Escalate.After)
	return d
}

// Payload is a webhook's body, as the Standard Webhooks spec shapes it:
// the type, when it happened, and the data.
type Payload struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      Data      `json:"data"`
}

// Data is what an event says of its question or run.
type Data struct {
	ThreadID   string `json:"thread_id"`
	QuestionID string `json:"question_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	CallID     string `json:"call_id,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Tool       string `json:"tool,omitempty"`
	// Summary is the call in one line ("bash: rm -r logs").
	Summary string `json:"summary,omitempty"`
	// Details are the policy's (why, matched_rule, effects, risk,
	// runs, ...), as the question holds them.
	Details  map[string]any `json:"details,omitempty"`
	Digest   string         `json:"digest,omitempty"`
	Status   string         `json:"status,omitempty"`
	Deadline *time.Time     `json:"deadline,omitempty"`
	// Resolution says how the question ended ("approved by alice").
	Resolution string     `json:"resolution,omitempty"`
	AnsweredBy string     `json:"answered_by,omitempty"`
	ResolvedAt *time.Time `json:"resolved_at,omitempty"`
	// Groups were told; EscalatedTo are told as the deadline nears.
	Groups      []string `json:"groups,omitempty"`
	EscalatedTo []string `json:"escalated_to,omitempty"`
	// Error is why a run failed.
	Error string `json:"error,omitempty"`
	// URL opens the question (or the thread) on the reviewer page.
	URL string `json:"url,omitempty"`
}

// questionInfo is what a question's payload says of its call.
type questionInfo struct {
	details map[string]any
	route   *Route
}

func infoOf(q *checkpoint.Question) questionInfo {
	var p struct {
		Details map[string]any `json:"details"`
	}
	_ = json.Unmarshal(q.Payload, &p)
	info := questionInfo{details: p.Details}
	if raw, ok := p.Details["notify"]; ok {
		b, _ := json.Marshal(raw)
		var r Route
		if json.Unmarshal(b, &r) == nil {
			info.route = &r
		}
	}
	return info
}

// groups returns whom q's rule tells (the configuration's default when
// it names nobody), and whom its escalation tells.
func (c *Config) groups(q *checkpoint.Question) (to, escalate []string) {
	info := infoOf(q)
	to = c.Default
	if r := info.route; r != nil && len(r.To) > 0 {
		to = r.To
	}
	if r := info.route; r != nil && r.Escalate != nil {
		escalate = r.Escalate.To
	}
	return to, escalate
}

// nearAt is when q's deadline_near event comes (zero: never): at the
// escalation's time, or near_deadline before the deadline (half the
// question's time when that is shorter).
func (c *Config) nearAt(q *checkpoint.Question) time.Time {
	if q.Deadline.IsZero() && infoOf(q).route.escalateAfter() == 0 {
		return time.Time{}
	}
	if d := infoOf(q).route.escalateAfter(); d > 0 {
		at := q.CreatedAt.Add(d)
		if !q.Deadline.IsZero() && !at.Before(q.Deadline) {
			return time.Time{}
		}
		return at
	}
	near := time.Duration(c.NearDeadline)
	if near <= 0 {
		return time.Time{}
	}
	if total := q.Deadline.Sub(q.CreatedAt); near > total/2 {
		near = total / 2
	}
	return q.Deadline.Add(-near)
}

// questionURL opens q on the reviewer page.
func (c *Config) questionURL(threadID, questionID string) string {
	if c.BaseURL == "" {
		return ""
	}
	return c.BaseURL + "/#q=" + url.PathEscape(threadID) + "/" + url.PathEscape(questionID)
}

func (c *Config) threadURL(threadID string) string {
	if c.BaseURL == "" {
		return ""
	}
	return c.BaseURL + "/#t=" + url.PathEscape(threadID)
}

// questionData is the data of an event about q.
func (c *Config) questionData(q *checkpoint.Question) Data {
	d := Data{
		ThreadID: q.ThreadID, QuestionID: q.ID, RunID: q.RunID, CallID: q.CallID, Kind: q.Kind, Tool: q.Tool,
		Summary: display.Summary(q), Digest: q.Digest, Status: string(q.Status),
		URL: c.questionURL(q.ThreadID, q.ID),
	}
	info := infoOf(q)
	if len(info.details) > 0 {
		d.Details = info.details
	}
	if !q.Deadline.IsZero() {
		t := q.Deadline.UTC()
		d.Deadline = &t
	}
	if q.Status != checkpoint.QuestionPending {
		d.Resolution = display.Resolution(q)
		d.AnsweredBy = q.AnsweredBy
		if !q.ResolvedAt.IsZero() {
			t := q.ResolvedAt.UTC()
			d.ResolvedAt = &t
		}
	}
	d.Groups, d.EscalatedTo = c.groups(q)
	return d
}

// deliveries are the deliveries of one event to each destination of the
// groups, once each (a destination two groups share is told once). key
// names the event, the same however often it is made.
func (c *Config) deliveries(typ, key string, p Payload, groups []string) ([]*checkpoint.Delivery, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("notify: encoding %s: %w", typ, err)
	}
	var out []*checkpoint.Delivery
	seen := map[string]bool{}
	add := func(channel, target string) {
		if seen[channel+" "+target] {
			return
		}
		seen[channel+" "+target] = true
		out = append(out, &checkpoint.Delivery{
			ID: deliveryID(key, channel, target), Event: typ, ThreadID: p.Data.ThreadID, QuestionID: p.Data.QuestionID,
			Channel: channel, Target: target, Payload: body, State: checkpoint.DeliveryPending,
		})
	}
	for _, name := range groups {
		g := c.Groups[name]
		if g == nil {
			continue
		}
		for _, w := range g.Webhooks {
			add(ChannelWebhook, w.URL)
		}
		if typ == RunFailed {
			continue // a run's failure goes to webhooks only: there is nothing to answer
		}
		for _, ch := range g.Slack {
			add(ChannelSlack, ch)
		}
		for _, a := range g.Email {
			add(ChannelEmail, a)
		}
	}
	return out, nil
}

// deliveryID is the idempotency key of an event's delivery to a
// destination: "msg_" and 32 hex digits, the same every time.
func deliveryID(key, channel, target string) string {
	h := sha256.Sum256([]byte(key + "\x00" + channel + "\x00" + target))
	return "msg_" + hex.EncodeToString(h[:16])
}

// created is the question.created deliveries of q.
func (c *Config) created(q *checkpoint.Question) ([]*checkpoint.Delivery, error) {
	d := c.questionData(q)
	return c.deliveries(QuestionCreated, "created\x00"+q.ThreadID+"\x00"+q.ID,
		Payload{Type: QuestionCreated, Timestamp: q.CreatedAt.UTC(), Data: d}, d.Groups)
}

// resolved is the question.resolved deliveries of q: to whom its
// creation was told, and its escalation's groups when the deadline_near
// moment had come.
func (c *Config) resolved(q *checkpoint.Question) ([]*checkpoint.Delivery, error) {
	d := c.questionData(q)
	groups := d.Groups
	if at := c.nearAt(q); !at.IsZero() && !q.ResolvedAt.Before(at) {
		groups = union(groups, d.EscalatedTo)
	}
	at := q.ResolvedAt
	if at.IsZero() {
		at = time.Now()
	}
	return c.deliveries(QuestionResolved, "resolved\x00"+q.ThreadID+"\x00"+q.ID,
		Payload{Type: QuestionResolved, Timestamp: at.UTC(), Data: d}, groups)
}

// near is the question.deadline_near deliveries of q, at.
func (c *Config) near(q *checkpoint.Question, at time.Time) ([]*checkpoint.Delivery, error) {
	d := c.questionData(q)
	return c.deliveries(DeadlineNear, "near\x00"+q.ThreadID+"\x00"+q.ID,
		Payload{Type: DeadlineNear, Timestamp: at.UTC(), Data: d}, union(d.Groups, d.EscalatedTo))
}

// failed is the run.failed deliveries of the run_finished event e (one
// with an error), to the default groups.
func (c *Config) failed(e *checkpoint.Event, errText string) ([]*checkpoint.Delivery, error) {
	d := Data{ThreadID: e.ThreadID, RunID: e.RunID, Error: errText, URL: c.threadURL(e.ThreadID), Groups: c.Default}
	return c.deliveries(RunFailed, fmt.Sprintf("failed\x00%s\x00%s\x00%d", e.ThreadID, e.RunID, e.At.UnixNano()),
		Payload{Type: RunFailed, Timestamp: e.At.UTC(), Data: d}, c.Default)
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
