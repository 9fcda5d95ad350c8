package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate-ai/tollgate/apiclient"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/display"
	"github.com/tollgate-ai/tollgate/policy/learn"
)

// This file is where the command line learns rules from answers
// (questions answer ... learn) and lists, shows, approves, revokes and
// exports them (tollgate rules): on a store through package policy/learn,
// or on a server through its API (/v1/rules, server/API.md).

func init() {
	register("rules", "list, show, approve, revoke or export the rules learned from answers (approve, and allow calls like this)", nil,
		subcommand{name: "list", summary: "list the learned rules (--status all: revoked and expired too)", run: rulesList},
		subcommand{name: "show", summary: "show a learned rule: what it allows, where, who learned it, as policy YAML", run: rulesShow},
		subcommand{name: "revoke", summary: "revoke a learned rule: it never applies again", run: rulesRevoke},
		subcommand{name: "approve", summary: "approve a learned rule as its second reviewer (learn: second_reviewer)", run: rulesApprove},
		subcommand{name: "export", summary: "print the learned rules as a policy file's rules (YAML)", run: rulesExport})
}

// learner is a source that learns rules: a store or a server.
type learner interface {
	preview(ctx context.Context, thread, id string, spec *learn.Spec, scope *learn.Scope, by string) (*learn.Preview, error)
	learn(ctx context.Context, thread, id string, req learnBody, by string) (*wireRule, error)
	rules(ctx context.Context, status string) ([]*wireRule, error)
	rule(ctx context.Context, id string) (*wireRule, error)
	change(ctx context.Context, id string, approve bool, reason, by string) (*wireRule, error)
	export(ctx context.Context, status string) ([]byte, error)
}

// learnBody is what learning takes: the API's body.
type learnBody struct {
	Digest  string       `json:"digest"`
	Spec    *learn.Spec  `json:"spec,omitempty"`
	Scope   *learn.Scope `json:"scope,omitempty"`
	Expires string       `json:"expires,omitempty"`
}

// wireRule is a learned rule as the API shows it.
type wireRule = apiclient.Rule

// ruleLine is a rule as --json prints it: the API's Rule without its
// spec (its summary and YAML say it), as it always has.
type ruleLine struct {
	*wireRule
	// Spec hides the rule's: a field of the same name nearer the top
	// wins, and this one is never set.
	Spec json.RawMessage `json:"spec,omitempty"`
}

// ---------- the commands ----------

// rulesSource opens the source of a rules command as a learner.
func rulesSource(ctx context.Context, fs *flagSet, sf *sourceFlags, name string, stderr io.Writer, n int, policyFile string) (learner, func(), int) {
	src, code := sf.openFor(ctx, fs, name, stderr, n)
	if src == nil {
		return nil, nil, code
	}
	if s, ok := src.(*storeSource); ok {
		s.policyFile = policyFile
	}
	l, ok := src.(learner)
	if !ok {
		src.close()
		return nil, nil, fail(stderr, name, errors.New("this source learns no rules"))
	}
	return l, src.close, 0
}

// ruleFlags are the flags of the rules commands beside the source's.
func ruleFlags(fs *flagSet) (policyFile *string) {
	return fs.String("policy", envDefault("TOLLGATE_POLICY", ""), "store only: the policy `file` the rules answer for: whether a rule waits for a second reviewer (default: the built-in sandbox policy), e.g. --policy policy.yaml [TOLLGATE_POLICY]")
}

const rulesListHelp = `usage: tollgate rules list [--status STATUS] [--json]

Lists the rules learned from answers ("approve, and allow calls like
this"), oldest first: the rule's id, its status, where it applies, who
learned it, and what it allows (git diff <inside> -- <inside>: <inside> is
a path inside the working directory, <any> any word that is not an
option). STATUS: live (the default: active, or waiting for a second
reviewer), active, waiting, expired, revoked or all.

examples:
  tollgate rules list
  tollgate rules list --status all
` + sourceFlagsHelp

func rulesList(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const name = "rules list"
	fs, sf := sourceCommand(name, rulesListHelp, stderr)
	status := fs.String("status", "live", "which rules: live, active, waiting, expired, revoked or all")
	asJSON := fs.Bool("json", false, "one JSON object a line, as the API shows a rule, e.g. --json")
	policyFile := ruleFlags(fs)
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	l, closeSrc, code := rulesSource(ctx, fs, sf, name, stderr, 0, *policyFile)
	if l == nil {
		return code
	}
	defer closeSrc()
	rules, err := l.rules(ctx, *status)
	if err != nil {
		return fail(stderr, name, err)
	}
	if *asJSON {
		return printJSONLines(stdout, stderr, name, rules, func(r *wireRule) any { return ruleLine{wireRule: r} })
	}
	if len(rules) == 0 {
		fmt.Fprintf(stdout, "no %s learned rules\n", display.Line(*status))
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tSTATUS\tSCOPE\tBY\tTOOL\tALLOWS")
	for _, r := range rules {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", display.Line(r.ID), display.Line(r.Status), display.Line(apiclient.Clip(r.ScopeText, 40)), display.Line(r.CreatedBy),
			display.Line(r.Tool), display.Line(apiclient.Clip(r.Summary, 80)))
	}
	tw.Flush()
	return 0
}

const rulesShowHelp = `usage: tollgate rules show RULE [--json]

Shows a learned rule: what it allows, where (a thread, a project, or
everyone), who learned it from which question and when, the digest of the
call they approved, its expiry, a second reviewer's approval, a
revocation, and the rule as a policy file's rule (YAML).

examples:
  tollgate rules show lr_3f2a9c1b07d4e5f6
` + sourceFlagsHelp

func rulesShow(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const name = "rules show"
	fs, sf := sourceCommand(name, rulesShowHelp, stderr)
	asJSON := fs.Bool("json", false, "the rule as one JSON object, as the API shows it, e.g. --json")
	policyFile := ruleFlags(fs)
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() != 1 {
		return fs.usageError("want one RULE")
	}
	l, closeSrc, code := rulesSource(ctx, fs, sf, name, stderr, -1, *policyFile)
	if l == nil {
		return code
	}
	defer closeSrc()
	r, err := l.rule(ctx, fs.Arg(0))
	if errors.Is(err, checkpoint.ErrNotFound) {
		return fail(stderr, name, fmt.Errorf("no learned rule %s (tollgate rules list --status all lists them)", display.Line(fs.Arg(0))))
	}
	if err != nil {
		return fail(stderr, name, err)
	}
	if *asJSON {
		return printJSONLines(stdout, stderr, name, []*wireRule{r}, func(r *wireRule) any { return ruleLine{wireRule: r} })
	}
	showRule(stdout, r)
	return 0
}

// showRule prints a rule for a person.
func showRule(w io.Writer, r *wireRule) {
	fmt.Fprintf(w, "rule %s: %s\n", display.Line(r.ID), display.Line(r.Status))
	field(w, "allows", display.Line(r.Tool)+": "+display.Line(r.Summary))
	field(w, "scope", display.Line(r.ScopeText))
	field(w, "learned", fmt.Sprintf("by %s at %s, from question %s of thread %s", display.Line(r.CreatedBy), when(time.Time(r.CreatedAt)),
		display.Line(r.QuestionID), display.Line(r.ThreadID)))
	field(w, "digest", display.Line(r.Digest))
	if t := time.Time(r.ExpiresAt); !t.IsZero() {
		field(w, "expires", when(t))
	}
	if r.ApprovedBy != "" {
		field(w, "approved", "by "+display.Line(r.ApprovedBy)+" at "+when(time.Time(r.ApprovedAt)))
	}
	if r.RevokedBy != "" {
		reason := ""
		if r.RevokeReason != "" {
			reason = " (" + display.Line(r.RevokeReason) + ")"
		}
		field(w, "revoked", "by "+display.Line(r.RevokedBy)+" at "+when(time.Time(r.RevokedAt))+reason)
	}
	fmt.Fprintln(w, "as a policy rule:")
	fmt.Fprint(w, display.Text(r.YAML))
}

const rulesRevokeHelp = `usage: tollgate rules revoke RULE [--reason TEXT]

Revokes a learned rule: from now on it allows nothing, in every process
that shares the store (replicas too), and the revocation, who made it and
why, is in the audit log. A revoked rule stays listed (--status revoked).

examples:
  tollgate rules revoke lr_3f2a9c1b07d4e5f6 --reason "too broad"
` + sourceFlagsHelp

func rulesRevoke(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return rulesChange(ctx, args, stdout, stderr, false)
}

const rulesApproveHelp = `usage: tollgate rules approve RULE

Approves a learned rule as its second reviewer: under a policy with
learn: {second_reviewer: true} a rule allows nothing until a reviewer
other than the one who learned it approves it.

examples:
  tollgate rules approve lr_3f2a9c1b07d4e5f6
` + sourceFlagsHelp

func rulesApprove(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return rulesChange(ctx, args, stdout, stderr, true)
}

func rulesChange(ctx context.Context, args []string, stdout, stderr io.Writer, approve bool) int {
	name, help := "rules revoke", rulesRevokeHelp
	if approve {
		name, help = "rules approve", rulesApproveHelp
	}
	fs, sf := sourceCommand(name, help, stderr)
	sf.writes = strings.TrimPrefix(name, "rules ") + " a rule"
	by := fs.String("by", "", "store only: the `name` of who "+strings.TrimPrefix(name, "rules ")+"s, recorded in the audit log (default: $TOLLGATE_USER, else your login name), e.g. --by alice")
	var reason *string
	if !approve {
		reason = fs.String("reason", "", "why, for the audit log (e.g. --reason \"too broad\")")
	}
	policyFile := ruleFlags(fs)
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() != 1 {
		return fs.usageError("want one RULE")
	}
	who, code := reviewerName(fs, sf, *by)
	if who == "" {
		return code
	}
	l, closeSrc, code := rulesSource(ctx, fs, sf, name, stderr, -1, *policyFile)
	if l == nil {
		return code
	}
	defer closeSrc()
	why := ""
	if reason != nil {
		why = *reason
	}
	r, err := l.change(ctx, fs.Arg(0), approve, why, who)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		return fail(stderr, name, fmt.Errorf("no learned rule %s (tollgate rules list --status all lists them)", display.Line(fs.Arg(0))))
	case err != nil:
		return fail(stderr, name, err)
	}
	if approve {
		fmt.Fprintf(stdout, "rule %s approved by %s: %s\n", display.Line(r.ID), display.Line(r.ApprovedBy), display.Line(r.Status))
	} else {
		fmt.Fprintf(stdout, "rule %s revoked by %s\n", display.Line(r.ID), display.Line(r.RevokedBy))
	}
	return 0
}

// reviewerName is who answers, approves or revokes: --by on a store
// (default: the login name), the token's name on a server (where --by
// is refused). "" with the exit status when it cannot be.
func reviewerName(fs *flagSet, sf *sourceFlags, by string) (string, int) {
	onServer, err := sf.onServer(fs)
	if err != nil {
		return "", fs.usageError("%v", err)
	}
	byGiven := false
	fs.Visit(func(f *flag.Flag) { byGiven = byGiven || f.Name == "by" })
	if onServer && byGiven {
		return "", fs.usageError("--by works on a store only: a server records the name of the token")
	}
	if by == "" {
		by = currentUser()
	}
	if reserved(by) {
		// The runtime records these names itself: an answer given as one
		// would be indistinguishable from a deadline, an abort or dev mode.
		return "", fs.usageError("--by %q is reserved; give the name of the person answering", by)
	}
	return by, 0
}

const rulesExportHelp = `usage: tollgate rules export [--status STATUS]

Prints the learned rules as a policy file's rules: section, each with
comments that say who learned it, from which question and digest, its
scope and expiry. Each exported rule allows no more than its learned rule
(the same commands and words, files inside the working directory, its
thread or project), so that a team can review them and move them into
its policy file. STATUS: live (the default), active, waiting, expired,
revoked or all.

examples:
  tollgate rules export > learned.yaml
` + sourceFlagsHelp

func rulesExport(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const name = "rules export"
	fs, sf := sourceCommand(name, rulesExportHelp, stderr)
	status := fs.String("status", "live", "which rules: live, active, waiting, expired, revoked or all, e.g. --status all")
	policyFile := ruleFlags(fs)
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	l, closeSrc, code := rulesSource(ctx, fs, sf, name, stderr, 0, *policyFile)
	if l == nil {
		return code
	}
	defer closeSrc()
	out, err := l.export(ctx, *status)
	if err != nil {
		return fail(stderr, name, err)
	}
	_, _ = stdout.Write(out)
	return 0
}

// ---------- questions answer ... learn ----------

// learnOptions are the flags of questions answer that shape a learned
// rule.
type learnOptions struct {
	scope   string
	match   []string
	expires string
	dryRun  bool
}

func (o *learnOptions) register(fs *flagSet) {
	fs.StringVar(&o.scope, "scope", "thread", "learn: where the rule applies: thread, project (the directory the call works in, and below) or everyone")
	fs.Func("match", "learn: how an argument matches, `N=MATCH` (N its position among the command's arguments, C.N in the C-th command) or NAME=MATCH for a tool's field; MATCH is exact, any, inside (a path in the working directory), inside:DIR, or range:MIN:MAX; repeatable (e.g. --match 2=any)",
		func(s string) error { o.match = append(o.match, s); return nil })
	fs.StringVar(&o.expires, "expires", "never", "learn: how long the rule lasts: never, or 90m, 12h, 30d")
	fs.BoolVar(&o.dryRun, "dry-run", false, "learn: show the rule and its blast radius, and answer nothing")
}

// applyMatches changes the preview's spec as --match says.
func (o *learnOptions) applyMatches(s *learn.Spec) error {
	for _, m := range o.match {
		target, match, ok := strings.Cut(m, "=")
		if !ok {
			return fmt.Errorf("--match %q: want N=MATCH or NAME=MATCH", m)
		}
		if sh := s.Shell; sh != nil && target != "" && strings.Trim(target, "0123456789.") == "" {
			ci, ai := 1, 0
			var err error
			if c, a, ok := strings.Cut(target, "."); ok {
				ci, err = strconv.Atoi(c)
				if err == nil {
					ai, err = strconv.Atoi(a)
				}
			} else {
				ai, err = strconv.Atoi(target)
			}
			if err != nil || ci < 1 || ci > len(sh.Commands) || ai < 1 || ai > len(sh.Commands[ci-1].Args) {
				return fmt.Errorf("--match %q: no such argument (the command string has %d command(s))", m, len(sh.Commands))
			}
			sh.Commands[ci-1].Args[ai-1].Match = learn.Match(match)
			continue
		}
		found := false
		for i := range s.Args {
			f := &s.Args[i]
			if f.Name != target {
				continue
			}
			found = true
			kind, rest, _ := strings.Cut(match, ":")
			f.Match, f.Min, f.Max, f.Dir = learn.Match(kind), nil, nil, ""
			switch learn.Match(kind) {
			case learn.Range:
				lo, hi, _ := strings.Cut(rest, ":")
				a, err1 := strconv.ParseFloat(lo, 64)
				b, err2 := strconv.ParseFloat(hi, 64)
				if err1 != nil || err2 != nil {
					return fmt.Errorf("--match %q: a range is range:MIN:MAX", m)
				}
				f.Min, f.Max = &a, &b
			case learn.Inside:
				f.Dir = rest
			}
		}
		if !found {
			return fmt.Errorf("--match %q: the call has no argument %s", m, target)
		}
	}
	return nil
}

// scopeOf is the --scope among the preview's scopes.
func (o *learnOptions) scopeOf(p *learn.Preview) (*learn.Scope, error) {
	want := map[string]checkpoint.RuleScope{"thread": checkpoint.ScopeThread, "project": checkpoint.ScopeDir,
		"dir": checkpoint.ScopeDir, "everyone": checkpoint.ScopeEveryone}[o.scope]
	for i := range p.Scopes {
		if p.Scopes[i].Kind == want {
			return &p.Scopes[i], nil
		}
	}
	var offered []string
	for _, s := range p.Scopes {
		offered = append(offered, s.String())
	}
	return nil, fmt.Errorf("--scope %s: a rule learned from this call may apply to %s", o.scope, strings.Join(offered, ", or "))
}

// learnAnswer is questions answer's "learn": approve, and allow calls
// like this. It shows the rule, as --match and --scope shape it, its
// policy YAML and blast radius; then, unless --dry-run, approves and
// saves it.
func learnAnswer(ctx context.Context, src source, q *checkpoint.Question, o *learnOptions, by, digest string, stdout, stderr io.Writer) int {
	const name = "questions answer"
	l, ok := src.(learner)
	if !ok {
		return fail(stderr, name, errors.New("this source learns no rules"))
	}
	// Checked first: a --dry-run took any --expires, and a real answer
	// refused it only after the whole preview.
	if _, err := learn.ParseExpiry(o.expires); err != nil {
		return answerError(stderr, name, fmt.Errorf("--expires %q%s", o.expires, strings.TrimPrefix(err.Error(), "learn: expiry "+strconv.Quote(o.expires))))
	}
	p, err := l.preview(ctx, q.ThreadID, q.ID, nil, nil, by)
	if err != nil {
		return fail(stderr, name, err)
	}
	spec := p.Spec
	if err := o.applyMatches(&spec); err != nil {
		return answerError(stderr, name, err)
	}
	scope, err := o.scopeOf(p)
	if err != nil {
		return answerError(stderr, name, err)
	}
	if p, err = l.preview(ctx, q.ThreadID, q.ID, &spec, scope, by); err != nil {
		return fail(stderr, name, err)
	}
	showPreview(stdout, p)
	if o.dryRun {
		fmt.Fprintln(stdout, "(dry run: nothing answered, no rule saved)")
		return 0
	}
	if digest == "" {
		digest = q.Digest
	}
	r, err := l.learn(ctx, q.ThreadID, q.ID, learnBody{Digest: digest, Spec: &p.Spec, Scope: scope, Expires: o.expires}, by)
	if err != nil {
		return fail(stderr, name, err)
	}
	fmt.Fprintf(stdout, "question %s in thread %s: approved by %s, and rule %s learned (%s)\n", display.Line(q.ID), display.Line(q.ThreadID),
		display.Line(r.CreatedBy), display.Line(r.ID), display.Line(r.Status))
	if r.Status == learn.StatusWaiting {
		fmt.Fprintf(stdout, "it allows nothing until another reviewer approves it: tollgate rules approve %s\n", display.Line(r.ID))
	}
	return 0
}

// showPreview prints a proposal: the rule, where, its YAML, its radius.
func showPreview(w io.Writer, p *learn.Preview) {
	field(w, "allows", display.Line(p.Spec.Tool)+": "+display.Line(p.Summary))
	field(w, "scope", display.Line(p.Scope.String()))
	if sh := p.Spec.Shell; sh != nil {
		for ci, c := range sh.Commands {
			for ai, a := range c.Args {
				pos := strconv.Itoa(ai + 1)
				if len(sh.Commands) > 1 {
					pos = strconv.Itoa(ci+1) + "." + pos
				}
				choices := p.Choices[ci][ai]
				if len(choices) > 1 {
					field(w, "  "+pos, fmt.Sprintf("%s %s: %s (may be %s)", a.Role, display.Line(a.Prefix+a.Word), a.Match, joinMatch(choices)))
				}
			}
		}
	}
	for _, f := range p.Spec.Args {
		if c := p.Fields[f.Name]; len(c.Matches) > 1 {
			field(w, "  "+display.Line(f.Name), fmt.Sprintf("%s (may be %s)", f.Match, joinMatch(c.Matches)))
		}
	}
	r := p.Radius
	fmt.Fprintf(w, "blast radius: of the last %d questions about %s, it would have allowed %d (%d approved, %d denied, %d edited, %d unanswered)\n",
		r.Scanned, display.Line(p.Spec.Tool), r.Matched, r.Approved, len(r.Denied), len(r.Edited), r.Unanswered)
	for _, d := range r.Denied {
		reason := ""
		if d.Reason != "" {
			reason = ": " + display.Line(d.Reason)
		}
		fmt.Fprintf(w, "  ⚑ denied by %s%s — %s (thread %s)\n", display.Line(d.By), reason, display.Line(apiclient.Clip(d.Call, 100)), display.Line(d.ThreadID))
	}
	for _, e := range r.Edited {
		fmt.Fprintf(w, "  ✎ edited by %s — %s (thread %s)\n", display.Line(e.By), display.Line(apiclient.Clip(e.Call, 100)), display.Line(e.ThreadID))
	}
	for _, u := range r.Unseen {
		fmt.Fprintf(w, "  never asked, allowed: %s\n", display.Line(apiclient.Clip(u, 100)))
	}
	if p.SecondReviewer {
		fmt.Fprintln(w, "the policy wants a second reviewer: the rule allows nothing until another reviewer approves it")
	}
	fmt.Fprintln(w, "as a policy rule:")
	fmt.Fprint(w, display.Text(p.YAML))
}

func joinMatch(ms []learn.Match) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}
