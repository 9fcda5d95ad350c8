package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/host"
)

// Answerer takes answers given from a notification (a Slack button, a
// mail link) as the API takes them: checked, bound to the digest, in the
// name of who gave them. *host.Host is one.
type Answerer interface {
	AnswerWith(ctx context.Context, threadID, questionID string, answer json.RawMessage, o host.AnswerOptions) (*checkpoint.Question, error)
}

// Options build a [Notifier]. Config and Store are required.
type Options struct {
	Config *Config
	Store  checkpoint.Store
	// Outbox keeps the deliveries until they are delivered. Zero: the
	// store's, when it is a [checkpoint.Outbox] (SQLite), else one in
	// memory. (Package cluster delivers through River's jobs instead and
	// never calls Run.)
	Outbox checkpoint.Outbox
	// Answerer takes the answers of Slack buttons and mail links. Zero:
	// they are refused.
	Answerer Answerer
	// Clock times deadline_near events and retries. Zero: the system
	// clock.
	Clock clock.Clock
	// Logger: zero is slog.Default(). Secrets are never logged.
	Logger *slog.Logger
	// HTTP sends webhooks and calls Slack. Zero: a client with a 10 s
	// timeout that follows no redirect.
	HTTP *http.Client
	// Poll is how often Run reads the store's log for events that came
	// with no notification (a run that failed; another process's
	// writes). Zero: 1s.
	Poll time.Duration
}

// Notifier tells people of questions: it turns the store's events into
// deliveries (webhooks, Slack messages, mail), keeps them in an outbox
// until they are delivered, retries with backoff, and serves the Slack
// buttons and mail links that answer. See the package documentation.
type Notifier struct {
	cfg        *Config
	store      checkpoint.Store
	outbox     checkpoint.Outbox
	answerer   Answerer
	clk        clock.Clock
	log        *slog.Logger
	http       *http.Client
	poll       time.Duration
	timeout    time.Duration
	actions    *Actions
	slack      *slack.Client
	slackHooks string
	webhooks   map[string]*Webhook

	wake chan struct{}
	mu   sync.Mutex
	near map[[2]string]time.Time // pending questions' deadline_near times, by thread and question
}

// New returns a notifier for o.
func New(o Options) (*Notifier, error) {
	if o.Config == nil || o.Store == nil {
		return nil, errors.New("notify: Options.Config and Options.Store are required")
	}
	n := &Notifier{cfg: o.Config, store: o.Store, outbox: o.Outbox, answerer: o.Answerer, clk: o.Clock, log: o.Logger,
		http: o.HTTP, poll: o.Poll, timeout: 10 * time.Second, webhooks: map[string]*Webhook{},
		wake: make(chan struct{}, 1), near: map[[2]string]time.Time{}}
	if n.outbox == nil {
		if ob, ok := o.Store.(checkpoint.Outbox); ok {
			n.outbox = ob
		} else {
			n.outbox = NewMemoryOutbox()
		}
	}
	if n.clk == nil {
		n.clk = clock.Real
	}
	if n.log == nil {
		n.log = slog.Default()
	}
	if n.http == nil {
		n.http = &http.Client{Timeout: n.timeout, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirect is a failure, never followed to another host
		}}
	}
	if n.poll <= 0 {
		n.poll = time.Second
	}
	n.actions = NewActions(o.Config.secrets["action"])
	for _, g := range o.Config.Groups {
		for _, w := range g.Webhooks {
			n.webhooks[w.URL] = w
		}
	}
	if s := o.Config.Slack; s != nil {
		opts := []slack.Option{slack.OptionHTTPClient(n.http)}
		n.slackHooks = "https://hooks.slack.com/"
		if s.APIURL != "" {
			opts = append(opts, slack.OptionAPIURL(s.APIURL))
			u, _ := url.Parse(s.APIURL)
			n.slackHooks = u.Scheme + "://" + u.Host + "/"
		}
		n.slack = slack.New(string(o.Config.secrets["slack_token"]), opts...)
	}
	return n, nil
}

// SetAnswerer sets who takes the answers of buttons and links, when it
// is made after the notifier (the host, whose cluster needs the notifier
// first).
func (n *Notifier) SetAnswerer(a Answerer) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.answerer = a
}

func (n *Notifier) getAnswerer() Answerer {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.answerer
}

// Config is the notifier's configuration.
func (n *Notifier) Config() *Config { return n.cfg }

// permanentError is a failure no retry changes: the delivery is dead at
// once.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return &permanentError{err} }

// Permanent reports whether err is a failure that no retry changes.
func Permanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// MaxAttempts is how often a delivery is tried before it is dead.
func (n *Notifier) MaxAttempts() int {
	if n.cfg.MaxAttempts > 0 {
		return n.cfg.MaxAttempts
	}
	return 12
}

// Backoff is the wait after the attempt-th failed try: 1 s doubling, at
// most 5 minutes.
func Backoff(attempt int) time.Duration {
	return min(time.Second<<min(max(attempt-1, 0), 20), 5*time.Minute)
}

// Deliver sends one delivery once and returns what the destination
// answered that later deliveries need (a Slack message's ts). A failure
// that [Permanent] reports is not worth retrying.
func (n *Notifier) Deliver(ctx context.Context, d *checkpoint.Delivery) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout+5*time.Second)
	defer cancel()
	switch d.Channel {
	case ChannelWebhook:
		return "", n.sendWebhook(ctx, d)
	case ChannelSlack:
		if n.slack == nil {
			return "", permanent(errors.New("no slack: section in the notifications file (any more)"))
		}
		return n.sendSlack(ctx, d)
	case ChannelEmail:
		if n.cfg.SMTP == nil {
			return "", permanent(errors.New("no smtp: section in the notifications file (any more)"))
		}
		return "", n.sendMail(ctx, d)
	}
	return "", permanent(fmt.Errorf("unknown channel %q", d.Channel))
}

// Fanout returns the deliveries of one event of the store's log: a
// question asked (question_asked) or resolved (question_resolved), a run
// that stopped on an error (run_finished with an error); none for other
// events.
func (n *Notifier) Fanout(ctx context.Context, e *checkpoint.Event) ([]*checkpoint.Delivery, error) {
	switch e.Type {
	case "question_asked", checkpoint.EventQuestionResolved:
		var p struct {
			QuestionID string `json:"question_id"`
		}
		if json.Unmarshal(e.Data, &p) != nil || p.QuestionID == "" {
			return nil, nil
		}
		q, err := n.store.GetQuestion(ctx, e.ThreadID, p.QuestionID)
		if errors.Is(err, checkpoint.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if e.Type == "question_asked" {
			return n.cfg.created(q)
		}
		return n.cfg.resolved(q)
	case "run_finished":
		var p struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(e.Data, &p) != nil || p.Error == "" {
			return nil, nil
		}
		return n.cfg.failed(e, p.Error)
	}
	return nil, nil
}

// FanoutQuestion returns the deliveries of q's creation
// (QuestionCreated) or resolution (QuestionResolved), from q as given:
// package cluster calls it in the transaction that commits q, where
// nothing else can read it yet.
func (n *Notifier) FanoutQuestion(typ string, q *checkpoint.Question) ([]*checkpoint.Delivery, error) {
	switch typ {
	case QuestionCreated:
		return n.cfg.created(q)
	case QuestionResolved:
		return n.cfg.resolved(q)
	}
	return nil, fmt.Errorf("notify: no question event %q", typ)
}

// NearAt is when q's deadline_near event comes (zero: never).
func (n *Notifier) NearAt(q *checkpoint.Question) time.Time { return n.cfg.nearAt(q) }

// Near returns q's deadline_near deliveries when q still waits (none
// when it was answered meanwhile: an answer by anyone ends its
// escalation).
func (n *Notifier) Near(ctx context.Context, threadID, questionID string) ([]*checkpoint.Delivery, error) {
	q, err := n.store.GetQuestion(ctx, threadID, questionID)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return nil, nil
	}
	if err != nil || q.Status != checkpoint.QuestionPending {
		return nil, err
	}
	at := n.cfg.nearAt(q)
	if at.IsZero() {
		return nil, nil
	}
	return n.cfg.near(q, at)
}

// Handler serves the routes the notifications' answers come to, under
// /notify/: POST /notify/slack (Slack's interactivity Request URL) and
// GET and POST /notify/answer (mail links). They take no bearer token:
// a Slack request is checked by Slack's signature, and an answer by the
// action this server signed into the message.
func (n *Notifier) Handler() http.Handler {
	mux := http.NewServeMux()
	if n.slack != nil {
		mux.HandleFunc("POST /notify/slack", n.slackActions)
	}
	if n.cfg.SMTP != nil && n.cfg.SMTP.AnswerLinks {
		mux.HandleFunc("GET /notify/answer", n.mailAnswer)
		mux.HandleFunc("POST /notify/answer", n.mailAnswer)
	}
	return mux
}

// Deliveries lists the outbox's deliveries in state ("" for all), the
// latest first.
func (n *Notifier) Deliveries(ctx context.Context, state checkpoint.DeliveryState, limit int) ([]*checkpoint.Delivery, error) {
	return n.outbox.ListDeliveries(ctx, state, limit)
}

// Run turns the store's events into deliveries and delivers them until
// ctx ends: the host's outbox (SQLite, memory). Each event after the
// outbox's cursor becomes its deliveries, written with the cursor in one
// transaction; each delivery is tried until it is delivered, or dead
// after MaxAttempts (kept, listed by [Notifier.Deliveries]). At its first
// start on a store, Run begins at the log's end: what happened before
// notifications were configured is not sent.
func (n *Notifier) Run(ctx context.Context) error {
	// The store's notifications only wake the loop sooner: while its feed
	// is away the poll goes on, and Follow subscribes again.
	follow, stopFollow := context.WithCancel(ctx)
	notes, err := checkpoint.Follow(follow, n.store, &checkpoint.FollowOptions{
		OnLost: func() { n.log.Warn("tollgate: notifications: the store's feed ended; subscribing again") },
		OnError: func(err error) {
			n.log.Warn("tollgate: notifications: subscribing to the store again", "err", err)
		}})
	woken := make(chan struct{})
	go func() {
		defer close(woken)
		for range notes {
			n.Wake()
		}
	}()
	defer func() {
		stopFollow()
		<-woken
	}()
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	cursor, err := n.startCursor(ctx)
	if err != nil {
		return err
	}
	if err := n.loadNear(ctx); err != nil {
		return err
	}
	for {
		if cursor, err = n.readLog(ctx, cursor); err != nil && ctx.Err() == nil {
			n.log.Warn("tollgate: notifications: reading the log", "err", err)
		}
		n.fireNear(ctx)
		n.sendDue(ctx)
		wait := n.poll
		if at, ok := n.nextNear(); ok {
			wait = min(wait, max(at.Sub(n.clk.Now()), 0))
		}
		ch, stop := n.clk.After(wait)
		select {
		case <-ctx.Done():
			stop()
			return nil
		case <-n.wake:
		case <-ch:
		}
		stop()
	}
}

// Wake makes Run look at the log and the outbox now.
func (n *Notifier) Wake() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// startCursor is the outbox's cursor; at the first start, the last
// event older than a minute before now: what happened before
// notifications were configured is not sent.
func (n *Notifier) startCursor(ctx context.Context) (int64, error) {
	cursor, err := n.outbox.OutboxCursor(ctx)
	if err != nil || cursor > 0 {
		return cursor, err
	}
	since := n.clk.Now().Add(-time.Minute)
	for {
		evs, err := n.store.ListEvents(ctx, "", cursor, 1000)
		if err != nil {
			return 0, fmt.Errorf("notify: reading the log: %w", err)
		}
		recent := slices.IndexFunc(evs, func(e *checkpoint.Event) bool { return !e.At.Before(since) })
		if recent >= 0 {
			evs = evs[:recent]
		}
		if len(evs) > 0 {
			cursor = evs[len(evs)-1].Seq
		}
		if recent >= 0 || len(evs) < 1000 {
			break
		}
	}
	if cursor > 0 {
		if err := n.outbox.AddDeliveries(ctx, nil, cursor); err != nil {
			return 0, fmt.Errorf("notify: %w", err)
		}
	}
	return cursor, nil
}

// staleAfter: an event the notifier reads this long after it happened
// is passed over (notifications configured again after a pause must not
// send weeks of questions); a restart or a crash is shorter.
const staleAfter = time.Hour

// readLog turns the events after cursor into deliveries, page by page.
func (n *Notifier) readLog(ctx context.Context, cursor int64) (int64, error) {
	stale := 0
	defer func() {
		if stale > 0 {
			n.log.Info("tollgate: notifications: events older than an hour were not sent", "events", stale)
		}
	}()
	for {
		evs, err := n.store.ListEvents(ctx, "", cursor, 200)
		if err != nil || len(evs) == 0 {
			return cursor, err
		}
		var ds []*checkpoint.Delivery
		for _, e := range evs {
			if e.At.Before(n.clk.Now().Add(-staleAfter)) {
				stale++
				continue
			}
			more, err := n.Fanout(ctx, e)
			if err != nil {
				return cursor, err
			}
			ds = append(ds, more...)
			n.track(ctx, e)
		}
		last := evs[len(evs)-1].Seq
		if err := n.outbox.AddDeliveries(ctx, ds, last); err != nil {
			return cursor, err
		}
		cursor = last
	}
}

// track keeps the deadline_near time of a question asked, and forgets
// that of one resolved.
func (n *Notifier) track(ctx context.Context, e *checkpoint.Event) {
	var p struct {
		QuestionID string `json:"question_id"`
	}
	if json.Unmarshal(e.Data, &p) != nil || p.QuestionID == "" {
		return
	}
	key := [2]string{e.ThreadID, p.QuestionID}
	switch e.Type {
	case "question_asked":
		q, err := n.store.GetQuestion(ctx, e.ThreadID, p.QuestionID)
		if err != nil || q.Status != checkpoint.QuestionPending {
			return
		}
		if at := n.cfg.nearAt(q); !at.IsZero() {
			n.mu.Lock()
			n.near[key] = at
			n.mu.Unlock()
		}
	case checkpoint.EventQuestionResolved:
		n.mu.Lock()
		delete(n.near, key)
		n.mu.Unlock()
	}
}

// loadNear keeps the deadline_near times of the questions pending at
// start (a restart loses no escalation; one that fired before it is not
// sent twice: its deliveries' ids exist).
func (n *Notifier) loadNear(ctx context.Context) error {
	f := checkpoint.QuestionFilter{Status: checkpoint.QuestionPending, Order: checkpoint.OldestFirst, Limit: 500}
	for q, err := range checkpoint.Questions(ctx, n.store, f) {
		if err != nil {
			return fmt.Errorf("notify: listing pending questions: %w", err)
		}
		if at := n.cfg.nearAt(q); !at.IsZero() {
			n.mu.Lock()
			n.near[[2]string{q.ThreadID, q.ID}] = at
			n.mu.Unlock()
		}
	}
	return nil
}

func (n *Notifier) nextNear() (time.Time, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var first time.Time
	for _, at := range n.near {
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first, !first.IsZero()
}

// fireNear makes the deliveries of every deadline_near time that came.
func (n *Notifier) fireNear(ctx context.Context) {
	now := n.clk.Now()
	n.mu.Lock()
	var due [][2]string
	for k, at := range n.near {
		if !at.After(now) {
			due = append(due, k)
		}
	}
	n.mu.Unlock()
	for _, k := range due {
		ds, err := n.Near(ctx, k[0], k[1])
		if err == nil && len(ds) > 0 {
			err = n.outbox.AddDeliveries(ctx, ds, 0)
		}
		if err != nil {
			n.log.Warn("tollgate: notifications: a deadline_near event", "thread", k[0], "question", k[1], "err", err)
			continue
		}
		n.mu.Lock()
		delete(n.near, k)
		n.mu.Unlock()
	}
}

// sendDue tries every delivery that is due, four at a time (a few rounds
// at most: a delivery whose outcome could not be recorded is due again,
// and must not be tried in a loop).
func (n *Notifier) sendDue(ctx context.Context) {
	for round := 0; round < 8 && ctx.Err() == nil; round++ {
		ds, err := n.outbox.DueDeliveries(ctx, n.clk.Now(), 32)
		if err != nil {
			n.log.Warn("tollgate: notifications: reading the outbox", "err", err)
			return
		}
		if len(ds) == 0 {
			return
		}
		sem := make(chan struct{}, 4)
		var wg sync.WaitGroup
		for _, d := range ds {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				n.attempt(ctx, d)
			}()
		}
		wg.Wait()
	}
}

// attempt tries d once and records the outcome: delivered, retried after
// a backoff, or dead.
func (n *Notifier) attempt(ctx context.Context, d *checkpoint.Delivery) {
	result, err := n.Deliver(ctx, d)
	if err != nil && ctx.Err() != nil {
		return // stopping: tried again at the next start
	}
	d.Attempts++
	if result != "" {
		d.Result = result
	}
	switch {
	case err == nil:
		d.State, d.LastError = checkpoint.DeliveryDelivered, ""
	case Permanent(err) || d.Attempts >= n.MaxAttempts():
		d.State, d.LastError = checkpoint.DeliveryDead, clip(redact(err), 500)
		n.log.Warn("tollgate: a notification could not be delivered (dead letter)", "delivery", d.ID, "event", d.Event,
			"channel", d.Channel, "target", Shown(d.Target), "attempts", d.Attempts, "err", d.LastError)
	default:
		d.LastError = clip(redact(err), 500)
		d.NextAt = n.clk.Now().Add(Backoff(d.Attempts))
	}
	if err := n.outbox.UpdateDelivery(context.WithoutCancel(ctx), d); err != nil {
		n.log.Warn("tollgate: notifications: recording a delivery", "delivery", d.ID, "err", err)
	}
}

// redact keeps a URL's query out of an error (a URL error quotes its
// URL), and says a timeout in words.
func redact(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		u, perr := url.Parse(ue.URL)
		where := ue.URL
		if perr == nil {
			u.RawQuery, u.User = "", nil
			where = u.String()
		}
		var ne net.Error
		if errors.As(ue.Err, &ne) && ne.Timeout() {
			return ue.Op + " " + where + ": timed out"
		}
		return ue.Op + " " + where + ": " + ue.Err.Error()
	}
	return err.Error()
}
