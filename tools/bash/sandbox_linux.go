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
	}{{unix.RLIMIT_CPU, c.CPU}, {unix.RLIMIT_FSIZE, c.FileSize}, {unix.RLIMIT_NPROC, c.Procs}, {unix.RLIMIT_CORE, 0}} {
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
	if err := applySeccomp(c.Profile); err != nil {
		return err
	}
	if c.Probe {
		return nil
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
// same without the user namespace (root); none.
var nsChoices = []namespaces{
	{unix.CLONE_NEWUSER | unix.CLONE_NEWNET | unix.CLONE_NEWPID, true},
	{unix.CLONE_NEWNET | unix.CLONE_NEWPID, false},
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

// probe runs the helper once with ns and reports whether it confined
// itself.
func probe(ns namespaces) error {
	dir, err := os.MkdirTemp("", "tollgate-sandbox-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd, after, err := helperCommand(ctx, helperConfig{Probe: true, Profile: ReadOnly, Dir: dir, Tmp: dir,
		CPU: 5, FileSize: 1 << 20, Procs: 1 << 20}, ns)
	if err != nil {
		return err
	}
	if err := after(cmd.Start()); err != nil {
		if cmd.Process != nil {
			_ = cmd.Wait()
		}
		return err
	}
	return cmd.Wait()
}

func check() Report {
	r := Report{OS: "linux"}
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil {
		r.LandlockErr = err.Error()
	} else {
		r.ABI = abi
	}
	if !helperWired.Load() {
		r.HelperErr = "bash.MaybeRunHelper() is not called at the start of main (or TestMain): the binary cannot be its own sandbox helper"
		return r
	}
	var errs []string
	for _, ns := range nsChoices {
		err := probe(ns)
		if err == nil {
			r.UserNS = ns.user
			r.NetNS = ns.flags&unix.CLONE_NEWNET != 0
			r.PidNS = ns.flags&unix.CLONE_NEWPID != 0
			r.ns = ns
			r.helperOK = true
			break
		}
		errs = append(errs, err.Error())
	}
	if !r.helperOK {
		r.HelperErr = "the sandbox helper failed: " + errs[len(errs)-1]
	} else if !r.NetNS && len(errs) > 0 {
		r.NetNSErr = errs[len(errs)-1]
	}
	return r
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
	r := Check()
	c := helperConfig{Profile: p, Dir: dir, Tmp: tmp, Shell: shell, Cmd: cmdline,
		Env: confinedEnv(o.Env), CPU: uint64((o.Limits.CPUTime + time.Second - 1) / time.Second),
		FileSize: uint64(o.Limits.FileSize), Procs: uint64(o.Limits.Procs)}
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
