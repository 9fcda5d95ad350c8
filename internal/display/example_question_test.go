package display_test

import (
	"encoding/json"
	"fmt"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/display"
)

// A stored approval question, as `questions list` shows it.
func ExampleSummary() {
	q := &checkpoint.Question{ID: "hitl_c1", Kind: "approve", Tool: "bash", Status: checkpoint.QuestionPending,
		Payload: json.RawMessage(`{"kind":"approve","tool_name":"bash","args":{"cmd":"ls \u003e\u003e /tmp/x"}}`)}
	fmt.Println(display.Summary(q))
	fmt.Println(display.Resolution(q))
	// Output:
	// bash: ls >> /tmp/x
	// pending
}

func ExampleResolution() {
	q := &checkpoint.Question{ID: "hitl_c1", Kind: "approve", Tool: "bash",
		Payload:    json.RawMessage(`{"kind":"approve","tool_name":"bash","args":{"cmd":"rm -r /tmp/x"}}`),
		Status:     checkpoint.QuestionAnswered,
		Answer:     json.RawMessage(`{"decision":"deny","reason":"keep it"}`),
		AnsweredBy: "bob"}
	fmt.Println(display.Resolution(q))
	// Output:
	// denied by bob (keep it)
}
