// Package bash is a shell tool for the demo and the command line: it runs
// a command with bash -c in a working directory, with a timeout and a cap
// on the output it keeps, and returns the exit code, stdout and stderr.
//
// It runs whatever it is given: put it behind a policy (package hitl or
// interrupt, or a policy file) before a model can call it.
package bash

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
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
	// Timeout bounds one command; the whole process group is killed when
	// it passes. Zero: 60s.
	Timeout time.Duration
	// MaxOutput caps the bytes kept of stdout and of stderr each. Zero:
	// 64 KiB.
	MaxOutput int
	// Shell is the interpreter. Zero: "bash" (or "sh" if bash is absent).
	Shell string
}

// New returns the bash tool.
func New(opts *Options) *agent.Tool {
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
	return agent.NewTool(o.Name, "Run a shell command and return its exit code, stdout and stderr.",
		func(ctx context.Context, a Args) (Result, error) { return run(ctx, o, a.Cmd) }, nil)
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

func run(ctx context.Context, o Options, cmdline string) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.Shell, "-c", cmdline)
	cmd.Dir = o.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Kill the whole group: a command's children must not outlive it.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	stdout, stderr := &capped{max: o.MaxOutput}, &capped{max: o.MaxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	res := Result{Stdout: stdout.String(), Stderr: stderr.String(), Truncated: stdout.dropped+stderr.dropped > 0}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		res.TimedOut, res.ExitCode = true, -1
		return res, fmt.Errorf("command timed out after %s (stdout so far: %q)", o.Timeout, res.Stdout)
	case ctx.Err() != nil:
		return res, ctx.Err()
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
	case err != nil:
		return res, fmt.Errorf("cannot run %s: %w", o.Shell, err)
	}
	return res, nil
}
