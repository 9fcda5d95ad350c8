package bash

import (
	"bytes"
	"fmt"
	"strconv"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// inherited describes what a sandbox helper started now, from this
// thread, would take from this process rather than from its
// configuration; a spare helper (spare_linux.go) is used only when it
// reads the same at the command's use as when the spare was started, and
// is discarded otherwise (found by review: a process that dropped root
// after its spare started ran its next command as uid 0, with the old
// umask, rlimits and cgroup).
//
// What a helper inherits, and is here: its credentials (real, effective,
// saved and file-system uid and gid, the supplementary groups), its
// capabilities (effective, permitted, inheritable, bounding, ambient),
// securebits and no_new_privs, the seccomp mode and the number of filters
// (Seccomp_filters: a process in mode 2 that adds one stays in mode 2),
// the LSM labels (current, and the one for the next exec), the umask,
// every rlimit (the helper only lowers five of them), the cgroup, the
// namespaces (the new ones are made in this process's), the root
// directory, the signal mask and ignored signals, the personality, the
// scheduling (all of sched_getattr: policy, priority, nice, utilization
// clamps; the core-scheduling cookie, the I/O priority, the CPUs and
// memory nodes allowed, the memory policy), a tracer, the speculation
// controls, the prctl settings fork and exec keep (THP, machine-check
// kill, timer slack, I/O flusher, memory-deny-write-execute),
// oom_score_adj, the audit login uid, the session and its keyring, and
// the helper binary itself (a file replaced at its path would be another
// program).
//
// What it does not inherit, and is not here: the environment (the helper
// gets only sandboxhelper.Env; the command's comes in the configuration),
// the working directory (the helper changes to the configuration's
// absolute Dir before anything reads a relative path), descriptors past
// the standard ones and the two pipes (every descriptor from 3 up is
// closed at the shell's exec; the standard ones are the command's pipes),
// and the mount table, which is watched instead (mountsMoved): a mount
// namespace is a copy of this process's at the helper's start. One thing
// cannot be read back: a Landlock domain this process put itself in after
// the spare started (the kernel has no call that says so). A helper
// started for the command would be in that domain, and the spare is not:
// its own ruleset does not make up for the process's (found by review).
// Hence spares only in a process that turned them on (UseSpareHelpers),
// one that does not confine itself once commands have started.
func inherited(helper string) []byte {
	b := make([]byte, 0, 4096)
	// Everything of the thread's is read relative to one descriptor of
	// /proc/thread-self: the comparison is on a spare's path (BenchmarkInherited).
	dir, err := unix.Open("/proc/thread-self", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return append(b, "thread-self "+err.Error()...)
	}
	defer unix.Close(dir)
	buf := make([]byte, 8192)
	// All of status: with many groups it passes 8 KiB, and what follows
	// Groups went uncompared (found by review). One that cannot be read
	// reads differently each time: no spare is used on it.
	status, ok := readAt(dir, "status", &buf)
	if !ok {
		b = fmt.Appendf(b, "status unread %d %s\n", statusFailures.Add(1), status)
	}
	for line := range bytes.SplitAfterSeq(status, []byte("\n")) {
		key, _, _ := bytes.Cut(line, []byte(":"))
		if inheritedStatus[string(key)] {
			b = append(b, line...)
		}
	}
	for _, f := range inheritedFiles {
		b = append(b, f...)
		b = append(b, ' ')
		v, _ := readAt(dir, f, &buf) // one the kernel lacks reads the same error each time
		b = append(b, v...)
		b = append(b, '\n')
	}
	num := func(name string, vs ...int64) {
		b = append(b, name...)
		for _, v := range vs {
			b = append(b, ' ')
			b = strconv.AppendInt(b, v, 10)
		}
		b = append(b, '\n')
	}
	errno := func(err error) int64 {
		if e, ok := err.(unix.Errno); ok {
			return int64(e)
		}
		if err != nil {
			return -1
		}
		return 0
	}
	for _, ns := range inheritedNS {
		var st unix.Stat_t
		err := unix.Fstatat(dir, "ns/"+ns, &st, 0)
		num(ns, errno(err), int64(st.Dev), int64(st.Ino))
	}
	for _, path := range []string{"root", helper} {
		var st unix.Stat_t
		err := unix.Fstatat(dir, path, &st, 0) // helper is absolute
		num(path, errno(err), int64(st.Dev), int64(st.Ino), int64(st.Mode), int64(st.Uid), int64(st.Gid),
			st.Size, st.Mtim.Nano(), st.Ctim.Nano())
	}
	for res := range rlimits {
		var l unix.Rlimit
		err := unix.Prlimit(0, res, nil, &l)
		num("rlimit", int64(res), errno(err), int64(l.Cur), int64(l.Max))
	}
	for _, opt := range inheritedPrctl {
		v, err := unix.PrctlRetInt(opt, 0, 0, 0, 0)
		num("prctl", int64(opt), errno(err), int64(v))
	}
	pers, _, e1 := unix.Syscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
	ioprio, _, e2 := unix.Syscall(unix.SYS_IOPRIO_GET, 1 /* IOPRIO_WHO_PROCESS */, 0, 0)
	num("personality, I/O priority", int64(pers), int64(e1), int64(ioprio), int64(e2))
	// All of the scheduling: the policy alone missed a priority changed
	// within it (found by review).
	var sa unix.SchedAttr
	if a, err := unix.SchedGetAttr(0, 0); err == nil {
		sa = *a
	} else {
		sa.Size = uint32(errno(err))
	}
	num("scheduling", int64(sa.Size), int64(sa.Policy), int64(sa.Flags), int64(sa.Nice), int64(sa.Priority),
		int64(sa.Runtime), int64(sa.Deadline), int64(sa.Period), int64(sa.Util_min), int64(sa.Util_max))
	var mode int32
	var nodes [16]int64 // a mask of 1024 nodes
	_, _, e3 := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&mode)), uintptr(unsafe.Pointer(&nodes[0])),
		uintptr(len(nodes)*64), 0, 0, 0)
	num("memory policy", int64(e3), int64(mode))
	num("memory nodes", nodes[:]...)
	var cookie uint64 // the core-scheduling cookie's id
	_, _, e4 := unix.Syscall6(unix.SYS_PRCTL, unix.PR_SCHED_CORE, unix.PR_SCHED_CORE_GET, 0, 0 /* PIDTYPE_PID */, uintptr(unsafe.Pointer(&cookie)), 0)
	num("core scheduling", int64(e4), int64(cookie))
	sid, err := unix.Getsid(0)
	num("session", int64(sid), errno(err))
	ring, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
	num("keyring", int64(ring), errno(err))
	return b
}

// readAt reads all of the file name below dir into *buf, grown as it
// needs, and returns what it read, or the error's text (a file cut short
// would leave what follows uncompared); read says whether it read it.
func readAt(dir int, name string, buf *[]byte) (b []byte, read bool) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return []byte(err.Error()), false
	}
	defer unix.Close(fd)
	n := 0
	for {
		if n == len(*buf) {
			*buf = append(*buf, make([]byte, len(*buf))...)
		}
		m, err := unix.Read(fd, (*buf)[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return []byte(err.Error()), false
		}
		if m == 0 {
			break
		}
		n += m
	}
	return (*buf)[:n], true
}

// statusFailures counts the failed reads of /proc/thread-self/status.
var statusFailures atomic.Int64

// rlimits is the number of resources getrlimit knows (RLIM_NLIMITS).
const rlimits = 16

// inheritedStatus are the lines of /proc/thread-self/status that fork and
// exec keep, or that a helper started now would have (the uid and gid
// lines hold the real, effective, saved and file-system ids).
var inheritedStatus = map[string]bool{
	"Umask": true, "Uid": true, "Gid": true, "Groups": true, "NoNewPrivs": true,
	"Seccomp": true, "Seccomp_filters": true, "CapInh": true, "CapPrm": true, "CapEff": true,
	"CapBnd": true, "CapAmb": true, "SigBlk": true, "SigIgn": true,
	"Speculation_Store_Bypass": true, "SpeculationIndirectBranch": true,
	"Cpus_allowed_list": true, "Mems_allowed_list": true,
	"TracerPid": true, // a tracer that follows forks would trace a helper started now
}

// inheritedFiles are the other files of /proc/thread-self that hold what
// a helper inherits.
var inheritedFiles = []string{"cgroup", "attr/current", "attr/exec", "oom_score_adj", "loginuid", "sessionid"}

// inheritedNS are the namespaces a helper starts in, or makes its new ones
// in.
var inheritedNS = []string{"cgroup", "ipc", "mnt", "net", "pid", "pid_for_children",
	"time", "time_for_children", "user", "uts"}

// inheritedPrctl are the prctl settings (their PR_GET_ options) that fork
// and exec keep and /proc/thread-self/status does not show.
var inheritedPrctl = []int{unix.PR_GET_SECUREBITS, unix.PR_GET_THP_DISABLE, unix.PR_MCE_KILL_GET,
	unix.PR_GET_TIMERSLACK, unix.PR_GET_IO_FLUSHER, prGetMDWE}

// prGetMDWE is PR_GET_MDWE (Linux 6.3: memory-deny-write-execute, kept
// by fork and exec).
const prGetMDWE = 66

// watchMounts opens this thread's mount table (the namespace a helper
// started from it copies, which a thread may have changed from the
// thread-group leader's: /proc/self would be the leader's), for
// mountsMoved to say whether any mount of its namespace was made, moved,
// changed or unmounted since; the caller closes the descriptor. It is not an
// *os.File: os.Open would add it to the runtime's poller, whose waits
// would take the kernel's flag (a poll of the table clears it).
func watchMounts() (int, error) {
	return unix.Open("/proc/thread-self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
}

// mountsMoved says whether the mount namespace of fd (see watchMounts)
// has changed since fd was opened: the kernel flags a mount table whose
// namespace's event counter moved (POLLPRI and POLLERR), whatever the
// table then reads (mount ids and device numbers are reused: a bind
// mount replaced by another at the same path can read the same, found by
// review). The flag is cleared when it is read: a spare whose watch said
// so once is discarded. An error says it has changed.
func mountsMoved(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
	for {
		_, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return err != nil || fds[0].Revents&(unix.POLLPRI|unix.POLLERR|unix.POLLNVAL) != 0
	}
}
