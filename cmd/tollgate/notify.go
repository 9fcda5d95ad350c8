package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/cluster"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/display"
	"github.com/tollgate-ai/tollgate/notify"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/server"
)

// checkNotifyGroups refuses a policy file whose rules name groups the
// notifications file does not define (a typo would tell nobody).
func checkNotifyGroups(cfg *notify.Config, policyFile string) error {
	if policyFile == "" || policyFile == builtinPolicy {
		return nil
	}
	p, err := policy.Load(policyFile, policyOptions())
	if err != nil {
		return nil // said where the policy is loaded
	}
	var missing []string
	for _, g := range p.NotifyGroups() {
		if !slices.Contains(cfg.GroupNames(), g) {
			missing = append(missing, g)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the policy %s names notification groups that the notifications file does not define: %s (it defines: %s)",
			policyFile, strings.Join(missing, ", "), strings.Join(cfg.GroupNames(), ", "))
	}
	return nil
}

// startNotifications starts the notifier (the host's outbox; with a
// cluster, River works its deliveries) and says what the server serves
// of it.
func startNotifications(ctx context.Context, n *notify.Notifier, h *host.Host, coord *cluster.Cluster, notices *noticeBoard, log *slog.Logger) (*server.Notifications, func()) {
	if n == nil {
		return nil, func() {}
	}
	n.SetAnswerer(h)
	list := n.Deliveries
	stop := func() {}
	if coord != nil {
		list = coord.Deliveries
		if answers, keyed := n.Config().Answers(); answers && !keyed {
			log.Warn("tollgate: the notifications file gives no action_secret_env or action_secret_file: each replica signs Slack buttons and mail links with a key of its own, and one pressed on another replica only opens the page; give every replica the same secret")
		}
	} else {
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := n.Run(rctx); err != nil {
				log.Error("tollgate: notifications stopped", "err", err)
			}
		}()
		stop = func() { cancel(); <-done }
	}
	notices.mu.Lock()
	notices.more = func() []server.Notice { return deadNotice(list) }
	notices.mu.Unlock()
	return &server.Notifications{Handler: n.Handler(), Deliveries: list}, stop
}

// deadNotice is a banner for the notifications that could not be
// delivered: reviewers are not being told of questions.
func deadNotice(list func(context.Context, checkpoint.DeliveryState, int) ([]*checkpoint.Delivery, error)) []server.Notice {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	dead, err := list(ctx, checkpoint.DeliveryDead, 100)
	if err != nil || len(dead) == 0 {
		return nil
	}
	last := dead[0]
	n := fmt.Sprint(len(dead))
	if len(dead) == 100 {
		n = "100 or more"
	}
	return []server.Notice{{Code: "notify_dead", At: last.UpdatedAt, Message: n + " notification(s) could not be delivered; the latest, " +
		last.Event + " to " + last.Channel + " " + notify.Shown(last.Target) + ": " + last.LastError +
		". Reviewers may not have been told: tollgate notify list shows them all."}}
}

func init() {
	register("notify", "the notifications serve sends (--notify-config): the ones that could not be delivered, on a store or a server", nil,
		subcommand{name: "list", summary: "list notifications: dead ones (never delivered) by default", run: notifyList})
}

const notifyListHelp = `usage: tollgate notify list [--state dead|pending|delivered|all] [--limit N] [--json]

Lists the notifications of questions (webhooks, Slack messages, mail)
that serve sent or tries to send, the latest first: when, the state, the
event, the channel and where to, the thread and question, the tries and
the last error. By default the dead ones: every try failed, or the
destination refused it for good, so whoever it was for was not told.

On a SQLite store the outbox is read; on a PostgreSQL store served by
replicas, River's jobs (delivered ones are kept an hour); against a
server, GET /v1/notify/deliveries.

examples:
  tollgate notify list
  tollgate notify list --state pending      waiting to be tried again
  tollgate notify list --limit 10           the latest ten dead ones
  tollgate notify list --state all --json   every one kept, one JSON object a line
` + sourceFlagsHelp

func notifyList(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const name = "notify list"
	fs, sf := sourceCommand(name, notifyListHelp, stderr)
	state := fs.String("state", "dead", "which: dead, pending, delivered or all")
	limit := fs.Int("limit", 100, "at most `N` (1 to 500)")
	asJSON := fs.Bool("json", false, "one JSON object a line")
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	st := checkpoint.DeliveryState(*state)
	switch *state {
	case "dead", "pending", "delivered":
	case "all":
		st = ""
	default:
		return fs.usageError("--state %q: want dead, pending, delivered or all", *state)
	}
	if *limit < 1 || *limit > 500 {
		return fs.usageError("--limit takes a number from 1 to 500")
	}
	src, code := sf.openFor(ctx, fs, name, stderr, 0)
	if src == nil {
		return code
	}
	defer src.close()
	ds, err := deliveriesOf(ctx, src, st, *limit)
	if err != nil {
		return fail(stderr, name, err)
	}
	if *asJSON {
		return printJSONLines(stdout, stderr, name, ds, func(d *checkpoint.Delivery) any {
			return map[string]any{"id": d.ID, "event": d.Event, "thread_id": d.ThreadID, "question_id": d.QuestionID,
				"channel": d.Channel, "target": notify.Shown(d.Target), "state": d.State, "attempts": d.Attempts,
				"last_error": d.LastError, "updated_at": d.UpdatedAt}
		})
	}
	if len(ds) == 0 {
		fmt.Fprintf(stdout, "no %s notifications\n", strings.TrimSpace(string(st)+" "))
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "UPDATED\tSTATE\tEVENT\tCHANNEL\tTO\tTHREAD\tQUESTION\tTRIES\tERROR")
	for _, d := range ds {
		cells := []string{when(d.UpdatedAt), string(d.State), d.Event, d.Channel, display.Line(notify.Shown(d.Target)),
			display.Line(d.ThreadID), display.Line(d.QuestionID), strconv.Itoa(d.Attempts), display.Line(d.LastError)}
		fmt.Fprintln(tw, row(cells))
	}
	tw.Flush()
	return 0
}

// deliveriesOf lists deliveries from a server or a store.
func deliveriesOf(ctx context.Context, src source, state checkpoint.DeliveryState, limit int) ([]*checkpoint.Delivery, error) {
	switch s := src.(type) {
	case *apiClient:
		ds, err := s.Deliveries(ctx, state, limit)
		return ds, s.words(err)
	case *storeSource:
		if ob, ok := s.store.(checkpoint.Outbox); ok {
			return ob.ListDeliveries(ctx, state, limit)
		}
		if pg, ok := s.store.(*postgres.Store); ok {
			if in, err := cluster.InUse(ctx, pg); err != nil || !in {
				return nil, cmp.Or(err, errors.New("no replica has served this store: it holds no notifications"))
			}
			c, err := cluster.New(ctx, cluster.Config{Store: pg, Logger: s.log})
			if err != nil {
				return nil, err
			}
			s.clusters = append(s.clusters, c)
			return c.Deliveries(ctx, state, limit)
		}
		return nil, fmt.Errorf("%s keeps no notifications", s.where())
	}
	return nil, errors.New("no notifications here")
}
