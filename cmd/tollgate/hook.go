package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/hooks"
	"github.com/tollgate-ai/tollgate/hooks/client"
)

func init() {
	register("hook", "guard a coding agent (Claude Code, Codex): its hooks ask tollgate about each tool call", nil,
		subcommand{name: "claude-code", summary: "Claude Code's command hook: reads the hook's input, prints tollgate's answer", run: hookCmd(hooks.ClaudeCode)},
		subcommand{name: "codex", summary: "Codex's command hook: reads the hook's input, prints tollgate's answer", run: hookCmd(hooks.Codex)},
		subcommand{name: "install", summary: "add tollgate's hooks to Claude Code's or Codex's settings", run: hookInstall},
		subcommand{name: "uninstall", summary: "take tollgate's hooks out of an agent's settings", run: hookUninstall},
		subcommand{name: "test", summary: "send a sample call end to end and show what the agent is told", run: hookTest})
}

const hookCmdHelp = `usage: tollgate hook %[1]s [--server URL] [--token-file FILE] [--timeout D] [--on-error deny|ask] [--confine-exe TOLLGATE]

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

tollgate-hook %[1]s (go install ./cmd/tollgate-hook) is the same hook
alone in a small binary, which starts several times faster: tollgate hook
install writes it when it is beside tollgate or on PATH.

examples:
  tollgate hook %[1]s --server http://127.0.0.1:8080 --timeout 10m < payload.json
  tollgate hook %[1]s --token-file ~/.config/tollgate/hook.token
`

// hookFlags are the flags of the hook, install and test.
type hookFlags struct {
	client.Flags
}

func (f *hookFlags) register(fs *flagSet, timeout time.Duration) { f.Flags.Register(fs, timeout) }

func (f *hookFlags) check(fs *flagSet) int {
	if err := f.Flags.Check(); err != nil {
		return fs.usageError("%v", err)
	}
	return -1
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
		return client.Hook(ctx, a, f.OnError == "ask", func() (*client.Client, error) { return f.Client(a) }, stdin, stdout, stderr)
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
	c, err := f.Client(a)
	if err != nil {
		return fail(stderr, "hook test", err)
	}
	cwd, _ := os.Getwd()
	session := "tollgate-test-" + strings.ToLower(rand.Text()[:8])
	input, _ := json.Marshal(map[string]any{"session_id": session, "cwd": cwd, "hook_event_name": hooks.EventPreToolUse,
		"permission_mode": "default", "tool_name": "Bash", "tool_input": map[string]any{"command": "ls", "description": "List files"},
		"tool_use_id": "toolu_tollgate_test"})
	ctx, cancel := context.WithTimeout(ctx, c.Wait)
	defer cancel()
	fmt.Fprintf(stdout, "sending Bash \"ls\" (session %s) to %s\n", session, c.Server)
	out, err := c.Send(ctx, input)
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
