package hitl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
)

type decisionKind int

// The zero ApprovalDecision asks: a policy that forgets to decide fails
// closed.
const (
	askUser decisionKind = iota
	approve
	deny
)

// ApprovalDecision is what a [Policy] returns: [Approve], [Deny] or
// [AskUser].
type ApprovalDecision struct {
	kind    decisionKind
	reason  string
	timeout time.Duration
	details map[string]any
}

// Approve lets the call run at once.
func Approve() ApprovalDecision { return ApprovalDecision{kind: approve} }

// ApproveWith is [Approve] with details for the people who read the
// call later (the audit log): the call's result carries them in a
// "policy_allow" trace, as a rule learned from a reviewer's answer names
// itself and its author there. They cannot set the fields the middleware
// writes itself (see [DenyWith]).
func ApproveWith(details map[string]any) ApprovalDecision {
	return ApprovalDecision{kind: approve, details: details}
}

// Deny blocks the call without asking anyone; the model sees reason.
func Deny(reason string) ApprovalDecision { return ApprovalDecision{kind: deny, reason: reason} }

// DenyWith is [Deny] with details for the people who read the block
// later (the audit log, the reviewer page): they are added to the
// "policy_deny" trace. They cannot set the fields the middleware writes
// itself ("decision", "reason", "by", "edited_args", "original_args",
// "digest_mismatch" and the digests), so a block cannot pass for a
// person's answer. Name the deciding rule "matched_rule", as
// [AskOptions.Details] does, so that the block reads "blocked by the
// policy (rule NAME: reason)".
func DenyWith(reason string, details map[string]any) ApprovalDecision {
	return ApprovalDecision{kind: deny, reason: reason, details: details}
}

// AskOptions say how to ask.
type AskOptions struct {
	// Timeout is the time to answer. Zero: no deadline.
	Timeout time.Duration
	// Details are shown to the reviewer (matched rule, impact...).
	Details map[string]any
}

// AskUser suspends the call until a person answers: approve, deny (with a
// reason) or edit the arguments. With no answer by the deadline the call is
// blocked with reason "approval_timeout".
func AskUser(opts AskOptions) ApprovalDecision {
	return ApprovalDecision{kind: askUser, timeout: opts.Timeout, details: opts.Details}
}

// String describes the decision for logs and tests.
func (d ApprovalDecision) String() string {
	switch d.kind {
	case approve:
		return "approve"
	case deny:
		return "deny: " + d.reason
	}
	return fmt.Sprintf("ask (timeout %s, details %v)", d.timeout, d.details)
}

// Action is "approve", "deny" or "ask".
func (d ApprovalDecision) Action() string {
	return [...]string{"ask", "approve", "deny"}[d.kind]
}

// Reason is the deny reason.
func (d ApprovalDecision) Reason() string { return d.reason }

// Details are an ask's details for the reviewer, or a deny's details for
// its trace ([DenyWith]). Shared: do not modify.
func (d ApprovalDecision) Details() map[string]any { return d.details }

// Timeout is an ask's time to answer (zero: none).
func (d ApprovalDecision) Timeout() time.Duration { return d.timeout }

// WithDetails returns the decision with extra details added (the extra
// value wins on a shared key): a wrapper of a policy says more of a call
// than the policy knows, as the MCP gateway says which client made it.
func (d ApprovalDecision) WithDetails(extra map[string]any) ApprovalDecision {
	if len(extra) == 0 {
		return d
	}
	m := maps.Clone(d.details)
	if m == nil {
		m = make(map[string]any, len(extra))
	}
	maps.Copy(m, extra)
	d.details = m
	return d
}

// PolicyContext is what a policy sees of a tool call.
type PolicyContext struct {
	ThreadID string
	CallID   string
	Tool     string
	// Args is the validated, typed arguments value: the tool's argument
	// struct for tools built with agent.NewTool.
	Args any
	// RawArgs is Args as a JSON object: the bytes the call's record and
	// digest hold, shared with them, so a policy reads it and never
	// changes it in place.
	RawArgs json.RawMessage
	// Messages is the conversation so far.
	Messages []agent.Message
	// Annotations are the tool's own description of itself
	// ([agent.Tool.Annotations]: an MCP server's hints, for one). Hints,
	// not facts: a server may say anything of its tools.
	Annotations map[string]any
	// Dir is the directory the call works in, when whoever relays the
	// call knows it (a coding agent's project: package hooks sets it
	// before its policy runs); "" otherwise. Policy files read it as dir.
	Dir string
}

// Policy classifies a tool call. It must be free of side effects: it runs
// again when a run is resumed and when an edited call is checked.
type Policy func(ctx context.Context, c *PolicyContext) ApprovalDecision

// Typed adapts a policy for one argument type: f receives the arguments as
// In directly. Calls whose arguments are of another type are asked (fail
// closed); route them elsewhere with [ByTool].
func Typed[In any](f func(ctx context.Context, c *PolicyContext, args In) ApprovalDecision) Policy {
	return func(ctx context.Context, c *PolicyContext) ApprovalDecision {
		args, ok := c.Args.(In)
		if !ok {
			return AskUser(AskOptions{Details: map[string]any{"policy_error": fmt.Sprintf("policy expects %T arguments, got %T", args, c.Args)}})
		}
		return f(ctx, c, args)
	}
}

// ByTool picks a policy by tool name; tools not in the map use fallback
// (nil fallback asks).
func ByTool(policies map[string]Policy, fallback Policy) Policy {
	return func(ctx context.Context, c *PolicyContext) ApprovalDecision {
		if p, ok := policies[c.Tool]; ok {
			return p(ctx, c)
		}
		if fallback != nil {
			return fallback(ctx, c)
		}
		return AskUser(AskOptions{Details: map[string]any{"matched_rule": "default"}})
	}
}

// ApprovalPolicyMiddleware runs every tool call past a policy and asks a
// person when the policy says so. Build it with
// [NewApprovalPolicyMiddleware].
//
// The results it gives, in Details["hitl"]:
//   - approved by the policy or a person: nothing (pass-through);
//   - approved by the policy with [ApproveWith]: "decision":
//     "policy_allow" and its details;
//   - denied by a person: "decision": "human_deny", the reason;
//   - edited by a person: "decision": "edit", "original_args", "edited_args";
//   - denied by the policy: "decision": "policy_deny", the reason, and
//     the details of a [DenyWith] (such as "matched_rule");
//   - no answer in time: "decision": "timed_out", reason "approval_timeout";
//   - aborted: "decision": "aborted".
type ApprovalPolicyMiddleware struct {
	channel Channel
	policy  Policy
	log     *slog.Logger
	dir     string
}

// NewApprovalPolicyMiddleware returns the middleware. The channel is the
// one the agent waits on (give the same to agent.Config.Channel).
func NewApprovalPolicyMiddleware(channel Channel, policy Policy) *ApprovalPolicyMiddleware {
	return &ApprovalPolicyMiddleware{channel: channel, policy: policy, log: slog.Default()}
}

// InDir says the run's tools work in dir (tollgate serve's --dir, made
// absolute) and returns m. The policy sees it as [PolicyContext.Dir], a
// question says it in its details ("dir"), and an answer is applied only
// where it was given: a call approved (or edited) in one directory and
// resumed by a process whose tools work in another — serve restarted with
// another --dir, a replica given another — is denied, saying both. The
// reviewer saw the directory; the call never runs anywhere else.
func (m *ApprovalPolicyMiddleware) InDir(dir string) *ApprovalPolicyMiddleware {
	m.dir = dir
	return m
}

// QuestionID is the id of the approval question for a tool call:
// "hitl_" plus the escaped call id.
func QuestionID(callID string) string { return "hitl_" + agent.EscapeID(callID) }

func (m *ApprovalPolicyMiddleware) evaluate(ctx context.Context, c *PolicyContext) (d ApprovalDecision) {
	defer func() {
		if r := recover(); r != nil {
			m.log.Error("tollgate: approval policy panicked; asking a person instead",
				"tool", c.Tool, "call", c.CallID, "panic", r, "stack", string(debug.Stack()))
			d = AskUser(AskOptions{Details: map[string]any{"policy_error": fmt.Sprintf("policy panicked: %v", r)}})
		}
	}()
	if m.policy == nil {
		return AskUser(AskOptions{})
	}
	return m.policy(ctx, c)
}

func trace(decision string, extra map[string]any) map[string]any {
	h := map[string]any{"decision": decision}
	maps.Copy(h, extra)
	return map[string]any{"hitl": h}
}

// traceFields are the fields of a trace the middleware writes itself.
var traceFields = []string{"decision", "reason", "by", "edited_args", "original_args", "digest_mismatch", "answer_digest", "question_digest"}

// denyTrace is the trace of a policy's deny: its details but for
// traceFields, then the trace's own fields.
func denyTrace(d ApprovalDecision, own map[string]any) map[string]any {
	return ownTrace("policy_deny", d.details, own)
}

// ownTrace is the trace of a policy's decision: its details but for
// traceFields, then the trace's own fields.
func ownTrace(decision string, details, own map[string]any) map[string]any {
	extra := maps.Clone(details)
	if extra == nil {
		extra = map[string]any{}
	}
	for _, k := range traceFields {
		delete(extra, k)
	}
	maps.Copy(extra, own)
	return trace(decision, extra)
}

// editDeniedError is the policy's deny of edited arguments; it keeps the
// decision for the trace of the blocked call.
type editDeniedError struct{ d ApprovalDecision }

func (e *editDeniedError) Error() string {
	return "the policy denies the edited call: " + e.d.reason
}

// BeforeTool implements agent.BeforeToolHook.
//
// A policy Deny always blocks. Otherwise an approval question already
// stored for the call decides (so a reviewer's deny stands even if a
// reloaded policy would now approve, and a resumed run never asks twice);
// with none, Approve runs the call and AskUser asks.
func (m *ApprovalPolicyMiddleware) BeforeTool(ctx context.Context, call *agent.ToolCallContext) (agent.Decision, error) {
	if err := m.checkWiring(call); err != nil {
		return agent.Decision{}, err
	}
	pc := &PolicyContext{ThreadID: call.ThreadID, CallID: call.Call.ID, Tool: call.Call.Name,
		Args: call.Args, RawArgs: call.RawArgs, Messages: call.Messages, Annotations: call.Tool.Annotations(), Dir: m.dir}
	d := m.evaluate(ctx, pc)
	if d.kind == deny {
		return agent.Block(d.reason, denyTrace(d, map[string]any{"reason": d.reason})), nil
	}
	qid := QuestionID(call.Call.ID)
	var existing *checkpoint.Question
	if !call.Fresh() { // else no question about the call can be stored yet
		var err error
		existing, err = call.Question(ctx, qid)
		switch {
		case errors.Is(err, checkpoint.ErrNotFound):
			existing = nil
		case err != nil:
			return agent.Decision{}, fmt.Errorf("%w %q: %w", agent.ErrQuestion, qid, err)
		}
	}
	if existing == nil && d.kind == approve {
		if len(d.details) > 0 {
			return agent.Continue().WithDetails(ownTrace("policy_allow", d.details, nil)), nil
		}
		return agent.Continue(), nil
	}

	var payload any
	if existing == nil {
		// Written with the question; a question found stored keeps its
		// own (Ask does not write it again).
		payload = m.questionPayload(call, d, pc.Dir)
	}
	q, err := call.Ask(ctx, agent.QuestionRequest{
		ID: qid, Kind: KindApprove, Payload: payload, Timeout: d.timeout,
		Digest: call.CallDigest(),
		Check: func(ctx context.Context, raw json.RawMessage) error {
			a, err := parseApprove(raw)
			if err != nil || a.Decision != DecisionEdit {
				return err
			}
			_, err = m.checkEdit(ctx, call, a.EditedArgs)
			return err
		},
	})
	if err != nil {
		return agent.Decision{}, err
	}
	switch q.Status {
	case checkpoint.QuestionTimedOut:
		return agent.Block("approval_timeout", trace("timed_out", map[string]any{
			"deny_reason": "approval_timeout", "timeout_seconds": int(q.Timeout() / time.Second)})), nil
	case checkpoint.QuestionAborted:
		return agent.Block("Tool call aborted: "+q.Reason, trace("aborted", map[string]any{"reason": q.Reason})), nil
	}
	a, err := parseApprove(q.Answer)
	if err != nil {
		// Only checked answers are stored, but a store written by other
		// code may hold anything: fail closed.
		return agent.Block("denied: unreadable answer", trace("human_deny", map[string]any{"reason": err.Error(), "by": q.AnsweredBy})), nil
	}
	if a.Digest != "" && a.Digest != q.Digest {
		// The channel refuses such an answer, but it may have been
		// stored by other code or another process: the person answered
		// about other arguments than this call's, so it never runs. The
		// block's details go to the audit log with the call's result.
		m.log.Warn("tollgate: a stored answer's digest differs from its question's; the call is denied",
			"thread", call.ThreadID, "call", call.Call.ID, "question", q.ID, "answer_digest", a.Digest, "question_digest", q.Digest, "by", q.AnsweredBy)
		reason := "denied: " + ErrDigestMismatch.Error()
		return agent.Block(reason, trace("policy_deny", map[string]any{"reason": reason, "digest_mismatch": true,
			"answer_digest": a.Digest, "question_digest": q.Digest, "by": q.AnsweredBy})), nil
	}
	if a.Decision == DecisionApprove || a.Decision == DecisionEdit {
		if asked := askedDirIf(pc.Dir, q); asked != "" && asked != pc.Dir {
			reason := fmt.Sprintf("denied: the call was approved to run in %s, and this run's tools work in %s (the server was started again with another working directory)", asked, pc.Dir)
			m.log.Warn("tollgate: an approved call was asked in another working directory; it is denied",
				"thread", call.ThreadID, "call", call.Call.ID, "question", q.ID, "asked_in", asked, "runs_in", pc.Dir, "by", q.AnsweredBy)
			return agent.Block(reason, trace("policy_deny", map[string]any{"reason": reason, "dir_mismatch": true,
				"asked_in": asked, "runs_in": pc.Dir, "by": q.AnsweredBy})), nil
		}
	}
	switch a.Decision {
	case DecisionApprove:
		return agent.Continue(), nil
	case DecisionEdit:
		edited, err := m.checkEdit(ctx, call, a.EditedArgs)
		if err != nil {
			own := map[string]any{"reason": err.Error(), "edited_args": a.EditedArgs}
			var denied *editDeniedError
			if errors.As(err, &denied) {
				return agent.Block(err.Error(), denyTrace(denied.d, own)), nil
			}
			return agent.Block(err.Error(), trace("policy_deny", own)), nil
		}
		args, _ := decodeArgs(call.RawArgs)
		return agent.ReplaceArgs(edited).WithDetails(trace("edit", map[string]any{
			"original_args": args, "edited_args": a.EditedArgs, "by": q.AnsweredBy})), nil
	}
	reason := a.Reason
	if reason == "" {
		reason = "denied by reviewer"
	}
	return agent.Block(reason, trace("human_deny", map[string]any{"reason": a.Reason, "by": q.AnsweredBy})), nil
}

// payload is the approval question's payload for call: its arguments as
// the model wrote them, the policy's details with the tool's annotations
// and the directory (dir) it works in.
func (m *ApprovalPolicyMiddleware) payload(call *agent.ToolCallContext, d ApprovalDecision, dir string) Payload {
	args, _ := decodeArgs(call.RawArgs)
	return m.payloadWith(call, d, dir, args)
}

// questionPayload is payload as the question stores it (encodedPayload),
// its arguments, when in canonical form, not decoded to be encoded again
// (canonicalArgsText).
func (m *ApprovalPolicyMiddleware) questionPayload(call *agent.ToolCallContext, d ApprovalDecision, dir string) any {
	text, empty, ok := canonicalArgsText(call.RawArgs)
	switch {
	case !ok:
		return encodedPayload(m.payload(call, d, dir))
	case empty:
		return encodedPayload(m.payloadWith(call, d, dir, nil))
	}
	return encodedPayloadArgs(m.payloadWith(call, d, dir, nil), text, call.RawArgs)
}

// payloadWith is payload with the arguments args.
func (m *ApprovalPolicyMiddleware) payloadWith(call *agent.ToolCallContext, d ApprovalDecision, dir string, args map[string]any) Payload {
	details := withAnnotations(d.details, call.Tool.Annotations())
	if dir != "" && details["dir"] == nil {
		details = maps.Clone(details)
		if details == nil {
			details = map[string]any{}
		}
		details["dir"] = dir
	}
	return Payload{Kind: KindApprove, ToolName: call.Call.Name, Args: args, Details: details, ArgsSchema: call.Tool.Schema()}
}

// askedDirIf is askedDir(q) for a run whose tools work in dir, "" for
// one that says no directory (nothing to compare: the payload is not
// decoded).
func askedDirIf(dir string, q *checkpoint.Question) string {
	if dir == "" {
		return ""
	}
	return askedDir(q)
}

// askedDir is the directory a question's call was asked to work in (its
// details' "dir"), "" when it says none.
func askedDir(q *checkpoint.Question) string {
	var p struct {
		Details struct {
			Dir any `json:"dir"`
		} `json:"details"`
	}
	if json.Unmarshal(q.Payload, &p) != nil {
		return ""
	}
	dir, _ := p.Details.Dir.(string)
	return dir
}

// checkWiring catches a middleware whose channel is not the one the agent
// writes questions to: its host would never see them.
func (m *ApprovalPolicyMiddleware) checkWiring(call *agent.ToolCallContext) error {
	c, ok := m.channel.(interface {
		Store() checkpoint.Store
		ThreadID() string
	})
	if !ok {
		return nil
	}
	if c.Store() != call.Store() {
		return fmt.Errorf("%w: the approval middleware's channel watches another store than the agent's checkpointer: pass the same store to both", agent.ErrQuestion)
	}
	if t := c.ThreadID(); t != "" && t != call.ThreadID {
		return fmt.Errorf("%w: the approval middleware's channel is for thread %q, the agent runs thread %q", agent.ErrQuestion, t, call.ThreadID)
	}
	return nil
}

// decodeArgs reads an arguments object keeping numbers exact (json.Number),
// so that what a reviewer is shown, and what an edit sends back, is what
// the model wrote, digit for digit.
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	err := dec.Decode(&m)
	return m, err
}

// checkEdit validates edited arguments against the tool's schema and runs
// the policy on them: an edit cannot turn a call into one the policy
// blocks.
func (m *ApprovalPolicyMiddleware) checkEdit(ctx context.Context, call *agent.ToolCallContext, edited map[string]any) (json.RawMessage, error) {
	raw, err := json.Marshal(edited)
	if err != nil {
		return nil, err
	}
	if err := m.CheckEdit(ctx, &agent.EditCheck{ThreadID: call.ThreadID, CallID: call.Call.ID, Tool: call.Tool,
		Args: raw, Messages: call.Messages}); err != nil {
		return nil, err
	}
	return raw, nil
}

// CheckEdit implements agent.EditChecker: the edited arguments must pass
// the tool's schema (a *agent.ValidationError listing every problem) and
// the policy must not deny them. The policy runs as it would in the run, so
// whichever process takes an answer refuses an edit the run would block.
func (m *ApprovalPolicyMiddleware) CheckEdit(ctx context.Context, c *agent.EditCheck) error {
	typed, err := c.Tool.Validate(c.Args)
	if err != nil {
		return err
	}
	d := m.evaluate(ctx, &PolicyContext{ThreadID: c.ThreadID, CallID: c.CallID, Tool: c.Tool.Name(),
		Args: typed, RawArgs: agent.CanonicalArgs(c.Args), Messages: c.Messages, Annotations: c.Tool.Annotations()})
	if d.kind == deny {
		return &editDeniedError{d}
	}
	return nil
}

// withAnnotations adds the tool's annotations to a question's details
// under "annotations", for the reviewer: what an MCP server says of its
// tool is worth reading (and worth doubting) beside the call. Details the
// policy set under that key stay.
func withAnnotations(details, annotations map[string]any) map[string]any {
	if len(annotations) == 0 {
		return details
	}
	if _, set := details["annotations"]; set {
		return details
	}
	out := maps.Clone(details)
	if out == nil {
		out = make(map[string]any, 1)
	}
	out["annotations"] = annotations
	return out
}
