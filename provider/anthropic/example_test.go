package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/provider/anthropic"
)

// fakeAPI stands in for api.anthropic.com, replaying a recorded stream.
func fakeAPI(recording string) *httptest.Server {
	stream, err := os.ReadFile(recording)
	if err != nil {
		panic(err)
	}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(stream)
	}))
}

func Example() {
	srv := fakeAPI("testdata/text.sse")
	defer srv.Close()

	p := anthropic.New(&anthropic.Options{APIKey: "sk-ant-...", BaseURL: srv.URL})
	msg, err := p.Complete(context.Background(), &agent.Request{
		Model:    agent.Model{ID: "claude-sonnet-4-6"},
		System:   "You are a friendly assistant.",
		Messages: []agent.Message{agent.UserMessage("Say hello.")},
	}, func(delta string) { fmt.Print(delta) }) // streamed as it arrives
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println()
	fmt.Println(msg.StopReason, msg.Usage.InputTokens, msg.Usage.OutputTokens)
	// Output:
	// Hello! How can I help you today?
	// end_turn 25 12
}

func Example_toolCalls() {
	srv := fakeAPI("testdata/parallel.sse")
	defer srv.Close()

	p := anthropic.New(&anthropic.Options{APIKey: "sk-ant-...", BaseURL: srv.URL, Model: "claude-sonnet-4-6"})
	msg, err := p.Complete(context.Background(), &agent.Request{
		Messages: []agent.Message{agent.UserMessage("List files, then delete the temp logs.")},
		Tools: []agent.ToolSpec{{
			Name:        "bash",
			Description: "Run a shell command.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`),
		}},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(msg.StopReason)
	for _, c := range msg.ToolCalls {
		fmt.Println(c.Name, string(c.Arguments))
	}
	// Output:
	// tool_use
	// bash {"command": "ls /tmp"}
	// bash {"command": "rm -r /tmp/logs"}
}
