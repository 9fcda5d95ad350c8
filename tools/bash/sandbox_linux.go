package bash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// helperEnv marks a process started as the sandbox helper: the binary
// re-executing itself. Its configuration comes on fd 3, and it reports a
// failure to confine on fd 4 (closed on exec: EOF means the shell started).
const helperEnv = "TOLLGATE_BASH_SANDBOX_HELPER"

// helperConfig is what the tool tells the helper.
type helperConfig struct {
	Probe    bool     `json:"probe,omitempty"` // apply everything, then exit 0
	Profile  Profile  `json:"profile"`
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

// MaybeRunHelper turns the process into the sandbox helper when it was
// started as one, and never returns then. Otherwise it returns at once and
// records that the binary can be its own helper. Call it first thing in
// main, and in TestMain of packages whose tests run the tool confined:
// confined profiles re-execute os.Executable() and need it there.
//
// The same binary is the supervisor of unconfined commands and of
// confined ones without a PID namespace (see the package documentation):
// without MaybeRunHelper, an unconfined command runs as the process's
// direct child, and what it leaves in the background, or moves to another
// process group, may outlive the process.
func MaybeRunHelper() {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		helperWired.Store(true)
		return
	}
	status := os.NewFile(4, "status")
	var err error
	if mode == superviseMode {
		err = runSupervisor(status) // returns only if nothing was started
	} else {
		err = runHelper()
	}
	if err != nil {
		fmt.Fprintf(status, "%v", err)
		os.Exit(125)
	}
	os.Exit(0) // a probe
}

// readConfig reads a helper's configuration, the whole of fd 3 (which it
// closes), into v, and keeps the status pipe (fd 4) from what the helper
// execs or starts. Until the tool has sent it all, the helper starts
// nothing: a tool that dies first sends none.
func readConfig(v any) error {
	unix.CloseOnExec(4)
	cfgFile := os.NewFile(3, "config")
	data, err := io.ReadAll(cfgFile)
	cfgFile.Close()
	if err == nil {
		err = json.Unmarshal(data, v)
	}
	if err != nil {
		return fmt.Errorf("reading the configuration: %w", err)
	}
	return nil
}

func runHelper() error {
	var c helperConfig
	if err := readConfig(&c); err != nil {
		return err
	}
	for _, l := range []struct {
		res int
		v   uint64
	}{{unix.RLIMIT_CPU, c.CPU}, {unix.RLIMIT_FSIZE, c.FileSize}, {unix.RLIMIT_NPROC, c.Procs}, {unix.RLIMIT_AS, c.Memory}, {unix.RLIMIT_CORE, 0}} {
		var old unix.Rlimit
		if err := unix.Getrlimit(l.res, &old); err != nil {
			return fmt.Errorf("getrlimit %d: %w", l.res, err)
		}
		v := min(l.v, old.Max) // only lowered: raising needs privileges
		if err := unix.Setrlimit(l.res, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("setrlimit %d: %w", l.res, err)
		}
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
	if c.Probe {
		return json.NewEncoder(os.Stdout).Encode(probeResult{SeccompOK: seccompEnforced})
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
	return syscall.Exec(c.Shell, []string{c.Shell, "-c", c.Cmd}, env)
}

// rules are the Landlock rules of a profile. Everything else is denied:
// every file access right the kernel's ABI can restrict, TCP bind and
// connect (ABI 4), signals and abstract UNIX sockets out of the sandbox
// (ABI 6), pathname UNIX sockets (ABI 9), UDP (ABI 10).
func rules(c helperConfig) []landlock.Rule {
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

// namespaces are the clone flags the helper is started with.
type namespaces struct {
	flags uintptr
	user  bool
}

// nsChoices are the namespace sets tried, best first: a user namespace
// (the command's capabilities mean nothing outside it, and process counts
// are its own) with a network namespace (no interface but a loopback that
// is down) and a PID namespace (the whole tree dies with its shell); the
// same without the user namespace (root); a user namespace alone; none.
//
// Each has a mount namespace (the command's own view of the file system,
// see setupView); without one tollgate's state cannot be hidden, and no
// confined profile is enforced.
var nsChoices = []namespaces{
	{unix.CLONE_NEWUSER | unix.CLONE_NEWNET | unix.CLONE_NEWPID | unix.CLONE_NEWNS, true},
	{unix.CLONE_NEWNET | unix.CLONE_NEWPID | unix.CLONE_NEWNS, false},
	{unix.CLONE_NEWUSER | unix.CLONE_NEWNS, true},
	{0, false},
}

func (n namespaces) apply(a *syscall.SysProcAttr) {
	a.Cloneflags = n.flags
	if n.user {
		uid, gid := os.Getuid(), os.Getgid()
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		a.GidMappingsEnableSetgroups = false
	}
}

// helperCommand prepares the helper for c; the caller starts it and calls
// the returned function after Start to send the configuration and learn
// whether the helper confined the command. It is started in its own
// process group, killed by cmd.Cancel, with Pdeathsig: with a PID
// namespace, where the helper (then the shell) is the namespace's init,
// the kernel kills every process in it when the shell dies, whatever
// killed the shell (the timeout, the agent's death through Pdeathsig), so
// the whole tree dies with it.
//
// The race of the agent dying between the fork and PR_SET_PDEATHSIG is
// closed by the order of things, not by Go's check of getppid (which in a
// new PID namespace is 0 whatever happens, and the SIGKILL it then sends
// itself is ignored, as by any init): the configuration is sent only after
// Start returns, which is after the child set its death signal, and
// without a configuration the helper starts nothing.
func helperCommand(ctx context.Context, c helperConfig, ns namespaces) (*exec.Cmd, func(start error) error, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return nil, nil, err
	}
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	ns.apply(attr)
	cmd, after, err := selfCommand(ctx, "1", data, c.Dir, attr, "sandbox helper")
	if err != nil {
		return nil, nil, err
	}
	cmd.Cancel = killGroup(cmd)
	return cmd, after, nil
}

// selfCommand prepares the binary re-executed as a helper in mode (the
// value of helperEnv), in dir, with attr. The returned function, called
// after Start, sends data on the helper's fd 3 and waits for its fd 4 to
// close: a message there is a failure before the command started (failed
// names the step in the error).
func selfCommand(ctx context.Context, mode string, data []byte, dir string, attr *syscall.SysProcAttr, failed string) (*exec.Cmd, func(start error) error, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("finding the binary to run the %s: %w", failed, err)
	}
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		cfgR.Close()
		cfgW.Close()
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Args = []string{"tollgate-sandbox-helper"}
	cmd.Dir = dir
	cmd.Env = []string{helperEnv + "=" + mode}
	cmd.ExtraFiles = []*os.File{cfgR, stW}
	cmd.SysProcAttr = attr
	after := func(start error) error {
		cfgR.Close()
		stW.Close()
		defer stR.Close()
		if start != nil {
			cfgW.Close()
			return start
		}
		// The helper reads all of it before anything else: a large
		// command does not block on the pipe's buffer for long.
		_, werr := cfgW.Write(data)
		cfgW.Close()
		msg, _ := io.ReadAll(stR)
		if len(msg) > 0 {
			return fmt.Errorf("%s: %s", failed, msg)
		}
		if werr != nil {
			return fmt.Errorf("%s: sending the configuration: %w", failed, werr)
		}
		return nil
	}
	return cmd, after, nil
}

// probeResult is what a probe prints on its stdout.
type probeResult struct {
	SeccompOK bool `json:"seccomp"`
}

// probe runs the helper once with ns and c (Probe is set) and reports
// whether it confined itself.
func probe(ns namespaces, c helperConfig) error {
	dir, err := os.MkdirTemp("", "tollgate-sandbox-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.Probe, c.Profile, c.Dir, c.Tmp = true, ReadOnly, dir, dir
	c.CPU, c.FileSize, c.Procs, c.Memory = 5, 1<<20, 1<<20, 1<<40
	cmd, after, err := helperCommand(ctx, c, ns)
	if err != nil {
		return err
	}
	var out strings.Builder
	cmd.Stdout = &out
	if err := after(cmd.Start()); err != nil {
		if cmd.Process != nil {
			_ = cmd.Wait()
		}
		return err
	}
	if err := cmd.Wait(); err != nil {
		return err
	}
	var res probeResult
	if err := json.Unmarshal([]byte(out.String()), &res); err != nil {
		return fmt.Errorf("the probe said %q: %w", out.String(), err)
	}
	return nil
}

// pidMaxPerNamespace says whether the kernel keeps a pid_max per PID
// namespace (Linux 6.14): before, /proc/sys/kernel/pid_max is the whole
// machine's, and root writing it in the sandbox would lower it for every
// process.
func pidMaxPerNamespace() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	rel := unix.ByteSliceToString(u.Release[:])
	var major, minor int
	if _, err := fmt.Sscanf(rel, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 6 || major == 6 && minor >= 14
}

// minPidMax is the smallest pid_max the kernel takes (RESERVED_PIDS + 1).
const minPidMax = 301

// pidMax is the pid_max that caps a PID namespace at procs processes.
func pidMax(procs uint64) uint64 { return max(procs+1, minPidMax) }

func check() Report {
	r := Report{OS: "linux", Memory: "address space (RLIMIT_AS)"}
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil {
		r.LandlockErr = err.Error()
	} else {
		r.ABI = abi
	}
	r.CgroupErr = cgroupV2()
	if !helperWired.Load() {
		r.HelperErr = "bash.MaybeRunHelper() is not called at the start of main (or TestMain): the binary cannot be its own sandbox helper"
		return r
	}
	var errs []string
	for _, ns := range nsChoices {
		c := helperConfig{View: ns.flags&unix.CLONE_NEWNS != 0, FreshProc: ns.flags&unix.CLONE_NEWPID != 0}
		capped := false
		if c.FreshProc && pidMaxPerNamespace() {
			c.PidMax, capped = pidMax(512), true
		}
		err := probe(ns, c)
		if err != nil && capped {
			c.PidMax, capped = 0, false
			if err2 := probe(ns, c); err2 == nil {
				r.PidCapErr = err.Error()
				err = nil
			}
		}
		if err == nil {
			r.UserNS = ns.user
			r.NetNS = ns.flags&unix.CLONE_NEWNET != 0
			r.PidNS = ns.flags&unix.CLONE_NEWPID != 0
			r.MountNS = c.View
			r.PidCap = capped
			r.ns = ns
			r.helperOK = true
			break
		}
		errs = append(errs, err.Error())
	}
	switch {
	case !r.helperOK:
		r.HelperErr = "the sandbox helper failed: " + errs[len(errs)-1]
	case len(errs) > 0:
		r.NamespaceErr = errs[0]
	}
	if r.PidNS && !r.PidCap && r.PidCapErr == "" {
		r.PidCapErr = "this kernel has one pid_max for the whole machine (a PID namespace's own is Linux 6.14)"
	}
	return r
}

// cgroupV2 says why no delegated cgroup v2 bounds the commands' processes
// and memory: this version does not use one yet, and says whether the
// machine has one.
func cgroupV2() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "no cgroup information: " + err.Error()
	}
	var path string
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			path, found = p, true
		}
	}
	if !found {
		return "no cgroup v2 hierarchy"
	}
	var st unix.Statfs_t
	root := "/sys/fs/cgroup"
	if unix.Statfs(root, &st) != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		root = "/sys/fs/cgroup/unified"
	}
	ctrl, err := os.ReadFile(filepath.Join(root, path, "cgroup.controllers"))
	if err != nil {
		return "no cgroup v2 hierarchy mounted at /sys/fs/cgroup"
	}
	f := strings.Fields(string(ctrl))
	if !slices.Contains(f, "pids") || !slices.Contains(f, "memory") {
		return fmt.Sprintf("the cgroup v2 group %s has no pids and memory controllers (has: %s)", path, strings.Join(f, " "))
	}
	return "a cgroup v2 group with pids and memory controllers exists (" + path + "), but this version does not use it yet"
}

// absShell resolves the shell to an absolute path, as the helper execs it
// with a PATH that may differ.
func absShell(shell string) (string, error) {
	if filepath.IsAbs(shell) {
		return shell, nil
	}
	return exec.LookPath(shell)
}

// confinedCommand prepares the helper that runs cmdline under p, with tmp
// as its private temporary directory.
func confinedCommand(ctx context.Context, o Options, p Profile, tmp, cmdline string) (command, error) {
	shell, err := absShell(o.Shell)
	if err != nil {
		return command{}, err
	}
	dir := o.Dir
	if dir == "" {
		dir = "."
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return command{}, err
	}
	masked, err := absPaths(append(append([]string{}, DefaultMasked...), o.Masked...))
	if err != nil {
		return command{}, err
	}
	sockets, err := absPaths(o.Sockets)
	if err != nil {
		return command{}, err
	}
	r := Check()
	c := helperConfig{Profile: p, Dir: dir, Tmp: tmp, Shell: shell, Cmd: cmdline,
		Env: confinedEnv(o.Env), CPU: uint64((o.Limits.CPUTime + time.Second - 1) / time.Second),
		FileSize: uint64(o.Limits.FileSize), Procs: uint64(o.Limits.Procs), Memory: uint64(o.Limits.Memory),
		View: r.MountNS, Masked: masked, Sockets: sockets, FreshProc: r.MountNS && r.PidNS}
	if r.PidCap {
		c.PidMax = pidMax(c.Procs)
	}
	if r.PidNS {
		cmd, after, err := helperCommand(ctx, c, r.ns) // the namespace takes the tree with the shell
		return command{Cmd: cmd, after: after}, err
	}
	return supervisedCommand(ctx, superviseConfig{Confined: &c, Cloneflags: r.ns.flags, UserNS: r.ns.user}, dir, "sandbox helper")
}

// unconfinedCommand runs an unconfined shell under the supervisor, or,
// when the binary cannot be its own helper, as a direct child in its own
// process group with Pdeathsig: then the shell dies with the agent's
// process and its group on timeout, but what it leaves behind does not
// die with the agent.
func unconfinedCommand(ctx context.Context, o Options, cmdline string) (command, error) {
	if !helperWired.Load() {
		return command{Cmd: directCommand(ctx, o, cmdline, &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL})}, nil
	}
	shell, err := absShell(o.Shell)
	if err != nil {
		return command{}, err
	}
	return supervisedCommand(ctx, superviseConfig{Shell: shell, Cmd: cmdline, Env: shellEnv(o.Dir)}, o.Dir, "supervisor")
}

// shellEnv is the environment of an unconfined shell: the process's, with
// PWD naming dir, as os/exec would give it.
func shellEnv(dir string) []string {
	env := os.Environ()
	if dir == "" {
		return env
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return env
	}
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PWD=") })
	return append(env, "PWD="+abs)
}
