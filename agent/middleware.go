package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// Middleware is any value implementing one or more of the hook interfaces
// [BeforeModelHook], [AfterModelHook], [BeforeToolHook], [AfterToolHook].
//
// Order: before-hooks run in the order the middleware are listed in
// [Config.Middleware]; after-hooks run in the reverse order, so the first
// middleware is the outermost wrapper, as with nested http.Handlers.
type Middleware any

// BeforeModelHook may change a model request before it is sent.
type BeforeModelHook interface {
	BeforeModel(ctx context.Context, req *Request) error
}

// AfterModelHook may change the assistant message before it is persisted.
type AfterModelHook interface {
	AfterModel(ctx context.Context, req *Request, msg *Message) error
}

// BeforeToolHook decides whether a tool call runs. It sees the call's
// validated arguments and returns [Continue], [ReplaceArgs] or [Block]; to
// ask a person it calls [ToolCallContext.Ask] and decides from the answer.
//
// The hook runs again when an interrupted run is resumed: the code before a
// question must be free of side effects, and question ids deterministic, so
// that the second pass finds the stored question (and its answer) instead
// of asking twice. A hook that returns an error blocks the call (fail
// closed); the model sees the error's message.
type BeforeToolHook interface {
	BeforeTool(ctx context.Context, call *ToolCallContext) (Decision, error)
}

// AfterToolHook may change a tool's result before the model sees it.
type AfterToolHook interface {
	AfterTool(ctx context.Context, call *ToolCallContext, result *ToolResult) error
}

// BeforeToolFunc adapts a function to [BeforeToolHook].
type BeforeToolFunc func(ctx context.Context, call *ToolCallContext) (Decision, error)

func (f BeforeToolFunc) BeforeTool(ctx context.Context, call *ToolCallContext) (Decision, error) {
	return f(ctx, call)
}

// AfterToolFunc adapts a function to [AfterToolHook].
type AfterToolFunc func(ctx context.Context, call *ToolCallContext, result *ToolResult) error

func (f AfterToolFunc) AfterTool(ctx context.Context, call *ToolCallContext, result *ToolResult) error {
	return f(ctx, call, result)
}

type decisionKind int

const (
	decideContinue decisionKind = iota
	decideReplace
	decideBlock
)

// Decision is a before-tool hook's verdict. Build it with [Continue],
// [ReplaceArgs] or [Block].
type Decision struct {
	kind    decisionKind
	args    any
	reason  string
	details map[string]any
}

// Continue lets the call go on (to the next middleware, then the tool).
func Continue() Decision { return Decision{} }

// ReplaceArgs lets the call go on with other arguments: a struct of the
// tool's argument type, a map, or a json.RawMessage object. They are
// validated against the tool's schema again.
func ReplaceArgs(args any) Decision { return Decision{kind: decideReplace, args: args} }

// Block stops the call: the tool does not run and the model sees an error
// result with reason. Details go to the result's Details.
func Block(reason string, details map[string]any) Decision {
	return Decision{kind: decideBlock, reason: reason, details: details}
}

// WithDetails returns d with details merged into the details the call's
// result will carry (for a continued call, after the tool has run).
func (d Decision) WithDetails(details map[string]any) Decision {
	m := maps.Clone(d.details)
	if m == nil {
		m = map[string]any{}
	}
	maps.Copy(m, details)
	d.details = m
	return d
}

// Blocked reports whether d blocks the call, and why.
func (d Decision) Blocked() (bool, string) { return d.kind == decideBlock, d.reason }

// ToolCallContext is what tool hooks see of one call.
type ToolCallContext struct {
	ThreadID string
	RunID    string
	// Call is the call as the model made it.
	Call ToolCall
	// Tool is the tool called.
	Tool *Tool
	// Args is the validated argument value (the tool's argument struct
	// for a tool built with NewTool); after a ReplaceArgs, the new value.
	// The tool runs with this value, and the call's record and digest are
	// of RawArgs: a hook changes the arguments only by [ReplaceArgs],
	// never in place (a map changed in place would run what nobody
	// recorded or approved).
	Args any
	// RawArgs is Args as a JSON object, shared with the call's record:
	// read it, never change it.
	RawArgs json.RawMessage
	// Messages is the conversation so far, up to and including the
	// assistant message that made the call. Read only.
	Messages []Message

	agent *Agent
	run   *runState
	// canonical: RawArgs is in canonical form (the run encoded it), so
	// its digests need no re-encoding; digest caches CallDigest.
	canonical bool
	digest    string
}

// CallDigest is [CallDigest] of the call (its thread, id and tool) and
// RawArgs, computed once: what a question about this call is bound to.
func (c *ToolCallContext) CallDigest() string {
	if c.digest == "" {
		c.digest = callDigestCanonical(c.ThreadID, c.Call.ID, c.Call.Name, c.canonicalArgs())
	}
	return c.digest
}

// argsDigest is [ArgsDigest] of the call's tool and RawArgs: the digest
// of questions asked before digests bound the call.
func (c *ToolCallContext) argsDigest() string {
	return digestCanonical(c.Call.Name, c.canonicalArgs())
}

func (c *ToolCallContext) canonicalArgs() json.RawMessage {
	if c.canonical {
		return c.RawArgs
	}
	return canonicalArgs(c.RawArgs)
}

// Ask writes a question durably, then waits until it is answered, times out
// or is aborted, and returns it resolved. Asking again with the same id
// returns the stored question (and its answer if it has one) without asking
// twice. A cancelled ctx returns ctx's error and leaves the question
// pending, for Resume.
func (c *ToolCallContext) Ask(ctx context.Context, q QuestionRequest) (*checkpoint.Question, error) {
	if c.agent == nil {
		return nil, fmt.Errorf("agent: Ask outside a run")
	}
	if q.CallID == "" {
		q.CallID = c.Call.ID
	}
	if q.Tool == "" {
		q.Tool = c.Call.Name
	}
	var legacy string
	if q.Digest != "" && q.Digest == c.CallDigest() {
		// A question about this call stored by a version whose digests
		// bound only the tool and arguments is the same question.
		legacy = c.argsDigest()
	}
	return c.agent.ask(ctx, c.run, q, legacy)
}

// Question returns the stored question with that id in the call's thread,
// or an error wrapping checkpoint.ErrNotFound. Middleware use it to let an
// answer already given decide, before they consult anything that may have
// changed since (a reloaded policy, say). A resolved question the run has
// already read, or was handed when it resumed ([Agent.Resume]), is
// returned as it was read: a resolution is never changed.
func (c *ToolCallContext) Question(ctx context.Context, id string) (*checkpoint.Question, error) {
	if c.agent == nil {
		// A context built by hand (a unit test of a hook) has no store,
		// so no question is stored for it.
		return nil, fmt.Errorf("agent: question %q outside a run: %w", id, checkpoint.ErrNotFound)
	}
	if c.run != nil {
		if q := c.run.resolvedRead(id); q != nil {
			return q, nil
		}
	}
	q, err := c.agent.store.GetQuestion(ctx, c.ThreadID, id)
	if err == nil && c.run != nil {
		c.run.noteRead(q)
	}
	return q, err
}

// Fresh reports whether the call's turn is not in the store yet: the
// model's message is written with the turn's first question, claim or
// result, and call ids are unique in a thread, so nothing keyed by the
// call's id (a question about it, its record) can be stored. A middleware
// that looks for a question about the call ([ToolCallContext.Question]
// with an id made from Call.ID) need not read it then. False outside a
// run.
func (c *ToolCallContext) Fresh() bool {
	return c.run != nil && c.run.turnFresh()
}

// Store is the checkpointer of the agent running the call.
func (c *ToolCallContext) Store() checkpoint.Store {
	if c.agent == nil {
		return nil
	}
	return c.agent.store
}

type toolCallCtxKey struct{}

type threadCtxKey struct{}

// ThreadFrom returns the thread whose model call runs in ctx: a provider
// that serves many threads (the MCP gateway's relay) tells them apart by
// it, not by what the messages say. "" outside a model call.
func ThreadFrom(ctx context.Context) string {
	t, _ := ctx.Value(threadCtxKey{}).(string)
	return t
}

// ToolCallFrom returns the context of the tool call running in ctx, so a
// tool can ask a person from inside ([ToolCallContext.Ask]). Nil outside a
// tool.
func ToolCallFrom(ctx context.Context) *ToolCallContext {
	c, _ := ctx.Value(toolCallCtxKey{}).(*ToolCallContext)
	return c
}

// encodeArgs turns a ReplaceArgs value into a JSON object.
func encodeArgs(args any) (json.RawMessage, error) {
	switch v := args.(type) {
	case json.RawMessage:
		return v, nil
	case []byte:
		return v, nil
	}
	return json.Marshal(args)
}

// EditCheck is an edit of a tool call's arguments to be vetted outside the
// run, by whichever process takes the answer (see [EditChecker]).
type EditCheck struct {
	ThreadID string
	CallID   string
	// Tool is the tool called; Args the whole edited arguments object.
	Tool *Tool
	Args json.RawMessage
	// Messages is the conversation, when the checker has it.
	Messages []Message
}

// EditChecker is implemented by before-tool middleware that can tell,
// outside a run, whether it would let an edited call run. A host calls it
// on every edit before recording the answer, so a reviewer whose edit the
// run would block is told at once and can correct it. An error refuses the
// edit; a *ValidationError in it lists every problem.
type EditChecker interface {
	CheckEdit(ctx context.Context, c *EditCheck) error
}
