package bash_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/provider/scripted"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

func ExampleNew() {
	tool := bash.New(&bash.Options{Dir: "/", Timeout: 5 * time.Second, MaxOutput: 8})
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{
			scripted.Call("c1", "bash", bash.Args{Cmd: "echo hello; exit 3"}),
			scripted.Call("c2", "bash", bash.Args{Cmd: "printf 0123456789abcdef"}),
		}},
		scripted.Turn{Text: "done"},
	)
	a, _ := agent.New(agent.Config{Provider: model, Tools: []*agent.Tool{tool}, Checkpointer: memory.New()})
	if _, err := a.Prompt(context.Background(), "run"); err != nil {
		fmt.Println(err)
	}
	msgs, _ := a.Messages(context.Background())
	for _, m := range msgs {
		if m.Result != nil {
			fmt.Println(m.Result.Content)
		}
	}
	// Output:
	// {"exit_code":3,"stdout":"hello\n","stderr":""}
	// {"exit_code":0,"stdout":"01234567\n[output truncated: 8 more bytes]","stderr":"","truncated":true}
}
