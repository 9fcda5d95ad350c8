package openai_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/provider/openai"
)

// fakeServer stands in for an OpenAI-compatible server, replaying a
// recorded stream.
func fakeServer(recording string) *httptest.Server {
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
	srv := fakeServer("testdata/text.sse")
	defer srv.Close()

	p := openai.New(&openai.Options{APIKey: "sk-...", BaseURL: srv.URL + "/v1"})
	msg, err := p.Complete(context.Background(), &agent.Request{
		Model:    agent.Model{ID: "gpt-4.1"},
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
	// end_turn 19 10
}

// A local model served by Ollama: no key, and the base URL ends in /v1.
func Example_ollama() {
	srv := fakeServer("testdata/ollama_parallel.sse")
	defer srv.Close()

	p := openai.New(&openai.Options{BaseURL: srv.URL + "/v1", Model: "qwen3:8b"}) // http://localhost:11434/v1
	msg, err := p.Complete(context.Background(), &agent.Request{
		Messages: []agent.Message{agent.UserMessage("List files, then delete the temp logs.")},
		Tools:    []agent.ToolSpec{{Name: "bash", Description: "Run a shell command."}},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(msg.StopReason)
	for _, c := range msg.ToolCalls {
		fmt.Println(c.ID, c.Name, string(c.Arguments))
	}
	// Output:
	// tool_use
	// call_k2x8sl1v bash {"command":"ls /tmp"}
	// call_p9q3mz0a bash {"command":"rm -r /tmp/logs"}
}
