package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/display"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
	"github.com/tollgate-ai/tollgate/internal/qkind"
)

func init() {
	register("questions", "list, show or answer the questions runs ask, on a store or against a server", nil,
		subcommand{name: "list", summary: "list the questions waiting for an answer (--all: every one)", run: questionsList},
		subcommand{name: "show", summary: "show everything a reviewer needs to answer a question", run: questionsShow},
		subcommand{name: "answer", summary: "approve, deny or edit a call, or answer a question", run: questionsAnswer})
}

// cliNow is the time the commands measure deadlines from (tests fix it).
var cliNow = time.Now

// fail prints a command's error on stderr and returns exit status 1.
func fail(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "tollgate %s: %v\n", cmd, err)
	return 1
}

// answerError says what is wrong with the answer given, on stderr, and
// returns exit status 2 (a mistake of the command line, without the
// whole help after it).
func answerError(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "tollgate %s: %v\n", cmd, err)
	return 2
}

const questionsListHelp = `usage: tollgate questions list [--thread ID] [--all] [--json]

Lists the questions waiting for an answer in the order they were asked
(oldest first; those of one turn in the order of its tool calls): the
thread, the question id, the tool, the time left to answer and what it
asks. With --all, also the answered, timed out and aborted ones, with who
answered and how.

examples:
  tollgate questions list
  tollgate questions list --thread t1       only the questions of thread t1
  tollgate questions list --all             with the answered, timed out and aborted ones
  tollgate questions list --json | jq .id   one JSON object a line, as the API's Question
` + sourceFlagsHelp

func questionsList(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	const name = "questions list"
	fs, sf := sourceCommand(name, questionsListHelp, stderr)
	thread := fs.String("thread", "", "only the questions of this thread `ID`")
	all := fs.Bool("all", false, "include answered, timed out and aborted questions")
	asJSON := fs.Bool("json", false, "print each question as one line of JSON (the API's Question)")
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	src, code := sf.openFor(ctx, fs, name, stderr, 0)
	if src == nil {
		return code
	}
	defer src.close()
	status := checkpoint.QuestionPending
	if *all {
		status = ""
	}
	qs, err := src.questions(ctx, *thread, status)
	if err != nil {
		return fail(stderr, name, err)
	}
	inCallOrder(ctx, src, qs)
	if *asJSON {
		return printJSONLines(stdout, stderr, name, qs, questionLine)
	}
	if len(qs) == 0 {
		what := "no pending questions"
		if *all {
			what = "no questions"
		}
		if *thread != "" {
			what += " in thread " + display.Line(*thread)
		}
		fmt.Fprintln(stdout, what)
		return 0
	}
	now := cliNow()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if *all {
		fmt.Fprintln(tw, "THREAD\tQUESTION\tTOOL\tSTATUS\tASKS")
	} else {
		fmt.Fprintln(tw, "THREAD\tQUESTION\tTOOL\tLEFT\tASKS")
	}
	for _, q := range qs {
		state := timeLeft(q, now)
		if *all && q.Status != checkpoint.QuestionPending {
			state = clipRunes(display.Resolution(q), 60, "…")
		} else if *all {
			state = "pending, " + state
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", display.Line(q.ThreadID), display.Line(q.ID), toolOf(q), state, clipRunes(asks(q), 120, "… (cut: questions show prints it all)"))
	}
	tw.Flush()
	return 0
}

// toolOf is the tool a question is about, "-" when none.
func toolOf(q *checkpoint.Question) string {
	if q.Tool == "" {
		return "-"
	}
	return display.Line(q.Tool)
}

// asks is what a question asks, without the tool's name the TOOL column
// shows.
func asks(q *checkpoint.Question) string {
	s := display.Summary(q)
	if q.Tool != "" {
		s = strings.TrimPrefix(s, display.Line(q.Tool)+": ")
	}
	return s
}

// clipRunes cuts s to n characters, followed by more when it did.
func clipRunes(s string, n int, more string) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	cut := string([]rune(s)[:n])
	// Never half of a ⟨U+XXXX⟩ mark.
	if i := strings.LastIndex(cut, "⟨"); i >= 0 && !strings.Contains(cut[i:], "⟩") {
		cut = cut[:i]
	}
	return cut + more
}

// timeLeft is the time left to answer q at now, rounded to the second.
func timeLeft(q *checkpoint.Question, now time.Time) string {
	switch {
	case q.Deadline.IsZero():
		return "no deadline"
	case !now.Before(q.Deadline):
		return "deadline passed"
	}
	return q.Deadline.Sub(now).Round(time.Second).String()
}

// inCallOrder puts the questions of one run in the order of its tool
// calls: the calls of one turn ask at the same time, so the order in
// which their questions were stored is not theirs. The questions of
// other runs keep their places.
func inCallOrder(ctx context.Context, src source, qs []*checkpoint.Question) {
	type key struct{ thread, run string }
	slots := map[key][]int{}
	for i, q := range qs {
		k := key{q.ThreadID, q.RunID}
		slots[k] = append(slots[k], i)
	}
	for k, idx := range slots {
		if len(idx) < 2 {
			continue
		}
		th, err := src.thread(ctx, k.thread)
		if err != nil {
			continue // the order they were stored in, then
		}
		group := make([]*checkpoint.Question, len(idx))
		for j, i := range idx {
			group[j] = qs[i]
		}
		sortByCall(group, th.Messages)
		for j, i := range idx {
			qs[i] = group[j]
		}
	}
}

// sortByCall puts questions in the order of their calls in the thread's
// messages; those whose call is not there keep their places.
func sortByCall(qs []*checkpoint.Question, messages json.RawMessage) {
	pos := callPositions(messages)
	slices.SortStableFunc(qs, func(a, b *checkpoint.Question) int {
		pa, oka := pos[a.CallID]
		pb, okb := pos[b.CallID]
		if !oka || !okb {
			return 0
		}
		return pa - pb
	})
}

// callPositions numbers the tool calls of a thread's messages in order.
func callPositions(messages json.RawMessage) map[string]int {
	var msgs []agent.Message
	_ = json.Unmarshal(messages, &msgs)
	pos := map[string]int{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			if _, ok := pos[c.ID]; !ok {
				pos[c.ID] = len(pos)
			}
		}
	}
	return pos
}

const questionsShowHelp = `usage: tollgate questions show THREAD QUESTION [--json]
       tollgate questions show --thread THREAD QUESTION

Prints what a reviewer needs to answer a question: the tool, every
argument in full (invisible characters shown as ⟨U+XXXX⟩, with a warning),
the rule that asked and its impact, the digest an answer is bound to, the
deadline and the status.

examples:
  tollgate questions show t1 hitl_call_1
  tollgate questions show --thread t1 hitl_call_1
  tollgate questions show --json t1 hitl_call_1   the API's Question, one line
` + sourceFlagsHelp

func questionsShow(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	const name = "questions show"
	fs, sf := sourceCommand(name, questionsShowHelp, stderr)
	threadFlag := fs.String("thread", "", "the question's thread `ID` (or give it before the question id)")
	asJSON := fs.Bool("json", false, "print the question as one line of JSON (the API's Question)")
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	thread, rest, ok := threadAndRest(*threadFlag, fs.Args())
	if !ok || len(rest) != 1 {
		return fs.usageError("want THREAD QUESTION")
	}
	src, code := sf.openFor(ctx, fs, name, stderr, -1)
	if src == nil {
		return code
	}
	defer src.close()
	q, err := findQuestion(ctx, src, thread, rest[0])
	if err != nil {
		return fail(stderr, name, err)
	}
	if *asJSON {
		return printJSONLines(stdout, stderr, name, []*checkpoint.Question{q}, questionLine)
	}
	showQuestion(stdout, q, cliNow())
	return 0
}

// threadAndRest reads the thread from --thread or from the first
// argument.
func threadAndRest(flagThread string, args []string) (string, []string, bool) {
	if flagThread != "" {
		return flagThread, args, true
	}
	if len(args) == 0 {
		return "", nil, false
	}
	return args[0], args[1:], true
}

// findQuestion reads a question, saying in words when there is none:
// no such thread, or no such question in it.
func findQuestion(ctx context.Context, src source, thread, id string) (*checkpoint.Question, error) {
	q, err := src.question(ctx, thread, id)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return nil, noQuestion(ctx, src, thread, id)
	}
	return q, err
}

func noQuestion(ctx context.Context, src source, thread, id string) error {
	if _, err := src.thread(ctx, thread); errors.Is(err, checkpoint.ErrNotFound) {
		return fmt.Errorf("no thread %s in %s (tollgate threads list lists them)", display.Line(thread), src.where())
	}
	return fmt.Errorf("no question %s in thread %s (tollgate questions list --all --thread %s lists its questions)",
		display.Line(id), display.Line(thread), shellWord(thread))
}

// shellWord quotes s for a shell command line when it needs it.
func shellWord(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.:@+=,/%", r))
	}) {
		return s
	}
	return display.Line("'" + strings.ReplaceAll(s, "'", `'\''`) + "'")
}

// when is a time as the commands print it: local, to the second.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// field prints one "name: value" line of a detail view; an empty name
// continues the field above.
func field(w io.Writer, name, value string) {
	if name != "" {
		name += ":"
	}
	fmt.Fprintf(w, "%-10s %s\n", name, value)
}

// showQuestion prints everything a reviewer needs to answer q.
func showQuestion(w io.Writer, q *checkpoint.Question, now time.Time) {
	fmt.Fprintf(w, "question %s in thread %s\n", display.Line(q.ID), display.Line(q.ThreadID))
	field(w, "kind", display.Line(q.Kind)+" ("+qkind.Of(q.Kind).Asks+")")
	if q.RunID != "" || q.CallID != "" {
		field(w, "run", display.Line(q.RunID)+", call "+display.Line(q.CallID))
	}
	req, reqErr := hitl.RequestOf(q)
	switch {
	case reqErr != nil:
		field(w, "payload", display.JSON(q.Payload)+" (not readable: "+display.Line(reqErr.Error())+")")
	case qkind.Of(q.Kind).Approval:
		c, err := qkind.CallOf(q)
		if err != nil {
			c = &qkind.Call{} // shown empty, as a run reads it
		}
		field(w, "tool", display.Line(c.Tool))
		showArgs(w, c.Args)
		for _, f := range display.Details(c.Details) {
			for i, l := range f.Lines {
				if i == 0 {
					field(w, f.Label, l)
				} else {
					field(w, "", l)
				}
			}
		}
	case q.Kind == hitl.KindAsk:
		field(w, "asks", display.Text(req.Payload.Question))
		if len(req.Payload.Choices) > 0 {
			fmt.Fprintln(w, "choices:")
			for _, c := range req.Payload.Choices {
				fmt.Fprintln(w, "  "+display.Line(c))
			}
		}
		if len(req.Payload.Schema) > 0 {
			fmt.Fprintln(w, "form (JSON Schema):")
			fmt.Fprintln(w, indentLines(display.JSONIndent(req.Payload.Schema), "  "))
		}
	case q.Kind == hitl.KindConfirm:
		field(w, "confirm", display.Text(req.Payload.Message))
	default:
		fmt.Fprintln(w, "payload:")
		fmt.Fprintln(w, indentLines(display.JSONIndent(q.Payload), "  "))
	}
	if n := display.HiddenJSON(q.Payload); n > 0 {
		fmt.Fprintf(w, "warning:   %s in what is shown, marked ⟨U+XXXX⟩: read them before you answer\n", plural(n, "invisible or control character"))
	}
	if q.Digest != "" {
		field(w, "digest", q.Digest)
	}
	field(w, "asked", when(q.CreatedAt))
	if q.Deadline.IsZero() {
		field(w, "deadline", "none")
	} else {
		left := timeLeft(q, now)
		if q.Status == checkpoint.QuestionPending && !q.Deadline.After(now) {
			left = "passed"
		} else if q.Status == checkpoint.QuestionPending {
			left += " left"
		}
		if q.Status != checkpoint.QuestionPending {
			left = fmt.Sprintf("%s to answer", q.Timeout().Round(time.Second))
		}
		field(w, "deadline", when(q.Deadline)+" ("+left+")")
	}
	field(w, "status", display.Resolution(q))
	if q.Status != checkpoint.QuestionPending {
		field(w, "resolved", when(q.ResolvedAt))
		return
	}
	fmt.Fprintf(w, "answer:    tollgate questions answer %s %s %s\n", shellWord(q.ThreadID), shellWord(q.ID),
		strings.ReplaceAll(answerWords(q.Kind), "|", " | "))
}

// answerWords lists the answers of the kind as a usage line does:
// approve|deny "reason"|edit '{...}'.
func answerWords(kind string) string {
	return strings.ReplaceAll(strings.ReplaceAll(qkind.Of(kind).Forms, ", ", "|"), " or ", "|")
}

func showArgs(w io.Writer, args map[string]any) {
	fmt.Fprintln(w, "arguments:")
	if len(args) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, l := range display.Args(args) {
		fmt.Fprintln(w, "  "+l)
	}
}

func indentLines(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

const questionsAnswerHelp = `usage: tollgate questions answer THREAD QUESTION ANSWER... [flags]
       tollgate questions answer --thread THREAD QUESTION ANSWER... [flags]

Flags may come anywhere; after -- nothing is a flag (deny -- "-f is not
allowed here"). ANSWER is, by the question's kind:
  approval   approve | deny "reason" | edit '{"cmd": "ls -l"}' (edit - reads the JSON from stdin)
             | learn: approve, and allow calls like this (see below)
  confirm    yes | no
  ask        text the answer in words | json '{"field": "value"}'
  any kind   json '<the answer as the API takes it>'

The answer is checked as the server checks it — its kind, the deadline,
the digest of the call (the question's as read now, or --digest), and for
an edit the tool's schema and the policy (--policy on a store) — and
recorded with a compare-and-set: the first answer wins. The run, parked or
waiting in another process, goes on.

Who answered is recorded: on a store, --by (default: you, $TOLLGATE_USER
or your login name); against a server, the name of the token (--by is
refused there).

learn approves the call and saves a rule that lets the policy allow calls
like it where it would ask (never where it blocks): the narrowest rule
that covers the call — for a command string the same commands, options and
operators, option values any, files inside the working directory, other
words exact. It first prints the rule, the choices of each argument, the
rule as policy YAML and its blast radius (the past questions it would have
allowed, those people denied flagged ⚑). --match N=any|inside|exact widens
or narrows the N-th argument, --scope thread|project|everyone says where
it applies, --expires how long; --dry-run shows without answering.

examples:
  tollgate questions answer t1 hitl_call_1 approve
  tollgate questions answer t1 hitl_call_1 deny "not on a Friday"
  tollgate questions answer t1 hitl_call_1 edit '{"cmd": "rm -r /tmp/scratch/old"}'
  tollgate questions answer --thread t1 hitl_call_2 yes
  tollgate questions answer --by alice t1 hitl_call_1 approve
  tollgate questions answer --digest sha256:3f7a... t1 hitl_call_1 approve   only if the call is still the one shown
  tollgate questions answer --policy policy.yaml t1 hitl_call_1 edit '{"cmd": "ls"}'   check an edit against this policy
  tollgate questions answer t1 hitl_call_1 learn --dry-run                    the rule and its blast radius, nothing answered
  tollgate questions answer t1 hitl_call_1 learn --match 2=any --scope project --expires 30d
` + sourceFlagsHelp

func questionsAnswer(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const name = "questions answer"
	fs, sf := sourceCommand(name, questionsAnswerHelp, stderr)
	sf.writes = "answer"
	threadFlag := fs.String("thread", "", "the question's thread `ID` (or give it before the question id)")
	by := fs.String("by", "", "store only: the `name` of who answers, recorded with the answer (default: $TOLLGATE_USER, else your login name)")
	digest := fs.String("digest", "", "answer only if the call's `digest` is this one (as questions show prints it)")
	policyFile := fs.String("policy", envDefault("TOLLGATE_POLICY", ""), "store only: the policy `file` an edit is checked against, and a learned rule made for (default: the built-in sandbox policy) [TOLLGATE_POLICY]")
	hookPolicy := fs.String("hook-policy", envDefault("TOLLGATE_HOOK_POLICY", ""), "store only: the policy `file` an edit of a coding agent's call is checked against (default: the built-in coding-agent policy), e.g. --hook-policy agents.yaml [TOLLGATE_HOOK_POLICY]")
	var lo learnOptions
	lo.register(fs)
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	thread, rest, ok := threadAndRest(*threadFlag, fs.Args())
	if !ok || len(rest) < 2 {
		return fs.usageError("want THREAD QUESTION ANSWER")
	}
	id, verb, words := rest[0], rest[1], rest[2:]
	if verb != "learn" {
		var learnFlag string
		fs.Visit(func(f *flag.Flag) {
			if strings.Contains(f.Usage, "learn: ") {
				learnFlag = f.Name
			}
		})
		if learnFlag != "" {
			return fs.usageError("--%s is for the answer learn (approve, and allow calls like this)", learnFlag)
		}
	} else if len(words) > 0 {
		return fs.usageError("learn takes nothing after it, got %q (--match, --scope and --expires shape the rule)", strings.Join(words, " "))
	}
	who, code := reviewerName(fs, sf, *by)
	if who == "" {
		return code
	}
	*by = who
	if verb == "edit" && len(words) == 1 && words[0] == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return fail(stderr, name, err)
		}
		words = []string{string(b)}
	}
	src, code := sf.openFor(ctx, fs, name, stderr, -1)
	if src == nil {
		return code
	}
	defer src.close()
	if s, ok := src.(*storeSource); ok {
		s.policyFile, s.hookPolicyFile = *policyFile, *hookPolicy
	}
	q, err := findQuestion(ctx, src, thread, id)
	if err != nil {
		return fail(stderr, name, err)
	}
	if *digest != "" && *digest != q.Digest {
		return fail(stderr, name, digestWords(q, *digest))
	}
	if verb == "learn" {
		// From a question this reviewer approved too: a rule that could
		// not be saved is learned again.
		return learnAnswer(ctx, src, q, &lo, *by, *digest, stdout, stderr)
	}
	if q.Status != checkpoint.QuestionPending {
		return fail(stderr, name, errors.New(resolvedWords(q)))
	}
	raw, err := buildAnswer(q, verb, words, *digest)
	if err != nil {
		return answerError(stderr, name, err)
	}
	resolved, err := src.answer(ctx, thread, id, raw, *by)
	if err != nil {
		var r *refusal
		if errors.As(err, &r) {
			err = refusalWords(ctx, src, thread, id, r, *digest)
		}
		return fail(stderr, name, err)
	}
	fmt.Fprintf(stdout, "question %s in thread %s: %s\n", display.Line(id), display.Line(thread), display.Resolution(resolved))
	if verb == "deny" && strings.TrimSpace(strings.Join(words, " ")) == "" {
		fmt.Fprintln(stderr, "note: denied with no reason; the model is told only that a reviewer denied the call (deny REASON says why)")
	}
	return 0
}

// buildAnswer turns the answer words into the JSON the question's kind
// takes, or says, in the terms of the command line, which answers it
// takes. digest binds an approval to the call it is about: the one given,
// else the question's as read.
func buildAnswer(q *checkpoint.Question, verb string, words []string, digest string) (json.RawMessage, error) {
	arg := strings.Join(words, " ")
	if digest == "" {
		digest = q.Digest
	}
	switch verb {
	case "approve", "yes", "no":
		// A word after approve was most likely meant as a reason or an
		// edit; answering without it would answer something else.
		if len(words) > 0 {
			return nil, fmt.Errorf("%s takes nothing after it, got %q (deny REASON gives a reason; edit JSON changes the call)", verb, arg)
		}
	}
	wrongKind := fmt.Errorf("question %s %s: answer %s", display.Line(q.ID), qkind.Of(q.Kind).Asks, qkind.Of(q.Kind).Forms)
	switch verb {
	case "json":
		if !json.Valid([]byte(arg)) {
			return nil, fmt.Errorf("json takes the answer as JSON, such as json '{\"decision\": \"approve\"}'; %q is not JSON", arg)
		}
		return withDigest(json.RawMessage(arg), q, digest), nil
	case "approve", "deny", "edit":
		var edited map[string]any
		if verb == "edit" {
			dec := json.NewDecoder(strings.NewReader(arg))
			dec.UseNumber() // numbers as written
			if err := dec.Decode(&edited); err != nil || edited == nil || dec.More() {
				return nil, fmt.Errorf("edit takes the new arguments as one JSON object, such as edit '{\"cmd\": \"ls -l\"}'; %s", jsonWords(arg, err))
			}
		}
		if a := qkind.Approval(q.Kind, verb, arg, edited, digest); a != nil {
			return jsontext.Marshal(a)
		}
		return nil, wrongKind
	case "yes", "no":
		if q.Kind != hitl.KindConfirm {
			return nil, wrongKind
		}
		return jsontext.Marshal(verb == "yes")
	case "text":
		if q.Kind != hitl.KindAsk {
			return nil, wrongKind
		}
		if req, err := hitl.RequestOf(q); err == nil && len(req.Payload.Choices) > 0 && !slices.Contains(req.Payload.Choices, arg) {
			return nil, fmt.Errorf("question %s takes one of the choices %s, not %q", display.Line(q.ID), display.Line(strings.Join(quoteAll(req.Payload.Choices), ", ")), arg)
		}
		return jsontext.Marshal(arg)
	}
	return nil, fmt.Errorf("unknown answer %q: question %s %s: answer %s", verb, display.Line(q.ID), qkind.Of(q.Kind).Asks, qkind.Of(q.Kind).Forms)
}

// withDigest binds an answer given as JSON to the call it is about, as
// approve, deny and edit are: an object answering a question bound to a
// digest gets the digest (the one given, else the question's as read) if
// it carries none; an answer that names one keeps it, to be checked.
func withDigest(raw json.RawMessage, q *checkpoint.Question, digest string) json.RawMessage {
	if q.Digest == "" || !qkind.Of(q.Kind).Approval {
		return raw
	}
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if dec.Decode(&m) != nil || m == nil {
		return raw
	}
	if _, ok := m["digest"]; ok {
		return raw
	}
	d, _ := json.Marshal(digest)
	// Appended to the object as written, so its other keys and numbers
	// stay as the user wrote them.
	t := bytes.TrimSpace(raw)
	out := append([]byte(nil), bytes.TrimSpace(t[:len(t)-1])...) // without its closing }
	if len(m) > 0 {
		out = append(out, ',')
	}
	out = append(out, `"digest":`...)
	out = append(out, d...)
	return append(out, '}')
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// jsonWords says what is wrong with text that should be a JSON object.
func jsonWords(arg string, err error) string {
	switch {
	case strings.TrimSpace(arg) == "":
		return "none was given"
	case err != nil:
		return fmt.Sprintf("%q is not JSON: %v", arg, err)
	}
	return fmt.Sprintf("%q is not one JSON object", arg)
}

// resolvedWords says that q was answered, timed out or aborted already,
// by whom and how.
func resolvedWords(q *checkpoint.Question) string {
	id := display.Line(q.ID)
	switch q.Status {
	case checkpoint.QuestionTimedOut:
		return fmt.Sprintf("question %s timed out at %s: no answer is taken after the deadline", id, when(q.Deadline))
	case checkpoint.QuestionAborted:
		return fmt.Sprintf("question %s was aborted at %s (%s): its run is closed", id, when(q.ResolvedAt), display.Line(q.Reason))
	}
	return fmt.Sprintf("question %s was already answered at %s: %s (the first answer wins)", id, when(q.ResolvedAt), display.Resolution(q))
}

func digestWords(q *checkpoint.Question, given string) error {
	return fmt.Errorf("question %s is about another call than the one you were shown: its digest is %s, not %s (look again: tollgate questions show %s %s)",
		display.Line(q.ID), q.Digest, display.Line(given), shellWord(q.ThreadID), shellWord(q.ID))
}

// refusalWords says why the store or the server refused an answer, the
// same for both.
func refusalWords(ctx context.Context, src source, thread, id string, r *refusal, digest string) error {
	q := r.question
	switch r.code {
	case "not_found":
		return noQuestion(ctx, src, thread, id)
	case "already_answered", "aborted", "expired":
		if q != nil && q.Status != checkpoint.QuestionPending {
			return errors.New(resolvedWords(q))
		}
		if r.code == "expired" && q != nil {
			return fmt.Errorf("question %s had to be answered by %s: it is too late", display.Line(id), when(q.Deadline))
		}
	case "digest_mismatch":
		if q != nil {
			return digestWords(q, digest)
		}
	case "digest_required":
		return fmt.Errorf("question %s is bound to the call it shows: an answer must carry its digest (json '{\"action\": \"approve\", \"digest\": \"sha256:...\"}'; approve, deny and edit add it themselves)",
			display.Line(id))
	case "invalid_answer":
		var b strings.Builder
		fmt.Fprintf(&b, "the answer is refused; question %s stays open for another:", display.Line(id))
		for _, p := range r.problems {
			if p.Path == "" {
				fmt.Fprintf(&b, "\n  %s", display.Line(p.Message))
				continue
			}
			fmt.Fprintf(&b, "\n  %s: %s", display.Line(p.Path), display.Line(p.Message))
		}
		return errors.New(b.String())
	}
	return errors.New(display.Line(r.message))
}
