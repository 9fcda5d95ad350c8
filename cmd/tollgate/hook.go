package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/hooks"
	"github.com/tollgate-ai/tollgate/server"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

func init() {
	register("hook", "guard a coding agent (Claude Code, Codex): its hooks ask tollgate about each tool call", nil,
		subcommand{name: "claude-code", summary: "Claude Code's command hook: reads the hook's input, prints tollgate's answer", run: hookCmd(hooks.ClaudeCode)},
		subcommand{name: "codex", summary: "Codex's command hook: reads the hook's input, prints tollgate's answer", run: hookCmd(hooks.Codex)},
		subcommand{name: "install", summary: "add tollgate's hooks to Claude Code's or Codex's settings", run: hookInstall},
		subcommand{name: "uninstall", summary: "take tollgate's hooks out of an agent's settings", run: hookUninstall},
		subcommand{name: "test", summary: "send a sample call end to end and show what the agent is told", run: hookTest})
}

const hookCmdHelp = `usage: tollgate hook %[1]s [--server URL] [--token-file FILE] [--timeout D] [--on-error deny|ask] [--confine]

%[2]s's command hook (tollgate hook install %[1]s writes it into the
agent's settings): it reads the hook's input on stdin — a tool call the
agent is about to make (PreToolUse), or what one gave back (PostToolUse)
— sends it to a tollgate serve, waits while a person answers, and prints
the answer in the agent's words: allow, deny with the reason the agent's
model reads, or allow an edited call.

It never answers allow by itself: a server it cannot reach, a token it
refuses, an input it cannot read, or no answer before --timeout is a deny
that says why (or, with --on-error ask, the agent's own prompt; Codex has
none, so there it is a deny too). When the server restarts while a person
decides, the hook sends the call again, and the next server finds its
question.

The token: --token-file, else $TOLLGATE_TOKEN, else
~/.config/tollgate/hook.token when it exists; a client token (tollgate
token new --role client): the server refuses one that can answer
questions.

examples:
  tollgate hook %[1]s --server http://127.0.0.1:8080 --timeout 10m < payload.json
  tollgate hook %[1]s --token-file ~/.config/tollgate/hook.token --confine
`

// hookMargin is how long before its agent stops it the hook answers: an
// agent that stops its hook decides by its own rules.
const hookMargin = 2 * time.Second

// maxHookInput bounds what the hook reads on stdin.
const maxHookInput = 16 << 20

// hookFlags are the flags of the hook, install and test.
type hookFlags struct {
	server, tokenFile string
	timeout           time.Duration
	onError           string
	confine           bool
}

func (f *hookFlags) register(fs *flagSet, timeout time.Duration) {
	fs.StringVar(&f.server, "server", envDefault("TOLLGATE_SERVER", "http://127.0.0.1:8080"), "the `URL` of the tollgate serve that decides, e.g. --server http://127.0.0.1:8080 [TOLLGATE_SERVER]")
	fs.StringVar(&f.tokenFile, "token-file", "", "a `file` holding the hook's client token (default: $TOLLGATE_TOKEN, else ~/.config/tollgate/hook.token if it exists), e.g. --token-file ~/.config/tollgate/hook.token")
	fs.DurationVar(&f.timeout, "timeout", timeout, "how long the agent lets the hook run (its hook's timeout): the hook answers before, and a question lasts no longer, e.g. --timeout 10m")
	fs.StringVar(&f.onError, "on-error", "deny", "what the agent is told when tollgate cannot decide: deny, or ask (the agent's own prompt; Codex: deny), e.g. --on-error ask")
	fs.BoolVar(&f.confine, "confine", false, "run each Bash call the policy allows under tollgate sandbox exec with the profile its rule requires (read-only when none), where this machine's kernel enforces it; where it does not, the call is asked of a person, e.g. --confine")
}

func (f *hookFlags) check(fs *flagSet) int {
	switch f.onError {
	case "deny", "ask":
	default:
		return fs.usageError("--on-error %q: want deny or ask", f.onError)
	}
	if f.timeout < 5*time.Second {
		return fs.usageError("--timeout %s: give the hook at least 5s", f.timeout)
	}
	if !strings.HasPrefix(f.server, "http://") && !strings.HasPrefix(f.server, "https://") {
		return fs.usageError("--server %q: want http://HOST:PORT or https://HOST", f.server)
	}
	return -1
}

// token is the hook's token: --token-file, $TOLLGATE_TOKEN, or the
// default file ("" when none: a server in dev mode).
func (f *hookFlags) token() (string, error) {
	file := f.tokenFile
	if file == "" {
		if t := strings.TrimSpace(os.Getenv("TOLLGATE_TOKEN")); t != "" {
			return t, nil
		}
		def, err := expandHome(configFile("hook.token"))
		if err != nil {
			return "", nil
		}
		if _, err := os.Stat(def); err != nil {
			return "", nil
		}
		file = def
	}
	path, err := expandHome(file)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("the hook's token file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// hookClient sends a hook's input to a server.
type hookClient struct {
	agent   hooks.Agent
	url     string
	token   string
	wait    time.Duration
	confine string // the Confine header, "" without --confine
	client  *http.Client
}

func newHookClient(a hooks.Agent, f *hookFlags) (*hookClient, error) {
	tok, err := f.token()
	if err != nil {
		return nil, err
	}
	c := &hookClient{agent: a, url: strings.TrimSuffix(f.server, "/") + "/v1/hooks/" + string(a), token: tok,
		wait: f.timeout - hookMargin, client: &http.Client{}}
	if f.confine {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("--confine: where tollgate is: %w", err)
		}
		conf := hooks.Confine{Exe: exe, Enforced: true}
		r := bash.Check()
		if err := r.Enforceable(bash.ReadOnly); err != nil {
			conf.Enforced, conf.WhyNot = false, err.Error()
		}
		conf.Workspace = r.Enforceable(bash.WorkspaceWrite) == nil
		b, _ := json.Marshal(conf)
		c.confine = string(b)
	}
	return c, nil
}

// send sends the input and returns the server's answer. A call the server
// took and then could not answer (it restarts) is sent again until ctx
// ends; a server that cannot be reached at all is an error at once.
func (c *hookClient) send(ctx context.Context, input []byte) ([]byte, error) {
	reached := false
	backoff := 200 * time.Millisecond
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(input))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		req.Header.Set(server.HookRetryHeader, "1")
		req.Header.Set(server.HookWaitHeader, fmt.Sprint(int(c.wait/time.Second)))
		if c.confine != "" {
			req.Header.Set(server.HookConfineHeader, c.confine)
		}
		resp, err := c.client.Do(req)
		var status int
		var body []byte
		if err == nil {
			status = resp.StatusCode
			body, err = io.ReadAll(io.LimitReader(resp.Body, 64<<20))
			resp.Body.Close()
		}
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("no answer within the hook's %s", c.wait.Round(time.Second))
		case err != nil && !reached:
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				return nil, fmt.Errorf("the tollgate server at %s cannot be reached (%v)", c.url, op.Err)
			}
			return nil, fmt.Errorf("the tollgate server at %s: %v", c.url, err)
		case err == nil && status == http.StatusOK:
			if !json.Valid(body) {
				return nil, fmt.Errorf("the tollgate server at %s answered something that is not JSON", c.url)
			}
			return body, nil
		case err == nil && status != http.StatusServiceUnavailable:
			return nil, fmt.Errorf("the tollgate server at %s answered HTTP %d", c.url, status)
		}
		// The server restarts (503), or went away while the call waited:
		// send the call again, as long as the hook may wait.
		reached = true
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no answer within the hook's %s: the tollgate server did not come back", c.wait.Round(time.Second))
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func hookCmd(a hooks.Agent) runFunc {
	return func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
		fs := newFlagSet("hook "+string(a), fmt.Sprintf(hookCmdHelp, a, a.Title()), stderr)
		var f hookFlags
		f.register(fs, 10*time.Minute)
		if code, done := parseFlagsOnly(fs, args, stdout); done {
			return code
		}
		if code := f.check(fs); code >= 0 {
			return code
		}
		input, err := io.ReadAll(io.LimitReader(stdin, maxHookInput+1))
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
			if event.Event != "" && event.Event != hooks.EventPreToolUse {
				return answer([]byte("{}")) // a result to record: nothing to decide
			}
			return answer(hooks.Unanswered(a, f.onError == "ask", why))
		}
		switch {
		case err != nil:
			return unanswered("the hook's input could not be read: " + err.Error())
		case len(input) > maxHookInput:
			return unanswered("the hook's input is larger than 16 MiB")
		}
		c, err := newHookClient(a, &f)
		if err != nil {
			return unanswered(err.Error())
		}
		ctx, cancel := context.WithTimeout(ctx, c.wait)
		defer cancel()
		out, err := c.send(ctx, input)
		if err != nil {
			return unanswered(err.Error())
		}
		return answer(out)
	}
}

const hookTestHelp = `usage: tollgate hook test claude-code|codex [--server URL] [--token-file FILE]

Sends what the agent's hook would send for a harmless call — Bash running
"ls" in this directory, in a session of its own (claude-code:tollgate-test-...)
— to the server, as the installed hook does, and prints what the agent
would be told. Exit status 0 when the server decided (allow or deny), 1
when it could not be asked (the reason is printed).

examples:
  tollgate hook test claude-code
  tollgate hook test codex --server http://192.168.1.20:8080 --token-file ~/.config/tollgate/hook.token
`

func hookTest(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("hook test", hookTestHelp, stderr)
	fs.interspersed = true
	var f hookFlags
	f.register(fs, 30*time.Second)
	a, code := parseAgentCommand(fs, args, stdout, &f)
	if a == "" {
		return code
	}
	c, err := newHookClient(a, &f)
	if err != nil {
		return fail(stderr, "hook test", err)
	}
	cwd, _ := os.Getwd()
	session := "tollgate-test-" + strings.ToLower(rand.Text()[:8])
	input, _ := json.Marshal(map[string]any{"session_id": session, "cwd": cwd, "hook_event_name": hooks.EventPreToolUse,
		"permission_mode": "default", "tool_name": "Bash", "tool_input": map[string]any{"command": "ls", "description": "List files"},
		"tool_use_id": "toolu_tollgate_test"})
	ctx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	fmt.Fprintf(stdout, "sending Bash \"ls\" (session %s) to %s\n", session, c.url)
	out, err := c.send(ctx, input)
	if err != nil {
		fmt.Fprintf(stdout, "%s would be told: deny: tollgate: %v\n", a.Title(), err)
		return 1
	}
	var v struct {
		H struct {
			Decision string `json:"permissionDecision"`
			Reason   string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
	}
	_ = json.Unmarshal(out, &v)
	fmt.Fprintf(stdout, "%s would be told: %s", a.Title(), v.H.Decision)
	if v.H.Reason != "" {
		fmt.Fprintf(stdout, ": %s", v.H.Reason)
	}
	fmt.Fprintf(stdout, "\nthe call is on thread %s:%s (tollgate threads show %s:%s)\n", a, session, a, session)
	if strings.HasPrefix(v.H.Reason, "tollgate: the hook's token") || strings.HasPrefix(v.H.Reason, "tollgate: a hook signs in") {
		return 1 // refused by the server, not decided by its policy
	}
	return 0
}
