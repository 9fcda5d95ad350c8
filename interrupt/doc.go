// Package interrupt is rule-based approval of tool calls: the tool calls that
// match a [Rule] wait until a person approves, edits or denies them. It is
// the Go form of ToolInterruptMiddleware and its helpers.
//
// # Quick start
//
//	mw, err := interrupt.New(
//		interrupt.RuleFor(transfer, interrupt.Gt("amount", 1000)),
//		interrupt.Rule{Tool: "bash", Match: interrupt.Matches("command", `\brm\b`)},
//	)
//	if err != nil { ... } // a rule built wrong
//	a, err := agent.New(agent.Config{..., Middleware: []agent.Middleware{mw}, Channel: channel})
//
//	// The host answers each pending question ("approve_" + escaped call id)
//	// with one of:
//	channel.Answer(ctx, questionID, true)
//	channel.Answer(ctx, questionID, interrupt.Edit(map[string]any{"amount": 900}))
//	channel.Answer(ctx, questionID, interrupt.Deny("over budget"))
//
// [Middleware] (built by [New]) does the asking and applies the answer; the
// rest of the package is pure and usable on its own.
//
// # Rules
//
// A [Rule] names a tool (or [AnyTool], "*", for every tool; [RuleFor] takes
// a tool value and uses its name) and an optional [Predicate] over the call's
// arguments. A call needs approval when a rule of its tool has no predicate,
// or its predicate returns true, returns an error or panics: a rule that
// cannot decide asks a person (fail closed).
//
//	rules := []interrupt.Rule{
//		{Tool: "bash", Match: interrupt.Matches("command", `\brm\b`)},
//		{Tool: "transfer", Match: interrupt.Gt("amount", 1000)},
//		{Tool: "http", Match: interrupt.AnyField(map[string]string{"url": `\.internal/`, "method": `^DELETE$`})},
//		{Tool: "delete_file"}, // every call
//	}
//	if err := interrupt.Validate(rules); err != nil { ... } // a bad pattern, no pattern, ...
//	interrupt.ShouldInterrupt(rules, "transfer", json.RawMessage(`{"amount": 1500}`)) // true
//
// [ShouldInterrupt] answers yes or no; [Check] also says which rules matched
// and why a predicate failed, for logs and traces.
//
// # Predicates
//
// [Gt], [Ge], [Lt], [Le] and [Eq] compare an argument with a value, [Matches]
// searches a string argument with a regular expression, [AllFields] and
// [AnyField] search several. They read the arguments as a JSON object
// (json.RawMessage, []byte or JSON text in a string), a map with string keys,
// or the tool's typed argument struct, whose fields are named by their JSON
// names. Numbers compare exactly (big integers too, 1 == 1.0) and never with
// booleans; other values need an argument of their own type. A missing
// argument is [ErrMissingField], a mistyped one [ErrWrongType], a NaN one
// [ErrNaN]. Regular expressions are Go's RE2, not Python's re: see [Matches]
// for the differences.
//
// A predicate built wrong (a pattern that does not compile, no pattern, a NaN
// or unordered value) fails on every call, so it asks every time; [Validate]
// reports such mistakes before anything runs, each wrapping [ErrInvalidRule].
// Your own predicates are a [PredicateFunc].
//
// # Questions and answers
//
// The question for a call has the id [ID] (deterministic, ASCII, one-to-one:
// "fc:1" gives "approve_fc.3a1") and a [ToolInterrupt] payload. The answer is
// read by [Interpret]: true or a [ToolDecision] with action "approve" runs the
// call as it is; action "edit" with an arguments object runs it with those
// keys replacing the call's; anything else denies, with the decision's
// message as the reason. A plain JSON object works like a ToolDecision. A
// denied call is a [*ToolDeniedError].
//
// # Names
//
// [ToolDecision] is a reviewer's answer, named by SPEC; the policy's
// verdict is policy.Decision and a middleware's is agent.Decision
// (docs/ARCHITECTURE.md, "Names").
package interrupt
