package bash

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
)

// helperWired says MaybeRunHelper ran in this process: the binary is its
// own sandbox helper.
var helperWired atomic.Bool

// HelperName is the sandbox helper binary (cmd/tollgate-sandbox): found
// next to the process's executable, it is started for every command in
// place of the executable itself, which then need not be re-executed.
// `go install ./cmd/...` puts it beside tollgate.
const HelperName = "tollgate-sandbox"

// Report is what the kernel can enforce here, found by [Check].
type Report struct {
	OS string `json:"os"`
	// ABI is the kernel's Landlock ABI version; 0 without Landlock.
	ABI         int    `json:"landlock_abi"`
	LandlockErr string `json:"landlock_error,omitempty"`
	// UserNS, NetNS and PidNS say which namespaces the helper is started
	// in (tried: all three, then network and PID, then none).
	UserNS bool `json:"user_namespace"`
	NetNS  bool `json:"network_namespace"`
	PidNS  bool `json:"pid_namespace"`
	// MountNS: the command gets its own view of the file system, where
	// tollgate's state is masked (see [Options.Masked]).
	MountNS bool `json:"mount_namespace"`
	// IPCNS: the command gets System V and POSIX IPC of its own, which
	// ends with it.
	IPCNS bool `json:"ipc_namespace"`
	// NamespaceErr is why the best set of namespaces could not be had.
	NamespaceErr string `json:"namespace_error,omitempty"`
	// PidCap: the PID namespace's pid_max caps the command's processes
	// (Limits.Procs), root's included, which RLIMIT_NPROC does not.
	PidCap    bool   `json:"pid_cap"`
	PidCapErr string `json:"pid_cap_error,omitempty"`
	// Memory is what bounds a command's memory (Limits.Memory).
	Memory string `json:"memory_limit"`
	// CgroupErr says why no cgroup bounds them.
	CgroupErr string `json:"cgroup,omitempty"`
	// Sockets are the UNIX sockets an operator lets workspace-write
	// commands use ([Options.Sockets]); not found by Check: set by the
	// caller before printing the report.
	Sockets []string `json:"sockets,omitempty"`
	// Helper is the binary started as the sandbox helper and the
	// supervisor: [HelperName] next to the executable, or the executable
	// itself (slower to start); HelperNote says why not HelperName.
	Helper     string `json:"helper,omitempty"`
	HelperNote string `json:"helper_note,omitempty"`
	// HelperErr says why the sandbox helper cannot run, if it cannot.
	HelperErr string `json:"helper_error,omitempty"`

	helperOK bool
	ns       namespaces
}

var (
	checkOnce sync.Once
	checked   Report
)

// Check finds, once per process, what the kernel enforces: the Landlock
// ABI, and which namespaces the sandbox helper may create (by starting it).
// Call [MaybeRunHelper] first.
func Check() Report {
	if !helperWired.Load() {
		return check() // not cached: MaybeRunHelper may still be called
	}
	checkOnce.Do(func() { checked = check() })
	r := checked
	if r.Helper != "" { // the helper now, which SetHelper may have changed
		r.Helper, r.HelperNote, _ = helperPath()
	}
	return r
}

// Guarantee is one thing the kernel does or does not enforce on a
// confined command.
type Guarantee struct {
	// Name is short and stable: "mount-view", "masked-paths", "io_uring",
	// "unix-sockets", "pids", "memory", ...
	Name     string `json:"name"`
	Enforced bool   `json:"enforced"`
	// What it is; Why it is not enforced, when it is not.
	What string `json:"what"`
	Why  string `json:"why,omitempty"`
}

// Guarantees lists what the kernel enforces on a confined command here,
// and what it does not, and why.
func (r Report) Guarantees() []Guarantee {
	sockets := r.Sockets
	var out []Guarantee
	add := func(name string, ok bool, what, why string) {
		g := Guarantee{Name: name, Enforced: ok, What: what}
		if !ok {
			g.Why = why
			if !r.helperOK {
				g.Why = "the sandbox helper does not run"
				if r.HelperErr != "" {
					g.Why += ": " + r.HelperErr
				}
			}
		}
		out = append(out, g)
	}
	ll := r.ABI > 0 && r.helperOK
	abi := func(n int) string {
		if r.ABI == 0 {
			return "no Landlock"
		}
		return fmt.Sprintf("Landlock ABI %d here, %d needed", r.ABI, n)
	}
	mnt := r.helperOK && r.MountNS
	noMnt := "no mount namespace"
	if r.NamespaceErr != "" {
		noMnt += " (" + r.NamespaceErr + ")"
	}
	add("mount-view", mnt, "files: a mount namespace of its own: every mount read-only but the working directory (workspace-write) and TMPDIR; /tmp and /run empty", noMnt)
	add("masked-paths", mnt, "files: tollgate's store, policy and tokens files and the database's socket directories are not in its view, even inside the working directory", noMnt)
	add("proc", mnt, "processes: /proc shows only the command's own processes (a fresh /proc of its PID namespace; without one, an empty /proc)", noMnt)
	add("landlock-files", ll, "files: reads only inside the granted directories, writes only where the profile allows (Landlock ABI 1)", abi(1))
	add("landlock-refer", ll && r.ABI >= 2, "files: no moving or linking files between directories except where writable (ABI 2)", abi(2))
	add("landlock-truncate", ll && r.ABI >= 3, "files: no truncating files that are not writable (ABI 3)", abi(3))
	add("ioctl", ll && r.ABI >= 5, "devices: no ioctl on device files (ABI 5)", abi(5))
	add("scoped", ll && r.ABI >= 6, "processes: no signals to, and no abstract UNIX sockets of, processes outside the sandbox (ABI 6)", abi(6))
	add("ptrace", ll || r.helperOK && r.NetNS, "processes: no ptrace of processes outside the sandbox (ABI 1)", abi(1))
	add("network-namespace", r.helperOK && r.NetNS, "network: a new network namespace (no interface but a loopback that is down)", "no network namespace")
	add("tcp", ll && r.ABI >= 4, "network: no TCP bind or connect (ABI 4)", abi(4))
	add("udp", r.helperOK && r.NetNS || ll && r.ABI >= 10, "network: no UDP to the outside (the network namespace, or Landlock ABI 10)", "no network namespace, and "+abi(10))
	sec := r.helperOK && seccompEnforced
	noSec := "no seccomp filter for this architecture (amd64 only)"
	add("io_uring", sec, "system calls: no io_uring in either confined profile (its operations are not system calls a filter sees: IORING_OP_SOCKET makes sockets) (seccomp)", noSec)
	if len(sockets) == 0 {
		add("unix-sockets", sec, "network: no UNIX sockets (socket(AF_UNIX) refused in both confined profiles; socketpair allowed) (seccomp)", noSec)
	} else {
		add("unix-sockets", sec, "network: no UNIX sockets under read-only; workspace-write may make them, and its view holds only these of the sockets outside the working directory and TMPDIR: "+strings.Join(sockets, ", ")+" (seccomp, mount view)", noSec)
		add("unix-socket-paths", ll && r.ABI >= 9, "network: workspace-write connects to no pathname UNIX socket but those listed (ABI 9)", abi(9)+"; the mount view still holds no other socket outside the working directory and TMPDIR")
	}
	add("metadata", sec, "read-only: no chmod, chown, utimes or extended attributes anywhere (seccomp)", noSec)
	add("pathname-unix-sockets", ll && r.ABI >= 9, "network: no connecting to pathname UNIX sockets made outside the sandbox (ABI 9)", abi(9)+" (the seccomp filter and the mount view stand in)")
	add("user-namespace", r.helperOK && r.UserNS, "privileges: a user namespace (capabilities mean nothing outside it; the process limit counts only the command's processes)", "no user namespace")
	add("capabilities", r.helperOK, "privileges: no capabilities, no new privileges (setuid programs do not raise them)", "")
	add("pid-namespace", r.helperOK && r.PidNS, "processes: a PID namespace (the kernel kills the whole tree with the shell, on timeout and with the agent; without one the tool's supervisor does)", "no PID namespace")
	pidsWhy := r.PidCapErr
	if !r.PidNS {
		pidsWhy = "no PID namespace"
	}
	pidsWhy += "; RLIMIT_NPROC still applies, except to root"
	add("pids", r.helperOK && r.PidCap, "resources: the command's processes are capped (the PID namespace's pid_max: holds for root too; RLIMIT_NPROC besides)", pidsWhy)
	memWhat := "resources: the command's memory is capped (" + r.Memory + ", each process; holds for root too)"
	add("memory", r.helperOK, memWhat, "")
	add("cgroup", false, "resources: a cgroup v2 group of its own (pids.max, memory.max for the whole tree)", r.CgroupErr)
	add("environment", r.helperOK, "environment: only PATH, HOME, LANG, TERM and the listed variables; a private TMPDIR, removed afterwards", "")
	add("rlimits", r.helperOK, "resources: CPU time, file size, address space and process count limits (setrlimit)", "")
	return out
}

// Enforced lists what the kernel enforces on a confined command, one line
// each, and what it does not (with why).
func (r Report) Enforced() (enforced, not []string) {
	for _, g := range r.Guarantees() {
		if g.Enforced {
			enforced = append(enforced, g.What)
		} else if g.Why != "" {
			not = append(not, g.What+": "+g.Why)
		} else {
			not = append(not, g.What)
		}
	}
	return enforced, not
}

// Enforceable says whether the kernel can enforce profile p, and if not,
// why. A confined profile needs the helper, Landlock with truncation
// (ABI 3), the network cut (a network namespace, or Landlock's TCP and
// UDP rules, ABI 10), and a mount namespace (the view where tollgate's
// state is not).
func (r Report) Enforceable(p Profile) error {
	switch {
	case p == Unconfined || p == "":
		return nil
	case !p.confined():
		return fmt.Errorf("unknown sandbox profile %q", p)
	case r.HelperErr != "":
		return fmt.Errorf("sandbox profile %s cannot be enforced: %s", p, r.HelperErr)
	case r.ABI == 0:
		why := "no Landlock"
		if r.OS != "linux" {
			why = "Landlock is Linux only, this is " + r.OS
		} else if r.LandlockErr != "" {
			why += " (" + r.LandlockErr + ")"
		}
		return fmt.Errorf("sandbox profile %s cannot be enforced: %s", p, why)
	case r.ABI < 3:
		return fmt.Errorf("sandbox profile %s cannot be enforced: Landlock ABI %d cannot stop truncation (3 can)", p, r.ABI)
	case !r.NetNS && r.ABI < 10:
		why := "no network namespace"
		if r.NamespaceErr != "" {
			why += " (" + r.NamespaceErr + ")"
		}
		return fmt.Errorf("sandbox profile %s cannot be enforced: %s, and Landlock ABI %d cannot stop UDP (10 can)", p, why, r.ABI)
	case !r.MountNS:
		why := "no mount namespace"
		if r.NamespaceErr != "" {
			why += " (" + r.NamespaceErr + ")"
		}
		return fmt.Errorf("sandbox profile %s cannot be enforced: %s: tollgate's own state (store, policy, tokens, the database's socket) could not be hidden from the command", p, why)
	}
	return nil
}

// Summary is the report on one line, for a start-up log.
func (r Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "landlock ABI %d", r.ABI)
	if r.ABI == 0 && r.LandlockErr != "" {
		fmt.Fprintf(&b, " (%s)", r.LandlockErr)
	}
	ns := []string{}
	for _, x := range []struct {
		ok   bool
		name string
	}{{r.UserNS, "user"}, {r.NetNS, "network"}, {r.PidNS, "pid"}, {r.MountNS, "mount"}, {r.IPCNS, "ipc"}} {
		if x.ok {
			ns = append(ns, x.name)
		}
	}
	if len(ns) == 0 {
		ns = append(ns, "none")
	}
	fmt.Fprintf(&b, "; namespaces: %s", strings.Join(ns, ", "))
	for _, p := range []Profile{ReadOnly, WorkspaceWrite} {
		if err := r.Enforceable(p); err != nil {
			fmt.Fprintf(&b, "; %s: NOT enforced", p)
		} else {
			fmt.Fprintf(&b, "; %s: enforced", p)
		}
	}
	if r.HelperErr != "" {
		fmt.Fprintf(&b, "; %s", r.HelperErr)
	}
	return b.String()
}

// Write prints the report for people: the ABI, each profile, what is
// enforced and what is not.
func (r Report) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "os:            %s\n", r.OS)
	fmt.Fprintf(&b, "landlock ABI:  %d", r.ABI)
	if r.LandlockErr != "" {
		fmt.Fprintf(&b, " (%s)", r.LandlockErr)
	}
	b.WriteByte('\n')
	fmt.Fprintf(&b, "namespaces:    user %s, network %s, pid %s, mount %s, ipc %s\n", yesNo(r.UserNS), yesNo(r.NetNS), yesNo(r.PidNS), yesNo(r.MountNS), yesNo(r.IPCNS))
	if r.Helper != "" {
		fmt.Fprintf(&b, "helper:        %s\n", r.Helper)
	}
	if r.HelperNote != "" {
		fmt.Fprintf(&b, "               %s\n", r.HelperNote)
	}
	if r.HelperErr != "" {
		fmt.Fprintf(&b, "helper:        %s\n", r.HelperErr)
	}
	b.WriteString("profiles:\n")
	for _, p := range Profiles {
		if err := r.Enforceable(p); err != nil {
			fmt.Fprintf(&b, "  %-16s NOT enforced: %v; rules that require it ask instead of allowing\n", p, err)
		} else if p == Unconfined {
			fmt.Fprintf(&b, "  %-16s nothing to enforce (resource limits only)\n", p)
		} else {
			fmt.Fprintf(&b, "  %-16s enforced\n", p)
		}
	}
	enforced, not := r.Enforced()
	b.WriteString("enforced on confined commands:\n")
	for _, s := range enforced {
		fmt.Fprintf(&b, "  + %s\n", s)
	}
	if len(not) > 0 {
		b.WriteString("not enforced here:\n")
		for _, s := range not {
			fmt.Fprintf(&b, "  - %s\n", s)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
