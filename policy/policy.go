package policy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-ai/tollgate/policy/shell"
)

// Action is what a rule, and a decision, says to do with a tool call.
type Action string

// The actions, from least to most restrictive.
const (
	Allow Action = "allow"
	Ask   Action = "ask"
	Block Action = "block"
)

// rank orders actions by how restrictive they are; an unknown action ranks
// below all.
func (a Action) rank() int {
	switch a {
	case Allow:
		return 1
	case Ask:
		return 2
	case Block:
		return 3
	}
	return 0
}

// Names that stand for the engine itself in [Decision.Rule] and
// [Match.Rule]; rule names in a file may not start with "(".
const (
	// RuleDefault is the policy's default action, for a call or a shell
	// command no rule covers.
	RuleDefault = "(default)"
	// RuleShellReview is a shell command string the analysis cannot vouch
	// for: it does not parse, runs code it cannot see, or uses an option
	// that runs programs. Such a call is never allowed.
	RuleShellReview = "(shell review)"
	// RuleError is a condition that failed at run time, or arguments the
	// engine cannot read: the call is asked (fail closed).
	RuleError = "(error)"
	// RuleLearned is a rule learned from a reviewer's answer (see
	// [Learned]): the file's rules asked, and the learned rule named by
	// [Decision.Learned] allowed the call.
	RuleLearned = "(learned)"
)

// The sandbox profiles a rule's allow can require (see the bash tool).
const (
	SandboxReadOnly       = "read-only"
	SandboxWorkspaceWrite = "workspace-write"
)

// DefaultTimeout is how long an ask waits when neither the rule nor the
// file sets a timeout (the seed's AskUser(timeout_seconds=180)).
const DefaultTimeout = 180 * time.Second

// Call is a tool call as the engine sees it.
type Call struct {
	Tool string
	// Args are the call's arguments as a JSON object decodes: strings,
	// float64 numbers, bools, nil, []any and map[string]any.
	Args     map[string]any
	ThreadID string
	// Annotations are what the tool says of itself (agent.Tool's
	// Annotations: for an MCP server's tool, mcp_server, mcp_tool and its
	// hints read_only, destructive, idempotent, open_world). Conditions
	// read them as annotations; no rule matches because of them alone,
	// and an ask shows them to the reviewer. Nil: none.
	Annotations map[string]any
	// Dir is the directory the call works in, when the caller knows it:
	// a coding agent's project, as its hook reports it (package hooks).
	// Conditions read it as dir, and give it to path_inside. Empty:
	// unknown, and no path is inside it.
	Dir string
}

// Decision is the engine's verdict on a call.
type Decision struct {
	Action Action
	// Reason says why, for the model (on block) and the reviewer (on ask).
	Reason string
	// Rule is the rule that decided: the first matching rule of the most
	// restrictive action, or one of RuleDefault, RuleShellReview, RuleError.
	Rule string
	// Command is the shell command the deciding rule matched, if it is a
	// rule with command.
	Command string
	// Sandbox is the profile an allowed call must run under: the most
	// confined one the matching allow rules require (SandboxReadOnly,
	// SandboxWorkspaceWrite), "" if none requires one. Allow only.
	Sandbox string
	// Timeout is how long to wait for a person (ask only).
	Timeout time.Duration
	// Impact says what the call could do, for the reviewer (ask only): the
	// deciding rule's impact, else DefaultImpact, but "" for a shell call,
	// whose Effects say it better.
	Impact string
	// Effects say what a shell call would do, each with its objects and
	// risk, and Risk the highest of them (ask only; nil and "" for a call
	// of a tool that is not a shell). Shared: do not modify.
	Effects []shell.Effect
	Risk    shell.Risk
	// Runs says where an allowed or asked call runs, in words: the
	// working directory and the sandbox profile (or "unconfined") the tool
	// announces in its annotations (working_directory, sandbox; the bash
	// tool does), a rule's stricter profile for an allow. "" when the tool
	// says nothing of it.
	Runs string
	// Review lists why the shell analysis cannot vouch for the command
	// string, if it cannot. Shared: do not modify.
	Review []string
	// Matched lists every rule that matched, in the order found, including
	// the engine's own verdicts (RuleDefault for each command no rule
	// covers, RuleShellReview, RuleError, RuleLearned).
	Matched []Match
	// Learnable says, of an ask, whether a rule learned from a reviewer's
	// answer may allow the call: every rule that asks lets it (none is
	// learnable: false, and none reads secrets or destroys data by
	// default), the shell analysis found nothing to review, and the
	// policy does not turn learning off. NotLearnable says why not.
	Learnable    bool
	NotLearnable string
	// Learned is the learned rule that allowed the call (Rule is then
	// RuleLearned); nil otherwise.
	Learned *LearnedRule

	details map[string]any // the deciding rule's details; shared
	dir     string         // the call's Dir, for an ask's details
}

// DefaultImpact is the impact of an ask whose rule states none.
const DefaultImpact = "needs human review"

// Details returns what the reviewer of an ask is shown, stored with the
// question: "matched_rule", "why" ([Decision.Why]), the rule's own
// details, and, when there are ones, "impact", "effects" (each an object
// with kind, text, risk, command and objects: [shell.Effect]), "risk",
// "runs" and "review" (why the shell analysis cannot vouch for the
// command). It is a fresh map on every call, and nil unless the action is
// ask.
func (d Decision) Details() map[string]any {
	if d.Action != Ask {
		return nil
	}
	m := make(map[string]any, len(d.details)+7)
	for k, v := range d.details {
		m[k] = v
	}
	m["matched_rule"] = d.Rule
	m["why"] = d.Why()
	if d.Impact != "" {
		m["impact"] = d.Impact
	}
	if len(d.Effects) > 0 {
		list := make([]any, len(d.Effects))
		for i, e := range d.Effects {
			x := map[string]any{"kind": string(e.Kind), "text": e.Text, "risk": string(e.Risk)}
			if e.Command != "" {
				x["command"] = e.Command
			}
			if len(e.Objects) > 0 {
				objs := make([]any, len(e.Objects))
				for j, o := range e.Objects {
					objs[j] = o
				}
				x["objects"] = objs
			}
			list[i] = x
		}
		m["effects"] = list
		m["risk"] = string(d.Risk)
	}
	if d.Runs != "" {
		m["runs"] = d.Runs
	}
	if len(d.Review) > 0 {
		m["review"] = slices.Clone(d.Review)
	}
	if d.dir != "" {
		// Where the call works: what a rule learned from the answer
		// may be scoped to (package policy/learn reads it back).
		m["dir"] = d.dir
	}
	return m
}

// Why says in words why the call got its action, naming each rule that
// gave it: "rule NAME: REASON" (a rule's reason is its author's words),
// "no rule matched rm -rf build: the policy's default is ask", "the
// shell analysis cannot vouch for it: ...". Several are joined with "; ".
func (d Decision) Why() string {
	var parts []string
	var uncovered []string
	defaults := -1
	seen := map[string]bool{}
	for _, m := range d.Matched {
		if m.Action != d.Action {
			continue
		}
		switch m.Rule {
		case RuleDefault:
			if m.Command != "" {
				uncovered = append(uncovered, m.Command)
			}
			if defaults < 0 {
				defaults = len(parts)
				parts = append(parts, "")
			}
			continue
		case RuleShellReview:
			if !seen[m.Rule] {
				parts = append(parts, "the shell analysis cannot vouch for it ("+m.Reason+")")
			}
		case RuleError:
			parts = append(parts, "it could not be checked, so the policy "+string(d.Action)+"s (fail closed): "+m.Reason)
		default:
			if seen[m.Rule] {
				continue
			}
			p := "rule " + m.Rule
			if m.Command != "" && d.Action != Allow {
				p += " (" + m.Command + ")"
			}
			if m.Reason != "" {
				p += ": " + m.Reason
			}
			parts = append(parts, p)
		}
		seen[m.Rule] = true
	}
	if len(d.Matched) == 0 && d.Rule == RuleDefault {
		defaults, parts = 0, []string{""}
	}
	if defaults >= 0 {
		p := "no rule matched"
		if len(uncovered) > 0 {
			s := strings.Join(uncovered[:min(len(uncovered), 3)], ", ")
			if n := len(uncovered) - 3; n > 0 {
				s += fmt.Sprintf(" and %d more", n)
			}
			p += " " + s
		}
		parts[defaults] = p + ": the policy's default is " + string(d.Action)
	}
	if len(parts) > 4 {
		parts = append(parts[:4], fmt.Sprintf("and %d more rules", len(parts)-4))
	}
	if len(parts) == 0 {
		return "rule " + d.Rule + ": " + d.Reason
	}
	return strings.Join(parts, "; ")
}

// Match is one rule that matched a call, or one of the call's shell
// commands.
type Match struct {
	Rule   string `json:"rule"`
	Action Action `json:"action"`
	// Command is the shell command a per-command rule matched, "" for a
	// rule on the whole call.
	Command string `json:"command,omitempty"`
	Reason  string `json:"reason,omitempty"`

	rule *rule // nil for the engine's own verdicts
	// notLearnable says, of an ask, why a learned rule may not answer
	// for it; "" when it may.
	notLearnable string
}

// Policy is a loaded, compiled policy file. It is safe for concurrent use.
type Policy struct {
	file    string
	digest  string // see Digest
	def     Action
	timeout time.Duration
	shell   map[string]string // tool -> argument holding a command string
	rules   []*rule
	tests   []TestCase
	cache   *analysisCache
	learn   learnSettings
	learned Learned // nil: no learned rules
	dir     string  // the Dir of calls that do not say theirs

	byTool  map[string]*toolRules // tools named exactly by a rule, and shell tools
	globbed []*rule               // rules on the whole call whose tool is a pattern
	// other maps tools named by no rule to the pattern rules that apply to
	// them; copied on write, so that reading it takes no lock.
	other   atomic.Pointer[map[string]*toolRules]
	otherMu sync.Mutex
}

// maxOtherTools bounds the tools, named by no rule, whose matching rules
// are remembered.
const maxOtherTools = 1024

var noRules = &toolRules{}

// rule is a compiled rule.
type rule struct {
	name        string
	index       int // position in the file
	tools       []pattern
	commands    []pattern // nil: a rule on the whole call
	cond        *condition
	action      Action
	reason      string
	timeout     time.Duration
	impact      string
	details     map[string]any
	allowWrites bool
	sandbox     string // the profile an allow requires, if any
	unenforced  string // why the kernel cannot enforce sandbox, if it cannot
	// learnable is what the rule says of learned rules (ask rules): nil
	// when it says nothing, and then it is learnable unless what it
	// matched reads secrets or destroys data.
	learnable *bool
}

// toolRules are the rules that can apply to one tool name, in file order.
type toolRules struct {
	call     []*rule            // rules on the whole call
	byName   map[string][]*rule // per-command rules naming a command exactly
	globCmd  []*rule            // per-command rules with a command pattern
	shellArg string             // the argument holding a command string, if a shell tool
	isShell  bool
}

// File is the file the policy was loaded from.
func (p *Policy) File() string { return p.file }

// MaxTimeout is the longest an ask of this policy waits for a person:
// the default timeout or a rule's, whichever is longest. Whoever waits
// for an answer on the asker's behalf (a coding agent's hook) must wait
// at least this long.
func (p *Policy) MaxTimeout() time.Duration {
	d := p.timeout
	for _, r := range p.rules {
		if r.action == Ask {
			d = max(d, r.timeout)
		}
	}
	return d
}

// Default is the action for calls and shell commands no rule covers.
func (p *Policy) Default() Action { return p.def }

// Rules returns the names of the rules, in file order.
func (p *Policy) Rules() []string {
	out := make([]string, len(p.rules))
	for i, r := range p.rules {
		out[i] = r.name
	}
	return out
}

// Tests returns the test cases written in the policy file.
func (p *Policy) Tests() []TestCase { return slices.Clone(p.tests) }

// ShellArg returns the argument of tool that holds a shell command string,
// if the policy treats tool as a shell.
func (p *Policy) ShellArg(tool string) (string, bool) {
	if arg, ok := p.shell[tool]; ok {
		return arg, true
	}
	return "", false
}

// index builds the per-tool rule lists.
func (p *Policy) index() {
	p.byTool = map[string]*toolRules{}
	names := map[string]bool{}
	for i, r := range p.rules {
		r.index = i
		for _, t := range r.tools {
			if t.kind == patExact {
				names[t.a] = true
			}
		}
		if r.commands == nil && slices.ContainsFunc(r.tools, func(t pattern) bool { return t.kind != patExact }) {
			p.globbed = append(p.globbed, r)
		}
	}
	for t := range p.shell {
		names[t] = true
	}
	for t := range names {
		tr := &toolRules{byName: map[string][]*rule{}}
		tr.shellArg, tr.isShell = p.shell[t]
		for _, r := range p.rules {
			if !r.appliesTo(t) {
				continue
			}
			if r.commands == nil {
				tr.call = append(tr.call, r)
				continue
			}
			if slices.ContainsFunc(r.commands, func(c pattern) bool { return c.kind != patExact }) {
				tr.globCmd = append(tr.globCmd, r)
				continue
			}
			for _, c := range r.commands {
				if l := tr.byName[c.a]; len(l) == 0 || l[len(l)-1] != r {
					tr.byName[c.a] = append(l, r)
				}
			}
		}
		p.byTool[t] = tr
	}
}

// rulesFor returns the rules that can apply to tool.
func (p *Policy) rulesFor(tool string) *toolRules {
	if tr, ok := p.byTool[tool]; ok {
		return tr
	}
	if len(p.globbed) == 0 {
		return noRules
	}
	if m := p.other.Load(); m != nil {
		if tr, ok := (*m)[tool]; ok {
			return tr
		}
	}
	tr := &toolRules{}
	for _, r := range p.globbed {
		if r.appliesTo(tool) {
			tr.call = append(tr.call, r)
		}
	}
	p.otherMu.Lock()
	defer p.otherMu.Unlock()
	old := p.other.Load()
	if old == nil || len(*old) < maxOtherTools {
		m := make(map[string]*toolRules, 1+lenOf(old))
		if old != nil {
			maps.Copy(m, *old)
		}
		m[tool] = tr
		p.other.Store(&m)
	}
	return tr
}

func lenOf(m *map[string]*toolRules) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

func (r *rule) appliesTo(tool string) bool { return matchAny(r.tools, tool) }

// Evaluate decides a call. It never fails: a condition that errors, or
// arguments it cannot read, make the call asked. The most restrictive
// matching rule wins (block over ask over allow). A shell call is allowed
// only when every command in it is allowed and the shell analysis found
// nothing that needs a person. When the file's rules ask and the call is
// learnable, the policy's learned rules ([Options].Learned) may allow it
// ([RuleLearned]); they never change a block.
func (p *Policy) Evaluate(ctx context.Context, call Call) Decision {
	if call.Dir == "" {
		call.Dir = p.dir
	}
	d := p.EvaluateRules(ctx, call)
	if d.Action != Ask || !d.Learnable || p.learned == nil {
		return d
	}
	lr, err := p.learned.Allow(ctx, call, p.learn.secondReviewer)
	switch {
	case err != nil:
		// Fail closed: the call is asked, and explain says why no
		// learned rule was looked at.
		d.Matched = append(slices.Clip(d.Matched), Match{Rule: RuleLearned, Action: Ask,
			Reason: "the learned rules could not be read: " + err.Error()})
		return d
	case lr == nil:
		return d
	}
	reason := fmt.Sprintf("allowed by rule %s, learned from %s's answer", lr.ID, lr.By)
	return Decision{Action: Allow, Rule: RuleLearned, Reason: reason, Learned: lr,
		Matched: append(slices.Clip(d.Matched), Match{Rule: RuleLearned, Action: Allow, Reason: reason})}
}

// EvaluateRules decides a call by the file's rules alone, as [Evaluate]
// does before it looks at learned rules: what a learned rule would be
// asked to answer for.
func (p *Policy) EvaluateRules(ctx context.Context, call Call) Decision {
	if call.Dir == "" {
		call.Dir = p.dir
	}
	ev := evaluation{size: -1, dir: call.Dir}
	if ctx.Done() != nil {
		ev.ctx = ctx
	}
	tr := p.rulesFor(call.Tool)
	for _, r := range tr.call {
		p.try(&ev, r, &call, nil, 0, nil)
	}
	if tr.isShell {
		p.shellCall(&ev, tr, &call)
	}
	d := p.decide(&ev, &call)
	if d.Action != Block && len(call.Annotations) > 0 {
		d.Runs = runs(call.Annotations, d.Sandbox)
	}
	return d
}

// The annotations in which a tool says where its calls run (the bash
// tool's Annotations: its working directory and its sandbox profile).
const (
	AnnotationDir     = "working_directory"
	AnnotationSandbox = "sandbox"
)

// runs says where a call runs, from the tool's annotations; required is
// the profile an allow rule requires, stricter than the tool's.
func runs(ann map[string]any, required string) string {
	dir, _ := ann[AnnotationDir].(string)
	profile, _ := ann[AnnotationSandbox].(string)
	if required != "" {
		profile = required
	}
	if dir == "" && profile == "" {
		return ""
	}
	var b strings.Builder
	if dir != "" {
		b.WriteString("in " + dir)
		if profile != "" {
			b.WriteString(", ")
		}
	}
	switch profile {
	case "":
	case SandboxReadOnly:
		b.WriteString("sandbox read-only: it reads only the working directory and the system's files, writes nothing, reaches no network")
	case SandboxWorkspaceWrite:
		b.WriteString("sandbox workspace-write: it writes only inside the working directory, reaches no network")
	case "unconfined":
		b.WriteString("unconfined: it can do whatever the user tollgate runs as can, network included")
	default:
		b.WriteString("sandbox " + profile)
	}
	return b.String()
}

// evaluation collects the matches of one call.
type evaluation struct {
	ctx        context.Context // nil when it cannot be canceled
	size       int             // sizeOf the call's inputs; -1 until measured
	matches    []Match
	capHint    int // the matches expected, to size the slice once
	act        *activation
	wholeAllow bool // a rule on the whole call allowed it
	review     []string
	dir        string    // the call's Dir
	shell      *analysis // the command string's, for a shell call
	// cmd, when set, is the shell command being decided as the call's Dir
	// makes it (see insideDir): the analysis's, for any directory, is not.
	cmd *shell.Command
}

// callSize returns the size of the call's tool, thread and arguments
// (sizeOf), which chooses how conditions run.
func (ev *evaluation) callSize(call *Call) int {
	if ev.size < 0 {
		budget := 4096
		ev.size = max(len(call.Tool), len(call.ThreadID), len(call.Dir), sizeOf(call.Args, &budget))
	}
	return ev.size
}

func (ev *evaluation) add(m Match, r *rule) {
	if ev.matches == nil {
		ev.matches = make([]Match, 0, max(ev.capHint, 2))
	}
	m.rule = r
	ev.matches = append(ev.matches, m)
}

// try evaluates rule r on the call (a == nil) or on its shell command i
// of a, and records a match. memo, when not nil, keeps the result of a
// condition that reads only the command.
func (p *Policy) try(ev *evaluation, r *rule, call *Call, a *analysis, i int, memo *atomic.Uint32) bool {
	var cmd *shell.Command
	cmdSize := 0
	if a != nil {
		cmd, cmdSize = &a.Commands[i], a.sizes[i]
		if ev.cmd != nil {
			// Not the analysis's command: its memo is not this one's.
			cmd, memo = ev.cmd, nil
		}
	}
	if r.cond != nil {
		if r.cond.callVars {
			memo = nil
		}
		known := uint32(0)
		if memo != nil {
			known = memo.Load()
		}
		switch known {
		case memoFalse:
			return false
		case memoTrue:
		default:
			if ev.act == nil {
				ev.act = &activation{call: *call}
			}
			ev.act.cmd = cmd
			size := cmdSize
			if r.cond.callVars {
				size = max(size, ev.callSize(call))
			}
			ok, err := evalCond(ev.ctx, r.cond, size, ev.act)
			if err != nil {
				ev.add(Match{Rule: RuleError, Action: Ask, Command: a.str(i),
					Reason:       fmt.Sprintf("the condition of rule %q failed: %v", r.name, err),
					notLearnable: fmt.Sprintf("the condition of rule %q failed", r.name)}, nil)
				return true
			}
			if memo != nil {
				memo.Store(memoOf(ok))
			}
			if !ok {
				return false
			}
		}
	}
	if r.action == Allow && r.unenforced != "" {
		// Fail closed: what the rule promised cannot be enforced here.
		ev.add(Match{Rule: r.name, Action: Ask, Command: a.str(i),
			Reason:       fmt.Sprintf("rule %q allows only under sandbox %s, which cannot be enforced here: %s", r.name, r.sandbox, r.unenforced),
			notLearnable: defaultNotLearnable(cmd, call)}, r)
		return true
	}
	if cmd == nil && r.action == Allow {
		ev.wholeAllow = true
	}
	m := Match{Rule: r.name, Action: r.action, Reason: r.reason, Command: a.str(i)}
	if r.action == Ask {
		m.notLearnable = r.notLearnable(cmd, call)
	}
	ev.add(m, r)
	return true
}

const (
	memoFalse = 1
	memoTrue  = 2
)

func memoOf(ok bool) uint32 {
	if ok {
		return memoTrue
	}
	return memoFalse
}

// shellCall applies the shell analysis and the per-command rules.
func (p *Policy) shellCall(ev *evaluation, tr *toolRules, call *Call) {
	src, ok := call.Args[tr.shellArg].(string)
	if !ok {
		ev.add(Match{Rule: RuleError, Action: Ask, Reason: fmt.Sprintf("argument %q is missing or not a string", tr.shellArg)}, nil)
		return
	}
	a := p.cache.analyze(src)
	ev.shell = a
	ev.capHint = len(ev.matches) + 2*len(a.Commands) + 1
	if len(a.reasons) > 0 {
		ev.review = a.reasons
		ev.add(Match{Rule: RuleShellReview, Action: Ask, Reason: a.reason,
			notLearnable: "the shell analysis cannot vouch for the command string"}, nil)
	}
	if len(a.Commands) == 0 && !ev.wholeAllow {
		ev.add(Match{Rule: RuleDefault, Action: p.def, Reason: "the command string runs no command",
			notLearnable: "the command string runs no command"}, nil)
	}
	defer func() { ev.cmd = nil }()
	for i := range a.Commands {
		c := &a.Commands[i]
		ev.cmd = insideDir(c, call.Dir)
		covered, skippedWrite := false, false
		exact, globbed := tr.byName[c.Name], tr.globCmd
		// Visit the rules for this name in file order: merge the two lists.
		for len(exact) > 0 || len(globbed) > 0 {
			var r *rule
			if len(globbed) == 0 || len(exact) > 0 && exact[0].index < globbed[0].index {
				r, exact = exact[0], exact[1:]
			} else {
				r, globbed = globbed[0], globbed[1:]
				if !matchAny(r.commands, c.Name) {
					continue
				}
			}
			if r.action == Allow && c.Writes && !r.allowWrites {
				skippedWrite = true
				continue
			}
			if p.try(ev, r, call, a, i, a.memoSlot(i, r.index)) {
				covered = true
			}
		}
		if !covered && !ev.wholeAllow {
			reason := "no rule covers this command"
			if skippedWrite {
				reason += " (it writes files, and the allow rules for it do not set allow_writes)"
			}
			ev.add(Match{Rule: RuleDefault, Action: p.def, Command: a.str(i), Reason: reason,
				notLearnable: defaultNotLearnable(c, call)}, nil)
		}
	}
}

// decide turns the matches into a decision.
func (p *Policy) decide(ev *evaluation, call *Call) Decision {
	if len(ev.matches) == 0 {
		d := p.defaultDecision("no rule matches this call")
		d.dir = ev.dir
		if d.Action == Ask {
			p.setLearnable(&d, defaultNotLearnable(nil, call))
		}
		return d
	}
	best := 0
	for i, m := range ev.matches {
		if m.Action.rank() > ev.matches[best].Action.rank() {
			best = i
		}
	}
	m, r := ev.matches[best], ev.matches[best].rule
	d := Decision{Action: m.Action, Rule: m.Rule, Reason: m.Reason, Command: m.Command, Matched: ev.matches}
	switch d.Action {
	case Block:
		if m.Command != "" {
			d.Reason += " (" + m.Command + ")"
		}
	case Allow:
		for _, m := range ev.matches {
			if m.rule != nil && m.Action == Allow && m.rule.sandbox != "" &&
				(d.Sandbox == "" || m.rule.sandbox == SandboxReadOnly) {
				d.Sandbox = m.rule.sandbox
			}
		}
	case Ask:
		d.Timeout, d.Impact, d.Review, d.dir = p.timeout, DefaultImpact, ev.review, ev.dir
		why := ""
		for _, m := range ev.matches {
			if m.Action == Ask && m.notLearnable != "" {
				why = m.notLearnable
				break
			}
		}
		p.setLearnable(&d, why)
		if ev.shell != nil {
			d.Effects = ev.shell.effects()
			d.Risk, d.Impact = shell.RiskOf(d.Effects), ""
		}
		if r != nil {
			if r.timeout > 0 {
				d.Timeout = r.timeout
			}
			if r.impact != "" {
				d.Impact = r.impact
			}
			d.details = r.details
		}
	}
	return d
}

func (p *Policy) defaultDecision(reason string) Decision {
	d := Decision{Action: p.def, Rule: RuleDefault, Reason: reason}
	if p.def == Ask {
		d.Timeout, d.Impact = p.timeout, DefaultImpact
	}
	return d
}

// analysis is a shell analysis with what every decision on it needs.
type analysis struct {
	*shell.Analysis
	sizes []int // each command's size (sizeOf), which chooses how conditions run
	// strs holds each command as a string, made when a decision first
	// needs one (CEL helpers never do); strsDone says they are made.
	strs     []string
	strsDone atomic.Bool
	strsMu   sync.Mutex
	// memo holds, per command and rule, the result of conditions that read
	// only the command (0: not known, 1: false, 2: true): they are pure,
	// and the analysis is decided again whenever the string comes back.
	memo    []atomic.Uint32
	rules   int
	reasons []string // every reason for review
	reason  string   // the reasons joined
	weight  int      // roughly the bytes it holds, for the cache

	effectsOnce sync.Once
	effectList  []shell.Effect // made when an ask or an explanation first needs them
}

// effects returns the analysis's effects, made once.
func (a *analysis) effects() []shell.Effect {
	a.effectsOnce.Do(func() { a.effectList = a.Effects() })
	return a.effectList
}

func newAnalysis(src string, rules int) *analysis {
	a, _ := shell.Parse(src) // a parse error is one of a's reasons for review
	x := &analysis{Analysis: a, sizes: make([]int, len(a.Commands)), reasons: a.Reasons()}
	x.weight = len(src) + 64
	for i := range a.Commands {
		c := &a.Commands[i]
		x.sizes[i] = commandSize(c)
		x.weight += commandWeight(c)
	}
	x.reason = strings.Join(x.reasons, "; ")
	x.weight += len(x.reason) + 16*len(x.reasons)
	if rules > 0 {
		x.memo, x.rules = make([]atomic.Uint32, len(a.Commands)*rules), rules
		x.weight += 4 * len(x.memo)
	}
	return x
}

// str returns command i as a string; "" for a == nil, the call itself.
func (a *analysis) str(i int) string {
	if a == nil {
		return ""
	}
	if !a.strsDone.Load() {
		a.makeStrs()
	}
	return a.strs[i]
}

func (a *analysis) makeStrs() {
	a.strsMu.Lock()
	defer a.strsMu.Unlock()
	if a.strsDone.Load() {
		return
	}
	strs := make([]string, len(a.Commands))
	for i := range a.Commands {
		strs[i] = a.Commands[i].String()
	}
	a.strs = strs
	a.strsDone.Store(true)
}

// commandWeight is roughly the bytes a command holds, twice over for its
// string.
func commandWeight(c *shell.Command) int {
	n := 256 + len(c.Path)
	for _, l := range [][]string{c.Args, c.Env, c.Via, c.Review, c.Files, c.Outside, c.Unknown, c.Secrets} {
		for _, s := range l {
			n += 16 + 2*len(s)
		}
	}
	for _, r := range c.Redirects {
		n += 64 + 2*len(r.Target)
	}
	return n
}

// memoSlot returns the memo of a rule on command i, or nil.
func (a *analysis) memoSlot(i, rule int) *atomic.Uint32 {
	if a.memo == nil {
		return nil
	}
	return &a.memo[i*a.rules+rule]
}

// analysisCache keeps recent shell analyses: the same command string is
// often decided again (a retried call, an edit checked twice, a test
// suite). Analyses are never modified after they are made, except for
// their memos and strings, made once. An analysis heavier than
// maxCachedWeight is not kept, and the cache empties when what it keeps
// would weigh more than maxCacheWeight: hostile strings cost their
// analysis once, not memory for as long as they stay.
type analysisCache struct {
	rules  int // the policy's rules, for the memos; set once at load
	mu     sync.Mutex
	max    int
	m      map[string]*analysis
	weight int // of the analyses kept
	budget int // maxCacheWeight, but for tests
}

// Bounds on what the analysis cache keeps, in bytes (roughly).
const (
	maxCachedWeight = 64 << 10
	maxCacheWeight  = 16 << 20
)

func newAnalysisCache(max int) *analysisCache {
	return &analysisCache{max: max, m: make(map[string]*analysis), budget: maxCacheWeight}
}

func (c *analysisCache) analyze(src string) *analysis {
	if c.max <= 0 {
		return newAnalysis(src, 0)
	}
	c.mu.Lock()
	a, ok := c.m[src]
	c.mu.Unlock()
	if ok {
		return a
	}
	a = newAnalysis(src, c.rules)
	if a.weight > maxCachedWeight {
		return a
	}
	c.mu.Lock()
	if len(c.m) >= c.max || c.weight+a.weight > c.budget {
		clear(c.m)
		c.weight = 0
	}
	if _, dup := c.m[src]; !dup {
		c.m[src] = a
		c.weight += a.weight
	}
	c.mu.Unlock()
	return a
}

// Blocks reports whether the policy blocks every call of tool, whatever
// its arguments: a rule on the whole call names it, has no condition and
// blocks; or the default blocks and no rule names the tool at all. The
// MCP gateway hides such tools from its clients' tool lists (a call made
// anyway is still evaluated, and blocked).
func (p *Policy) Blocks(tool string) bool {
	tr := p.rulesFor(tool)
	if tr.isShell {
		return false
	}
	for _, r := range tr.call {
		if r.action == Block && r.cond == nil && r.commands == nil {
			return true
		}
	}
	return p.def == Block && len(tr.call) == 0
}

// Blocks is [Policy.Blocks] of the policy in force.
func (r *Reloadable) Blocks(tool string) bool { return r.Policy().Blocks(tool) }
