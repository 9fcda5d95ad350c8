package bash

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/tollgate-ai/tollgate/internal/sandboxhelper"
	"golang.org/x/sys/unix"
)

// MaybeRunHelper turns the process into the sandbox helper when it was
// started as one, and never returns then. Otherwise it returns at once and
// records that the binary can be its own helper. Call it first thing in
// main, and in TestMain of packages whose tests run the tool confined:
// confined profiles start [HelperName] next to os.Executable() or, when
// it is not there (or not usable, see [Check]), re-execute
// os.Executable() and need it there. It is needed with the helper binary
// too: without it, a confined profile is not enforced.
//
// The same binary is the supervisor of unconfined commands and of
// confined ones without a PID namespace (see the package documentation):
// without MaybeRunHelper, an unconfined command runs as the process's
// direct child, and what it leaves in the background, or moves to another
// process group, may outlive the process.
func MaybeRunHelper() {
	sandboxhelper.Main() // returns only if this process is not a helper
	helperWired.Store(true)
}

// namespaces are the clone flags the helper is started with.
type namespaces = sandboxhelper.Namespaces

// seccompEnforced says whether the helper's seccomp filter blocks
// metadata writes, io_uring and UNIX sockets on this architecture.
const seccompEnforced = sandboxhelper.SeccompEnforced

// nsChoices are the namespace sets tried, best first: a user namespace
// (the command's capabilities mean nothing outside it, and process counts
// are its own) with a network namespace (no interface but a loopback that
// is down) and a PID namespace (the whole tree dies with its shell); the
// same without the user namespace (root); a user namespace alone; none.
// Each but none has an IPC namespace: System V and POSIX IPC of its own,
// which ends with it (found by review: a read-only command left a shared
// memory segment and a message queue in the host's, and could reach
// other processes' of the same user).
//
// Each has a mount namespace (the command's own view of the file system,
// see setupView); without one tollgate's state cannot be hidden, and no
// confined profile is enforced.
var nsChoices = []namespaces{
	{Flags: unix.CLONE_NEWUSER | unix.CLONE_NEWNET | unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWIPC, User: true},
	{Flags: unix.CLONE_NEWNET | unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWIPC},
	{Flags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWIPC, User: true},
	{},
}

// helperCommand prepares the helper for c; the caller starts it and calls
// the returned function after Start to send the configuration and learn
// whether the helper confined the command. tmp, if set, makes the
// private TMPDIR (c.Tmp) once the helper is started: the directory is
// made and the configuration encoded while the new process starts its
// runtime, not before it. It is started in its own
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
func helperCommand(ctx context.Context, c sandboxhelper.Config, ns namespaces, tmp func() (string, error)) (*exec.Cmd, func(start error) error, error) {
	c.Protocol = sandboxhelper.Protocol()
	data := func() ([]byte, error) {
		if tmp != nil {
			var err error
			if c.Tmp, err = tmp(); err != nil {
				return nil, err
			}
		}
		return json.Marshal(c)
	}
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	ns.Apply(attr)
	cmd, after, err := selfCommand(ctx, sandboxhelper.HelperMode, data, c.Dir, attr, "sandbox helper")
	if err != nil {
		return nil, nil, err
	}
	cmd.Cancel = killGroup(cmd)
	return cmd, after, nil
}

// selfCommand prepares the helper binary (helperPath: HelperName, or
// this binary re-executed) in mode (the value of sandboxhelper.Env), in
// dir, with attr. The returned function, called
// after Start, sends what data returns on the helper's fd 3 (an error
// there is returned as it is, and the helper, given nothing, starts
// nothing) and waits for its fd 4 to close: a message there is a failure
// before the command started (failed names the step in the error).
func selfCommand(ctx context.Context, mode string, data func() ([]byte, error), dir string, attr *syscall.SysProcAttr, failed string) (*exec.Cmd, func(start error) error, error) {
	exe, _, err := helperPath()
	if err != nil {
		return nil, nil, err
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
	cmd.Env = []string{sandboxhelper.Env + "=" + mode}
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
		b, err := data()
		if err != nil {
			cfgW.Close()
			return err
		}
		// The helper reads all of it before anything else: a large
		// command does not block on the pipe's buffer for long.
		_, werr := cfgW.Write(b)
		cfgW.Close()
		msg, _ := io.ReadAll(stR)
		if len(msg) > 0 {
			return fmt.Errorf("%s: %s", failed, msg)
		}
		if werr != nil {
			return fmt.Errorf("%s: %w", failed, configNotSent{werr})
		}
		return nil
	}
	return cmd, after, nil
}

// probe runs the helper once with ns and c (Probe is set) and reports
// whether it confined itself.
func probe(ns sandboxhelper.Namespaces, c sandboxhelper.Config) error {
	dir, err := os.MkdirTemp("", "tollgate-sandbox-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.Probe, c.Profile, c.Dir, c.Tmp = true, string(ReadOnly), dir, dir
	c.CPU, c.FileSize, c.Procs, c.Memory = 5, 1<<20, 1<<20, 1<<40
	cmd, after, err := helperCommand(ctx, c, ns, nil)
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
	var res sandboxhelper.ProbeResult
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
	path, note, err := helperPath()
	if err != nil {
		r.HelperErr = err.Error()
		return r
	}
	r.Helper, r.HelperNote = path, note
	var errs []string
	for _, ns := range nsChoices {
		c := sandboxhelper.Config{View: ns.Flags&unix.CLONE_NEWNS != 0, FreshProc: ns.Flags&unix.CLONE_NEWPID != 0}
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
			r.UserNS = ns.User
			r.NetNS = ns.Flags&unix.CLONE_NEWNET != 0
			r.PidNS = ns.Flags&unix.CLONE_NEWPID != 0
			r.MountNS = c.View
			r.IPCNS = ns.Flags&unix.CLONE_NEWIPC != 0
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

// confinedCommand prepares the helper that runs cmdline under p; tmp
// makes its private temporary directory once the helper is started (see
// helperCommand).
func confinedCommand(ctx context.Context, o Options, p Profile, tmp func() (string, error), cmdline string) (command, error) {
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
	c := sandboxhelper.Config{Protocol: sandboxhelper.Protocol(), Profile: string(p), Dir: dir, Shell: shell, Cmd: cmdline,
		Env: confinedEnv(o.Env), CPU: uint64((o.Limits.CPUTime + time.Second - 1) / time.Second),
		FileSize: uint64(o.Limits.FileSize), Procs: uint64(o.Limits.Procs), Memory: uint64(o.Limits.Memory),
		View: r.MountNS, Masked: masked, Sockets: sockets, FreshProc: r.MountNS && r.PidNS}
	if r.PidCap {
		c.PidMax = pidMax(c.Procs)
	}
	if r.PidNS {
		next := func() { askSpare(r.ns) }
		// A spare changes to c.Dir in its mount view (a helper started
		// for the command is started there), and its output is pipes
		// (os/exec hands a file, a terminal, to a helper started for it).
		if r.MountNS && !isFile(o.Stdout) && !isFile(o.Stderr) {
			if sp := takeSpare(ctx, r.ns); sp != nil {
				sc := sp.command(ctx, c, tmp)
				sc.finished = next
				// One that ended after takeSpare looked (found by review)
				// gives way to a helper started for the command.
				sc.fresh = func() (command, error) {
					cmd, after, err := helperCommand(ctx, c, r.ns, tmp)
					return command{Cmd: cmd, after: after}, err
				}
				return sc, nil
			}
		}
		cmd, after, err := helperCommand(ctx, c, r.ns, tmp) // the namespace takes the tree with the shell
		return command{Cmd: cmd, after: after, finished: next}, err
	}
	return supervisedCommand(ctx, sandboxhelper.SuperviseConfig{Confined: &c, Cloneflags: r.ns.Flags, UserNS: r.ns.User}, dir, "sandbox helper", tmp)
}

// isFile says whether w is a file, which os/exec gives a process as it is.
func isFile(w io.Writer) bool {
	_, ok := w.(*os.File)
	return ok
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
	return supervisedCommand(ctx, sandboxhelper.SuperviseConfig{Shell: shell, Cmd: cmdline, Env: shellEnv(o.Dir)}, o.Dir, "supervisor", nil)
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

// absPaths makes paths absolute and clean, dropping empty ones.
func absPaths(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		if strings.TrimSpace(p) == "" {
			continue
		}
		a, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// DefaultMasked are paths every confined command's view covers besides
// [Options.Masked]: database data and socket directories outside /run and
// /tmp (both empty in the view anyway), and POSIX shared memory.
var DefaultMasked = []string{"/var/lib/postgresql", "/var/lib/mysql", "/var/pgsql_socket", "/dev/shm"}
