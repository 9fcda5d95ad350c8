package agent_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// A typed tool: the schema comes from the argument struct and arguments are
// validated before the handler runs.
func ExampleNewTool() {
	type addArgs struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	add := agent.NewTool("add", "Add two integers.", func(ctx context.Context, args addArgs) (int, error) {
		return args.A + args.B, nil
	}, nil)
	fmt.Println(string(add.Schema()))
	if _, err := add.Validate([]byte(`{"a": "one", "c": 3}`)); err != nil {
		fmt.Println(err)
	}
	// Output:
	// {"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}
	// invalid arguments for tool "add": 3 problems: /a: want integer, got string; /b: required; /c: unknown argument (allowed: a, b)
}

// A run with a scripted model: one tool call, then a final answer.
func ExampleAgent_Prompt() {
	shout := agent.NewTool("shout", "Upper-case text.", func(ctx context.Context, args struct {
		Text string `json:"text"`
	}) (string, error) {
		return strings.ToUpper(args.Text), nil
	}, nil)
	model := scripted.New(
		scripted.Turn{Text: "Shouting.", ToolCalls: []agent.ToolCall{scripted.Call("c1", "shout", map[string]string{"text": "hello"})}},
		scripted.Turn{Text: "Done: HELLO."},
	)
	a, _ := agent.New(agent.Config{Provider: model, Tools: []*agent.Tool{shout}, Checkpointer: memory.New()})
	msg, err := a.Prompt(context.Background(), "shout hello")
	if err != nil {
		fmt.Println(err)
		return
	}
	msgs, _ := a.Messages(context.Background())
	for _, m := range msgs {
		switch {
		case m.Result != nil:
			fmt.Printf("%s: %s\n", m.Role, m.Result.Content)
		default:
			fmt.Printf("%s: %s\n", m.Role, m.Text)
		}
	}
	fmt.Println("final:", msg.Text, msg.StopReason)
	// Output:
	// user: shout hello
	// assistant: Shouting.
	// tool: HELLO
	// assistant: Done: HELLO.
	// final: Done: HELLO. end_turn
}

// A middleware that blocks some calls and asks a person about others.
func ExampleBeforeToolFunc() {
	rm := agent.NewTool("rm", "Remove a file.", func(ctx context.Context, args struct {
		Path string `json:"path"`
	}) (string, error) {
		return "removed " + args.Path, nil
	}, nil)
	guard := agent.BeforeToolFunc(func(ctx context.Context, c *agent.ToolCallContext) (agent.Decision, error) {
		if strings.HasPrefix(string(c.RawArgs), `{"path":"/etc`) {
			return agent.Block("not under /etc", nil), nil
		}
		q, err := c.Ask(ctx, agent.QuestionRequest{ID: "ok_" + agent.EscapeID(c.Call.ID), Kind: "confirm", Payload: "remove?"})
		if err != nil {
			return agent.Decision{}, err
		}
		if string(q.Answer) != "true" {
			return agent.Block("the user said no", nil), nil
		}
		return agent.Continue(), nil
	})
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{
			scripted.Call("c1", "rm", `{"path":"/etc/passwd"}`),
			scripted.Call("c2", "rm", `{"path":"/tmp/x"}`),
		}},
		scripted.Turn{Text: "ok"},
	)
	a, _ := agent.New(agent.Config{Provider: model, Tools: []*agent.Tool{rm}, Middleware: []agent.Middleware{guard}, ThreadID: "t", Checkpointer: memory.New()})
	// A host answers the question through the store.
	events := a.Subscribe(0)
	go func() {
		for e := range events.C {
			if r, ok := e.(*agent.HitlRequestEvent); ok {
				_, _ = a.Store().ResolveQuestion(context.Background(), "t", r.Question.ID,
					checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: []byte("true")})
			}
		}
	}()
	if _, err := a.Prompt(context.Background(), "clean up"); err != nil {
		fmt.Println(err)
	}
	events.Close()
	msgs, _ := a.Messages(context.Background())
	for _, m := range msgs {
		if m.Result != nil {
			fmt.Printf("%s error=%v %s\n", m.Result.CallID, m.Result.IsError, m.Result.Content)
		}
	}
	// Output:
	// c1 error=true not under /etc
	// c2 error=false removed /tmp/x
}
