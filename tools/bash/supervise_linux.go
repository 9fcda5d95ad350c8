package bash

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The supervisor is how a command's whole tree dies with the agent, on
// timeout and when the shell ends, where no PID namespace does it (an
// unconfined command must not get one: it would no longer see or signal
// the processes the agent can, and with a user namespace sudo and
// setuid programs stop working). It is this binary re-executed (mode
// superviseMode of helperEnv), the agent's child, and the shell's (or the
// sandbox helper's) parent:
//
//   - Its parent-death signal is SIGTERM, which it catches: SIGKILL would
//     take the supervisor alone, the very process that can find the tree.
//     The handler is installed before anything is started; a SIGTERM that
//     comes before it kills the supervisor, which has started nothing
//     yet. The death of the agent between the fork and PR_SET_PDEATHSIG
//     is caught by Go's check of getppid in the child; and once it can
//     catch the signal the supervisor checks getppid again against the
//     agent's pid, which comes with the configuration the agent sends
//     only after Start (no configuration, nothing started).
//   - It is a child subreaper (PR_SET_CHILD_SUBREAPER): whatever is
//     orphaned below it, a backgrounded job whose shell ended, a nohup, a
//     daemon that forked twice and called setsid, becomes its child rather
//     than init's. So every process the command started, in any process
//     group or session, stays its descendant: it finds them by walking
//     /proc from its own pid, and when it has no child left there is none.
//   - When the shell ends, a SIGTERM comes (the agent died, or cancelled
//     the command: the timeout) or the shell cannot be started, it kills
//     the shell's process group at once (pidfd_send_signal with
//     PIDFD_SIGNAL_PROCESS_GROUP, Linux 6.9) and then every descendant,
//     walking /proc again until a walk finds no process it has not killed
//     yet. A process sent SIGKILL cannot fork any more, so the walk ends.
//     Each kill goes through a pidfd, taken before the process's start
//     time is checked again: a pid reused meanwhile is not killed.
//
// A cgroup would hold the tree too, but it needs a delegated, writable
// hierarchy that a user's shell, a container or CI seldom gives.
//
// What it cannot do: kill a process it may not signal (one that became
// another user through a setuid program, unconfined only), see a process
// a hidepid /proc hides, or survive SIGKILL itself; a command that kills
// its own supervisor (unconfined, or confined on a kernel without Landlock
// signal scoping, ABI 6) leaves its orphans to init. A process another
// service starts for it (cron, systemd-run) is no descendant.
const superviseMode = "supervise"

// superviseConfig is what the tool tells the supervisor.
type superviseConfig struct {
	// Parent is the agent's pid. Set by supervisedCommand.
	Parent int `json:"parent"`
	// Shell -c Cmd with Env: an unconfined command.
	Shell string   `json:"shell,omitempty"`
	Cmd   string   `json:"cmd,omitempty"`
	Env   []string `json:"env,omitempty"`
	// Confined, if set, is run instead: the sandbox helper with this
	// configuration, in the namespaces Cloneflags and UserNS say.
	Confined   *helperConfig `json:"confined,omitempty"`
	Cloneflags uintptr       `json:"cloneflags,omitempty"`
	UserNS     bool          `json:"user_ns,omitempty"`
}

// supervisedCommand prepares the supervisor of c, started in dir. Cancel
// asks it to kill the tree (it exits when that is done); failed names it
// in errors.
func supervisedCommand(ctx context.Context, c superviseConfig, dir, failed string) (*exec.Cmd, func(error) error, error) {
	c.Parent = os.Getpid()
	data, err := json.Marshal(c)
	if err != nil {
		return nil, nil, err
	}
	cmd, after, err := selfCommand(ctx, superviseMode, data, dir,
		&syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}, failed)
	if err != nil {
		return nil, nil, err
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	return cmd, after, nil
}

// runSupervisor is the supervisor's process. It returns an error only if
// it started nothing; otherwise it exits with the shell's status (128+n
// for a signal n, as the tool reports it).
func runSupervisor(status *os.File) error {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	// The child's Pdeathsig is this thread's: the thread must live as
	// long as the child.
	runtime.LockOSThread()
	var c superviseConfig
	if err := readConfig(&c); err != nil {
		return err
	}
	if os.Getppid() != c.Parent {
		return errors.New("the agent is gone")
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("becoming a subreaper: %w", err)
	}
	select {
	case <-stop:
		return errors.New("stopped before the command started")
	default:
	}
	child, childFD, err := c.start()
	if err != nil {
		killTree(childFD) // a helper that may have been started
		return err
	}
	// The status pipe is now the child's alone: the agent reads EOF when
	// the sandbox helper has execed the shell, or the shell is started.
	status.Close()
	// Not os.Exit: a race-detector build sleeps a second in it (GORACE
	// atexit_sleep_ms), on every command of a race-built binary's tests.
	syscall.Exit(supervise(child, childFD, stop))
	return nil
}

// start starts the supervised child: the shell, or the sandbox helper,
// which gets the status pipe (fd 4) and its configuration. It is in its
// own process group, and killed (SIGKILL) if the supervisor dies.
func (c superviseConfig) start() (pid, pidFD int, err error) {
	pidFD = -1
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, PidFD: &pidFD}
	if c.Confined == nil {
		pid, err = syscall.ForkExec(c.Shell, []string{c.Shell, "-c", c.Cmd},
			&syscall.ProcAttr{Env: c.Env, Files: []uintptr{0, 1, 2}, Sys: attr})
		if err != nil {
			return 0, -1, fmt.Errorf("starting %s: %w", c.Shell, err)
		}
		return pid, pidFD, nil
	}
	data, err := json.Marshal(c.Confined)
	if err != nil {
		return 0, -1, err
	}
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return 0, -1, err
	}
	defer cfgW.Close()
	namespaces{flags: c.Cloneflags, user: c.UserNS}.apply(attr)
	pid, err = syscall.ForkExec("/proc/self/exe", []string{"tollgate-sandbox-helper"},
		&syscall.ProcAttr{Dir: c.Confined.Dir, Env: []string{helperEnv + "=1"},
			Files: []uintptr{0, 1, 2, cfgR.Fd(), 4}, Sys: attr})
	cfgR.Close()
	if err != nil {
		return 0, -1, fmt.Errorf("starting the sandbox helper: %w", err)
	}
	if _, err := cfgW.Write(data); err != nil {
		return pid, pidFD, fmt.Errorf("sending the configuration: %w", err)
	}
	return pid, pidFD, nil
}

// supervise waits for the child to end or a stop signal, kills what is
// left of the tree, and returns the exit status.
func supervise(child, childFD int, stop <-chan os.Signal) int {
	exited := make(chan syscall.WaitStatus, 1)
	reaped := make(chan struct{})
	go reap(child, exited, reaped)
	var ws syscall.WaitStatus
	ended := false
	select {
	case ws = <-exited:
		ended = true
	case <-stop:
	}
	if !ended || hasChildren() {
		killTree(childFD)
	}
	select {
	case <-reaped:
	case <-time.After(time.Second): // a process stuck in the kernel: it has its SIGKILL
	}
	if !ended {
		select {
		case ws = <-exited:
			ended = true
		default:
		}
	}
	switch {
	case !ended:
		return 128 + int(syscall.SIGKILL)
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// reap waits for every child: the supervised one, whose status it sends,
// and the orphans that come to the subreaper, so that they do not pile up
// as zombies (counted against the process limit) while the shell runs.
// done is closed when no child is left.
func reap(child int, exited chan<- syscall.WaitStatus, done chan<- struct{}) {
	defer close(done)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, unix.WALL, nil)
		switch {
		case err == syscall.EINTR:
		case err != nil:
			return // ECHILD
		case pid == child:
			exited <- ws
		}
	}
}

// hasChildren says whether any process, alive or a zombie, is still the
// supervisor's child; with none, none is its descendant either.
func hasChildren() bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil)
		if err != unix.EINTR {
			return err != unix.ECHILD
		}
	}
}

// killTree kills the child's process group, then every descendant of the
// supervisor, until a walk of /proc finds none it has not killed. It gives
// up after a few seconds of finding new ones (processes it may not kill
// that keep forking).
func killTree(childFD int) {
	if childFD >= 0 {
		if unix.PidfdSendSignal(childFD, unix.SIGKILL, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP) != nil {
			_ = unix.PidfdSendSignal(childFD, unix.SIGKILL, nil, 0) // before Linux 6.9
		}
	}
	self := os.Getpid()
	killed := map[proc]bool{}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		found := false
		for _, p := range descendants(self) {
			if !killed[p] {
				killed[p], found = true, true
				p.kill()
			}
		}
		if !found {
			return
		}
	}
}

// proc is one process: its pid and its start time (clock ticks after
// boot), which together do not name another process when the pid is
// reused.
type proc struct {
	pid   int
	start uint64
}

// procStat reads a process's parent, state and start time from
// /proc/PID/stat.
func procStat(pid int) (ppid int, state byte, start uint64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, false
	}
	// The command name, in parentheses, may hold anything, spaces and
	// parentheses included: the fields are after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) == 0 {
		return 0, 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		return 0, 0, 0, false
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return ppid, f[0][0], start, err == nil
}

// descendants lists the live processes below root (zombies are dead
// already), found by their parent pids in /proc.
func descendants(root int) []proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	kids := map[int][]proc{}
	live := map[int]bool{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, state, start, ok := procStat(pid); ok {
			kids[ppid] = append(kids[ppid], proc{pid, start})
			live[pid] = state != 'Z' && state != 'X'
		}
	}
	var out []proc
	seen := map[int]bool{root: true}
	for queue := []int{root}; len(queue) > 0; queue = queue[1:] {
		for _, k := range kids[queue[0]] {
			if seen[k.pid] {
				continue // the walk is not atomic: a reused pid may make a loop
			}
			seen[k.pid] = true
			queue = append(queue, k.pid)
			if live[k.pid] {
				out = append(out, k)
			}
		}
	}
	return out
}

// kill sends p SIGKILL, unless its pid now names another process.
func (p proc) kill() {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if err == nil {
		defer unix.Close(fd)
	}
	if _, _, start, ok := procStat(p.pid); !ok || start != p.start {
		return
	}
	if err == nil {
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	} else if !errors.Is(err, unix.ESRCH) {
		_ = unix.Kill(p.pid, unix.SIGKILL) // no pidfd (before Linux 5.3, or no fd left)
	}
}
