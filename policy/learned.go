package policy

import (
	"context"
	"path"
	"slices"
	"strings"

	"github.com/tollgate-ai/tollgate/policy/shell"
)

// Learned are the rules reviewers learned from their answers ("approve,
// and allow calls like this": package policy/learn keeps them in the
// store). A policy given them in [Options].Learned asks them about a
// call its own rules ask about, when [Decision.Learnable]: never about a
// call they block, never about one a rule marks learnable: false.
type Learned interface {
	// Allow returns the learned rule that allows call, or nil. second
	// says the policy requires a second reviewer's approval of a learned
	// rule before it takes effect. An error counts as no rule: the call
	// is asked.
	Allow(ctx context.Context, call Call, second bool) (*LearnedRule, error)
}

// LearnedRule names the learned rule that allowed a call, for the
// decision and the audit log.
type LearnedRule struct {
	// ID is the rule's id in the store ("lr_..."); By is the reviewer
	// who learned it, Second the one who approved it as a second
	// reviewer (when the policy requires one).
	ID, By, Second string
	// Scope says where it applies: "thread T", "project /dir" or
	// "everyone".
	Scope string
}

// details are what the audit log says of the rule that allowed a call:
// the "policy_allow" trace's learned_rule, learned_by, second_reviewer
// and scope.
func (lr *LearnedRule) details() map[string]any {
	m := map[string]any{"learned_rule": lr.ID, "learned_by": lr.By, "scope": lr.Scope}
	if lr.Second != "" {
		m["second_reviewer"] = lr.Second
	}
	return m
}

// learnSettings are the file's learn: section.
type learnSettings struct {
	// off: no learned rule answers for this policy's asks.
	off bool
	// secondReviewer: a learned rule takes effect once a second
	// reviewer approved it.
	secondReviewer bool
}

// LearnDoc is the learn: section of a policy file.
type learnDoc struct {
	// Enabled: false turns learned rules off for this policy.
	Enabled *bool `yaml:"enabled"`
	// SecondReviewer: a learned rule takes effect only once a reviewer
	// other than its author approved it.
	SecondReviewer bool `yaml:"second_reviewer"`
}

// SecondReviewer reports whether a learned rule takes effect only once
// a second reviewer approved it (the file's learn: second_reviewer).
func (p *Policy) SecondReviewer() bool { return p.learn.secondReviewer }

// LearningOff reports whether the file turns learned rules off (learn:
// enabled: false).
func (p *Policy) LearningOff() bool { return p.learn.off }

// setLearnable fills in an ask's Learnable and NotLearnable, given why
// its matches let no learned rule answer ("" when they do).
func (p *Policy) setLearnable(d *Decision, why string) {
	if p.learn.off {
		why = "the policy turns learned rules off (learn: enabled: false)"
	}
	d.Learnable, d.NotLearnable = why == "", why
}

// notLearnable says why a learned rule may not answer for this ask rule's
// match on cmd (nil: a rule on the whole call); "" when it may.
func (r *rule) notLearnable(cmd *shell.Command, call *Call) string {
	if r.learnable != nil {
		if *r.learnable {
			return ""
		}
		return "rule " + r.name + " is learnable: false"
	}
	return defaultNotLearnable(cmd, call)
}

// defaultNotLearnable is why an ask that no rule says learnable of may
// not be answered by a learned rule: the command reads what may hold
// secrets, names files known only at run time, or destroys data; or a
// tool says of itself that it is destructive. "" when none of these.
func defaultNotLearnable(cmd *shell.Command, call *Call) string {
	if cmd != nil {
		switch {
		case len(cmd.Secrets) > 0:
			return "it may read secrets (" + cmd.Secrets[0] + ")"
		case len(cmd.Unknown) > 0:
			return "it names files only known when it runs (" + cmd.Unknown[0] + ")"
		}
		if what := destroys(cmd); what != "" {
			return "it destroys data (" + what + ")"
		}
		return ""
	}
	if call != nil && saysDestructive(call.Annotations) {
		return "the tool says of itself that it is destructive"
	}
	return ""
}

// saysDestructive reports whether a tool states that it is destructive
// (an MCP server's destructive hint, stated, not defaulted).
func saysDestructive(a map[string]any) bool {
	if d, _ := a["destructive"].(bool); !d {
		return false
	}
	switch s := a["stated"].(type) {
	case []string:
		return slices.Contains(s, "destructive")
	case []any:
		return slices.Contains(s, any("destructive"))
	}
	return false
}

// destroyers are commands that delete or overwrite data whatever their
// arguments.
var destroyers = map[string]bool{
	"rm": true, "rmdir": true, "unlink": true, "shred": true, "truncate": true, "dd": true,
	"wipefs": true, "mke2fs": true, "fdisk": true, "sfdisk": true, "parted": true, "mkswap": true,
}

// destroys says what of the command deletes or overwrites data for good
// (rm, dd, mkfs, git clean, git reset --hard, a forced or deleting git
// push, ...); "" when nothing the list knows of. It is the default of
// learnable, not a guard: the file's rules decide what asks.
func destroys(c *shell.Command) string {
	name := path.Base(c.Name)
	if destroyers[name] || strings.HasPrefix(name, "mkfs") {
		return name
	}
	if name != "git" {
		return ""
	}
	sub, rest := "", []string(nil)
	for i, a := range c.Args {
		if !strings.HasPrefix(a, "-") {
			sub, rest = a, c.Args[i+1:]
			break
		}
	}
	has := func(opts ...string) bool {
		for _, a := range rest {
			if slices.Contains(opts, a) || strings.HasPrefix(a, "--force") {
				return true
			}
		}
		return false
	}
	switch sub {
	case "clean":
		return "git clean"
	case "reset":
		if has("--hard", "--merge", "--keep") {
			return "git reset --hard"
		}
	case "push":
		if has("-f", "-d", "--delete", "--mirror", "--prune") || slices.ContainsFunc(rest, func(a string) bool { return strings.HasPrefix(a, "+") || strings.HasPrefix(a, ":") }) {
			return "git push that overwrites or deletes"
		}
	case "checkout", "switch":
		if has("-f", "--discard-changes", ".", "--") {
			return "git " + sub + " that discards changes"
		}
	case "restore":
		return "git restore"
	case "branch":
		if has("-D", "-d", "--delete") {
			return "git branch --delete"
		}
	case "stash":
		if slices.Contains(rest, "drop") || slices.Contains(rest, "clear") {
			return "git stash drop"
		}
	}
	return ""
}
