package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// runTurn gives every tool call of the last assistant message a result.
// Each call is decided and run in its own goroutine, so gated calls wait
// independently and are answered in any order; execution is bounded by
// MaxParallelTools. Results come back in the model's call order.
//
// It returns the turn's result messages. When one call is left to handle
// (a turn of one call, or a resumed turn whose other calls have results),
// its result's write appends them too, and committed is true: the turn
// ends in the write of its last result.
func (a *Agent) runTurn(ctx context.Context, rs *runState, msgs []Message) (add []Message, committed bool, err error) {
	assistant := msgs[len(msgs)-1]
	runID := rs.th.RunID
	byID := map[string]*checkpoint.ToolCall{}
	if !rs.turnFresh() {
		// A resumed turn: read what its calls have recorded (only its
		// calls: the cost is the turn's, not the run's).
		ids := make([]string, len(assistant.ToolCalls))
		for i, c := range assistant.ToolCalls {
			ids[i] = c.ID
		}
		records, err := a.store.ListToolCalls(ctx, rs.th.ID, runID, ids...)
		if err != nil {
			return nil, false, fmt.Errorf("agent: reading tool call states: %w", err)
		}
		for _, r := range records {
			byID[r.CallID] = r
		}
	}
	results := make([]ToolResult, len(assistant.ToolCalls))
	errs := make([]error, len(assistant.ToolCalls))
	var todo []int
	for i, call := range assistant.ToolCalls {
		if rec := byID[call.ID]; rec != nil && rec.State == checkpoint.ToolCallDone {
			if err := json.Unmarshal(rec.Result, &results[i]); err != nil {
				return nil, false, fmt.Errorf("agent: stored result of call %s is not readable: %w", call.ID, err)
			}
			continue
		}
		todo = append(todo, i)
	}
	sem := make(chan struct{}, a.maxParallel)
	rs.mu.Lock()
	rs.solo = len(todo) == 1
	rs.mu.Unlock()
	if len(todo) == 1 {
		// Nothing to overlap with: no goroutine (and no stack to grow),
		// and the turn's results are appended with this call's.
		i := todo[0]
		endTurn := func(r ToolResult) []Message {
			results[i] = r
			add = a.resultMessages(runID, results)
			return add
		}
		call := assistant.ToolCalls[i]
		results[i], errs[i] = a.handleCall(ctx, rs, msgs, call, byID[call.ID], sem, endTurn)
		if errs[i] == nil {
			return add, true, nil
		}
	} else {
		var wg sync.WaitGroup
		for _, i := range todo {
			call := assistant.ToolCalls[i]
			wg.Go(func() {
				results[i], errs[i] = a.handleCall(ctx, rs, msgs, call, byID[call.ID], sem, nil)
			})
		}
		wg.Wait()
	}
	if err := turnError(errs); err != nil {
		return nil, false, err
	}
	return a.resultMessages(runID, results), false, nil
}

// resultMessages are the messages that give the model a turn's results,
// in call order, each dated when its result was known (the turn's last
// result may come long after its first).
func (a *Agent) resultMessages(runID string, results []ToolResult) []Message {
	add := make([]Message, len(results))
	for i, r := range results {
		add[i] = ToolResultMessage(r)
		add[i].RunID, add[i].CreatedAt = runID, r.EndedAt
		if r.EndedAt.IsZero() {
			add[i].CreatedAt = a.clock.Now()
		}
	}
	return add
}

// turnError combines the errors of a turn's calls. If every one that
// failed only parked, the turn parks (a *parkedError naming every
// question); any other failure stops the run with all the other errors.
func turnError(errs []error) error {
	parked := parkedError{recorded: true}
	var failed []error
	for _, err := range errs {
		var p *parkedError
		switch {
		case err == nil:
		case errors.As(err, &p):
			parked.questions = append(parked.questions, p.questions...)
			parked.recorded = parked.recorded && p.recorded
		default:
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		return errors.Join(failed...)
	}
	if len(parked.questions) > 0 {
		return &parked
	}
	return nil
}

// handleCall decides and runs one call and checkpoints its result. An error
// means the call has no result yet (the run was stopped or the store
// failed); the run can be resumed.
//
// endTurn, when set, makes the result's write end the turn: it returns the
// turn's result messages, which are appended to the thread in that write.
func (a *Agent) handleCall(ctx context.Context, rs *runState, msgs []Message, call ToolCall, rec *checkpoint.ToolCall, sem chan struct{}, endTurn func(ToolResult) []Message) (ToolResult, error) {
	runID := rs.th.RunID
	tool := a.Tool(call.Name)
	var res ToolResult
	var ran json.RawMessage // the arguments the call ran with, or would have
	var digest string       // their digest, when known already
	var policy string       // the digest of the policy that decided it, if one did
	switch {
	case rec != nil && rec.State == checkpoint.ToolCallExecuting && tool != nil && tool.Idempotent():
		// It was approved and started before the crash: run it again with
		// the same arguments and idempotency key. The call is already
		// claimed, so it is not claimed again.
		ran = rec.Args
		typed, err := tool.Validate(rec.Args)
		if err != nil {
			res = ToolResult{IsError: true, Content: err.Error()}
			break
		}
		tc := a.callContext(rs, msgs, call, tool, typed, rec.Args)
		var runErr error
		res, runErr = a.execute(ctx, tc, sem, nil, false)
		if runErr != nil {
			return ToolResult{}, runErr
		}
	case rec != nil && rec.State == checkpoint.ToolCallExecuting:
		ran = rec.Args
		res = unknownOutcome(call.Name)
	default:
		var err error
		res, ran, digest, policy, err = a.decideAndRun(ctx, rs, msgs, call, tool, sem)
		if err != nil {
			return ToolResult{}, err
		}
	}
	res.CallID, res.ToolName = call.ID, call.Name
	if res.EndedAt.IsZero() {
		res.EndedAt = a.clock.Now()
	}
	var add []Message
	if endTurn != nil {
		add = endTurn(res)
	}
	if err := a.recordDone(ctx, rs, call, ran, digest, policy, res, add); err != nil {
		return ToolResult{}, err
	}
	a.emit(&ToolCallFinishedEvent{meta: a.meta(runID), Call: call, Result: res})
	return res, nil
}

// sameJSON reports whether two JSON values are equal as values (a store
// may keep a document's spacing or not).
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// unknownOutcome is the result of a call found executing with no result
// (the process stopped while it ran) whose tool is not idempotent.
func unknownOutcome(tool string) ToolResult {
	return ToolResult{IsError: true, Content: fmt.Sprintf(
		"The outcome of this call is unknown: tool %q was executing when the run was interrupted, and it is not run again because it is not idempotent.", tool),
		Details: map[string]any{"outcome": "unknown"}}
}

// recordDone is a call's durable result: its record, its tool_result
// audit entry and (add) the turn's result messages in one write. The
// write is made even when ctx ended (a run stopped while its tool ran:
// the result is known); while ctx lasts it outlasts a store that cannot
// be reached (see keep), so that a known result is not lost to a moment's
// outage and later reported "unknown".
func (a *Agent) recordDone(live context.Context, rs *runState, call ToolCall, args json.RawMessage, digest, policy string, res ToolResult, add []Message) error {
	ctx := context.WithoutCancel(live)
	raw, err := marshalResult(&res)
	if err != nil {
		return fmt.Errorf("agent: encoding result of call %s: %w", call.ID, err)
	}
	if digest == "" {
		// The digest of the call that ran: for a call run as approved,
		// the digest its question was bound to.
		digest = CallDigest(a.threadID, call.ID, call.Name, args)
	}
	entry := map[string]any{"call_id": call.ID, "tool": call.Name, "is_error": res.IsError,
		"digest": digest}
	if policy != "" {
		entry["policy_digest"] = policy
	}
	if h, ok := res.Details["hitl"]; ok {
		entry["hitl"] = h
	}
	if res.IsError {
		entry["reason"] = res.Content
	}
	b := &checkpoint.Batch{
		ToolCalls: []*checkpoint.ToolCall{{
			ThreadID: a.threadID, RunID: rs.th.RunID, CallID: call.ID, Tool: call.Name,
			Args: args, State: checkpoint.ToolCallDone, Result: raw,
		}},
		Events: []*checkpoint.Event{a.event(rs.th.RunID, "tool_result", entry)},
	}
	// A result once known is kept: a store that fails for a moment (a
	// group transaction that failed for another caller's batch) is tried
	// again, and one out of reach (a dropped connection) as long as the
	// run may still write — found written, when the answer to a commit
	// that was made was lost.
	k := &keep{live: live, landed: func(ctx context.Context) (bool, error) {
		recs, err := a.store.ListToolCalls(ctx, a.threadID, rs.th.RunID, call.ID)
		if err != nil {
			return false, err
		}
		return len(recs) == 1 && recs[0].State == checkpoint.ToolCallDone && sameJSON(recs[0].Result, raw), nil
	}}
	err = nil
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			a.pause(live, time.Duration(attempt*attempt)*50*time.Millisecond)
		}
		b.Thread = nil
		if _, err = rs.commitKept(ctx, b, add, false, k); err == nil {
			return nil
		}
		if errors.Is(err, checkpoint.ErrConflict) || errors.Is(err, checkpoint.ErrUnavailable) {
			break
		}
	}
	if errors.Is(err, checkpoint.ErrConflict) && len(add) > 0 && !rs.turnFresh() {
		// The thread moved under this run (another driver, an abort): its
		// turn's messages cannot be appended, but the call's own record
		// can, so that whoever carries the run on finds the result rather
		// than an unknown outcome. (Only when the turn's message is
		// durable: a record must never precede its call's message.)
		b.Thread = nil
		if _, rerr := a.store.Commit(ctx, b); rerr != nil {
			return fmt.Errorf("agent: recording result of call %s: %w (and alone: %v)", call.ID, err, rerr)
		}
	}
	if err != nil {
		return fmt.Errorf("agent: recording result of call %s: %w", call.ID, err)
	}
	return nil
}

// pause waits d on the agent's clock before a result's write is tried
// again, or until live ends: a run stopped while its tool ran makes its
// remaining tries at once (the result is known and still written) rather
// than hold up whoever stopped it.
func (a *Agent) pause(live context.Context, d time.Duration) {
	timer, stop := a.clock.After(d)
	defer stop()
	select {
	case <-timer:
	case <-live.Done():
	}
}

func (a *Agent) callContext(rs *runState, msgs []Message, call ToolCall, tool *Tool, typed any, raw json.RawMessage) *ToolCallContext {
	return &ToolCallContext{ThreadID: a.threadID, RunID: rs.th.RunID, Call: call, Tool: tool,
		Args: typed, RawArgs: raw, Messages: msgs, agent: a, run: rs}
}

// decideAndRun decides the call and runs it if it may run; policy is the
// digest of the policy in force as it was decided (Config.PolicyDigest).
func (a *Agent) decideAndRun(ctx context.Context, rs *runState, msgs []Message, call ToolCall, tool *Tool, sem chan struct{}) (res ToolResult, ran json.RawMessage, digest, policy string, err error) {
	policy = a.policyDigest()
	res, tc, err := a.decide(ctx, rs, msgs, call, tool)
	if err != nil || tc == nil {
		return res, call.Arguments, "", policy, err
	}
	res, err = a.execute(ctx, tc, sem, res.Details, true)
	return res, tc.RawArgs, tc.CallDigest(), policy, err
}

// policyDigest is Config.PolicyDigest's, or "".
func (a *Agent) policyDigest() string {
	if a.policy == nil {
		return ""
	}
	return a.policy()
}

// decide validates the call and runs the before-tool hooks. It returns
// either a final result (invalid, unknown, blocked: tc is nil) or the call
// to execute, with the details its result will carry in res.Details.
func (a *Agent) decide(ctx context.Context, rs *runState, msgs []Message, call ToolCall, tool *Tool) (res ToolResult, tc *ToolCallContext, err error) {
	if tool == nil {
		names := make([]string, 0, len(a.tools))
		for _, t := range a.tools {
			names = append(names, t.Name())
		}
		sort.Strings(names)
		return ToolResult{IsError: true, Content: fmt.Sprintf("Unknown tool %q. Available tools: %s.", call.Name, strings.Join(names, ", ")),
			Details: map[string]any{"error": "unknown_tool"}}, nil, nil
	}
	if r := checkArgSize(call, a.maxArgBytes); r != nil {
		return *r, nil, nil
	}
	v := rs.validated(call, tool)
	typed := any(nil)
	if v != nil {
		// A decision made again (a resume): the value decoded afresh, as
		// the hooks of the first decision may have changed theirs in
		// place — unless nothing in it can be.
		var err error
		if tool.argsByValue {
			typed = v.typed
		} else if typed, err = tool.decode(orEmptyObject(call.Arguments)); err != nil {
			v = nil
		}
	}
	if v == nil {
		// Validated once a run, and kept for a resume of the call after
		// its question (see keptRun): the same tool and bytes validate
		// the same, to the same value.
		tool.validations.Add(1)
		decoded, obj, err := tool.validate(call.Arguments)
		if err != nil {
			return invalidResult(err), nil, nil
		}
		v = &validCall{tool: tool, args: call.Arguments, typed: decoded, canonical: encodeCanonical(obj, call.Arguments)}
		v.digest = callDigestCanonical(a.threadID, call.ID, call.Name, v.canonical)
		rs.noteValidated(call, v)
		typed = decoded
	}
	tc = a.callContext(rs, msgs, call, tool, typed, v.canonical)
	tc.canonical, tc.digest = true, v.digest
	details := map[string]any{}
	for _, m := range a.middleware {
		h, ok := m.(BeforeToolHook)
		if !ok {
			continue
		}
		d, err := safeBeforeTool(ctx, h, tc)
		if err != nil {
			if ctx.Err() != nil {
				return ToolResult{}, nil, ctx.Err()
			}
			if errors.Is(err, ErrQuestion) || errors.Is(err, checkpoint.ErrNotFound) {
				// The question could not be stored or read: never run
				// the tool, and let the run be resumed.
				return ToolResult{}, nil, err
			}
			return errorResult(err, details), nil, nil
		}
		maps.Copy(details, d.details)
		switch d.kind {
		case decideBlock:
			return ToolResult{IsError: true, Content: d.reason, Details: nonEmpty(details)}, nil, nil
		case decideReplace:
			raw, err := encodeArgs(d.args)
			if err != nil {
				return ToolResult{IsError: true, Content: fmt.Sprintf("middleware %T replaced the arguments with a value that cannot be encoded: %v", m, err)}, nil, nil
			}
			typed, obj, err := tool.validate(raw)
			if err != nil {
				return invalidResult(err), nil, nil
			}
			tc.Args, tc.RawArgs, tc.digest = typed, encodeCanonical(obj, raw), ""
		}
	}
	return ToolResult{Details: details}, tc, nil
}

func nonEmpty(m map[string]any) map[string]any {
	if len(m) == 0 {
		return nil
	}
	return m
}

func invalidResult(err error) ToolResult {
	r := ToolResult{IsError: true, Content: err.Error() + ". Fix the arguments and call the tool again."}
	var ve *ValidationError
	if errors.As(err, &ve) {
		r.Details = map[string]any{"validation": ve.Problems}
	}
	return r
}

// ErrCallClaimed: another process driving the same run claimed the tool
// call first (two replicas, or a Resume while the run was still alive).
// This process stops the run; the other one carries it on.
var ErrCallClaimed = errors.New("agent: the tool call was claimed by another driver of this run")

// DetailedError is an error that carries details for the tool result a
// blocked call gets (hitl and interrupt denials implement it).
type DetailedError interface {
	error
	ResultDetails() map[string]any
}

func errorResult(err error, details map[string]any) ToolResult {
	m := maps.Clone(details)
	if m == nil {
		m = map[string]any{}
	}
	var de DetailedError
	if errors.As(err, &de) {
		maps.Copy(m, de.ResultDetails())
	}
	return ToolResult{IsError: true, Content: err.Error(), Details: nonEmpty(m)}
}

func safeBeforeTool(ctx context.Context, h BeforeToolHook, tc *ToolCallContext) (d Decision, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("before-tool hook %T panicked: %v\n%s", h, r, debug.Stack())
		}
	}()
	return h.BeforeTool(ctx, tc)
}

// canonicalArgs re-encodes an arguments object with sorted keys (and {}
// for empty input), so that digests and stored arguments do not depend on
// the model's spacing or key order. Arguments already in that form are
// returned as they are, without decoding them (the digests of a call
// whose arguments the run or the gateway made canonical):
// jsontext.CanonicalHTML says true only of a text that decoding and
// encoding give back byte for byte (FuzzCanonicalArgsAsBefore).
func canonicalArgs(raw json.RawMessage) json.RawMessage {
	if jsontext.CanonicalHTML(raw) {
		return raw
	}
	obj, p := decodeObject(raw)
	if p != nil {
		return raw
	}
	return encodeCanonical(obj, raw)
}

// encodeCanonical is canonicalArgs of raw, given raw decoded (obj).
func encodeCanonical(obj map[string]any, raw json.RawMessage) json.RawMessage {
	b, err := jsontext.MarshalHTML(obj) // json.Marshal's bytes, without reflection
	if err != nil {
		return raw
	}
	return b
}

// execute checkpoints "executing", runs the tool and the after-tool hooks.
func (a *Agent) execute(ctx context.Context, tc *ToolCallContext, sem chan struct{}, details map[string]any, claim bool) (ToolResult, error) {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return ToolResult{}, ctx.Err()
	}
	defer func() { <-sem }()
	// Persisted before the tool runs: a crash from here on finds the call
	// executing and does not run it twice. The write is a claim: if
	// another process driving this run claimed the call first, this one
	// stops. If the write fails the tool does not run.
	if claim {
		// A claim whose answer a lost connection hid is read back: found
		// written by this run (the sole driver: see WithSoleDriver), the
		// tool runs; else the run stops, and the call is found claimed,
		// its outcome unknown, when the run goes on.
		k := &keep{live: ctx, landed: func(rctx context.Context) (bool, error) {
			if !soleDriver(ctx) {
				return false, errUnknowable
			}
			recs, err := a.store.ListToolCalls(rctx, a.threadID, tc.RunID, tc.Call.ID)
			if err != nil {
				return false, err
			}
			return len(recs) == 1 && recs[0].State == checkpoint.ToolCallExecuting && sameJSON(recs[0].Args, tc.RawArgs) && soleDriver(ctx), nil
		}}
		_, err := tc.run.commitKept(ctx, &checkpoint.Batch{ToolCalls: []*checkpoint.ToolCall{{
			ThreadID: a.threadID, RunID: tc.RunID, CallID: tc.Call.ID, Tool: tc.Call.Name,
			Args: tc.RawArgs, State: checkpoint.ToolCallExecuting,
		}}}, nil, false, k)
		if errors.Is(err, checkpoint.ErrConflict) {
			return ToolResult{}, fmt.Errorf("%w: call %s", ErrCallClaimed, tc.Call.ID)
		}
		if err != nil {
			return ToolResult{}, fmt.Errorf("agent: recording call %s as executing: %w", tc.Call.ID, err)
		}
	}
	a.emit(&ToolCallStartedEvent{meta: a.meta(tc.RunID), Call: tc.Call, Args: tc.RawArgs})
	toolCtx := context.WithValue(ctx, idempotencyKeyCtx{}, a.threadID+"/"+tc.RunID+"/"+tc.Call.ID)
	toolCtx = context.WithValue(toolCtx, toolCallCtxKey{}, tc)
	started := a.clock.Now()
	res, parked := tc.Tool.execute(toolCtx, tc.Args)
	res.StartedAt, res.EndedAt = started, a.clock.Now()
	if parked != nil {
		// It asked a question and the run parks: no result yet, the call
		// stays "executing". Only idempotent tools park (see ask), so
		// Resume runs it again and it finds the stored answer.
		return ToolResult{}, parked
	}
	if res.IsError && ctx.Err() != nil {
		// The run was stopped while the tool ran and the tool gave up: it
		// has no result of its own. The call stays "executing" for Resume
		// (which reruns it only if it is idempotent).
		return ToolResult{}, ctx.Err()
	}
	if len(details) > 0 {
		m := maps.Clone(res.Details)
		if m == nil {
			m = map[string]any{}
		}
		maps.Copy(m, details)
		res.Details = m
	}
	for i := len(a.middleware) - 1; i >= 0; i-- {
		if h, ok := a.middleware[i].(AfterToolHook); ok {
			if err := h.AfterTool(ctx, tc, &res); err != nil {
				res = ToolResult{IsError: true, Content: fmt.Sprintf("after-tool hook %T: %v", a.middleware[i], err), Details: res.Details}
			}
		}
	}
	return res, nil
}
