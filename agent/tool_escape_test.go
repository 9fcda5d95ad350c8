package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// shellOut is shaped like the bash tool's result.
type shellOut struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

// A tool that returns a struct: its JSON is the text the model reads and
// people see, so <, > and & stay as they are (json.Marshal writes them as
// \u003c, \u003e, \u0026), with no trailing newline.
func TestToolResultNotHTMLEscaped(t *testing.T) {
	t.Parallel()
	const want = `{"exit_code":0,"stdout":"echo a >> log && cat <in\n","stderr":""}`
	tool := agent.NewTool("sh", "Run a command.", func(ctx context.Context, a echoArgs) (shellOut, error) {
		return shellOut{Stdout: a.Text + "\n"}, nil
	}, nil)
	var seen string
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "sh", echoArgs{"echo a >> log && cat <in"})}},
		scripted.Turn{Text: "done", Check: func(req *agent.Request) error {
			for _, m := range req.Messages {
				if m.Role == agent.RoleTool && m.Result != nil {
					seen = m.Result.Content
				}
			}
			if seen != want {
				return fmt.Errorf("the model reads %s, want %s", seen, want)
			}
			return nil
		}},
	)
	a := newAgent(t, agent.Config{Provider: model, Tools: []*agent.Tool{tool}})
	if _, err := a.Prompt(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	rs := toolResults(t, a)
	if len(rs) != 1 || rs[0].IsError || rs[0].Content != want {
		t.Fatalf("results %+v, want content %s", rs, want)
	}
	if strings.Contains(rs[0].Content, `\u00`) || !json.Valid([]byte(rs[0].Content)) {
		t.Errorf("content %q", rs[0].Content)
	}
}
