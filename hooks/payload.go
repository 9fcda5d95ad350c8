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
)

// Agent is a coding agent whose hooks tollgate takes.
type Agent string

// The agents tollgate knows.
const (
	// ClaudeCode is Anthropic's Claude Code: PreToolUse, PostToolUse and
	// PostToolUseFailure hooks, command or http, in .claude/settings.json.
	ClaudeCode Agent = "claude-code"
	// Codex is OpenAI's Codex CLI: PreToolUse and PostToolUse command
	// hooks in $CODEX_HOME/hooks.json, for its shell tool (Bash). It takes
	// allow only with updatedInput, and has no ask.
	Codex Agent = "codex"
)

// Agents are the agents tollgate knows, in the order help lists them.
var Agents = []Agent{ClaudeCode, Codex}

// ParseAgent reads an agent's name as the command line and the URL give
// it.
func ParseAgent(s string) (Agent, error) {
	for _, a := range Agents {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("unknown coding agent %q: want claude-code or codex", s)
}

// Title is the agent's name as people write it.
func (a Agent) Title() string {
	switch a {
	case ClaudeCode:
		return "Claude Code"
	case Codex:
		return "Codex"
	}
	return string(a)
}

// The hook events tollgate acts on.
const (
	EventPreToolUse         = "PreToolUse"
	EventPostToolUse        = "PostToolUse"
	EventPostToolUseFailure = "PostToolUseFailure"
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

type preOutput struct {
	HookEventName string          `json:"hookEventName"`
	Decision      string          `json:"permissionDecision"`
	Reason        string          `json:"permissionDecisionReason,omitempty"`
	UpdatedInput  json.RawMessage `json:"updatedInput,omitempty"`
}

// render is the verdict as the agent's hook prints it (or its http hook
// returns it). original is the call's input.
func (a Agent) render(v verdict, original json.RawMessage) []byte {
	out := preOutput{HookEventName: EventPreToolUse, Decision: v.decision, Reason: v.reason, UpdatedInput: v.input}
	if a == Codex {
		switch v.decision {
		case "ask":
			// Codex 0.169 runs the call when a hook says ask: never that.
			out.Decision = "deny"
			out.Reason += " (Codex cannot ask its user from a hook, so the call is denied)"
		case "allow":
			// It takes allow only with the input to run (a bare allow is
			// reported as a failed hook, and the call runs anyway): the
			// input the policy saw.
			if out.UpdatedInput == nil {
				out.UpdatedInput = original
			}
			out.Reason = ""
		}
	}
	b, _ := json.Marshal(map[string]any{"hookSpecificOutput": out})
	return b
}

// Refusal is the answer to a hook tollgate cannot serve (the caller's
// token, the agent's name, the request itself): a deny in the agent's
// words, which an agent obeys. Any other answer (an HTTP error status, a
// body it cannot read) lets the agent fall back on its own permission
// rules, which may allow the call.
func Refusal(a Agent, reason string) []byte {
	if a == "" {
		a = ClaudeCode
	}
	return a.render(verdict{decision: "deny", reason: "tollgate: " + reason}, nil)
}

// Unanswered is what a command hook prints when it got no decision from
// tollgate (the server cannot be reached, refused the token, ...): a deny
// with the reason, or with ask (the user's --on-error ask) the agent's own
// prompt — but for Codex, which runs a call its hook asks about: there it
// is a deny too.
func Unanswered(a Agent, ask bool, reason string) []byte {
	v := verdict{decision: "deny", reason: "tollgate: " + reason}
	if ask {
		v.decision = "ask"
		v.reason += " (tollgate could not decide: you are asked here instead)"
	}
	return a.render(v, nil)
}

// emptyOutput is the answer to an event that needs none.
var emptyOutput = []byte("{}")
