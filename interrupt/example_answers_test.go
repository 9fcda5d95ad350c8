package interrupt_test

import (
	"encoding/json"
	"fmt"

	"github.com/tollgate-ai/tollgate/interrupt"
)

// The id of the question for a tool call, as the seed writes it.
func ExampleID() {
	fmt.Println(interrupt.ID("fc:1"))
	fmt.Println(interrupt.ID("call_a.b/é"))
	// Output:
	// approve_fc.3a1
	// approve_call_a.2eb.2f.c3.a9
}

// The payload a reviewer sees.
func ExampleToolInterrupt() {
	payload := interrupt.NewToolInterrupt("transfer", "fc:1", map[string]any{"amount": 1500, "to": "alice"})
	b, _ := json.Marshal(payload)
	fmt.Println(string(b))
	// Output:
	// {"kind":"tool_interrupt","tool_name":"transfer","tool_call_id":"fc:1","arguments":{"amount":1500,"to":"alice"}}
}

// How answers read: true or approve runs the call, edit merges, anything
// else denies.
func ExampleInterpret() {
	args := map[string]any{"amount": 1500, "to": "alice"}
	for _, answer := range []any{
		true,
		json.RawMessage(`{"action": "approve"}`),
		json.RawMessage(`{"action": "edit", "arguments": {"amount": 900}}`),
		interrupt.Edit(map[string]any{"to": "bob"}),
		map[string]any{"action": "deny", "message": "over budget"},
		json.RawMessage(`"yes"`),
		false,
	} {
		out := interrupt.Interpret(answer, args)
		fmt.Printf("%s %v %q\n", out.Action, out.Arguments, out.Message)
	}
	// Output:
	// approve map[amount:1500 to:alice] ""
	// approve map[amount:1500 to:alice] ""
	// edit map[amount:900 to:alice] ""
	// edit map[amount:1500 to:bob] ""
	// deny map[] "over budget"
	// deny map[] ""
	// deny map[] ""
}
