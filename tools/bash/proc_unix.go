//go:build unix

package bash

import (
	"context"
	"os/exec"
	"syscall"
)

// directCommand runs the shell as the agent's own child, in its own
// process group (attr sets Setpgid), which Cancel kills.
func directCommand(ctx context.Context, o Options, cmdline string, attr *syscall.SysProcAttr) *exec.Cmd {
	cmd := exec.CommandContext(ctx, o.Shell, "-c", cmdline)
	cmd.Dir = o.Dir
	cmd.SysProcAttr = attr
	cmd.Cancel = killGroup(cmd)
	return cmd
}

// killGroup kills cmd's process group, which it leads.
func killGroup(cmd *exec.Cmd) func() error {
	return func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
