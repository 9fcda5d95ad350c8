// Package client is the command hook of coding agents, the side of
// package hooks that runs on the agent's machine once a call: it reads
// the hook's input, posts it to a tollgate serve (POST /v1/hooks/AGENT),
// waits while a person answers, and prints the answer in the agent's
// words. It also holds what both sides of a hook share: the agents, their
// answers, and the request's headers.
//
// It imports only the standard library, so that the process an agent
// starts for every call starts fast (tollgate-hook is this package and a
// main; tollgate hook is the same in the tollgate binary).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
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

// Headers tollgate's command hook sends with a call (an agent's http
// hook sends none of them; ?wait=SECONDS in its URL says how long it
// waits).
const (
	// RetryHeader "1": the caller sends the call again when answered 503
	// (the server restarts), so its question is kept.
	RetryHeader = "X-Tollgate-Hook-Retry"
	// WaitHeader: how many seconds the caller can wait for an answer.
	WaitHeader = "X-Tollgate-Hook-Wait"
	// ConfineHeader: a Confine as JSON: run allowed Bash calls confined
	// on the caller's machine.
	ConfineHeader = "X-Tollgate-Hook-Confine"
)

// Confine is what a command hook says of confinement on its machine:
// where tollgate is, and whether the kernel enforces the read-only
// profile there (tollgate sandbox check, when the hook was installed). A
// Bash call the policy allows is answered with its command under
// `tollgate sandbox exec`; where the profile is not enforced, the call is
// asked of a person instead.
type Confine struct {
	Exe      string `json:"exe"`
	Enforced bool   `json:"enforced"`
	WhyNot   string `json:"why_not,omitempty"`
}

// Answer is a hook's answer to a PreToolUse call, in the agent's words:
// decision is allow, deny or ask; input, when set, replaces the call's
// input (an edit, a confined command); original is the call's own input.
func Answer(a Agent, decision, reason string, input, original json.RawMessage) []byte {
	type output struct {
		HookEventName string          `json:"hookEventName"`
		Decision      string          `json:"permissionDecision"`
		Reason        string          `json:"permissionDecisionReason,omitempty"`
		UpdatedInput  json.RawMessage `json:"updatedInput,omitempty"`
	}
	out := output{HookEventName: EventPreToolUse, Decision: decision, Reason: reason, UpdatedInput: input}
	if a == Codex {
		switch decision {
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
	return Answer(a, "deny", "tollgate: "+reason, nil, nil)
}

// Unanswered is what a command hook prints when it got no decision from
// tollgate (the server cannot be reached, refused the token, ...): a deny
// with the reason, or with ask (the user's --on-error ask) the agent's own
// prompt — but for Codex, which runs a call its hook asks about: there it
// is a deny too.
func Unanswered(a Agent, ask bool, reason string) []byte {
	if !ask {
		return Answer(a, "deny", "tollgate: "+reason, nil, nil)
	}
	return Answer(a, "ask", "tollgate: "+reason+" (tollgate could not decide: you are asked here instead)", nil, nil)
}

// DefaultTokenFile is where a hook's token is kept when no file is
// named: tollgate's configuration directory ($XDG_CONFIG_HOME/tollgate,
// else ~/.config/tollgate), hook.token.
func DefaultTokenFile() string {
	if d := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "tollgate", "hook.token")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".config", "tollgate", "hook.token")
}

// Token is a hook's token: the file's content (~/ is the home directory),
// else $TOLLGATE_TOKEN, else DefaultTokenFile's when it exists; "" when
// none (a server in dev mode).
func Token(file string) (string, error) {
	if file == "" {
		if t := strings.TrimSpace(os.Getenv("TOLLGATE_TOKEN")); t != "" {
			return t, nil
		}
		file = DefaultTokenFile()
		if _, err := os.Stat(file); file == "" || err != nil {
			return "", nil
		}
	}
	if rest, ok := strings.CutPrefix(file, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("the hook's token file %s: the home directory is not known (%v)", file, err)
		}
		file = filepath.Join(home, rest)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("the hook's token file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Client sends a hook's input to a server.
type Client struct {
	Agent Agent
	// Server is the tollgate serve's URL (http://HOST:PORT).
	Server string
	// Token is the hook's client token ("" for a server in dev mode).
	Token string
	// Wait is how long the hook may wait for an answer (a moment less
	// than its agent's timeout of it).
	Wait time.Duration
	// Confine, if set, asks that allowed Bash calls run confined.
	Confine *Confine
	// HTTP is the client to use; nil: a new one.
	HTTP *http.Client
}

// Send sends the input and returns the server's answer. A call the server
// took and then could not answer (it restarts) is sent again until ctx
// ends; a server that cannot be reached at all is an error at once.
func (c *Client) Send(ctx context.Context, input []byte) ([]byte, error) {
	url := strings.TrimSuffix(c.Server, "/") + "/v1/hooks/" + string(c.Agent)
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{}
	}
	var confine string
	if c.Confine != nil {
		b, _ := json.Marshal(c.Confine)
		confine = string(b)
	}
	reached := false
	backoff := 200 * time.Millisecond
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(input))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if c.Token != "" {
			req.Header.Set("Authorization", "Bearer "+c.Token)
		}
		req.Header.Set(RetryHeader, "1")
		req.Header.Set(WaitHeader, fmt.Sprint(int(c.Wait/time.Second)))
		if confine != "" {
			req.Header.Set(ConfineHeader, confine)
		}
		resp, err := hc.Do(req)
		var status int
		var body []byte
		if err == nil {
			status = resp.StatusCode
			body, err = io.ReadAll(io.LimitReader(resp.Body, 64<<20))
			resp.Body.Close()
		}
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("no answer within the hook's %s", c.Wait.Round(time.Second))
		case err != nil && !reached:
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				return nil, fmt.Errorf("the tollgate server at %s cannot be reached (%v)", url, op.Err)
			}
			return nil, fmt.Errorf("the tollgate server at %s: %v", url, err)
		case err == nil && status == http.StatusOK:
			if !json.Valid(body) {
				return nil, fmt.Errorf("the tollgate server at %s answered something that is not JSON", url)
			}
			return body, nil
		case err == nil && status != http.StatusServiceUnavailable:
			return nil, fmt.Errorf("the tollgate server at %s answered HTTP %d", url, status)
		}
		// The server restarts (503), or went away while the call waited:
		// send the call again, as long as the hook may wait.
		reached = true
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no answer within the hook's %s: the tollgate server did not come back", c.Wait.Round(time.Second))
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// MaxInput bounds what the hook reads on stdin: an agent writes whole
// files.
const MaxInput = 16 << 20

// Hook is the command hook: it reads the hook's input from stdin, sends
// it, and prints the answer on stdout; whatever goes wrong is said on
// stderr and answered with a deny (or, with ask, the agent's own prompt)
// for a call, and with nothing to do for a result. setup, run once the
// input is read, makes the client (an error is such a failure too). The
// exit status is always 0: the answer is in what is printed.
func Hook(ctx context.Context, a Agent, ask bool, setup func() (*Client, error), stdin io.Reader, stdout, stderr io.Writer) int {
	input, err := io.ReadAll(io.LimitReader(stdin, MaxInput+1))
	answer := func(out []byte) int {
		stdout.Write(out)
		fmt.Fprintln(stdout)
		return 0
	}
	var event struct {
		Event string `json:"hook_event_name"`
	}
	_ = json.Unmarshal(input, &event)
	unanswered := func(why string) int {
		fmt.Fprintln(stderr, "tollgate hook:", why)
		if event.Event != "" && event.Event != EventPreToolUse {
			return answer([]byte("{}")) // a result to record: nothing to decide
		}
		return answer(Unanswered(a, ask, why))
	}
	switch {
	case err != nil:
		return unanswered("the hook's input could not be read: " + err.Error())
	case len(input) > MaxInput:
		return unanswered("the hook's input is larger than 16 MiB")
	}
	c, err := setup()
	if err != nil {
		return unanswered(err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, c.Wait)
	defer cancel()
	out, err := c.Send(ctx, input)
	if err != nil {
		return unanswered(err.Error())
	}
	return answer(out)
}

// Flags are the command hook's flags (tollgate hook AGENT and
// tollgate-hook AGENT take the same).
type Flags struct {
	Server, TokenFile string
	Timeout           time.Duration
	OnError           string
	// ConfineExe and ConfineWhyNot: what tollgate hook install found of
	// confinement on this machine (the tollgate binary; why the kernel
	// does not enforce the read-only profile, if it does not).
	ConfineExe, ConfineWhyNot string
}

// FlagDefiner defines flags: a *flag.FlagSet.
type FlagDefiner interface {
	StringVar(p *string, name, value, usage string)
	DurationVar(p *time.Duration, name string, value time.Duration, usage string)
}

// Register defines the flags; timeout is --timeout's default.
func (f *Flags) Register(fs FlagDefiner, timeout time.Duration) {
	server := os.Getenv("TOLLGATE_SERVER")
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	fs.StringVar(&f.Server, "server", server, "the `URL` of the tollgate serve that decides, e.g. --server http://127.0.0.1:8080 [TOLLGATE_SERVER]")
	fs.StringVar(&f.TokenFile, "token-file", "", "a `file` holding the hook's client token (default: $TOLLGATE_TOKEN, else ~/.config/tollgate/hook.token if it exists), e.g. --token-file ~/.config/tollgate/hook.token")
	fs.DurationVar(&f.Timeout, "timeout", timeout, "how long the agent lets the hook run (its hook's timeout): the hook answers before, and a question lasts no longer, e.g. --timeout 10m")
	fs.StringVar(&f.OnError, "on-error", "deny", "what the agent is told when tollgate cannot decide: deny, or ask (the agent's own prompt; Codex: deny), e.g. --on-error ask")
	fs.StringVar(&f.ConfineExe, "confine-exe", "", "run each Bash call the policy allows under this tollgate binary's sandbox exec (tollgate hook install --confine sets it), e.g. --confine-exe /usr/local/bin/tollgate")
	fs.StringVar(&f.ConfineWhyNot, "confine-why-not", "", "with --confine-exe: why this machine's kernel does not enforce the read-only profile (the policy's allowed calls are then asked), e.g. --confine-why-not 'no Landlock'")
}

// HookMargin is how long before its agent stops it the hook answers: an
// agent that stops its hook decides by its own rules.
const HookMargin = 2 * time.Second

// Check says what is wrong with the flags, in the user's terms.
func (f *Flags) Check() error {
	switch {
	case f.OnError != "deny" && f.OnError != "ask":
		return fmt.Errorf("--on-error %q: want deny or ask", f.OnError)
	case f.Timeout < 5*time.Second:
		return fmt.Errorf("--timeout %s: give the hook at least 5s", f.Timeout)
	case !strings.HasPrefix(f.Server, "http://") && !strings.HasPrefix(f.Server, "https://"):
		return fmt.Errorf("--server %q: want http://HOST:PORT or https://HOST", f.Server)
	case f.ConfineWhyNot != "" && f.ConfineExe == "":
		return errors.New("--confine-why-not goes with --confine-exe")
	}
	return nil
}

// Client is the client the flags describe, for the agent.
func (f *Flags) Client(a Agent) (*Client, error) {
	tok, err := Token(f.TokenFile)
	if err != nil {
		return nil, err
	}
	c := &Client{Agent: a, Server: f.Server, Token: tok, Wait: f.Timeout - HookMargin}
	if f.ConfineExe != "" {
		c.Confine = &Confine{Exe: f.ConfineExe, Enforced: f.ConfineWhyNot == "", WhyNot: f.ConfineWhyNot}
	}
	return c, nil
}
