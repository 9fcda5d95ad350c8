package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/hooks"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/server"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

func init() {
	register("sandbox", "report what the kernel enforces on the bash tool's commands, or run one confined", nil,
		subcommand{name: "check", summary: "report the Landlock ABI, the namespaces and each profile's enforcement", run: sandboxCheck},
		subcommand{name: "exec", summary: "run a shell command under a sandbox profile, as the bash tool would", run: sandboxExec})
}

const sandboxExecHelp = `usage: tollgate sandbox exec [--profile read-only|workspace-write] [--timeout D] [--env NAMES] -- COMMAND [ARGS...]

Runs a shell command (one argument: a command string for bash -c; more:
a command and its arguments) in the current directory under a sandbox
profile, confined by the kernel exactly as the bash tool confines what a
policy allows: under read-only it reads the working directory and the
system's directories, writes nothing but a private TMPDIR, reaches no
network and sees only PATH, HOME, LANG and TERM of the environment. Its
output goes to this command's, and its exit status is this command's.
Where the kernel cannot enforce the profile (tollgate sandbox check),
nothing runs and the exit status is 126.

tollgate hook claude-code --confine answers an allowed Bash call with its
command under this.

examples:
  tollgate sandbox exec -- 'ls -la | head'
  tollgate sandbox exec --profile workspace-write --timeout 10m -- make test
  tollgate sandbox exec --env GOPATH,GOFLAGS -- go vet ./...
`

func sandboxExec(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("sandbox exec", sandboxExecHelp, stderr)
	profile := fs.String("profile", string(bash.ReadOnly), "the sandbox `profile`: read-only or workspace-write")
	timeout := fs.Duration("timeout", 10*time.Minute, "the command's time limit: it is killed, all it started too, when it passes")
	env := fs.String("env", "", "comma-separated environment `variables` the command keeps besides PATH, HOME, LANG and TERM")
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	p, err := bash.ParseProfile(*profile)
	if err != nil || p == bash.Unconfined {
		return fs.usageError("--profile %q: want read-only or workspace-write", *profile)
	}
	words := fs.Args()
	if len(words) == 0 {
		return fs.usageError("no command: give it after --")
	}
	cmdline := words[0]
	if len(words) > 1 {
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = hooks.ShellQuote(w)
		}
		cmdline = strings.Join(quoted, " ")
	}
	dir, err := os.Getwd()
	if err != nil {
		return fail(stderr, "sandbox exec", err)
	}
	opts := &bash.Options{Dir: dir, Profile: p, Timeout: *timeout, Stdout: stdout, Stderr: stderr,
		Masked: statePaths(defaultStore(), configFile("hook.token"), configFile("tokens.yaml"))}
	for _, name := range strings.Split(*env, ",") {
		if name = strings.TrimSpace(name); name != "" {
			opts.Env = append(opts.Env, name)
		}
	}
	if err := bash.Check().Enforceable(p); err != nil {
		fmt.Fprintf(stderr, "tollgate sandbox exec: not run: %v\n", err)
		return 126
	}
	res, err := bash.Run(ctx, opts, cmdline)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate sandbox exec: %v\n", err)
		if res.ExitCode > 0 {
			return res.ExitCode
		}
		return 126
	}
	return res.ExitCode
}

const sandboxCheckHelp = `usage: tollgate sandbox check [--json]

Reports the kernel's Landlock ABI, the namespaces the bash tool's helper
can enter, whether each sandbox profile is enforced, and what is and is
not enforced on a confined command. "helper:" is the binary started for
each command: tollgate-sandbox next to tollgate (go install ./cmd/...
installs both), or else tollgate itself, re-executed, which is as
confining but slower to start, and the line below says why. A policy rule that requires a profile
this machine cannot enforce asks instead of allowing. Exit status 1 when
read-only or workspace-write is not enforced.

examples:
  tollgate sandbox check
  tollgate sandbox check --json | jq .profiles
`

func sandboxCheck(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("sandbox check", sandboxCheckHelp, stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if code, done := parseFlagsOnly(fs, args, stdout); done {
		return code
	}
	r := bash.Check()
	if *asJSON {
		enforced, not := r.Enforced()
		profiles := map[string]string{}
		for _, p := range bash.Profiles {
			profiles[string(p)] = "enforced"
			if err := r.Enforceable(p); err != nil {
				profiles[string(p)] = err.Error()
			}
		}
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			bash.Report
			Profiles    map[string]string `json:"profiles"`
			Enforced    []string          `json:"enforced"`
			NotEnforced []string          `json:"not_enforced"`
		}{r, profiles, enforced, not})
	} else if err := r.Write(stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if r.Enforceable(bash.ReadOnly) != nil || r.Enforceable(bash.WorkspaceWrite) != nil {
		return 1
	}
	return 0
}

// sandboxFlags are the bash tool's confinement flags of serve and run.
type sandboxFlags struct {
	profile string
	env     string
}

// register adds the flags to fs (a *flagSet or a *flag.FlagSet), each
// with an example.
func (f *sandboxFlags) register(fs flagDefiner) {
	fs.StringVar(&f.profile, "sandbox", envDefault("TOLLGATE_SANDBOX", string(bash.WorkspaceWrite)),
		"the bash tool's sandbox `profile` for what a person approves and what rules allow without requiring one: read-only, workspace-write or unconfined; a rule's sandbox: can only make it stricter, e.g. --sandbox read-only [TOLLGATE_SANDBOX]")
	fs.StringVar(&f.env, "sandbox-env", envDefault("TOLLGATE_SANDBOX_ENV", ""),
		"comma-separated environment `variables` a confined command keeps besides PATH, HOME, LANG and TERM, e.g. --sandbox-env GOPATH,GOFLAGS [TOLLGATE_SANDBOX_ENV]")
}

// options returns the bash tool's options; decide, if not nil, gives the
// profile the policy requires of each call.
func (f *sandboxFlags) options(dir string, opts bash.Options, decide func(context.Context, json.RawMessage) (string, error)) (*bash.Options, error) {
	p, err := bash.ParseProfile(f.profile)
	if err != nil {
		return nil, err
	}
	opts.Dir, opts.Profile = dir, p
	for _, name := range strings.Split(f.env, ",") {
		if name = strings.TrimSpace(name); name != "" {
			opts.Env = append(opts.Env, name)
		}
	}
	if decide != nil {
		opts.Decide = func(ctx context.Context, args json.RawMessage) (bash.Profile, error) {
			s, err := decide(ctx, args)
			return bash.Profile(s), err
		}
	}
	return &opts, nil
}

// startupLine says, once at start-up, what the kernel enforces on the bash
// tool's commands.
func (f *sandboxFlags) startupLine() string {
	r := bash.Check()
	line := fmt.Sprintf("sandbox: bash tool profile %s; %s", f.profile, r.Summary())
	if p, err := bash.ParseProfile(f.profile); err == nil {
		if err := r.Enforceable(p); err != nil {
			line += "; the tool's profile cannot be enforced: its commands will not run"
		}
	}
	if r.Enforceable(bash.ReadOnly) != nil {
		line += "; rules that require read-only ask instead of allowing"
	}
	if f.unconfined() {
		line += "; UNCONFINED: the bash tool's commands can read and rewrite tollgate's store, policy and tokens, so an approved command can approve its own calls"
	}
	return line
}

// notices are what the page tells every reviewer of the bash tool's
// confinement when it is not what it should be: the tool runs unconfined,
// or its profile cannot be enforced on this machine.
func (f *sandboxFlags) notices() []server.Notice {
	if f.unconfined() {
		return []server.Notice{{Code: "unconfined", Message: "The bash tool runs commands UNCONFINED (--sandbox unconfined): a command you approve can read and rewrite tollgate's store, policy and tokens, and so approve its own calls. Approve only what you would run yourself, outside any sandbox."}}
	}
	p, err := bash.ParseProfile(f.profile)
	if err != nil {
		return nil
	}
	if err := bash.Check().Enforceable(p); err != nil {
		return []server.Notice{{Code: "sandbox", Message: "The kernel sandbox is not available on this machine (" + err.Error() + "): the bash tool's commands do not run, and rules that allow a command only inside the sandbox ask instead."}}
	}
	return nil
}

// unconfined reports whether the bash tool's approved commands run with
// no kernel confinement. (A confined profile the kernel cannot enforce
// runs nothing: the line says so.)
func (f *sandboxFlags) unconfined() bool {
	p, err := bash.ParseProfile(f.profile)
	return err == nil && p == bash.Unconfined
}

// policyOptions are the options a policy that runs tools is loaded with:
// a rule requiring a profile this kernel cannot enforce asks.
func policyOptions() *policy.Options {
	return &policy.Options{Sandbox: func(profile string) error {
		return bash.Check().Enforceable(bash.Profile(profile))
	}}
}
