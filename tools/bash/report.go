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

// Report is what the kernel can enforce here, found by [Check].
type Report struct {
	OS string `json:"os"`
	// ABI is the kernel's Landlock ABI version; 0 without Landlock.
	ABI         int    `json:"landlock_abi"`
	LandlockErr string `json:"landlock_error,omitempty"`
	// UserNS, NetNS and PidNS say which namespaces the helper is started
	// in (tried: all three, then network and PID, then none).
	UserNS   bool   `json:"user_namespace"`
	NetNS    bool   `json:"network_namespace"`
	PidNS    bool   `json:"pid_namespace"`
	NetNSErr string `json:"network_namespace_error,omitempty"`
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
	return checked
}

// Enforced lists what the kernel enforces on a confined command, one line
// each, and what it does not.
func (r Report) Enforced() (enforced, not []string) {
	add := func(ok bool, what string) {
		if ok {
			enforced = append(enforced, what)
		} else {
			not = append(not, what)
		}
	}
	ll := r.ABI > 0 && r.helperOK
	add(ll, "files: reads only inside the granted directories, writes only where the profile allows (Landlock ABI 1)")
	add(ll && r.ABI >= 2, "files: no moving or linking files between directories except where writable (ABI 2)")
	add(ll && r.ABI >= 3, "files: no truncating files that are not writable (ABI 3)")
	add(ll && r.ABI >= 5, "devices: no ioctl on device files (ABI 5)")
	add(ll && r.ABI >= 6, "processes: no signals to, and no abstract UNIX sockets of, processes outside the sandbox (ABI 6)")
	add(ll || r.helperOK && r.NetNS, "processes: no ptrace of processes outside the sandbox (ABI 1)")
	add(r.helperOK && r.NetNS, "network: a new network namespace (no interface but a loopback that is down)")
	add(ll && r.ABI >= 4, "network: no TCP bind or connect (ABI 4)")
	add(r.helperOK && r.NetNS || ll && r.ABI >= 10, "network: no UDP to the outside (the network namespace, or Landlock ABI 10)")
	add(ll && r.ABI >= 9, "network: no connecting to pathname UNIX sockets made outside the sandbox (ABI 9)")
	add(r.helperOK && seccompEnforced, "read-only: no chmod, chown, utimes or extended attributes anywhere, and no UNIX sockets at all (seccomp)")
	add(r.helperOK && r.UserNS, "privileges: a user namespace (capabilities mean nothing outside it; the process limit counts only the command's processes)")
	add(r.helperOK, "privileges: no capabilities, no new privileges (setuid programs do not raise them)")
	add(r.helperOK && r.PidNS, "processes: a PID namespace (the kernel kills the whole tree with the shell, on timeout and with the agent; without one the tool's supervisor does)")
	add(r.helperOK, "environment: only PATH, HOME, LANG, TERM and the listed variables; a private TMPDIR, removed afterwards")
	add(r.helperOK, "resources: CPU time, file size and process count limits")
	return enforced, not
}

// Enforceable says whether the kernel can enforce profile p, and if not,
// why. A confined profile needs the helper, Landlock with truncation
// (ABI 3), and the network cut: a network namespace, or Landlock's TCP and
// UDP rules (ABI 10).
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
		if r.NetNSErr != "" {
			why += " (" + r.NetNSErr + ")"
		}
		return fmt.Errorf("sandbox profile %s cannot be enforced: %s, and Landlock ABI %d cannot stop UDP (10 can)", p, why, r.ABI)
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
	}{{r.UserNS, "user"}, {r.NetNS, "network"}, {r.PidNS, "pid"}} {
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
	fmt.Fprintf(&b, "namespaces:    user %s, network %s, pid %s\n", yesNo(r.UserNS), yesNo(r.NetNS), yesNo(r.PidNS))
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
