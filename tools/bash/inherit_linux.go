package bash

import (
	"bytes"
	"fmt"
	"os"
	"strings"

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
// securebits and no_new_privs, the seccomp mode and filters, the LSM
// label, the umask, every rlimit (the helper only lowers five of them),
// the cgroup, the namespaces (the new ones are made in this process's),
// the root directory, the signal mask and ignored signals, the
// personality, the scheduling (nice, policy, I/O priority, CPUs and
// memory nodes allowed), the speculation controls, the prctl settings
// fork and exec keep (THP, machine-check kill, timer slack, I/O flusher,
// memory-deny-write-execute), oom_score_adj, the audit login uid, the
// session and its keyring, and the helper binary itself (a file replaced
// at its path would be another program).
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
// the spare started (the kernel has no call that says so); the helper's
// own ruleset confines the command all the same.
func inherited(helper string) []byte {
	var b bytes.Buffer
	status, err := os.ReadFile("/proc/thread-self/status")
	fmt.Fprintf(&b, "status %v\n", err)
	for _, line := range strings.SplitAfter(string(status), "\n") {
		key, _, _ := strings.Cut(line, ":")
		if inheritedStatus[key] {
			b.WriteString(line)
		}
	}
	for _, f := range inheritedFiles {
		v, err := os.ReadFile(f)
		fmt.Fprintf(&b, "%s %v %q\n", f, err, v)
	}
	for _, ns := range inheritedNS {
		v, err := os.Readlink("/proc/thread-self/ns/" + ns)
		fmt.Fprintf(&b, "ns %s %v %s\n", ns, err, v)
	}
	for res := 0; res < rlimits; res++ {
		var l unix.Rlimit
		err := unix.Prlimit(0, res, nil, &l)
		fmt.Fprintf(&b, "rlimit %d %v %d %d\n", res, err, l.Cur, l.Max)
	}
	for _, opt := range inheritedPrctl {
		v, err := unix.PrctlRetInt(opt, 0, 0, 0, 0)
		fmt.Fprintf(&b, "prctl %d %v %d\n", opt, err, v)
	}
	pers, _, errno := unix.Syscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
	fmt.Fprintf(&b, "personality %d %d\n", pers, errno)
	nice, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	fmt.Fprintf(&b, "nice %d %v\n", nice, err)
	policy, _, errno := unix.Syscall(unix.SYS_SCHED_GETSCHEDULER, 0, 0, 0)
	fmt.Fprintf(&b, "scheduler %d %d\n", policy, errno)
	ioprio, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, 1 /* IOPRIO_WHO_PROCESS */, 0, 0)
	fmt.Fprintf(&b, "ioprio %d %d\n", ioprio, errno)
	sid, err := unix.Getsid(0)
	fmt.Fprintf(&b, "sid %d %v\n", sid, err)
	ring, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
	fmt.Fprintf(&b, "keyring %d %v\n", ring, err)
	for _, path := range []string{"/proc/self/root", helper} {
		var st unix.Stat_t
		err := unix.Stat(path, &st)
		fmt.Fprintf(&b, "stat %s %v %d %d %o %d %d %d %v %v\n", path, err, st.Dev, st.Ino, st.Mode, st.Uid, st.Gid, st.Size, st.Mtim, st.Ctim)
	}
	return b.Bytes()
}

// rlimits is the number of resources getrlimit knows (RLIM_NLIMITS).
const rlimits = 16

// inheritedStatus are the lines of /proc/thread-self/status that fork and
// exec keep (the uid and gid lines hold the real, effective, saved and
// file-system ids).
var inheritedStatus = map[string]bool{
	"Umask": true, "Uid": true, "Gid": true, "Groups": true, "NoNewPrivs": true,
	"Seccomp": true, "Seccomp_filters": true, "CapInh": true, "CapPrm": true, "CapEff": true,
	"CapBnd": true, "CapAmb": true, "SigBlk": true, "SigIgn": true,
	"Speculation_Store_Bypass": true, "SpeculationIndirectBranch": true,
	"Cpus_allowed_list": true, "Mems_allowed_list": true,
}

// inheritedFiles are the other files of /proc that hold what a helper
// inherits.
var inheritedFiles = []string{"/proc/self/cgroup", "/proc/thread-self/attr/current",
	"/proc/self/oom_score_adj", "/proc/self/loginuid", "/proc/self/sessionid"}

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

// watchMounts opens this process's mount table, for mountsMoved to say
// whether any mount of its namespace was made, moved, changed or
// unmounted since; the caller closes the descriptor. It is not an
// *os.File: os.Open would add it to the runtime's poller, whose waits
// would take the kernel's flag (a poll of the table clears it).
func watchMounts() (int, error) {
	return unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
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
