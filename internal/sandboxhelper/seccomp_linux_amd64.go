package sandboxhelper

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

// ioUringSyscalls are io_uring's: a ring's operations are not system
// calls a filter sees, and IORING_OP_SOCKET makes the AF_UNIX socket that
// socket(2) is refused (found by review: an allowed command connected to
// the store's PostgreSQL socket that way and approved its own calls).
var ioUringSyscalls = []uint32{unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER}

// ttyInjection are the ioctl requests that put input into a terminal
// (TIOCSTI) or act on the console (TIOCLINUX): a command given the
// caller's terminal could type a command the caller's shell then runs,
// unconfined (found by review). The helper also gives up its controlling
// terminal (detachTerminal), which is what TIOCSTI needs without
// CAP_SYS_ADMIN; the filter refuses it on any terminal.
var ttyInjection = []uint32{unix.TIOCSTI, unix.TIOCLINUX}

// filter is the seccomp program of a confined profile: io_uring and, unless
// unixSockets, socket(AF_UNIX) (Landlock below ABI 9 cannot keep a command
// from connecting to a pathname socket it can see) fail with EPERM; under
// read-only, the metadata calls above too; ioctl's terminal injection
// (ttyInjection); any other architecture's or the x32 ABI's calls too.
// Everything else is allowed (socketpair included: a pair connects to
// nothing outside).
func filter(p string, unixSockets bool) []unix.SockFilter {
	deny := unix.SockFilter{Code: bpfRetK, K: seccompRetErrno | uint32(unix.EPERM)}
	allow := unix.SockFilter{Code: bpfRetK, K: seccompRetAllow}
	refused := append([]uint32{}, ioUringSyscalls...)
	if p == ReadOnly {
		refused = append(refused, metadataSyscalls...)
	}
	var prog []unix.SockFilter
	// The program ends: ..., allow, deny(socket check), deny. Jumps are
	// relative to the next instruction, so they are filled in at the end.
	prog = append(prog, unix.SockFilter{Code: bpfLdWAbs, K: 4}) // arch
	archCheck := len(prog)
	prog = append(prog, unix.SockFilter{Code: bpfJeqK, K: auditArchX86_64})
	prog = append(prog, unix.SockFilter{Code: bpfLdWAbs, K: 0}) // nr
	x32Check := len(prog)
	prog = append(prog, unix.SockFilter{Code: bpfJgeK, K: x32SyscallBit})
	var toDeny []int
	for _, nr := range refused {
		toDeny = append(toDeny, len(prog))
		prog = append(prog, unix.SockFilter{Code: bpfJeqK, K: nr})
	}
	socketCheck := -1
	if !unixSockets {
		socketCheck = len(prog)
		prog = append(prog, unix.SockFilter{Code: bpfJeqK, K: unix.SYS_SOCKET})
	}
	ioctlCheck := len(prog)
	prog = append(prog, unix.SockFilter{Code: bpfJeqK, K: unix.SYS_IOCTL})
	prog = append(prog, allow) // anything else
	// socket: the domain is the low 32 bits of args[0] (offset 16).
	socketAt, socketUnix := len(prog), len(prog)+1
	prog = append(prog, unix.SockFilter{Code: bpfLdWAbs, K: 16})
	prog = append(prog, unix.SockFilter{Code: bpfJeqK, K: unix.AF_UNIX})
	prog = append(prog, allow)
	// ioctl: the request is the low 32 bits of args[1] (offset 24).
	ioctlAt := len(prog)
	prog = append(prog, unix.SockFilter{Code: bpfLdWAbs, K: 24})
	var ttyRequests []int
	for _, req := range ttyInjection {
		ttyRequests = append(ttyRequests, len(prog))
		prog = append(prog, unix.SockFilter{Code: bpfJeqK, K: req})
	}
	prog = append(prog, allow)
	denyAt := len(prog)
	prog = append(prog, deny)

	rel := func(from, to int) uint8 { return uint8(to - from - 1) }
	prog[archCheck].Jt, prog[archCheck].Jf = 0, rel(archCheck, denyAt)
	prog[x32Check].Jt, prog[x32Check].Jf = rel(x32Check, denyAt), 0
	for _, i := range toDeny {
		prog[i].Jt, prog[i].Jf = rel(i, denyAt), 0
	}
	if socketCheck >= 0 {
		prog[socketCheck].Jt, prog[socketCheck].Jf = rel(socketCheck, socketAt), 0
	}
	prog[ioctlCheck].Jt, prog[ioctlCheck].Jf = rel(ioctlCheck, ioctlAt), 0
	prog[socketUnix].Jt, prog[socketUnix].Jf = rel(socketUnix, denyAt), 0
	for _, i := range ttyRequests {
		prog[i].Jt, prog[i].Jf = rel(i, denyAt), 0
	}
	return prog
}

// applySeccomp installs the profile's filter on the calling thread (which
// then execs the shell: the filter is inherited). no_new_privs must be set.
// unixSockets keeps socket(AF_UNIX) allowed (workspace-write with listed
// sockets).
func applySeccomp(p string, unixSockets bool) error {
	if p != ReadOnly && p != WorkspaceWrite {
		return nil
	}
	prog := filter(p, unixSockets)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}

// SeccompEnforced says whether applySeccomp can block metadata writes,
// io_uring and UNIX sockets on this architecture.
const SeccompEnforced = true
