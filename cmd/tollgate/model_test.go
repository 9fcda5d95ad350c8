package main

import (
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/providertest"
)

// An OpenAI-compatible server (as Ollama serves) drives `tollgate run`: the
// model asks for a command, the terminal denies it, and the second request
// carries the reviewer's reason.
func TestRunWithAnOpenAICompatibleServer(t *testing.T) {
	chunk := func(delta string, finish string) string {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama3.1","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}` + "\n\n"
	}
	toolTurn := chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"bash","arguments":""}}]}`, "") +
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"cmd\":\"rm -r /tmp/x\"}"}}]}`, "") +
		chunk(`{}`, "tool_calls") + "data: [DONE]\n\n"
	textTurn := chunk(`{"role":"assistant","content":"Understood, I left it."}`, "") + chunk(`{}`, "stop") + "data: [DONE]\n\n"
	srv := providertest.New(t, providertest.SSE(toolTurn), providertest.SSE(textTurn))
	t.Setenv("OPENAI_BASE_URL", srv.URL+"/v1")
	t.Setenv("OPENAI_API_KEY", "")

	code, out, errOut := runCLI(t, "d\nnot on my machine\n", "run", "--model", "openai:llama3.1", "--dir", t.TempDir(), "clean up")
	if code != 0 || !strings.Contains(out, "assistant:\n  │ Understood, I left it.") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	second := srv.Request(1).JSON(t)
	msgs, _ := second["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	if last["role"] != "tool" || last["tool_call_id"] != "call_a" || !strings.Contains(last["content"].(string), "not on my machine") {
		t.Fatalf("the model was not told the reason: %v", last)
	}
	if code, _, errOut := runCLI(t, "", "run", "--model", "gemini", "x"); code != 2 || !strings.Contains(errOut, "want demo, anthropic:MODEL or openai:MODEL") {
		t.Fatalf("bad model: %d %s", code, errOut)
	}
}
