//go:build !linux

package bash

import (
	"context"
	"errors"
	"os/exec"
	"runtime"
)

// MaybeRunHelper records that the binary can be its own helper; off Linux
// there is no sandbox, and confined profiles cannot be enforced.
func MaybeRunHelper() { helperWired.Store(true) }

type namespaces struct{}

// SetHelper: there is no sandbox helper off Linux.
func SetHelper(string) error { return errors.New("the sandbox is Linux only") }

// UseSpareHelpers: there are no sandbox helpers off Linux.
func UseSpareHelpers(bool) {}

func helperPath() (path, note string, err error) { return "", "", nil }

// seccompEnforced: no seccomp off Linux.
const seccompEnforced = false

// DefaultMasked: there is no mount view off Linux.
var DefaultMasked []string

func check() Report {
	return Report{OS: runtime.GOOS, LandlockErr: "Landlock is Linux only", Memory: "none", CgroupErr: "Linux only"}
}

func confinedCommand(context.Context, Options, Profile, func() (string, error), string) (command, error) {
	return command{}, errors.New("the sandbox is Linux only")
}

// unconfinedCommand runs the shell in its own process group (a process
// tree of its own on Windows), killed on timeout and cancellation. There
// is no parent-death signal here, and no supervisor: nothing kills the
// command when the agent's process dies.
func unconfinedCommand(ctx context.Context, o Options, cmdline string) (command, error) {
	cmd := exec.CommandContext(ctx, o.Shell, "-c", cmdline)
	cmd.Dir = o.Dir
	ownGroup(cmd)
	return command{Cmd: cmd}, nil
}
