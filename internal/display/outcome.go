package display

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/qkind"
)

// AllowedByPolicy is what to say of a call that ran with no question and no
// approval trace, for a caller that knows every call passes a policy
// ([Outcome] cannot tell such a call from one under no policy, and says
// nothing).
const AllowedByPolicy = "allowed by the policy"

func itoa(n int) string { return strconv.Itoa(n) }

// str is the string at m[k], "" if none.
func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// trace returns the approval trace of a result: Details["hitl"] (the
// approval policy middleware, and abort) or Details["interrupt"] (the
// tool_interrupt middleware).
func trace(r agent.ToolResult) (m map[string]any, interrupt bool) {
	if h, ok := r.Details["hitl"].(map[string]any); ok {
		return h, false
	}
	if h, ok := r.Details["interrupt"].(map[string]any); ok {
		return h, true
	}
	return nil, false
}

// paren is " (s)", or "" when s is empty.
func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// by is "by NAME", or "by the reviewer" when no name is known.
func by(name string) string {
	if name == "" {
		return "by the reviewer"
	}
	return "by " + name
}

// answeredBy is who answered: the trace's "by", else the question's.
func answeredBy(h map[string]any, q *checkpoint.Question) string {
	if b := str(h, "by"); b != "" {
		return b
	}
	if q != nil {
		return q.AnsweredBy
	}
	return ""
}

// timeout is the time a question was given to be answered, from a trace's
// timeout_seconds or the question (zero if unknown).
func timeout(h map[string]any, q *checkpoint.Question) time.Duration {
	var d time.Duration
	switch v := h["timeout_seconds"].(type) {
	case float64:
		d = time.Duration(v * float64(time.Second))
	case int:
		d = time.Duration(v) * time.Second
	case json.Number:
		if f, err := v.Float64(); err == nil {
			d = time.Duration(f * float64(time.Second))
		}
	}
	if d <= 0 && q != nil {
		// Whole seconds in the trace: a shorter time is 0 there.
		d = q.Timeout()
	}
	return d
}

func timedOut(d time.Duration) string {
	if d <= 0 {
		return "timed out"
	}
	return "timed out after " + d.String()
}

// Outcome says in words what happened to a tool call, from its result's
// approval trace (Details["hitl"] of the approval policy middleware or of
// an abort, Details["interrupt"] of the tool_interrupt middleware) and its
// approval question q (nil when none was asked):
//
//   - "blocked by the policy (rule NAME: reason)" — the policy blocked it
//     and no person was asked ("rule NAME: " only when the result records
//     the rule); never "denied";
//   - "denied by NAME (reason)" — a person denied it;
//   - "timed out after 5m0s" — no one answered in time;
//   - "aborted (reason)";
//   - "edited by NAME; ran: ARGS" — what ran, not what was asked;
//   - "approved by NAME";
//   - "allowed by rule lr_..., learned from NAME's answer" — a rule a
//     reviewer learned from an answer allowed it;
//   - "" when there is nothing to say (a call that ran with no question:
//     see [AllowedByPolicy]).
//
// Calls that did not run for other reasons say why: "blocked: the edit by
// NAME was refused (reason)" (the edited arguments failed the tool's
// schema or the policy), "blocked: the answer by NAME was given for other
// arguments than the call's", "denied: the edit by NAME is invalid
// (reason)" (tool_interrupt), "refused: the arguments are invalid",
// "refused: unknown tool". Without a trace, a resolved q says what
// [Resolution] says. A call cut off while it ran says so first, whatever
// was decided before it started: "outcome unknown: the run was interrupted
// while it ran (approved by NAME)". The phrase is one line.
func Outcome(r agent.ToolResult, q *checkpoint.Question) string {
	if str(r.Details, "outcome") == "unknown" {
		// Cut off while it ran: that comes first, whatever was answered
		// before it started ("approved by kim" alone reads as if it ran
		// to its end).
		return unknownOutcome + paren(decided(r, q))
	}
	if s := decided(r, q); s != "" {
		return s
	}
	switch {
	case r.Details["validation"] != nil:
		return "refused: the arguments are invalid"
	case str(r.Details, "error") == "unknown_tool":
		return "refused: unknown tool"
	}
	return ""
}

// unknownOutcome starts the outcome of a call cut off while it ran (its
// result's Details["outcome"] is "unknown"): the process stopped, or the
// run was aborted, while the tool ran, and it is not run again.
const unknownOutcome = "outcome unknown: the run was interrupted while it ran"

// decided is what the trace, else the resolved question, says of a call.
func decided(r agent.ToolResult, q *checkpoint.Question) string {
	h, interrupt := trace(r)
	if h != nil {
		if s := outcomeOf(h, interrupt, q); s != "" {
			return s
		}
	}
	if q != nil && q.Status != checkpoint.QuestionPending {
		return Resolution(q)
	}
	return ""
}

func outcomeOf(h map[string]any, interrupt bool, q *checkpoint.Question) string {
	reason := str(h, "reason")
	if interrupt {
		reason = str(h, "message")
	}
	switch str(h, "decision") {
	case "policy_deny":
		if h["digest_mismatch"] == true {
			return Line("blocked: the answer " + by(answeredBy(h, q)) + " was given for other arguments than the call's")
		}
		if _, ok := h["edited_args"]; ok {
			// The approval middleware traces an edit refused by the
			// tool's schema or by the policy alike.
			return Line("blocked: the edit " + by(answeredBy(h, q)) + " was refused" + paren(reason))
		}
		return Line("blocked by the policy" + paren(ruleAnd(h, reason)))
	case "human_deny", "deny":
		return Line("denied " + by(answeredBy(h, q)) + paren(reason))
	case "invalid_edit":
		return Line("denied: the edit " + by(answeredBy(h, q)) + " is invalid" + paren(reason))
	case "timed_out":
		return timedOut(timeout(h, q))
	case "aborted":
		return Line("aborted" + paren(reason))
	case "edit":
		return "edited " + Line(by(answeredBy(h, q))) + "; ran: " + ranArgs(h, interrupt)
	case "policy_allow":
		if rule := str(h, "learned_rule"); rule != "" {
			return Line("allowed by rule " + rule + ", learned from " + str(h, "learned_by") + "'s answer")
		}
	}
	return ""
}

// ruleAnd is "rule NAME: reason" for the rule a trace names ("rule NAME"
// with no reason), reason alone if it names none.
func ruleAnd(h map[string]any, reason string) string {
	for _, k := range []string{"matched_rule", "rule"} {
		if s := str(h, k); s != "" {
			if reason == "" {
				return "rule " + s
			}
			return "rule " + s + ": " + reason
		}
	}
	return reason
}

// ranArgs are the arguments an edited call ran with: the approval
// middleware records them whole in edited_args; the tool_interrupt
// middleware records only the edited keys, merged over original_args.
func ranArgs(h map[string]any, interrupt bool) string {
	edited, _ := h["edited_args"].(map[string]any)
	if interrupt {
		orig, _ := h["original_args"].(map[string]any)
		m := maps.Clone(orig)
		if m == nil {
			m = map[string]any{}
		}
		maps.Copy(m, edited)
		edited = m
	}
	return argsLine(edited)
}

// argsLine is a call's arguments on one line: the cmd argument as plain
// text when it is the only one, else [JSON].
func argsLine(args map[string]any) string {
	if len(args) == 1 {
		if s, ok := args["cmd"].(string); ok {
			return Line(s)
		}
	}
	if args == nil {
		return "{}"
	}
	return JSON(args)
}

// Resolution says how a question was resolved: "approved by alice",
// "denied by bob (reason)", "edited by alice: {...}", "timed out",
// "aborted (reason)", "answered by alice: ANSWER" for ask and confirm
// (yes or no), "pending" while open. The phrase is one line.
func Resolution(q *checkpoint.Question) string {
	if q == nil {
		return ""
	}
	switch q.Status {
	case checkpoint.QuestionPending:
		return "pending"
	case checkpoint.QuestionTimedOut:
		return "timed out"
	case checkpoint.QuestionAborted:
		return Line("aborted" + paren(q.Reason))
	case checkpoint.QuestionAnswered:
	default:
		return Line(string(q.Status))
	}
	who := Line(by(q.AnsweredBy))
	a := qkind.Read(q.Kind, q.Answer)
	switch {
	case !a.Readable:
	case a.Decision == hitl.DecisionApprove:
		return "approved " + who
	case a.Decision == hitl.DecisionEdit:
		return "edited " + who + ": " + argsLine(a.Edits)
	case a.Decision == hitl.DecisionDeny:
		return "denied " + who + Line(paren(a.Reason))
	case a.Decision == qkind.Yes || a.Decision == qkind.No:
		return "answered " + who + ": " + a.Decision
	case a.Words:
		return "answered " + who + ": " + Line(a.Text)
	}
	return "answered " + who + ": " + JSON(q.Answer)
}

// Summary is one line saying what a question asks: for an approval the
// tool and its arguments ("bash: rm -r /tmp/x", the cmd argument as plain
// text when it is the only one, else the arguments as [JSON]), for ask the
// question, for confirm the message; for another kind, the kind and its
// payload.
func Summary(q *checkpoint.Question) string {
	if q == nil {
		return ""
	}
	if qkind.Of(q.Kind).Approval {
		if c, err := qkind.CallOf(q); err == nil {
			return Line(cmp.Or(c.Tool, q.Tool)) + ": " + argsLine(c.Args)
		}
	}
	switch q.Kind {
	case hitl.KindAsk, hitl.KindConfirm:
		req, err := hitl.RequestOf(q)
		if err != nil {
			break
		}
		if q.Kind == hitl.KindAsk {
			return Line(req.Payload.Question)
		}
		return Line(req.Payload.Message)
	}
	return Line(fmt.Sprintf("%s: ", q.Kind)) + JSON(q.Payload)
}
