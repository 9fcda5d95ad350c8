package bash

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a console process group of its own. Cancel kills
// the shell only (os/exec's default): Windows has no process group to
// signal, and what the shell started may outlive it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}
