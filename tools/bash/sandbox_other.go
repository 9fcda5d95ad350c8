//go:build !linux

package bash

import (
	"context"
	"errors"
	"runtime"
	"syscall"
)

// MaybeRunHelper records that the binary can be its own helper; off Linux
// there is no sandbox, and confined profiles cannot be enforced.
func MaybeRunHelper() { helperWired.Store(true) }

type namespaces struct{}

// seccompEnforced: no seccomp off Linux.
const seccompEnforced = false

func check() Report {
	return Report{OS: runtime.GOOS, LandlockErr: "Landlock is Linux only"}
}

func confinedCommand(context.Context, Options, Profile, string, string) (command, error) {
	return command{}, errors.New("the sandbox is Linux only")
}

// unconfinedCommand runs the shell in its own process group, killed on
// timeout and cancellation. There is no parent-death signal here, and no
// supervisor: nothing kills the command when the agent's process dies.
func unconfinedCommand(ctx context.Context, o Options, cmdline string) (command, error) {
	return command{Cmd: directCommand(ctx, o, cmdline, &syscall.SysProcAttr{Setpgid: true})}, nil
}
