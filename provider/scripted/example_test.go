package scripted_test

import (
	"context"
	"fmt"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// A scripted model plays its turns in order and can check what it is sent.
func ExampleNew() {
	model := scripted.New(
		scripted.Turn{Text: "Hello!", Check: func(req *agent.Request) error {
			if req.System != "be kind" {
				return fmt.Errorf("system prompt %q", req.System)
			}
			return nil
		}},
	)
	a, _ := agent.New(agent.Config{Provider: model, SystemPrompt: "be kind", Checkpointer: memory.New()})
	msg, err := a.Prompt(context.Background(), "hi")
	fmt.Println(msg.Text, err)
	_, err = a.Prompt(context.Background(), "again")
	fmt.Println(err)
	// Output:
	// Hello! <nil>
	// agent: model call: scripted: no turns left in the script (1 turns played)
}

// The offline demo model turns "$ " lines into bash calls and then reports
// what happened to each.
func ExampleDemo() {
	bash := agent.NewTool("bash", "Pretend to run a command.", func(ctx context.Context, a struct {
		Cmd string `json:"cmd"`
	}) (string, error) {
		return `{"exit_code":0,"stdout":"","stderr":""}`, nil
	}, nil)
	a, _ := agent.New(agent.Config{Provider: scripted.Demo{}, Tools: []*agent.Tool{bash}, Checkpointer: memory.New()})
	msg, _ := a.Prompt(context.Background(), "please\n$ ls\n$ pwd")
	fmt.Println(msg.Text)
	// Output:
	// `ls`: ran, exit 0
	// `pwd`: ran, exit 0
}
