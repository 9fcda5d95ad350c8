package interrupt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/interrupt"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// ToolInterruptMiddleware as the seed uses it: transfers above 1000 wait for
// a person, who answers with an edit; the model sees the edited run.
func ExampleNew() {
	type TransferArgs struct {
		Amount int64  `json:"amount"`
		To     string `json:"to"`
	}
	transfer := agent.NewTool("transfer", "Send money.", func(ctx context.Context, a TransferArgs) (string, error) {
		return fmt.Sprintf("sent %d to %s", a.Amount, a.To), nil
	}, nil)

	mw, err := interrupt.New(interrupt.RuleFor(transfer, interrupt.Gt("amount", 1000)))
	if err != nil {
		log.Fatal(err) // a rule built wrong: bad pattern, no pattern, ...
	}
	channel := hitl.NewCheckpointedChannel(memory.New(), "example", nil)
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{
			scripted.Call("fc:1", "transfer", TransferArgs{50, "bob"}),
			scripted.Call("fc:2", "transfer", TransferArgs{5000, "bob"}),
		}},
		scripted.Turn{Text: "Sent."},
	)
	a, err := agent.New(agent.Config{
		Provider: model, Tools: []*agent.Tool{transfer},
		Middleware: []agent.Middleware{mw}, Channel: channel, ThreadID: "example",
	})
	if err != nil {
		log.Fatal(err)
	}

	// The host: show each pending approval, answer it.
	ctx, stop := context.WithCancel(context.Background())
	hostDone := make(chan struct{})
	go func() {
		defer close(hostDone)
		for req, err := range channel.Subscribe(ctx) {
			if err != nil {
				continue
			}
			fmt.Printf("asked %s: %s\n", req.QuestionID, req.Payload.Raw)
			_ = channel.Answer(ctx, req.QuestionID, interrupt.Edit(map[string]any{"amount": 900}))
		}
	}()
	if _, err := a.Prompt(context.Background(), "pay bob"); err != nil {
		log.Fatal(err)
	}
	stop()
	<-hostDone

	msgs, _ := a.Messages(context.Background())
	for _, m := range msgs {
		if m.Role == agent.RoleTool {
			h, _ := json.Marshal(m.Result.Details["interrupt"])
			fmt.Printf("%s: %s %s\n", m.Result.CallID, m.Result.Content, h)
		}
	}
	// Output:
	// asked approve_fc.3a2: {"kind":"tool_interrupt","tool_name":"transfer","tool_call_id":"fc:2","arguments":{"amount":5000,"to":"bob"}}
	// fc:1: sent 50 to bob null
	// fc:2: sent 900 to bob {"by":"","decision":"edit","edited_args":{"amount":900},"original_args":{"amount":5000,"to":"bob"},"question_id":"approve_fc.3a2"}
}
