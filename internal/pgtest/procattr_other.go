//go:build unix && !linux

package pgtest

import "syscall"

// serverProcAttr starts the server as cred in its own process group. Other
// Unix systems have no parent-death signal: a test binary killed by its
// timeout can leave the server running there.
func serverProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true}
}
