package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/server"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

func init() {
	register("sandbox", "report what the kernel enforces on the bash tool's commands", nil,
		subcommand{name: "check", summary: "report the Landlock ABI, the namespaces and each profile's enforcement", run: sandboxCheck})
}

const sandboxCheckHelp = `usage: tollgate sandbox check [--json]

Reports the kernel's Landlock ABI, the namespaces the bash tool's helper
can enter, whether each sandbox profile is enforced, and what is and is
not enforced on a confined command. A policy rule that requires a profile
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
