//go:build !linux

package bash

import (
	"context"
	"errors"
	"os/exec"
	"runtime"
	"syscall"
)

// MaybeRunHelper records that the binary can be its own helper; off Linux
// there is no sandbox, and confined profiles cannot be enforced.
func MaybeRunHelper() { helperWired.Store(true) }

type namespaces struct{}

func check() Report {
	return Report{OS: runtime.GOOS, LandlockErr: "Landlock is Linux only"}
}

func confinedCommand(context.Context, Options, Profile, string, string) (*exec.Cmd, func(error) error, error) {
	return nil, nil, errors.New("the sandbox is Linux only")
}

func unconfinedAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
