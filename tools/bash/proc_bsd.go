//go:build unix && !linux

package bash

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, which Cancel kills.
// (Linux runs every command under the supervisor or the sandbox helper.)
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = killGroup(cmd)
}
