package bash

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// metadataSyscalls change a file's mode, owner, times or extended
// attributes. Landlock (ABI 7 and below) does not govern them, and inside
// its user namespace the command owns what the agent's user owns, so
// without this filter a read-only command could chmod or touch files
// anywhere (found by review).
var metadataSyscalls = []uint32{
	unix.SYS_CHMOD, unix.SYS_FCHMOD, unix.SYS_FCHMODAT, unix.SYS_FCHMODAT2,
	unix.SYS_CHOWN, unix.SYS_FCHOWN, unix.SYS_LCHOWN, unix.SYS_FCHOWNAT,
	unix.SYS_UTIME, unix.SYS_UTIMES, unix.SYS_UTIMENSAT, unix.SYS_FUTIMESAT,
	unix.SYS_SETXATTR, unix.SYS_LSETXATTR, unix.SYS_FSETXATTR, unix.SYS_SETXATTRAT,
	unix.SYS_REMOVEXATTR, unix.SYS_LREMOVEXATTR, unix.SYS_FREMOVEXATTR, unix.SYS_REMOVEXATTRAT,
}

const (
	auditArchX86_64 = 0xc000003e
	x32SyscallBit   = 0x40000000
	seccompRetAllow = 0x7fff0000
	seccompRetErrno = 0x00050000
	bpfLdWAbs       = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK         = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJgeK         = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfRetK         = unix.BPF_RET | unix.BPF_K
)

// readOnlyFilter is the seccomp program of the read-only profile: the
// metadata calls above, and socket(AF_UNIX) (Landlock below ABI 9 cannot
// keep a command from connecting to a pathname socket outside the working
// directory, such as a session bus), fail with EPERM; any other
// architecture's or the x32 ABI's calls too. Everything else is allowed.
func readOnlyFilter() []unix.SockFilter {
	deny := unix.SockFilter{Code: bpfRetK, K: seccompRetErrno | uint32(unix.EPERM)}
	allow := unix.SockFilter{Code: bpfRetK, K: seccompRetAllow}
	var p []unix.SockFilter
	// The program ends: ..., allow, deny(socket check), deny. Jumps are
	// relative to the next instruction, so they are filled in at the end.
	p = append(p, unix.SockFilter{Code: bpfLdWAbs, K: 4}) // arch
	archCheck := len(p)
	p = append(p, unix.SockFilter{Code: bpfJeqK, K: auditArchX86_64})
	p = append(p, unix.SockFilter{Code: bpfLdWAbs, K: 0}) // nr
	x32Check := len(p)
	p = append(p, unix.SockFilter{Code: bpfJgeK, K: x32SyscallBit})
	var toDeny []int
	for _, nr := range metadataSyscalls {
		toDeny = append(toDeny, len(p))
		p = append(p, unix.SockFilter{Code: bpfJeqK, K: nr})
	}
	socketCheck := len(p)
	p = append(p, unix.SockFilter{Code: bpfJeqK, K: unix.SYS_SOCKET})
	allowAt := len(p)
	p = append(p, allow)
	// socket: the domain is the low 32 bits of args[0] (offset 16).
	socketAt := len(p)
	p = append(p, unix.SockFilter{Code: bpfLdWAbs, K: 16})
	p = append(p, unix.SockFilter{Code: bpfJeqK, K: unix.AF_UNIX, Jt: 1, Jf: 0})
	p = append(p, allow)
	denyAt := len(p)
	p = append(p, deny)

	rel := func(from, to int) uint8 { return uint8(to - from - 1) }
	p[archCheck].Jt, p[archCheck].Jf = 0, rel(archCheck, denyAt)
	p[x32Check].Jt, p[x32Check].Jf = rel(x32Check, denyAt), 0
	for _, i := range toDeny {
		p[i].Jt, p[i].Jf = rel(i, denyAt), 0
	}
	p[socketCheck].Jt, p[socketCheck].Jf = rel(socketCheck, socketAt), rel(socketCheck, allowAt)
	return p
}

// applySeccomp installs the profile's filter on the calling thread (which
// then execs the shell: the filter is inherited). no_new_privs must be set.
func applySeccomp(p Profile) error {
	if p != ReadOnly {
		return nil
	}
	prog := readOnlyFilter()
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}

// seccompEnforced says whether applySeccomp can block metadata writes and
// UNIX sockets on this architecture.
const seccompEnforced = true
