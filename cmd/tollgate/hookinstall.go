package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/hooks"
	"github.com/tollgate-ai/tollgate/hooks/client"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

const hookInstallHelp = `usage: tollgate hook install claude-code|codex [--project DIR | --user] [--server URL] [--token-file FILE] [--timeout D] [--http] [--confine] [--on-error deny|ask] [--dry-run]

Adds tollgate's hooks to a coding agent's settings, so that every tool
call it makes is decided by the tollgate serve at --server: PreToolUse
(decide the call), PostToolUse and, for Claude Code, PostToolUseFailure
(record what the call gave back). What the settings hold already is kept;
tollgate's hooks from an earlier install are replaced. The change is shown
as a diff; installing twice changes nothing.

  claude-code   --project DIR (default: .): DIR/.claude/settings.json;
                --user: ~/.claude/settings.json ($CLAUDE_CONFIG_DIR)
  codex         $CODEX_HOME/hooks.json (~/.codex/hooks.json); Codex runs
                a new hook only once you trust it: review it in codex
                (/hooks)

The hook is this tollgate binary run as 'tollgate hook AGENT' (a process a
call, which denies when the server cannot be reached), or with --http
(Claude Code only) an http hook that posts to the server itself, with the
token from $TOLLGATE_HOOK_TOKEN in Claude Code's environment: no process a
call, but when the server cannot be reached Claude Code decides by its own
permission rules, which may allow the call.

--timeout is how long the agent lets the hook wait for a person: a
question lasts no longer. The server is asked for the longest its policy
lets a question wait, and a shorter --timeout is said.

examples:
  tollgate hook install claude-code
  tollgate hook install claude-code --user --server http://127.0.0.1:8080 --timeout 15m
  tollgate hook install claude-code --http --dry-run
  tollgate hook install codex --token-file ~/.config/tollgate/hook.token --confine
`

const hookUninstallHelp = `usage: tollgate hook uninstall claude-code|codex [--project DIR | --user] [--dry-run]

Takes tollgate's hooks (command and http) out of the agent's settings,
keeping everything else, and shows the diff. A file that held nothing
else is removed.

examples:
  tollgate hook uninstall claude-code
  tollgate hook uninstall codex
`

// postHookTimeout is how long a hook that records a result may take.
const postHookTimeout = 30 * time.Second

// installTarget is where an agent's hooks go.
type installTarget struct {
	agent hooks.Agent
	file  string
	user  bool
}

func installFlags(fs *flagSet) (project *string, user, dryRun *bool) {
	project = fs.String("project", "", "claude-code: the project `directory` whose .claude/settings.json gets the hooks (default: the current directory), e.g. --project ~/src/app")
	user = fs.Bool("user", false, "claude-code: your user settings, ~/.claude/settings.json, for every project, e.g. --user")
	dryRun = fs.Bool("dry-run", false, "show the diff, change nothing, e.g. --dry-run")
	return
}

// targetOf says which file an agent's hooks go to.
func targetOf(a hooks.Agent, project string, user, projectGiven bool) (installTarget, error) {
	t := installTarget{agent: a, user: user}
	switch a {
	case hooks.ClaudeCode:
		if user && projectGiven {
			return t, errors.New("give --project or --user, not both")
		}
		if user {
			dir, err := agentDir("CLAUDE_CONFIG_DIR", ".claude")
			t.file = filepath.Join(dir, "settings.json")
			return t, err
		}
		if project == "" {
			project = "."
		}
		abs, err := filepath.Abs(project)
		if err != nil {
			return t, err
		}
		t.file = filepath.Join(abs, ".claude", "settings.json")
	case hooks.Codex:
		if projectGiven {
			return t, errors.New("no --project for codex: it reads hooks from $CODEX_HOME/hooks.json only")
		}
		dir, err := agentDir("CODEX_HOME", ".codex")
		t.file = filepath.Join(dir, "hooks.json")
		t.user = true
		return t, err
	}
	return t, nil
}

// agentDir is an agent's configuration directory: $env, else sub in the
// home directory.
func agentDir(env, sub string) (string, error) {
	if dir := os.Getenv(env); dir != "" {
		return dir, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("$%s is not set and your home directory is not known (%v)", env, err)
	}
	return filepath.Join(home, sub), nil
}

func hookInstall(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("hook install", hookInstallHelp, stderr)
	fs.interspersed = true
	var f hookFlags
	f.register(fs, 10*time.Minute)
	project, user, dryRun := installFlags(fs)
	useHTTP := fs.Bool("http", false, "claude-code: an http hook that posts to the server (token from $TOLLGATE_HOOK_TOKEN) instead of a command, e.g. --http")
	confine := fs.Bool("confine", false, "run each Bash call the policy allows under tollgate sandbox exec with the profile its rule requires (read-only when none), where this machine's kernel enforces it (checked now); where it does not, such calls are asked of a person, e.g. --confine")
	a, code := parseAgentCommand(fs, args, stdout, &f)
	if a == "" {
		return code
	}
	t, err := targetOf(a, *project, *user, given(fs, "project"))
	if err != nil {
		return fs.usageError("%v", err)
	}
	if *confine {
		exe, err := os.Executable()
		if err != nil {
			return fail(stderr, "hook install", fmt.Errorf("--confine: where this tollgate binary is: %w", err))
		}
		f.ConfineExe = exe
		if err := bash.Check().Enforceable(bash.ReadOnly); err != nil {
			f.ConfineWhyNot = err.Error()
			fmt.Fprintf(stdout, "note: this machine's kernel does not enforce the read-only profile (%v): the calls the policy allows will be asked of a person instead\n", err)
		}
	}
	if *useHTTP && (a != hooks.ClaudeCode || f.ConfineExe != "" || f.OnError != "deny") {
		return fs.usageError("--http is for claude-code, without --confine or --on-error (the server answers it: a failed request lets Claude Code's own rules decide)")
	}
	exe, err := hookExe()
	if err != nil {
		return fail(stderr, "hook install", err)
	}
	if f.TokenFile == "" {
		// Named in the hook, so that a TOLLGATE_TOKEN in the agent's
		// environment (a reviewer's, for tollgate questions) is not sent
		// instead.
		if def := client.DefaultTokenFile(); def != "" {
			if _, err := os.Stat(def); err == nil {
				f.TokenFile = def
			}
		}
	}
	handlers := map[string]*jsonObject{}
	for _, ev := range hookEvents(a) {
		if *useHTTP {
			handlers[ev] = httpHandler(&f, a, ev)
		} else {
			handlers[ev] = commandHandler(exe, &f, a, ev)
		}
	}
	status := editSettings(t, stdout, stderr, *dryRun, func(doc *jsonObject) { installHooks(doc, a, handlers) })
	if status != 0 {
		return status
	}
	checkHookTimeout(ctx, &f, stdout)
	if *useHTTP {
		fmt.Fprintln(stdout, "Claude Code sends the token from $TOLLGATE_HOOK_TOKEN: set it (a client token) in the environment claude starts in. If the server cannot be reached, Claude Code decides by its own permission rules.")
	}
	if a == hooks.Codex {
		fmt.Fprintln(stdout, "Codex runs a new or changed hook only once you trust it: start codex and review it (/hooks), then trust it. (codex exec --dangerously-bypass-hook-trust skips that review: for automation that vets its hooks itself.)")
	}
	fmt.Fprintf(stdout, "check it end to end: tollgate hook test %s --server %s\n", a, f.Server)
	return 0
}

func hookUninstall(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("hook uninstall", hookUninstallHelp, stderr)
	fs.interspersed = true
	project, user, dryRun := installFlags(fs)
	a, code := parseAgentCommand(fs, args, stdout, nil)
	if a == "" {
		return code
	}
	t, err := targetOf(a, *project, *user, given(fs, "project"))
	if err != nil {
		return fs.usageError("%v", err)
	}
	if _, err := os.Stat(t.file); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stdout, "%s does not exist: no hooks to take out\n", t.file)
		return 0
	}
	return editSettings(t, stdout, stderr, *dryRun, func(doc *jsonObject) { installHooks(doc, a, nil) })
}

// parseAgentCommand parses the flags of a command whose one argument is
// the agent (checking f too, when given): the agent, or "" and the exit
// status.
func parseAgentCommand(fs *flagSet, args []string, stdout io.Writer, f *hookFlags) (hooks.Agent, int) {
	if code, done := parseFlags(fs, args, stdout); done {
		return "", code
	}
	if f != nil {
		if code := f.check(fs); code >= 0 {
			return "", code
		}
	}
	if fs.NArg() != 1 {
		return "", fs.usageError("want the agent: claude-code or codex")
	}
	a, err := hooks.ParseAgent(fs.Arg(0))
	if err != nil {
		return "", fs.usageError("%v", err)
	}
	return a, -1
}

// hookEvents are the events tollgate's hooks take, per agent.
func hookEvents(a hooks.Agent) []string {
	if a == hooks.Codex {
		return []string{hooks.EventPreToolUse, hooks.EventPostToolUse}
	}
	return []string{hooks.EventPreToolUse, hooks.EventPostToolUse, hooks.EventPostToolUseFailure}
}

// hookSeconds is the agent's timeout of a hook, in whole seconds: a
// PreToolUse hook gets --timeout, one that records a result less.
func hookSeconds(f *hookFlags, event string) int {
	if event == hooks.EventPreToolUse {
		return int(f.Timeout / time.Second)
	}
	return int(postHookTimeout / time.Second)
}

func commandHandler(exe string, f *hookFlags, a hooks.Agent, event string) *jsonObject {
	secs := hookSeconds(f, event)
	cmd := shellWord(exe) + " " + string(a) + " --server " + shellWord(f.Server) + fmt.Sprintf(" --timeout %ds", secs)
	if filepath.Base(exe) != hookBinary {
		cmd = shellWord(exe) + " hook " + strings.TrimPrefix(cmd, shellWord(exe)+" ")
	}
	if f.TokenFile != "" {
		p, err := expandHome(f.TokenFile)
		if err == nil {
			p, _ = filepath.Abs(p)
		}
		cmd += " --token-file " + shellWord(p)
	}
	if f.OnError != "deny" {
		cmd += " --on-error " + f.OnError
	}
	if f.ConfineExe != "" && event == hooks.EventPreToolUse {
		cmd += " --confine-exe " + shellWord(f.ConfineExe)
		if f.ConfineWhyNot != "" {
			cmd += " --confine-why-not " + shellWord(f.ConfineWhyNot)
		}
	}
	return newObject("type", "command", "command", cmd, "timeout", json.Number(fmt.Sprint(secs)))
}

// hookBinary is the small command hook: the hook's client alone, which
// starts in a fraction of the time the whole tollgate binary takes (go
// install ./cmd/tollgate-hook; install uses it when it is beside tollgate
// or on PATH).
const hookBinary = "tollgate-hook"

// hookExe is the command hook's binary: tollgate-hook beside this
// tollgate or on PATH, else this tollgate (tollgate hook AGENT).
func hookExe() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("where this tollgate binary is: %w", err)
	}
	beside := filepath.Join(filepath.Dir(exe), hookBinary)
	if st, err := os.Stat(beside); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
		return beside, nil
	}
	if p, err := exec.LookPath(hookBinary); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs, nil
		}
	}
	return exe, nil
}

func httpHandler(f *hookFlags, a hooks.Agent, event string) *jsonObject {
	secs := hookSeconds(f, event)
	url := strings.TrimSuffix(f.Server, "/") + "/v1/hooks/" + string(a) + fmt.Sprintf("?wait=%d", secs)
	return newObject("type", "http", "url", url, "timeout", json.Number(fmt.Sprint(secs)),
		"headers", newObject("Authorization", "Bearer $TOLLGATE_HOOK_TOKEN"),
		"allowedEnvVars", []any{"TOLLGATE_HOOK_TOKEN"})
}

// isTollgateHook reports whether a handler of an agent's settings is one
// tollgate installed for the agent: a command running 'tollgate hook
// AGENT' or 'tollgate-hook AGENT', or an http hook posting to
// /v1/hooks/AGENT.
func isTollgateHook(h any, a hooks.Agent) bool {
	o, ok := h.(*jsonObject)
	if !ok {
		return false
	}
	switch t, _ := o.get("type").(string); t {
	case "command":
		cmd, _ := o.get("command").(string)
		for _, mark := range []string{" hook ", hookBinary + " ", hookBinary + "' "} {
			if strings.Contains(cmd, mark+string(a)+" ") {
				return true
			}
		}
		return false
	case "http":
		url, _ := o.get("url").(string)
		return strings.Contains(url, "/v1/hooks/"+string(a))
	}
	return false
}

// installHooks takes tollgate's hooks for the agent out of the settings'
// "hooks" and, when handlers is not nil, adds them back, one matcher
// group ("*") per event, after the user's own.
func installHooks(doc *jsonObject, a hooks.Agent, handlers map[string]*jsonObject) {
	hk, _ := doc.get("hooks").(*jsonObject)
	if hk == nil {
		if handlers == nil {
			return
		}
		hk = newObject()
		doc.set("hooks", hk)
	}
	for _, ev := range append([]string(nil), hk.keys...) {
		groups, ok := hk.get(ev).([]any)
		if !ok {
			continue
		}
		var kept []any
		for _, g := range groups {
			gobj, ok := g.(*jsonObject)
			if !ok {
				kept = append(kept, g)
				continue
			}
			hs, ok := gobj.get("hooks").([]any)
			if !ok {
				kept = append(kept, g)
				continue
			}
			var left []any
			for _, h := range hs {
				if !isTollgateHook(h, a) {
					left = append(left, h)
				}
			}
			if len(left) == 0 {
				continue // a group that held only tollgate's
			}
			gobj.set("hooks", left)
			kept = append(kept, gobj)
		}
		if len(kept) == 0 {
			hk.remove(ev)
		} else {
			hk.set(ev, kept)
		}
	}
	for _, ev := range hookEvents(a) {
		h := handlers[ev]
		if h == nil {
			continue
		}
		groups, _ := hk.get(ev).([]any)
		hk.set(ev, append(groups, newObject("matcher", "*", "hooks", []any{h})))
	}
	if len(hk.keys) == 0 {
		doc.remove("hooks")
	}
}

// editSettings reads the settings file (none: empty), edits it, shows
// the diff and writes it (unless dryRun), keeping its mode.
func editSettings(t installTarget, stdout, stderr io.Writer, dryRun bool, edit func(*jsonObject)) int {
	const name = "hook install"
	old, err := os.ReadFile(t.file)
	mode := os.FileMode(0o644)
	switch {
	case errors.Is(err, os.ErrNotExist):
		old = nil
	case err != nil:
		return fail(stderr, name, err)
	default:
		if st, err := os.Stat(t.file); err == nil {
			mode = st.Mode().Perm()
		}
	}
	doc := newObject()
	if len(bytes.TrimSpace(old)) > 0 {
		v, err := decodeOrdered(old)
		if err != nil {
			return fail(stderr, name, fmt.Errorf("%s is not JSON (%v): fix it first, or move it away", t.file, err))
		}
		o, ok := v.(*jsonObject)
		if !ok {
			return fail(stderr, name, fmt.Errorf("%s holds a JSON %s, not the object of settings", t.file, jsonKind(v)))
		}
		doc = o
		if hk := doc.get("hooks"); hk != nil {
			if _, ok := hk.(*jsonObject); !ok {
				return fail(stderr, name, fmt.Errorf("%s: \"hooks\" is not an object", t.file))
			}
		}
	}
	edit(doc)
	updated := encodeOrdered(doc)
	if len(old) > 0 && string(old) == string(updated) || len(old) == 0 && len(doc.keys) == 0 {
		fmt.Fprintf(stdout, "%s: nothing to change\n", t.file)
		return 0
	}
	if len(doc.keys) == 0 {
		// Nothing but tollgate's hooks was in it (an uninstall): the file
		// goes, rather than stay behind as {} that no one wrote.
		fmt.Fprintf(stdout, "--- %s\n+++ /dev/null\n%s", t.file, lineDiff(string(old), ""))
		if dryRun {
			fmt.Fprintln(stdout, "(--dry-run: nothing removed)")
			return 0
		}
		if err := os.Remove(t.file); err != nil {
			return fail(stderr, name, err)
		}
		fmt.Fprintf(stdout, "removed %s: it held nothing but tollgate's hooks\n", t.file)
		return 0
	}
	fmt.Fprintf(stdout, "--- %s\n+++ %s\n%s", t.file, t.file, lineDiff(string(old), string(updated)))
	if dryRun {
		fmt.Fprintln(stdout, "(--dry-run: nothing written)")
		return 0
	}
	if err := os.MkdirAll(filepath.Dir(t.file), 0o755); err != nil {
		return fail(stderr, name, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(t.file), ".tollgate-*.json")
	if err != nil {
		return fail(stderr, name, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(updated); err != nil {
		tmp.Close()
		return fail(stderr, name, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fail(stderr, name, err)
	}
	if err := tmp.Close(); err != nil {
		return fail(stderr, name, err)
	}
	if err := os.Rename(tmp.Name(), t.file); err != nil {
		return fail(stderr, name, err)
	}
	fmt.Fprintf(stdout, "wrote %s\n", t.file)
	return 0
}

// checkHookTimeout asks the server how long its questions may wait, and
// says so when the hook would stop waiting first.
func checkHookTimeout(ctx context.Context, f *hookFlags, stdout io.Writer) {
	tok, _ := client.Token(f.TokenFile)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(f.Server, "/")+"/v1/hooks", nil)
	if err != nil {
		return
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	var info struct {
		Max int `json:"max_timeout_seconds"`
	}
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		} else {
			err = json.NewDecoder(resp.Body).Decode(&info)
		}
	}
	if err != nil {
		fmt.Fprintf(stdout, "could not ask %s how long its questions wait (%v): make sure --timeout %s is longer than its hook policy's longest timeout\n", f.Server, err, f.Timeout)
		return
	}
	wait := f.Timeout - client.HookMargin
	if max := time.Duration(info.Max) * time.Second; max > 0 && wait < max {
		fmt.Fprintf(stdout, "warning: the server's hook policy lets a question wait up to %s, but the hook waits %s: questions will be cut to that, and denied when it passes. Give --timeout %s or more to wait as long as the policy says.\n",
			max, wait.Round(time.Second), (max + client.HookMargin + time.Second).Round(time.Second))
	}
}
