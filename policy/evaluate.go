package policy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/tollgate-ai/tollgate/policy/shell"
)

// This file decides calls: which rules apply to a call and to each of its
// shell commands, and the most restrictive answer of those that match.

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
	l := newLinks(a.Commands, call.Dir)
	for i := range a.Commands {
		c := &a.Commands[i]
		ev.cmd = inDir(c, call.Dir, l)
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
