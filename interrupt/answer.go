package interrupt

import (
	"encoding/json"
	"maps"
	"reflect"
)

// KindToolInterrupt is the Kind of every [ToolInterrupt].
const KindToolInterrupt = "tool_interrupt"

// ToolInterrupt is the payload of the question that asks a reviewer to
// approve a tool call.
type ToolInterrupt struct {
	Kind       string         `json:"kind"`         // always "tool_interrupt", to tell the payload apart
	ToolName   string         `json:"tool_name"`    // the tool to run
	ToolCallID string         `json:"tool_call_id"` // id of the call under review
	Arguments  map[string]any `json:"arguments"`    // arguments the tool would run with
}

// NewToolInterrupt is the payload for a call of the named tool; nil
// arguments become an empty object.
func NewToolInterrupt(toolName, toolCallID string, arguments map[string]any) ToolInterrupt {
	if arguments == nil {
		arguments = map[string]any{}
	}
	return ToolInterrupt{Kind: KindToolInterrupt, ToolName: toolName, ToolCallID: toolCallID, Arguments: arguments}
}

// The actions of a [ToolDecision].
const (
	ActionApprove = "approve" // run the call as it is
	ActionDeny    = "deny"    // refuse it
	ActionEdit    = "edit"    // run it with Arguments merged over its own
)

// ToolDecision is a reviewer's answer to a tool approval. A plain JSON object
// with the same fields works the same way; see [Interpret].
type ToolDecision struct {
	// Action is ActionApprove, ActionDeny or ActionEdit.
	Action string `json:"action"`
	// Arguments, with ActionEdit, are the keys that replace the call's
	// arguments (a shallow merge). Ignored with other actions.
	Arguments map[string]any `json:"arguments,omitzero"`
	// Message is the reason given to [ToolDeniedError] when the call is
	// denied. Ignored when it is not.
	Message string `json:"message,omitempty"`
	// Digest, when set, must equal the question's digest: an answer
	// taken by hitl's channels (and so the HTTP API, which requires it)
	// is refused if the call changed since the reviewer looked. Interpret
	// does not read it.
	Digest string `json:"digest,omitempty"`
}

// Approve is the answer that runs the call as it is.
func Approve() ToolDecision { return ToolDecision{Action: ActionApprove} }

// Deny is the answer that refuses the call, with the reason shown to the
// model.
func Deny(message string) ToolDecision { return ToolDecision{Action: ActionDeny, Message: message} }

// Edit is the answer that runs the call with arguments replacing its own,
// key by key.
func Edit(arguments map[string]any) ToolDecision {
	if arguments == nil {
		arguments = map[string]any{}
	}
	return ToolDecision{Action: ActionEdit, Arguments: arguments}
}

// Outcome is what an answer means for the call under review.
type Outcome struct {
	// Action is ActionApprove, ActionEdit or ActionDeny.
	Action string
	// Arguments are those the call runs with: the original ones (the same
	// map) when approved, a new map with the edits merged in when edited,
	// nil when denied.
	Arguments map[string]any
	// Edits are the reviewer's replacement keys (ActionEdit only). Numbers
	// in an answer given as JSON are json.Number, so they stay exact.
	Edits map[string]any
	// Message is the reason of a deny (possibly empty).
	Message string
}

// Interpret reads a reviewer's answer to the approval of a call with the
// arguments original, as the Python original does, failing closed:
//
//   - true, or a decision with action "approve", runs the call as it is;
//   - a decision with action "edit" and an arguments object runs it with
//     those keys replacing the call's (a shallow merge over original, which
//     is not modified);
//   - anything else denies: false, null, numbers, strings (even "true" or
//     "approve"), arrays, invalid JSON, action "deny", an unknown or
//     mistyped action, a field of the wrong type (arguments that are not an
//     object, a message that is not a string), and an "edit" without an
//     arguments object (a front end that lost the edit must not run the
//     call; send {} to run it unchanged).
//
// A decision is a [ToolDecision] (or a pointer to one), or a JSON object or
// Go map or struct with the same JSON fields; unknown fields are ignored.
// The answer may be given as a Go value or as JSON (json.RawMessage or
// []byte); a Go string is a string, never JSON text. The message of a deny,
// including one that is denied for being malformed, is kept when it is a
// string.
func Interpret(answer any, original map[string]any) Outcome {
	d, ok := decisionOf(answer)
	switch {
	case ok && d.Action == ActionApprove:
		return Outcome{Action: ActionApprove, Arguments: original}
	case ok && d.Action == ActionEdit && d.Arguments != nil:
		merged := make(map[string]any, len(original)+len(d.Arguments))
		maps.Copy(merged, original)
		maps.Copy(merged, d.Arguments)
		return Outcome{Action: ActionEdit, Arguments: merged, Edits: d.Arguments}
	}
	return Outcome{Action: ActionDeny, Message: d.Message}
}

// decisionOf reads an answer as a decision; false means the answer is not a
// valid decision (the message may still be set).
func decisionOf(answer any) (ToolDecision, bool) {
	switch a := answer.(type) {
	case nil, string:
		return ToolDecision{}, false
	case bool:
		if a {
			return Approve(), true
		}
		return ToolDecision{}, false
	case ToolDecision:
		return a, validAction(a.Action)
	case *ToolDecision:
		if a == nil {
			return ToolDecision{}, false
		}
		return *a, validAction(a.Action)
	case json.RawMessage:
		return decisionOfJSON(a)
	case []byte:
		return decisionOfJSON(a)
	case map[string]any:
		return decisionOfObject(a)
	}
	rv := reflect.ValueOf(answer)
	for rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Map && rv.Kind() != reflect.Struct {
		return ToolDecision{}, false
	}
	data, err := json.Marshal(answer)
	if err != nil {
		return ToolDecision{}, false
	}
	return decisionOfJSON(data)
}

func decisionOfJSON(data []byte) (ToolDecision, bool) {
	v, err := decodeJSON(data)
	if err != nil {
		return ToolDecision{}, false
	}
	switch v := v.(type) {
	case bool:
		if v {
			return Approve(), true
		}
	case map[string]any:
		return decisionOfObject(v)
	}
	return ToolDecision{}, false
}

func decisionOfObject(m map[string]any) (ToolDecision, bool) {
	var d ToolDecision
	ok := true
	if a, isString := m["action"].(string); isString && validAction(a) {
		d.Action = a
	} else {
		ok = false
	}
	switch args := m["arguments"].(type) {
	case nil:
	case map[string]any:
		d.Arguments = args
	default:
		ok = false
	}
	switch msg := m["message"].(type) {
	case nil:
	case string:
		d.Message = msg
	default:
		ok = false
	}
	return d, ok
}

func validAction(a string) bool {
	return a == ActionApprove || a == ActionDeny || a == ActionEdit
}

// ToolDeniedError is the error of a tool call that was not approved. Its
// message is what the model sees as the call's error result.
type ToolDeniedError struct {
	ToolName   string
	ToolCallID string
	// Message is the reviewer's reason (possibly empty); for a call denied
	// without a reviewer's word, what happened.
	Message string
	// Decision says how the call came to be denied: "deny" (the answer
	// denied it), "timed_out", "aborted", or "invalid_edit" (an edit that
	// failed the tool's schema, recorded while no run was waiting to check
	// it).
	Decision string
	// QuestionID is the question asked; By is who answered, if known.
	QuestionID string
	By         string
}

func (e *ToolDeniedError) Error() string {
	var prefix string
	switch e.Decision {
	case "timed_out":
		prefix = "tool call denied: approval timed out"
	case "aborted":
		prefix = "tool call aborted"
	case "invalid_edit":
		prefix = "tool call denied: the reviewer's edit is invalid"
	default:
		prefix = "tool call denied by the reviewer"
	}
	if e.Message == "" {
		return prefix
	}
	return prefix + ": " + e.Message
}

// ResultDetails is what the call's result carries in Details (it
// implements agent.DetailedError): Details["interrupt"] with the decision,
// the message, the question and who answered.
func (e *ToolDeniedError) ResultDetails() map[string]any {
	d := e.Decision
	if d == "" {
		d = ActionDeny
	}
	return map[string]any{"interrupt": map[string]any{
		"decision": d, "message": e.Message, "question_id": e.QuestionID, "by": e.By,
	}}
}
