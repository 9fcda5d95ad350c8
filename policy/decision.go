package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/policy/shell"
)

// This file holds what a decision says: the action, the rules that
// matched, and the reasons a reviewer and the model read.

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
			p, reason := "rule "+m.Rule, m.Reason
			if reason == defaultReason(m.Action, m.Rule) {
				// A rule without a reason of its own: its default names
				// the rule already ("rule X asks for a person").
				p, reason = reason, ""
			}
			if m.Command != "" && d.Action != Allow {
				p += " (" + m.Command + ")"
			}
			if reason != "" {
				p += ": " + reason
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
