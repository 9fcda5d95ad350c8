package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/provider/anthropic"
	"github.com/tollgate-ai/tollgate/provider/openai"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// providerFor turns a --model value into a provider and model:
//
//	demo                       the offline demo model (the default)
//	anthropic:MODEL            the Anthropic Messages API (ANTHROPIC_API_KEY)
//	openai:MODEL               OpenAI or any compatible server (OPENAI_API_KEY,
//	                           OPENAI_BASE_URL, e.g. http://localhost:11434/v1 for Ollama)
func providerFor(spec string) (agent.Provider, agent.Model, error) {
	kind, id, _ := strings.Cut(spec, ":")
	switch kind {
	case "demo", "":
		return scripted.Demo{}, agent.Model{ID: "demo", Provider: "scripted"}, nil
	case "anthropic":
		if id == "" {
			return nil, agent.Model{}, fmt.Errorf("--model anthropic:MODEL needs a model id, such as anthropic:claude-sonnet-4-6")
		}
		return anthropic.New(nil), agent.Model{ID: id, Provider: "anthropic"}, nil
	case "openai":
		if id == "" {
			return nil, agent.Model{}, fmt.Errorf("--model openai:MODEL needs a model id, such as openai:gpt-4.1 or openai:llama3.1 for Ollama")
		}
		return openai.New(nil), agent.Model{ID: id, Provider: "openai"}, nil
	}
	return nil, agent.Model{}, fmt.Errorf("--model %q: want demo, anthropic:MODEL or openai:MODEL", spec)
}

// credentialProblem says in one line why every call of the model spec
// would fail for want of a key, or "" when nothing is missing. (Without
// it serve started and each message failed later with the SDK's
// several-line error.) OpenAI-compatible servers other than OpenAI's
// (OPENAI_BASE_URL: Ollama, vLLM) may need no key.
func credentialProblem(spec string) string {
	kind, _, _ := strings.Cut(spec, ":")
	switch kind {
	case "anthropic":
		if os.Getenv("ANTHROPIC_API_KEY") == "" && os.Getenv("ANTHROPIC_AUTH_TOKEN") == "" {
			return "ANTHROPIC_API_KEY is not set: every call of " + spec + " will fail until it is"
		}
	case "openai":
		if os.Getenv("OPENAI_API_KEY") == "" && os.Getenv("OPENAI_BASE_URL") == "" {
			return "OPENAI_API_KEY is not set (nor OPENAI_BASE_URL, for a server that needs none): every call of " + spec + " will fail until it is"
		}
	}
	return ""
}
