package hooks

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tollgate-ai/tollgate/hooks/client"
)

// Agent is a coding agent whose hooks tollgate takes (see package
// client, which the agent's command hook is).
type Agent = client.Agent

// The agents tollgate knows.
const (
	ClaudeCode = client.ClaudeCode
	Codex      = client.Codex
)

// Agents are the agents tollgate knows.
var Agents = client.Agents

// ParseAgent reads an agent's name as the command line and the URL give
// it.
func ParseAgent(s string) (Agent, error) { return client.ParseAgent(s) }

// The hook events tollgate acts on.
const (
	EventPreToolUse         = client.EventPreToolUse
	EventPostToolUse        = client.EventPostToolUse
	EventPostToolUseFailure = client.EventPostToolUseFailure
)

// payload is what an agent's hook sends (the fields tollgate reads).
type payload struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	PermissionMode string          `json:"permission_mode"`
	Event          string          `json:"hook_event_name"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolUseID      string          `json:"tool_use_id"`
	// PostToolUse and PostToolUseFailure.
	ToolResponse json.RawMessage `json:"tool_response"`
	Error        string          `json:"error"`
	IsInterrupt  bool            `json:"is_interrupt"`
	DurationMS   *int64          `json:"duration_ms"`
	// Codex's.
	TurnID string `json:"turn_id"`
	Model  string `json:"model"`
}

// maxID bounds a session's and a call's id.
const maxID = 200

// parsePayload reads a hook's payload, refusing one tollgate cannot act
// on safely: every error says what is wrong in the hook's terms.
func parsePayload(body []byte) (*payload, error) {
	var p payload
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("the hook's input is not the JSON object an agent sends: %v", err)
	}
	if dec.More() {
		return nil, errors.New("the hook's input holds more than one JSON value")
	}
	switch p.Event {
	case EventPreToolUse, EventPostToolUse, EventPostToolUseFailure:
	case "":
		return nil, errors.New("the hook's input has no hook_event_name")
	default:
		return &p, nil // an event tollgate does not act on
	}
	switch {
	case p.SessionID == "" || len(p.SessionID) > maxID:
		return nil, fmt.Errorf("the hook's input has no usable session_id (%d bytes)", len(p.SessionID))
	case p.ToolUseID == "" || len(p.ToolUseID) > maxID || !printable(p.ToolUseID):
		return nil, errors.New("the hook's input has no usable tool_use_id")
	case !validToolName(p.ToolName):
		return nil, fmt.Errorf("the hook's input has no usable tool_name (%q)", clip(p.ToolName, 40))
	}
	if p.Event == EventPreToolUse {
		var in map[string]json.RawMessage
		if err := json.Unmarshal(p.ToolInput, &in); err != nil || in == nil {
			return nil, fmt.Errorf("the tool_input of %s is not a JSON object", p.ToolName)
		}
	}
	return &p, nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' {
			return false
		}
	}
	return true
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// sessionThread is the thread of an agent's session: the agent's name, a
// colon and the session id (hashed when it is not a plain id).
func sessionThread(a Agent, session string) string {
	plain := len(session) <= 100
	for i := 0; i < len(session) && plain; i++ {
		c := session[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
	}
	if !plain {
		sum := sha256.Sum256([]byte(session))
		session = "h" + hex.EncodeToString(sum[:12])
	}
	return string(a) + ":" + session
}

// laneThread is the session's thread number n (1: the session thread
// itself): calls made while every earlier thread of the session waits
// for a person, or once they hold their share of calls, go on the next.
func laneThread(base string, n int) string {
	if n <= 1 {
		return base
	}
	return base + "~" + strconv.Itoa(n)
}

// IsThread reports whether a thread is a coding agent's session (or one
// of its further threads): its runs relay the agent's calls, and it
// takes no messages from anyone else.
func IsThread(id string) bool {
	for _, a := range Agents {
		if strings.HasPrefix(id, string(a)+":") {
			return true
		}
	}
	return false
}

// verdict is the answer to a PreToolUse hook, before it is put in the
// agent's words.
type verdict struct {
	decision string // allow, deny or ask
	reason   string
	// input, when set, replaces the call's input (an edit, a confined
	// command).
	input json.RawMessage
}

// render is the verdict as the agent's hook prints it (or its http hook
// returns it). original is the call's input.
func render(a Agent, v verdict, original json.RawMessage) []byte {
	return client.Answer(a, v.decision, v.reason, v.input, original)
}

// Refusal is client.Refusal: a deny, in the agent's words, of a hook
// tollgate cannot serve.
func Refusal(a Agent, reason string) []byte { return client.Refusal(a, reason) }

// emptyOutput is the answer to an event that needs none.
var emptyOutput = []byte("{}")
