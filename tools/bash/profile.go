package bash

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Profile is what a command may do, enforced by the kernel (see [Check]).
type Profile string

// The profiles, from the most confined.
const (
	// ReadOnly: read the working directory and the system directories a
	// shell needs; write nothing but /dev/null and a private temporary
	// directory (TMPDIR, removed afterwards), and change no file's mode,
	// owner, times or extended attributes (seccomp, amd64); no network,
	// no UNIX sockets; only the allow-listed environment.
	ReadOnly Profile = "read-only"
	// WorkspaceWrite is ReadOnly that may also write inside the working
	// directory.
	WorkspaceWrite Profile = "workspace-write"
	// Unconfined runs the shell directly, as the process itself could:
	// every file, the network, the whole environment, no resource limits.
	// It still dies, with everything it started, with the agent, on
	// timeout and when its shell ends (a supervisor, see the package
	// documentation).
	Unconfined Profile = "unconfined"
)

// Profiles lists the profiles, most confined first.
var Profiles = []Profile{ReadOnly, WorkspaceWrite, Unconfined}

// ParseProfile reads a profile name.
func ParseProfile(s string) (Profile, error) {
	for _, p := range Profiles {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown sandbox profile %q (want %s)", s, strings.Join(profileNames(), ", "))
}

func profileNames() []string {
	out := make([]string, len(Profiles))
	for i, p := range Profiles {
		out[i] = string(p)
	}
	return out
}

func (p Profile) rank() int {
	switch p {
	case ReadOnly:
		return 1
	case WorkspaceWrite:
		return 2
	case Unconfined:
		return 3
	}
	return 0
}

// Stricter returns the more confined of a and b; an empty profile is no
// requirement.
func Stricter(a, b Profile) Profile {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	case a.rank() <= b.rank():
		return a
	}
	return b
}

// confined reports whether the profile runs the command through the
// helper.
func (p Profile) confined() bool { return p == ReadOnly || p == WorkspaceWrite }

// Limits bound the resources of one command (setrlimit in the helper, for
// the shell and everything it starts; the PID namespace's pid_max). Zero
// fields take the defaults.
type Limits struct {
	// CPUTime is the processor time of each process (RLIMIT_CPU). Zero:
	// the tool's timeout, at least a second.
	CPUTime time.Duration
	// FileSize is the largest file a process may write (RLIMIT_FSIZE).
	// Zero: 1 GiB.
	FileSize int64
	// Procs is the processes the user may have (RLIMIT_NPROC). With a
	// user namespace (see [Report]) that counts only the command's own
	// processes; without one, every process of the user. Root is not
	// bound by it: where the kernel keeps a pid_max per PID namespace
	// (Linux 6.14) the namespace's caps the command's processes at Procs,
	// at least 300, for root too ([Report].PidCap). Zero: 512.
	Procs int
	// Memory is the address space of each process (RLIMIT_AS), root's
	// too. Zero: 4 GiB.
	Memory int64
}

func (l Limits) withDefaults(timeout time.Duration) Limits {
	if l.CPUTime <= 0 {
		l.CPUTime = max(timeout, time.Second)
	}
	if l.FileSize <= 0 {
		l.FileSize = 1 << 30
	}
	if l.Procs <= 0 {
		l.Procs = 512
	}
	if l.Memory <= 0 {
		l.Memory = 4 << 30
	}
	return l
}

// BaseEnv are the environment variables a confined command keeps, besides
// those listed in [Options.Env].
var BaseEnv = []string{"PATH", "HOME", "LANG", "TERM"}

// confinedEnv is the environment a confined command keeps.
func confinedEnv(extra []string) []string {
	var env []string
	seen := map[string]bool{}
	for _, name := range append(append([]string{}, BaseEnv...), extra...) {
		if seen[name] || name == "TMPDIR" {
			continue
		}
		seen[name] = true
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}
