// Package qkind is the one place that knows each kind of question —
// approve, ask, confirm and tool_interrupt: what a question of the kind
// asks for in words, the answers it takes on the command line, what its
// payload shows (for the two that ask to run a call, the tool and its
// arguments), how an answer is read back (its decision: what the reviewer
// decided, in the words the audit, the metrics and the outcome lines
// use) and how an approval's answer is built. The command line, the
// terminal prompt, internal/display, the audit and the metrics ask it
// instead of switching on the kind strings themselves.
//
// The readings follow what a run does with the answer: a tool_interrupt
// answer is read by [interrupt.Interpret] (anything that is not an
// approval or an edit denies), an approve answer by its decision.
package qkind

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/interrupt"
)

// Kind is what is known of a kind of question.
type Kind struct {
	// Name is the kind as questions carry it.
	Name string
	// Approval: the question asks to run a tool call (approve,
	// tool_interrupt), answered approve, deny or edit, bound to the
	// call's digest.
	Approval bool
	// Asks says what a question of the kind asks for: "asks for
	// approval".
	Asks string
	// Forms lists the answers the command line takes for it:
	// `approve, deny "reason" or edit '{...}'`.
	Forms string
}

var (
	approval = `approve, deny "reason" or edit '{...}'`
	kinds    = map[string]Kind{
		hitl.KindApprove:            {Name: hitl.KindApprove, Approval: true, Asks: "asks for approval", Forms: approval},
		interrupt.KindToolInterrupt: {Name: interrupt.KindToolInterrupt, Approval: true, Asks: "asks for approval", Forms: approval},
		hitl.KindConfirm:            {Name: hitl.KindConfirm, Asks: "asks yes or no", Forms: "yes or no"},
		hitl.KindAsk:                {Name: hitl.KindAsk, Asks: "asks for an answer in words", Forms: "text ... or json '...'"},
	}
)

// Of returns the kind named; a kind tollgate does not know takes a JSON
// answer.
func Of(name string) Kind {
	if k, ok := kinds[name]; ok {
		return k
	}
	return Kind{Name: name, Asks: "takes a JSON answer", Forms: "json '...'"}
}

// Decisions an answer is read as (Answer.Decision), beside
// hitl.DecisionApprove, hitl.DecisionDeny and hitl.DecisionEdit.
const (
	Yes = "yes"
	No  = "no"
	// Answered: an answer in words or JSON (ask, or a kind not known).
	Answered = "answered"
)

// Answer is an answer read back.
type Answer struct {
	// Decision is approve, deny or edit (an approval), yes or no
	// (confirm), answered (ask, a kind not known); "" when the answer is
	// not one the kind takes (Readable false).
	Decision string
	// Readable is false for an answer the kind does not take (stored
	// data no answer check would have let through).
	Readable bool
	// Reason is a deny's reason.
	Reason string
	// Edits are an edit's arguments: the whole arguments (approve), or
	// the keys that replace the call's (tool_interrupt).
	Edits map[string]any
	// Text is an ask's answer in words, when Words.
	Text  string
	Words bool
}

// Read reads an answer to a question of the kind. Numbers in edits are
// kept as written (json.Number).
func Read(kind string, raw json.RawMessage) Answer {
	switch kind {
	case hitl.KindApprove:
		var a hitl.ApproveAnswer
		if decode(raw, &a) != nil {
			return Answer{}
		}
		switch a.Decision {
		case hitl.DecisionApprove, hitl.DecisionDeny, hitl.DecisionEdit:
			return Answer{Decision: a.Decision, Readable: true, Reason: a.Reason, Edits: a.EditedArgs}
		}
		return Answer{}
	case interrupt.KindToolInterrupt:
		o := interrupt.Interpret(raw, nil)
		return Answer{Decision: o.Action, Readable: true, Reason: o.Message, Edits: o.Edits}
	case hitl.KindConfirm:
		var yes bool
		var a hitl.ConfirmAnswer
		if json.Unmarshal(raw, &yes) != nil && json.Unmarshal(raw, &a) != nil {
			return Answer{}
		}
		if yes || a.Yes {
			return Answer{Decision: Yes, Readable: true}
		}
		return Answer{Decision: No, Readable: true}
	}
	a := Answer{Decision: Answered, Readable: true}
	if kind == hitl.KindAsk {
		a.Words = json.Unmarshal(raw, &a.Text) == nil
	}
	return a
}

func decode(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}

// Call is the call an approval asks to run, as its payload shows it.
type Call struct {
	Tool string
	// Args are the call's arguments, numbers as written.
	Args map[string]any
	// Details are the policy's (approve only): matched rule, impact...
	Details map[string]any
}

// CallOf is the call a question of an approval kind asks to run; an error
// for a payload that cannot be read or a kind that is not an approval.
func CallOf(q *checkpoint.Question) (*Call, error) {
	switch q.Kind {
	case hitl.KindApprove:
		req, err := hitl.RequestOf(q)
		if err != nil {
			return nil, err
		}
		return &Call{Tool: req.Payload.ToolName, Args: req.Payload.Args, Details: req.Payload.Details}, nil
	case interrupt.KindToolInterrupt:
		var p struct {
			ToolName  string         `json:"tool_name"`
			Arguments map[string]any `json:"arguments"`
		}
		if err := decode(q.Payload, &p); err != nil {
			return nil, fmt.Errorf("the payload of question %q is not readable: %w", q.ID, err)
		}
		return &Call{Tool: p.ToolName, Args: p.Arguments}, nil
	}
	return nil, fmt.Errorf("question %q (%s) asks to run no call", q.ID, q.Kind)
}

// Approval is the answer of a reviewer to an approval kind's question:
// decision approve, deny (with the reason) or edit (with the arguments),
// bound to the call's digest, in the form the kind takes; nil for a kind
// that is not an approval.
func Approval(kind, decision, reason string, edits map[string]any, digest string) any {
	switch kind {
	case hitl.KindApprove:
		a := hitl.ApproveAnswer{Decision: decision, Digest: digest, EditedArgs: edits}
		if decision == hitl.DecisionDeny {
			a.Reason = reason
		}
		return a
	case interrupt.KindToolInterrupt:
		d := interrupt.Approve()
		switch decision {
		case hitl.DecisionDeny:
			d = interrupt.Deny(reason)
		case hitl.DecisionEdit:
			d = interrupt.Edit(edits)
		}
		d.Digest = digest
		return d
	}
	return nil
}
