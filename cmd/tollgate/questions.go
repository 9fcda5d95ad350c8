package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/storeurl"
)

func init() {
	register("questions", "list or answer pending questions in a store", questionsCmd)
}

const questionsHelp = `usage:
  tollgate questions list   --store URL [--thread ID] [--all]
  tollgate questions answer --store URL --thread ID QUESTION approve
  tollgate questions answer --store URL --thread ID QUESTION deny "reason"
  tollgate questions answer --store URL --thread ID QUESTION edit '{"cmd": "..."}'
  tollgate questions answer --store URL --thread ID QUESTION json '<any JSON answer>'

Answers are checked as the service checks them (kind, deadline, an
edit's arguments against the tool's schema and the policy given with
--policy, the built-in sandbox policy by default) and recorded with a
compare-and-set: the first answer wins. The run, parked or waiting in
another process, sees the answer and goes on.

flags:
`

func questionsCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "list" && args[0] != "answer") {
		fmt.Fprint(stderr, questionsHelp)
		return 2
	}
	verb := args[0]
	fs := flag.NewFlagSet("questions "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, questionsHelp); fs.PrintDefaults() }
	storeURL := fs.String("store", "", "the store: sqlite:PATH or postgres://...")
	thread := fs.String("thread", "", "thread id (list: all threads when empty)")
	all := fs.Bool("all", false, "list: include answered, timed out and aborted questions")
	by := fs.String("by", "cli", "answer: who answers, recorded with the answer")
	var af agentFlags
	af.register(fs, false)
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *storeURL == "" {
		fmt.Fprintln(stderr, "tollgate: --store is required")
		return 2
	}
	store, err := storeurl.Open(ctx, *storeURL)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 1
	}
	defer store.Close()
	if verb == "list" {
		return listQuestions(ctx, store, *thread, *all, stdout, stderr)
	}
	rest := fs.Args()
	if *thread == "" || len(rest) < 2 {
		fs.Usage()
		return 2
	}
	answer, err := parseAnswer(rest[1], rest[2:])
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 2
	}
	switch *by {
	case "", "timeout", "abort", "dev":
		// The runtime records these names itself: an answer given as one
		// would be indistinguishable from a deadline or an abort.
		fmt.Fprintf(stderr, "tollgate: --by %q is reserved; give the name of the person answering\n", *by)
		return 2
	}
	raw, err := json.Marshal(answer)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 2
	}
	// A host that is never started: it checks the answer with the same
	// tools and policy as the run, records it, and leaves resuming to the
	// process that drives the run.
	tmpl, _, err := af.template(ctx, store, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 2
	}
	h, err := host.New(host.Config{Store: store, Agent: tmpl})
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 1
	}
	if _, err := h.Answer(ctx, *thread, rest[0], raw, *by); err != nil {
		fmt.Fprintln(stderr, "tollgate: answer refused:", err)
		return 1
	}
	fmt.Fprintf(stdout, "answered %s\n", rest[0])
	return 0
}

func parseAnswer(verb string, rest []string) (any, error) {
	arg := strings.Join(rest, " ")
	switch verb {
	case "approve":
		return hitl.ApproveAnswer{Decision: hitl.DecisionApprove}, nil
	case "deny":
		return hitl.ApproveAnswer{Decision: hitl.DecisionDeny, Reason: arg}, nil
	case "edit":
		var m map[string]any
		if err := json.Unmarshal([]byte(arg), &m); err != nil {
			return nil, fmt.Errorf("edit takes the new arguments as a JSON object: %v", err)
		}
		return hitl.ApproveAnswer{Decision: hitl.DecisionEdit, EditedArgs: m}, nil
	case "yes":
		return true, nil
	case "no":
		return false, nil
	case "json":
		if !json.Valid([]byte(arg)) {
			return nil, errors.New("json takes a JSON value")
		}
		return json.RawMessage(arg), nil
	case "text":
		return arg, nil
	}
	return nil, fmt.Errorf("unknown answer %q: want approve, deny, edit, yes, no, text or json", verb)
}

func listQuestions(ctx context.Context, store checkpoint.Store, thread string, all bool, stdout, stderr io.Writer) int {
	f := checkpoint.QuestionFilter{ThreadID: thread}
	if !all {
		f.Status = checkpoint.QuestionPending
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tQUESTION\tKIND\tSTATUS\tLEFT\tWHAT")
	for {
		qs, next, err := store.ListQuestions(ctx, f)
		if err != nil {
			fmt.Fprintln(stderr, "tollgate:", err)
			return 1
		}
		for _, q := range qs {
			req, err := hitl.RequestOf(q)
			what := string(q.Payload)
			if err == nil {
				what = describe(req)
			}
			left := "-"
			if !q.Deadline.IsZero() && q.Status == checkpoint.QuestionPending {
				left = req.Remaining(time.Now()).Round(time.Second).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", q.ThreadID, q.ID, q.Kind, q.Status, left, clip(what, 80))
		}
		if next == "" {
			break
		}
		f.After = next
	}
	tw.Flush()
	return 0
}

func describe(r *hitl.Request) string {
	p := r.Payload
	switch p.Kind {
	case hitl.KindApprove:
		args, _ := json.Marshal(p.Args)
		return p.ToolName + " " + string(args)
	case hitl.KindAsk:
		return p.Question
	case hitl.KindConfirm:
		return p.Message
	}
	return string(p.Raw)
}
