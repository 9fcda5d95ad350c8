package sandboxhelper

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Env marks a process started as the sandbox helper or the supervisor;
// its value is the mode (HelperMode or SuperviseMode). Its configuration
// comes on fd 3, and it reports a failure to confine on fd 4 (closed on
// exec: EOF means the shell started).
const Env = "TOLLGATE_BASH_SANDBOX_HELPER"

// HelperMode is the value of Env that makes a process the sandbox helper;
// ProtocolMode makes it print Protocol() and exit (a helper binary is asked
// before it is used).
const (
	HelperMode   = "1"
	ProtocolMode = "protocol"
)

// The profiles the helper confines a command to (package bash's
// ReadOnly and WorkspaceWrite).
const (
	ReadOnly       = "read-only"
	WorkspaceWrite = "workspace-write"
)

// Config is what the tool tells the helper.
type Config struct {
	// Protocol is the sender's Protocol: a helper built from other
	// source refuses the configuration.
	Protocol string   `json:"protocol"`
	Probe    bool     `json:"probe,omitempty"` // apply everything, then exit 0
	Profile  string   `json:"profile"`
	Dir      string   `json:"dir"`
	Tmp      string   `json:"tmp"`
	Shell    string   `json:"shell"`
	Cmd      string   `json:"cmd"`
	Env      []string `json:"env"`
	CPU      uint64   `json:"cpu_seconds"`
	FileSize uint64   `json:"file_size"`
	Procs    uint64   `json:"procs"`
	Memory   uint64   `json:"memory"` // RLIMIT_AS
	// View: build the mount view (see setupView) with these masked paths
	// and sockets; FreshProc: mount a /proc of the PID namespace, whose
	// pid_max is PidMax (0: unchanged).
	View      bool     `json:"view"`
	Masked    []string `json:"masked,omitempty"`
	Sockets   []string `json:"sockets,omitempty"`
	FreshProc bool     `json:"fresh_proc,omitempty"`
	PidMax    uint64   `json:"pid_max,omitempty"`
}

// ProbeResult is what a probe prints on its stdout.
type ProbeResult struct {
	SeccompOK bool `json:"seccomp"`
}

// Namespaces are the clone flags the helper is started with; User adds
// the user namespace's identity mappings (the caller's uid and gid).
type Namespaces struct {
	Flags uintptr
	User  bool
}

// Apply sets n on a.
func (n Namespaces) Apply(a *syscall.SysProcAttr) {
	a.Cloneflags = n.Flags
	if n.User {
		uid, gid := os.Getuid(), os.Getgid()
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		a.GidMappingsEnableSetgroups = false
	}
}

// Main turns the process into the sandbox helper or the supervisor when
// it was started as one (Env is set), and never returns then. Otherwise
// it returns at once.
func Main() {
	mode := os.Getenv(Env)
	if mode == "" {
		return
	}
	status := os.NewFile(4, "status")
	var err error
	switch mode {
	case SuperviseMode:
		err = runSupervisor(status) // returns only if nothing was started
	case HelperMode:
		err = runHelper()
	case ProtocolMode:
		fmt.Println(Protocol())
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Fprintf(status, "%v", err)
		os.Exit(125)
	}
	os.Exit(0) // a probe
}

// readConfig reads a helper's configuration, the whole of fd 3 (which it
// closes), into v (a *Config or *SuperviseConfig, whose Protocol it checks
// against this build's), and keeps the status pipe (fd 4) from what the
// helper execs or starts. Until the tool has sent it all, the helper
// starts nothing: a tool that dies first sends none.
func readConfig(v any, proto *string) error {
	unix.CloseOnExec(4)
	cfgFile := os.NewFile(3, "config")
	data, err := io.ReadAll(cfgFile)
	cfgFile.Close()
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		err = dec.Decode(v)
	}
	if err == nil && !SameProtocol(*proto) {
		err = fmt.Errorf("this helper (protocol %s) was built from other source than the tollgate that started it (protocol %q): build both from one checkout (go install ./cmd/...)", Protocol(), *proto)
	}
	if err != nil {
		return fmt.Errorf("reading the configuration: %w", err)
	}
	return nil
}

// detachTerminal gives up the helper's controlling terminal, if it has
// one: without it, and without CAP_SYS_ADMIN, a command given the
// caller's terminal on its standard streams cannot push input into it
// (TIOCSTI), which the caller's shell would run unconfined (found by
// review). The seccomp filter refuses TIOCSTI as well.
func detachTerminal() {
	fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return // no controlling terminal
	}
	_ = unix.IoctlSetInt(fd, unix.TIOCNOTTY, 0)
	unix.Close(fd)
}

func runHelper() error {
	var c Config
	if err := readConfig(&c, &c.Protocol); err != nil {
		return err
	}
	// Everything from here is per thread (bounding set, capabilities,
	// no_new_privs, the Landlock domain) and the shell is exec'd from this
	// thread, so it is locked and never unlocked. (Confining every thread
	// of the process would read /proc/PID/task, which in the new PID
	// namespace is another process's.)
	runtime.LockOSThread()
	// The parent-death signal is per thread too, the main thread's; a
	// thread that is not the main one keeps none through the exec (found
	// by TestChainDies: a few in a hundred shells in a PID namespace
	// outlived the agent). The main thread has it until then, and kills
	// the whole helper if the agent dies first.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("parent-death signal: %w", err)
	}
	if c.View {
		if err := setupView(c); err != nil {
			return err
		}
	}
	fd, flags, err := landlock.V11.BestEffort().NewRulesetFD(rules(c)...)
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if err := dropBoundingCaps(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if fd >= 0 {
		if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
			return fmt.Errorf("landlock: %w", err)
		}
		unix.Close(fd)
	}
	if err := clearCaps(); err != nil {
		return err
	}
	if err := applySeccomp(c.Profile, c.Profile == WorkspaceWrite && len(c.Sockets) > 0); err != nil {
		return err
	}
	if c.Profile == ReadOnly || c.Profile == WorkspaceWrite {
		detachTerminal()
		// A descriptor the agent's process holds without close-on-exec
		// (a library's, a caller's) would reach the command, and through it
		// a file outside its view (found by review): none past stderr goes
		// through the exec (the status pipe is close-on-exec already).
		if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
			return fmt.Errorf("closing inherited descriptors: %w", err)
		}
	}
	if c.Probe {
		out, err := json.Marshal(ProbeResult{SeccompOK: SeccompEnforced})
		if err != nil {
			return err
		}
		out = append(out, '\n')
		lims, err := limitsOf(c)
		if err != nil {
			return err
		}
		if err := setLimits(lims); err != nil {
			return err
		}
		_, err = unix.Write(1, out)
		return err
	}
	// HOME is not readable under a confined profile, and programs such as
	// git treat an unreadable ~/.gitconfig as fatal: HOME is the private
	// TMPDIR instead (found by review: every allowed git command failed).
	env := []string{"TMPDIR=" + c.Tmp, "HOME=" + c.Tmp}
	for _, kv := range c.Env {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "TMPDIR=") {
			env = append(env, kv)
		}
	}
	// The limits last, just before the exec, and nothing allocated
	// between the two: under RLIMIT_AS the helper's own runtime may not
	// map memory again, and a Go binary's address space is large (a
	// race-built helper died in setupView with the limit set first, and
	// one died in syscall.Exec's own allocations with it set just before).
	argv0, err := syscall.BytePtrFromString(c.Shell)
	if err != nil {
		return err
	}
	argv, err := syscall.SlicePtrFromStrings([]string{c.Shell, "-c", c.Cmd})
	if err != nil {
		return err
	}
	envv, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return err
	}
	// The soft RLIMIT_NOFILE the helper was started with: Go raised it
	// for itself at start (syscall/rlimit.go) and syscall.Exec puts the
	// saved one back before its execve, which the raw one below does not
	// — an exec that cannot succeed ("") does it, and clears the saved
	// value (TestConfinedCommandKeepsTheSoftNofileLimit, found by review:
	// a confined command's soft limit was the hard one's).
	_ = syscall.Exec("", nil, nil)
	lims, err := limitsOf(c)
	if err != nil {
		return err
	}
	// No collection (and its allocations) in between; nothing here makes
	// a thread either (syscall.Exec's lock against a thread made during
	// the exec is the runtime's, not ours to take).
	debug.SetGCPercent(-1)
	if err := setLimits(lims); err != nil {
		return err
	}
	_, _, errno := syscall.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(argv0)), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	return fmt.Errorf("exec %s: %w", c.Shell, errno)
}

// limit is one rlimit to set.
type limit struct {
	res int
	lim unix.Rlimit
}

// limitsOf are the command's rlimits (only lowered: raising needs
// privileges), read and computed before any is set.
func limitsOf(c Config) ([5]limit, error) {
	var out [5]limit
	for i, l := range []struct {
		res int
		v   uint64
	}{{unix.RLIMIT_CPU, c.CPU}, {unix.RLIMIT_FSIZE, c.FileSize}, {unix.RLIMIT_NPROC, c.Procs}, {unix.RLIMIT_AS, c.Memory}, {unix.RLIMIT_CORE, 0}} {
		var old unix.Rlimit
		if err := unix.Getrlimit(l.res, &old); err != nil {
			return out, fmt.Errorf("getrlimit %d: %w", l.res, err)
		}
		v := min(l.v, old.Max)
		out[i] = limit{l.res, unix.Rlimit{Cur: v, Max: v}}
	}
	return out, nil
}

// setLimits sets lims with raw system calls: nothing is allocated on the
// way (an allocation may need memory the limits no longer allow).
func setLimits(lims [5]limit) error {
	for i := range lims {
		if _, _, errno := syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(lims[i].res), uintptr(unsafe.Pointer(&lims[i].lim)), 0, 0, 0); errno != 0 {
			return fmt.Errorf("setrlimit %d: %w", lims[i].res, errno)
		}
	}
	return nil
}

// rules are the Landlock rules of a profile. Everything else is denied:
// every file access right the kernel's ABI can restrict, TCP bind and
// connect (ABI 4), signals and abstract UNIX sockets out of the sandbox
// (ABI 6), pathname UNIX sockets (ABI 9), UDP (ABI 10).
func rules(c Config) []landlock.Rule {
	rs := []landlock.Rule{
		landlock.RODirs("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/proc",
			"/etc/alternatives", "/etc/terminfo", "/etc/ld.so.conf.d").IgnoreIfMissing(),
		landlock.ROFiles("/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/ld.so.cache",
			"/etc/ld.so.conf", "/etc/localtime", "/etc/timezone", "/etc/locale.alias", "/etc/gitconfig",
			"/etc/inputrc", "/etc/magic", "/etc/magic.mime", "/etc/mime.types", "/etc/os-release",
			"/etc/debian_version", "/etc/hostname", "/etc/hosts", "/dev/zero", "/dev/urandom", "/dev/random").IgnoreIfMissing(),
		landlock.RWFiles("/dev/null").IgnoreIfMissing(),
		landlock.RWDirs(c.Tmp).WithRefer(),
	}
	if c.Profile == WorkspaceWrite {
		rs = append(rs, landlock.RWDirs(c.Dir).WithRefer())
		if len(c.Sockets) > 0 { // connecting to them (ABI 9)
			rs = append(rs, landlock.ROFiles(c.Sockets...).WithResolveUnix().IgnoreIfMissing())
		}
	} else {
		rs = append(rs, landlock.RODirs(c.Dir))
	}
	return rs
}

// dropBoundingCaps empties the capability bounding set, so that no program
// the command runs gains a capability (root included), while the helper
// still has CAP_SETPCAP. A process without capabilities has nothing to
// drop.
func dropBoundingCaps() error {
	if !hasCaps() {
		return nil
	}
	for c := 0; c <= 63; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the last capability
			}
			return fmt.Errorf("dropping capability %d: %w", c, err)
		}
	}
	return unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
}

func capData() (unix.CapUserHeader, [2]unix.CapUserData, error) {
	h := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var d [2]unix.CapUserData
	err := unix.Capget(&h, &d[0])
	return h, d, err
}

func hasCaps() bool {
	_, d, err := capData()
	return err != nil || d[0].Permitted|d[1].Permitted|d[0].Effective|d[1].Effective != 0
}

// clearCaps drops the helper's own capabilities.
func clearCaps() error {
	if !hasCaps() {
		return nil
	}
	h, _, _ := capData()
	var d [2]unix.CapUserData
	if err := unix.Capset(&h, &d[0]); err != nil {
		return fmt.Errorf("dropping capabilities: %w", err)
	}
	return nil
}
