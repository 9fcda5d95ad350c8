package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/apiclient"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hooks"
	"github.com/tollgate-ai/tollgate/internal/display"
	"github.com/tollgate-ai/tollgate/server"
)

func init() {
	register("threads", "list threads, show a conversation or abort a run, on a store or against a server", nil,
		subcommand{name: "list", summary: "list the threads, their runs and pending questions", run: threadsList},
		subcommand{name: "show", summary: "show a thread's conversation and what happened to each call", run: threadsShow},
		subcommand{name: "abort", summary: "close a thread's unfinished run", run: threadsAbort})
}

const threadsListHelp = `usage: tollgate threads list [--status running|idle] [--state STATE] [--search TEXT] [--json]

Lists the threads, the latest first: the thread id, its status (running
while a run is unfinished), the run's state (active, parked waiting for
answers, failed, idle), how many questions wait for an answer, and when
it last changed. On a store, a running thread with no pending question is
shown active: only the process that drives a run knows it failed.

--state picks the threads a reviewer's history shows: waiting (a question
waits for an answer), running (driven, waiting for nobody), failed (its
run stopped with an error: known to a server, not on a store), finished,
or timed_out (a question of it timed out). --search finds a text in the
threads' ids, tools and messages (reviewers and admins: a client token may
not search).

examples:
  tollgate threads list
  tollgate threads list --status running   only threads whose run is unfinished
  tollgate threads list --status idle
  tollgate threads list --state timed_out  threads where a question timed out
  tollgate threads list --state finished --search notes.txt
  tollgate threads list --json             one JSON object a line, as the API's Thread
` + sourceFlagsHelp

// threadLine is a thread as threads list --json prints it: the API's
// Thread without its messages, and the count of its pending questions
// (null when the token may not see questions).
type threadLine struct {
	apiclient.Thread
	Pending *int `json:"pending_questions"`
}

func threadsList(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	const name = "threads list"
	fs, sf := sourceCommand(name, threadsListHelp, stderr)
	status := fs.String("status", "", "only threads with this `status`: running or idle")
	state := fs.String("state", "", "only threads in this `state`: waiting, running, failed, finished or timed_out, e.g. --state waiting")
	search := fs.String("search", "", "only threads whose id, tools or messages hold this `text`, e.g. --search notes.txt")
	asJSON := fs.Bool("json", false, "print each thread as one line of JSON")
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	switch *status {
	case "", string(checkpoint.ThreadRunning), string(checkpoint.ThreadIdle):
	default:
		return fs.usageError("--status %q: want running or idle", *status)
	}
	if _, ok := server.ThreadState(*state); !ok && *state != "" {
		return fs.usageError("--state %q: want waiting, running, failed, finished or timed_out", *state)
	}
	if len(strings.TrimSpace(*search)) > 200 {
		return fs.usageError("--search: the text is longer than 200 bytes")
	}
	src, code := sf.openFor(ctx, fs, name, stderr, 0)
	if src == nil {
		return code
	}
	defer src.close()
	ths, err := src.threads(ctx, threadQuery{Status: checkpoint.ThreadStatus(*status), State: *state, Search: strings.TrimSpace(*search)})
	if err != nil {
		return fail(stderr, name, err)
	}
	// One list of every pending question, rather than one per thread. A
	// token that may not see questions (a client's) sees no counts.
	var counts map[string]int
	if pending, err := src.questions(ctx, "", checkpoint.QuestionPending); err == nil {
		counts = map[string]int{}
		for _, q := range pending {
			counts[q.ThreadID]++
		}
	} else if !forbidden(err) {
		return fail(stderr, name, err)
	}
	if *asJSON {
		return printJSONLines(stdout, stderr, name, ths, func(th *threadInfo) any {
			l := threadLine{Thread: headOfThread(th)}
			if counts != nil {
				n := counts[th.ID]
				l.Pending = &n
			}
			return l
		})
	}
	if len(ths) == 0 {
		fmt.Fprintln(stdout, "no threads")
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tSTATUS\tRUN\tPENDING\tUPDATED")
	for _, th := range ths {
		n := "-"
		if counts != nil {
			n = strconv.Itoa(counts[th.ID])
		}
		state := th.RunState
		if th.RunError != "" {
			state += ": " + clipRunes(display.Line(th.RunError), 60, "…")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", display.Line(th.ID), th.Status, state, n, when(th.UpdatedAt))
	}
	tw.Flush()
	return 0
}

// forbidden reports whether the server refused the token the request.
func forbidden(err error) bool {
	var ae *apiclient.Error
	return errors.As(err, &ae) && ae.Code == "forbidden"
}

const threadsShowHelp = `usage: tollgate threads show THREAD [--json]

Prints the thread's conversation: each message; each tool call with its
arguments in full; each result with what happened to the call (allowed by
the policy, approved or denied by whom, blocked by the policy, timed out,
aborted, or edited and what ran) and the tool's output; then the questions
still waiting for an answer.

examples:
  tollgate threads show t1
  tollgate threads show --json t1   the API's Thread with its messages, one line
` + sourceFlagsHelp

func threadsShow(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	const name = "threads show"
	fs, sf := sourceCommand(name, threadsShowHelp, stderr)
	asJSON := fs.Bool("json", false, "print the thread and its messages as one line of JSON")
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	src, th, code := openThread(ctx, fs, sf, name, stderr)
	if src == nil {
		return code
	}
	defer src.close()
	if *asJSON {
		return printJSONLines(stdout, stderr, name, []*threadInfo{th}, threadOut)
	}
	// The approval questions of the thread's calls, to say who answered
	// them; a token that may not see questions gets the results' traces.
	var byCall map[string]*checkpoint.Question
	if qs, err := src.questions(ctx, th.ID, ""); err == nil {
		byCall = map[string]*checkpoint.Question{}
		for _, q := range qs {
			if q.CallID != "" {
				byCall[q.CallID] = q
			}
		}
	} else if !forbidden(err) {
		return fail(stderr, name, err)
	}
	var msgs []agent.Message
	if err := json.Unmarshal(th.Messages, &msgs); err != nil && len(th.Messages) > 0 {
		return fail(stderr, name, fmt.Errorf("the messages of thread %s are not readable: %v", display.Line(th.ID), err))
	}
	// What a coding agent reported of the calls it ran (its PostToolUse
	// hook), recorded in the thread's audit log.
	var outputs map[string][]map[string]any
	if hooks.IsThread(th.ID) {
		evs, err := src.events(ctx, th.ID, 0, 0)
		if err != nil && !forbidden(err) {
			return fail(stderr, name, err)
		}
		outputs = map[string][]map[string]any{}
		for _, e := range evs {
			var d map[string]any
			if e.Type == hooks.OutputEvent && json.Unmarshal(e.Data, &d) == nil {
				id, _ := d["call_id"].(string)
				outputs[id] = append(outputs[id], d)
			}
		}
	}
	showThread(stdout, th, msgs, byCall, outputs)
	return 0
}

// openThread opens the source and reads the thread the command's one
// argument names. When src is nil the command returns code: the error
// is on stderr.
func openThread(ctx context.Context, fs *flagSet, sf *sourceFlags, name string, stderr io.Writer) (source, *threadInfo, int) {
	src, code := sf.openFor(ctx, fs, name, stderr, 1)
	if src == nil {
		return nil, nil, code
	}
	th, err := findThread(ctx, src, fs.Arg(0))
	if err != nil {
		src.close()
		return nil, nil, fail(stderr, name, err)
	}
	return src, th, 0
}

// findThread reads a thread, saying in words when there is none.
func findThread(ctx context.Context, src source, id string) (*threadInfo, error) {
	th, err := src.thread(ctx, id)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return nil, fmt.Errorf("no thread %s in %s (tollgate threads list lists them)", display.Line(id), src.where())
	}
	return th, err
}

// showThread prints the conversation. byCall holds the thread's
// questions by call id; nil when they could not be read.
func showThread(w io.Writer, th *threadInfo, msgs []agent.Message, byCall map[string]*checkpoint.Question, outputs map[string][]map[string]any) {
	state := string(th.Status)
	if th.Status == checkpoint.ThreadRunning {
		state += ", " + th.RunState
	}
	fmt.Fprintf(w, "thread %s: %s (run %s)\n", display.Line(th.ID), state, display.Line(th.RunID))
	field(w, "created", when(th.CreatedAt))
	field(w, "updated", when(th.UpdatedAt))
	if th.RunError != "" {
		field(w, "error", display.Line(th.RunError))
	}
	calls := map[string]agent.ToolCall{}
	for _, m := range msgs {
		fmt.Fprintln(w)
		switch m.Role {
		case agent.RoleTool:
			if m.Result != nil {
				showResult(w, m, calls[m.Result.CallID], byCall[m.Result.CallID], byCall != nil)
				for _, o := range outputs[m.Result.CallID] {
					showOutput(w, o)
				}
			}
			continue
		case agent.RoleAssistant:
			head := "assistant"
			switch m.StopReason {
			case agent.StopAborted, agent.StopError, agent.StopMaxTokens, agent.StopRefusal, agent.StopContentFilter:
				head += " (" + string(m.StopReason) + ")"
			}
			fmt.Fprintf(w, "%s  %s\n", when(m.CreatedAt), head)
		default:
			fmt.Fprintf(w, "%s  %s\n", when(m.CreatedAt), display.Line(string(m.Role)))
		}
		text := m.Text
		if m.Role == agent.RoleUser && hooks.IsThread(th.ID) {
			// A coding agent's call, as JSON for the relay: the call and
			// where it comes from are said above it and below.
			if i := strings.LastIndex(text, "\n"+hooks.EnvelopeMark); i >= 0 {
				text = text[:i]
			}
		}
		if text != "" {
			fmt.Fprintln(w, indentLines(display.Text(strings.TrimSuffix(text, "\n")), "  "))
		}
		for _, c := range m.ToolCalls {
			calls[c.ID] = c
			fmt.Fprintf(w, "  → %s (call %s)\n", display.Line(c.Name), display.Line(c.ID))
			showCallArgs(w, c.Arguments, "      ")
		}
	}
	for _, c := range th.Open {
		fmt.Fprintln(w)
		switch c.State {
		case agent.CallDone:
			// Its result is recorded; the turn's end adds it to the
			// conversation.
			showResult(w, agent.Message{Role: agent.RoleTool, Result: c.Result, CreatedAt: c.Result.EndedAt}, calls[c.Call.ID], byCall[c.Call.ID], byCall != nil)
		case agent.CallRunning:
			fmt.Fprintf(w, "%s  … %s (call %s): running since %s\n", when(c.StartedAt), display.Line(c.Call.Name), display.Line(c.Call.ID), when(c.StartedAt))
		default:
			what := "not run yet"
			if q := byCall[c.Call.ID]; q != nil && q.Status == checkpoint.QuestionPending {
				what = "waiting for an answer"
			}
			fmt.Fprintf(w, "%s  … %s (call %s): %s\n", strings.Repeat(" ", len("2006-01-02 15:04:05")), display.Line(c.Call.Name), display.Line(c.Call.ID), what)
		}
	}
	if len(th.Pending) > 0 {
		sortByCall(th.Pending, th.Messages)
		fmt.Fprintf(w, "\nwaiting for an answer:\n")
		now := cliNow()
		for _, q := range th.Pending {
			fmt.Fprintf(w, "  %s  %s, %s  (tollgate questions show %s %s)\n", display.Line(q.ID), clipRunes(display.Summary(q), 80, "…"),
				timeLeft(q, now), shellWord(q.ThreadID), shellWord(q.ID))
		}
	}
}

// showCallArgs prints a call's arguments, one per line, and a warning
// when they hold characters a reader would not see.
func showCallArgs(w io.Writer, raw json.RawMessage, indent string) {
	var args map[string]any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		fmt.Fprintln(w, indent+display.JSON(raw))
	} else {
		for _, l := range display.Args(args) {
			fmt.Fprintln(w, indent+l)
		}
	}
	if n := display.HiddenJSON(raw); n > 0 {
		fmt.Fprintf(w, "%swarning: %s, marked ⟨U+XXXX⟩\n", indent, plural(n, "invisible or control character"))
	}
}

// showResult prints a call's result and what happened to it; known says
// whether q, the call's question, was looked for.
func showResult(w io.Writer, m agent.Message, call agent.ToolCall, q *checkpoint.Question, known bool) {
	r := *m.Result
	outcome := display.Outcome(r, q)
	switch {
	case outcome != "":
	case known:
		outcome = display.AllowedByPolicy
	default:
		// An approval leaves no trace in the result: without the
		// questions, "allowed by the policy" may be untrue.
		outcome = "ran (allowed by the policy or approved: this token may not see questions)"
	}
	tool := r.ToolName
	if tool == "" {
		tool = call.Name
	}
	fmt.Fprintf(w, "%s  ← %s (call %s): %s\n", when(m.CreatedAt), display.Line(tool), display.Line(r.CallID), outcome)
	fmt.Fprintln(w, indentLines(display.Result(r), "      "))
	if !r.StartedAt.IsZero() && !r.EndedAt.IsZero() {
		// Each call's own times: the calls of a turn start and end apart.
		fmt.Fprintf(w, "      ran from %s to %s (%s)\n", when(r.StartedAt), when(r.EndedAt)[11:], r.EndedAt.Sub(r.StartedAt).Round(time.Millisecond))
	}
}

// showOutput prints what a coding agent reported of a call it ran.
func showOutput(w io.Writer, o map[string]any) {
	agentName, _ := o["agent"].(string)
	if a, err := hooks.ParseAgent(agentName); err == nil {
		agentName = a.Title()
	}
	head := agentName + " ran it"
	if why, _ := o["not_allowed"].(string); why != "" {
		// Forged, or run without tollgate's leave.
		head = "! " + agentName + " reports it ran it, which tollgate did not allow (" + display.Line(why) + ")"
	}
	if isErr, _ := o["is_error"].(bool); isErr {
		head += ", and it failed"
	}
	if ms, ok := o["duration_ms"].(float64); ok {
		head += fmt.Sprintf(" (%s)", (time.Duration(ms) * time.Millisecond).String())
	}
	out, _ := o["output"].(string)
	if strings.TrimSpace(out) == "" {
		fmt.Fprintf(w, "      %s: no output\n", head)
		return
	}
	fmt.Fprintf(w, "      %s:\n%s\n", head, indentLines(display.Text(strings.TrimSuffix(out, "\n")), "        "))
}

const threadsAbortHelp = `usage: tollgate threads abort [--reason "why"] THREAD

Closes the thread's unfinished run (SPEC "Abort"): every pending question
is aborted (a later answer is refused), every tool call without a result
is denied, and the run ends with an "aborted" message. The next message
to the thread starts afresh. A thread with no unfinished run is left as
it is.

The reason is recorded with the aborted questions and given to the model;
by default "aborted by NAME": on a store, you ($TOLLGATE_USER or your login
name); against a server, the name of the token.

examples:
  tollgate threads abort t1
  tollgate threads abort --reason "user closed the tab" t1
` + sourceFlagsHelp

func threadsAbort(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	const name = "threads abort"
	fs, sf := sourceCommand(name, threadsAbortHelp, stderr)
	sf.writes = "abort"
	reason := fs.String("reason", "", "`why`, recorded and given to the model (default \"aborted by NAME\")")
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	src, before, code := openThread(ctx, fs, sf, name, stderr)
	if src == nil {
		return code
	}
	defer src.close()
	id := display.Line(before.ID)
	if before.Status != checkpoint.ThreadRunning {
		fmt.Fprintf(stdout, "thread %s has no unfinished run: nothing to abort\n", id)
		return 0
	}
	if _, onStore := src.(*storeSource); onStore && *reason == "" {
		// Said here, not left to the store's abort: a server parked on
		// the thread may take the aborted questions' answers and close
		// the run itself, without the final message that carries it.
		*reason = "aborted by " + currentUser()
	}
	if err := src.abort(ctx, before.ID, *reason); err != nil {
		return fail(stderr, name, err)
	}
	after, err := src.thread(ctx, before.ID)
	if err != nil {
		return fail(stderr, name, fmt.Errorf("thread %s was aborted, but reading it again failed: %v", id, err))
	}
	still := map[string]bool{}
	for _, q := range after.Pending {
		still[q.ID] = true
	}
	questions := 0
	for _, q := range before.Pending {
		if !still[q.ID] {
			questions++
		}
	}
	calls, why := abortedCalls(before.Messages, after.Messages)
	if why == "" {
		why = *reason
	}
	fmt.Fprintf(stdout, "thread %s aborted (%s): %s aborted, %s denied\n", id, display.Line(why),
		plural(questions, "pending question"), plural(calls, "unfinished tool call"))
	return 0
}

// abortedCalls counts the calls an abort denied (the tool messages it
// added) and reads the reason from its closing message.
func abortedCalls(before, after json.RawMessage) (int, string) {
	var old, now []agent.Message
	_ = json.Unmarshal(before, &old)
	if json.Unmarshal(after, &now) != nil || len(now) < len(old) {
		return 0, ""
	}
	n, why := 0, ""
	for _, m := range now[len(old):] {
		if m.Role == agent.RoleTool && m.Result != nil {
			if h, _ := m.Result.Details["hitl"].(map[string]any); h["decision"] == "aborted" {
				n++
			}
		}
		if m.StopReason == agent.StopAborted {
			why = strings.TrimPrefix(m.Text, "Aborted: ")
		}
	}
	return n, why
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
