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

// What the store keeps for people to read — the thread's messages and the
// audit log — is written with <, > and & as they are, so that even a
// person reading the database directly sees the command reviewed.
func TestStoredTextNotHTMLEscaped(t *testing.T) {
	t.Parallel()
	tool := agent.NewTool("sh", "Run a command.", func(ctx context.Context, a echoArgs) (shellOut, error) {
		return shellOut{Stdout: a.Text}, nil
	}, nil)
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "sh", echoArgs{"a >> b && <c>"})}},
		scripted.Turn{Text: "ran a >> b"},
	)
	a := newAgent(t, agent.Config{Provider: model, Tools: []*agent.Tool{tool}})
	ctx := context.Background()
	if _, err := a.Prompt(ctx, "run a >> b"); err != nil {
		t.Fatal(err)
	}
	th, err := a.Store().LoadThread(ctx, a.ThreadID())
	if err != nil {
		t.Fatal(err)
	}
	if s := string(th.Messages); strings.Contains(s, `\u003e`) || !strings.Contains(s, `a >> b`) {
		t.Errorf("stored messages are escaped: %s", s)
	}
	events, err := a.Store().ListEvents(ctx, a.ThreadID(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events {
		if strings.Contains(string(e.Data), `\u003e`) || strings.Contains(string(e.Data), `\u0026`) {
			t.Errorf("audit event %s is escaped: %s", e.Type, e.Data)
		}
		found = found || strings.Contains(string(e.Data), ">>")
	}
	if !found {
		t.Error("no audit event carries the command")
	}
}

// The digest that binds an approval to what the reviewer saw does not
// depend on how the stored arguments spell <, > and &: arguments written
// before the stores stopped escaping keep their digests (and answers).
func TestArgsDigestIgnoresHTMLEscapes(t *testing.T) {
	t.Parallel()
	escaped := agent.ArgsDigest("bash", json.RawMessage(`{"cmd":"a \u003e\u003e b \u0026\u0026 \u003cc\u003e"}`))
	plain := agent.ArgsDigest("bash", json.RawMessage(`{"cmd":"a >> b && <c>"}`))
	if escaped != plain {
		t.Fatalf("digest %s for the escaped spelling, %s for the plain one", escaped, plain)
	}
}
