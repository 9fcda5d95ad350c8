package pgtest

import "syscall"

// serverProcAttr starts the server as cred in its own process group. On
// Linux the server also gets SIGQUIT (PostgreSQL's immediate shutdown)
// when the thread that started it exits, so a test binary killed by its
// timeout leaves no server behind.
func serverProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
}
