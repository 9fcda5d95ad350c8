// Package bash is a shell tool for the demo and the command line: it runs
// a command with bash -c in a working directory, with a timeout and a cap
// on the output it keeps, and returns the exit code, stdout and stderr.
//
// It runs whatever it is given: put it behind a policy (package hitl or
// interrupt, or a policy file) before a model can call it. Under a
// confined [Profile] the kernel bounds what the command can do whatever
// the policy decided: the tool starts a helper ([HelperName], the small
// cmd/tollgate-sandbox, found next to the executable; or else the binary
// re-executing itself, see [MaybeRunHelper]) that enters new user, network and PID
// namespaces where it may, sets resource limits, drops capabilities,
// applies a Landlock ruleset and then execs the shell with an allow-listed
// environment. [Check] says what this kernel enforces. The calling process
// is never confined. On Linux, in a process that turned it on
// ([UseSpareHelpers]: one that does not confine itself), from the second
// confined command on, the helper has been started ahead of the command,
// in the new namespaces, and waits for its configuration (a spare
// helper: the namespaces and the helper's start are off the command's
// path); it is confined exactly as one started for the command, and is
// not used when the process's state it inherited (credentials, seccomp
// filters, scheduling, umask, rlimits, cgroup, ...) or the mounts have
// changed since it started.
//
// # Nothing a command starts outlives it
//
// When the shell ends, when the command times out or its context is
// cancelled, and when the agent's process dies, SIGKILL included, every
// process of the command is killed: the ones it left in the background,
// in another process group or in another session (nohup, setsid, a daemon
// that forks twice) too. A server started with `cmd > log 2>&1 &` stops
// when the call ends.
//
// On Linux, a confined command in a PID namespace ([Report].PidNS) is its
// namespace's init: the kernel kills every process in it when the shell
// dies, and the shell gets SIGKILL when the agent's process dies (a
// parent-death signal). Every other command, unconfined ones included,
// runs under a supervisor, started like the sandbox helper:
// its parent-death signal is one it catches, it is a child subreaper (what
// is orphaned below it stays its descendant, whatever group or session it
// is in), and it kills the shell's process group, every descendant it
// finds in /proc, and then its children until none is left (a process
// that starts the next and exits, over and over, becomes its child each
// time). What it cannot stop within a few seconds (a process it may not
// signal) makes the command's result an error that says how many are
// left. Both need [MaybeRunHelper] in main; without it an
// unconfined shell is the process's own child with a parent-death signal:
// the shell dies with the process and its process group on timeout, but
// what it leaves behind may outlive both. Neither stops a command set on
// escaping: an unconfined one may kill its supervisor or ask another
// service (cron, systemd-run) to start a process, and the supervisor
// cannot kill a process that became another user through a setuid program.
//
// On other systems there is no sandbox (a confined profile is not run), no
// parent-death signal and no supervisor: the shell runs in its own process
// group, killed on timeout and cancellation; nothing is killed when the
// agent's process dies, nor what leaves the group.
package bash

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
)

// Args are the tool's arguments.
type Args struct {
	Cmd string `json:"cmd" jsonschema:"the shell command to run with bash -c"`
}

// Result is what the tool returns (as JSON) to the model.
type Result struct {
	ExitCode  int    `json:"exit_code"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	TimedOut  bool   `json:"timed_out,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// Options configure the tool. A nil *Options means all zero values.
type Options struct {
	// Name of the tool. Zero: "bash".
	Name string
	// Dir is the working directory. Zero: the process's.
	Dir string
	// Timeout bounds one command; every process of the command is killed
	// when it passes (see the package documentation). Zero: 60s.
	Timeout time.Duration
	// MaxOutput caps the bytes kept of stdout and of stderr each. Zero:
	// 64 KiB.
	MaxOutput int
	// Shell is the interpreter. Zero: "bash" (or "sh" if bash is absent).
	Shell string
	// Profile confines every command. Zero: Unconfined (what a policy or
	// Decide requires still applies). A confined profile needs
	// [MaybeRunHelper] in main; a command whose profile the kernel cannot
	// enforce is not run (an error result).
	Profile Profile
	// Decide, if set, is asked before each command for the profile the
	// policy requires of this call (the call's arguments as JSON; the
	// context is the tool call's, see agent.ToolCallFrom): the command runs
	// under the stricter of it and Profile. An error and the command is not
	// run. See policy.Policy.SandboxFor.
	Decide func(ctx context.Context, args json.RawMessage) (Profile, error)
	// Env lists the variables of the process's environment a confined
	// command keeps besides [BaseEnv].
	Env []string
	// Limits bound each confined command's resources.
	Limits Limits
	// Masked are paths a confined command's view does not hold, besides
	// [DefaultMasked]: each is covered by an empty, read-only directory or
	// file (one that does not exist when the command starts is not). The
	// caller passes tollgate's own state here: the store's files (an
	// SQLite database and its -wal and -shm), the policy files, the
	// tokens files, the database's UNIX socket directory; they are hidden
	// wherever they are, inside the working directory too.
	Masked []string
	// Sockets are UNIX sockets (paths) a workspace-write command may use,
	// such as docker's: its view holds them, and it may make UNIX sockets
	// (without them no confined command may). Read-only commands get
	// none.
	Sockets []string
	// Stdout and Stderr, if set, get the command's output as it comes
	// (tollgate sandbox exec passes its own), instead of the Result
	// keeping it: the Result's Stdout and Stderr are then empty.
	Stdout, Stderr io.Writer
}

// New returns the bash tool. Its annotations say where its commands run,
// for the policy and the reviewer: "working_directory" (Dir, absolute)
// and "sandbox" (Profile; "unconfined" when zero). A policy's Decide may
// make one call's profile stricter; what a person approves runs under
// Profile.
func New(opts *Options) *agent.Tool {
	o := withDefaults(opts)
	return agent.NewTool(o.Name, "Run a shell command and return its exit code, stdout and stderr.",
		func(ctx context.Context, a Args) (Result, error) {
			p, err := o.profile(ctx, a)
			if err != nil {
				return Result{ExitCode: -1}, err
			}
			return run(ctx, o, p, a.Cmd)
		}, &agent.ToolOptions{Annotations: o.annotations()})
}

// annotations say where the tool's commands run (the keys are
// policy.AnnotationDir and policy.AnnotationSandbox).
func (o *Options) annotations() map[string]any {
	dir := o.Dir
	if abs, err := filepath.Abs(cmp.Or(dir, ".")); err == nil {
		dir = abs
	}
	return map[string]any{"working_directory": dir, "sandbox": string(cmp.Or(o.Profile, Unconfined))}
}

func withDefaults(opts *Options) Options {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "bash"
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = 64 << 10
	}
	if o.Shell == "" {
		o.Shell = "bash"
		if _, err := exec.LookPath("bash"); err != nil {
			o.Shell = "sh"
		}
	}
	o.Limits = o.Limits.withDefaults(o.Timeout)
	return o
}

// profile is the profile a command runs under: the stricter of the tool's
// and the one Decide requires.
func (o *Options) profile(ctx context.Context, a Args) (Profile, error) {
	p := o.Profile
	if p == "" {
		p = Unconfined
	}
	if o.Decide != nil {
		raw, err := json.Marshal(a)
		if err != nil {
			return "", err
		}
		req, err := o.Decide(ctx, raw)
		if err != nil {
			return "", fmt.Errorf("not run: %w", err)
		}
		if req != "" {
			if _, err := ParseProfile(string(req)); err != nil {
				return "", fmt.Errorf("not run: %w", err)
			}
		}
		p = Stricter(p, req)
	}
	if p.confined() {
		if err := Check().Enforceable(p); err != nil {
			return "", fmt.Errorf("not run: %w", err)
		}
	}
	return p, nil
}

// capped keeps the first max bytes written and counts the rest.
type capped struct {
	buf     bytes.Buffer
	max     int
	dropped int
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if room >= len(p) {
		c.buf.Write(p)
	} else {
		if room > 0 {
			c.buf.Write(p[:room])
		}
		c.dropped += len(p) - max(room, 0)
	}
	return len(p), nil
}

func (c *capped) String() string {
	if c.dropped == 0 {
		return c.buf.String()
	}
	return fmt.Sprintf("%s\n[output truncated: %d more bytes]", c.buf.String(), c.dropped)
}

// Run runs one command as the tool would, under opts.Profile (Decide is
// not asked), without an agent: for tests and benchmarks of the sandbox.
func Run(ctx context.Context, opts *Options, cmdline string) (Result, error) {
	o := withDefaults(opts)
	o.Decide = nil
	p, err := o.profile(ctx, Args{Cmd: cmdline})
	if err != nil {
		return Result{ExitCode: -1}, err
	}
	return run(ctx, o, p, cmdline)
}

func run(ctx context.Context, o Options, p Profile, cmdline string) (Result, error) {
	// Pdeathsig fires when the thread that started the process ends:
	// keep it until the command is done.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var c command
	if p.confined() {
		// The private TMPDIR is made once the helper is started (while
		// it starts its runtime), and removed when the command is done.
		var tmp string
		defer func() {
			if tmp != "" {
				removeTree(tmp)
			}
		}()
		mkTmp := func() (string, error) {
			if tmp != "" { // made for a spare helper that ran nothing (command.fresh)
				return tmp, nil
			}
			dir, err := os.MkdirTemp("", "tollgate-bash-")
			if err != nil {
				return "", fmt.Errorf("private temporary directory: %w", err)
			}
			tmp = dir
			return dir, nil
		}
		var err error
		if c, err = confinedCommand(ctx, o, p, mkTmp, cmdline); err != nil {
			return Result{ExitCode: -1}, err
		}
	} else {
		var err error
		if c, err = unconfinedCommand(ctx, o, cmdline); err != nil {
			return Result{ExitCode: -1}, fmt.Errorf("cannot run %s: %w", o.Shell, err)
		}
	}
	if c.finished != nil {
		defer c.finished()
	}
	stdout, stderr := &capped{max: o.MaxOutput}, &capped{max: o.MaxOutput}
	var outW, errW io.Writer = stdout, stderr
	if o.Stdout != nil {
		outW = o.Stdout
	}
	if o.Stderr != nil {
		errW = o.Stderr
	}
	var cmd *exec.Cmd
	var err error
	for {
		// cmd.Cancel, set by each way of starting, kills the whole tree
		// (the process group, or the supervisor's killing): a command's
		// children must not outlive it. WaitDelay bounds the wait for a
		// tree that does not die (the supervisor's is longer than its own
		// bound).
		cmd = c.Cmd
		if cmd.WaitDelay == 0 {
			cmd.WaitDelay = 2 * time.Second
		}
		if c.output != nil {
			c.output(outW, errW) // started already
		} else {
			cmd.Stdout, cmd.Stderr = outW, errW
			err = cmd.Start()
		}
		if c.after != nil {
			if aerr := c.after(err); aerr != nil {
				if err == nil {
					_ = cmd.Cancel()
					_ = cmd.Wait()
					_ = c.stop()
				}
				if err == nil && c.fresh != nil && errors.As(aerr, new(configNotSent)) {
					if c, err = c.fresh(); err != nil {
						return Result{ExitCode: -1}, err
					}
					continue
				}
				return Result{ExitCode: -1}, aerr
			}
		}
		break
	}
	var stopErr error
	if err == nil {
		err = cmd.Wait()
		stopErr = c.stop()
	}
	res := Result{Stdout: stdout.String(), Stderr: stderr.String(), Truncated: stdout.dropped+stderr.dropped > 0}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		res.TimedOut, res.ExitCode = true, -1
		return res, errors.Join(fmt.Errorf("command timed out after %s (stdout so far: %q)", o.Timeout, res.Stdout), stopErr)
	case ctx.Err() != nil:
		return res, errors.Join(ctx.Err(), stopErr)
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
		}
	case errors.Is(err, exec.ErrWaitDelay) && stopErr == nil:
		// The command exited 0, and something still held its output
		// WaitDelay later: a process started without a supervisor (no
		// MaybeRunHelper), or one that no supervisor or namespace could
		// find (given the output through a socket).
		return res, fmt.Errorf("could not stop every process the command started: its output was still open %s after it ended", cmd.WaitDelay)
	case errors.Is(err, exec.ErrWaitDelay):
	case err != nil:
		return res, fmt.Errorf("cannot run %s: %w", o.Shell, err)
	}
	return res, stopErr
}

// command is a command prepared to run: the shell, the sandbox helper or
// the supervisor.
type command struct {
	*exec.Cmd
	// after, if set, is called with Start's error: an error is a failure
	// before the command started.
	after func(start error) error
	// stopped, if set, is called after Wait: an error says that processes
	// the command started may be left.
	stopped func() error
	// output, if set, says that the command is started already (a spare
	// helper, waiting for its configuration: see spare_linux.go) and sends
	// its output to stdout and stderr; Start is not called.
	output func(stdout, stderr io.Writer)
	// finished, if set, is called when the command is done (it asks for
	// the next spare helper).
	finished func()
	// fresh, if set, prepares the command again in a helper started for
	// it: for a spare helper that ended before it got its configuration,
	// and so ran nothing (configNotSent).
	fresh func() (command, error)
}

// configNotSent is the failure to send a helper its configuration: it
// ended, or closed the pipe, before it read all of it, and so ran
// nothing (it reads all of it before anything else).
type configNotSent struct{ err error }

func (e configNotSent) Error() string { return "sending the configuration: " + e.err.Error() }
func (e configNotSent) Unwrap() error { return e.err }

func (c command) stop() error {
	if c.stopped == nil {
		return nil
	}
	return c.stopped()
}

// removeTree removes a command's private TMPDIR, first giving back the
// owner's rights on every directory in it: a command that made a
// directory unwritable (chmod 500) must not leave its files behind. An
// empty one, what most commands leave, goes at once.
func removeTree(dir string) {
	if os.Remove(dir) == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		} else if err != nil && path != dir {
			// Unreadable until its parent is fixed: fixed on the way down.
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}
