package sandboxhelper

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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
// SuperviseMode of Env), the agent's child, and the shell's (or the
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
//     PIDFD_SIGNAL_PROCESS_GROUP, Linux 6.9), every descendant a walk of
//     /proc finds, and then its children, over and over, until it has
//     none and a last walk finds none (see stopper.stop). A walk alone
//     does not do: it takes milliseconds, and a chain of processes that
//     each start the next (setsid -f) and exit is gone before it is seen,
//     forever (found by review). But every link is the subreaper's child
//     in turn, and its list of children (/proc/self/task/*/children)
//     takes microseconds to read: it kills each one it lists, and what
//     that one had started becomes its child, to be killed in turn; one
//     sent SIGKILL forks no more. Each kill goes through a pidfd, taken
//     before the process is checked to be the supervisor's child (waitid
//     on the pidfd) or, found by a walk, to have the same start time: a
//     pid reused meanwhile is not killed.
//   - It exits, with the shell's status, only then, or when it has spent
//     its budget (5s) on processes it may not kill or that do not die; it
//     tells the agent (fd 5) how many it left, and the command's result
//     is an error that says so. The agent waits for it longer than that
//     budget (WaitDelay), so that it does not kill the supervisor, and
//     leave the tree to init, while it is still killing.
//
// A cgroup would hold the tree too (cgroup.kill kills it at once), but it
// needs a delegated, writable cgroup v2 hierarchy that a user's shell, a
// container or CI seldom gives; and within the tree the subreaper misses
// nothing a cgroup would hold.
//
// What it cannot do: kill a process it may not signal (one that became
// another user through a setuid program, unconfined only: reported, as
// above), see a process a hidepid /proc hides (it still is a child, and
// its children), or survive SIGKILL itself; a command that kills its own
// supervisor (unconfined, or confined on a kernel without Landlock signal
// scoping, ABI 6) leaves its orphans to init (the result says the
// supervisor was killed). A process another service starts for it (cron,
// systemd-run) is no descendant.
const SuperviseMode = "supervise"

// SuperviseConfig is what the tool tells the supervisor.
type SuperviseConfig struct {
	// Protocol: see Config.
	Protocol string `json:"protocol"`
	// Parent is the agent's pid.
	Parent int `json:"parent"`
	// Shell -c Cmd with Env: an unconfined command.
	Shell string   `json:"shell,omitempty"`
	Cmd   string   `json:"cmd,omitempty"`
	Env   []string `json:"env,omitempty"`
	// Confined, if set, is run instead: the sandbox helper with this
	// configuration, in the namespaces Cloneflags and UserNS say.
	Confined   *Config `json:"confined,omitempty"`
	Cloneflags uintptr `json:"cloneflags,omitempty"`
	UserNS     bool    `json:"user_ns,omitempty"`
	// Budget bounds the killing; Spare is for tests (see stopper).
	Budget time.Duration `json:"budget"`
	Spare  string        `json:"spare,omitempty"`
}

// runSupervisor is the supervisor's process. It returns an error only if
// it started nothing; otherwise it exits with the shell's status (128+n
// for a signal n, as the tool reports it), once it has written to fd 5
// the number of processes it could not stop.
func runSupervisor(status *os.File) error {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	// The child's Pdeathsig is this thread's: the thread must live as
	// long as the child.
	runtime.LockOSThread()
	unix.CloseOnExec(5)
	report := os.NewFile(5, "report")
	var c SuperviseConfig
	if err := readConfig(&c, &c.Protocol); err != nil {
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
		if child > 0 { // a helper that was started: kill what it may have started
			go reap(child, make(chan syscall.WaitStatus, 1))
			stopper{budget: c.Budget, spare: c.Spare}.stop(childFD)
		}
		return err
	}
	// The status pipe is now the child's alone: the agent reads EOF when
	// the sandbox helper has execed the shell, or the shell is started.
	status.Close()
	code, left := supervise(child, childFD, stop, stopper{budget: c.Budget, spare: c.Spare})
	fmt.Fprint(report, left)
	// Not os.Exit: a race-detector build sleeps a second in it (GORACE
	// atexit_sleep_ms), on every command of a race-built binary's tests.
	syscall.Exit(code)
	return nil
}

// start starts the supervised child: the shell, or the sandbox helper,
// which gets the status pipe (fd 4) and its configuration. It is in its
// own process group, and killed (SIGKILL) if the supervisor dies.
func (c SuperviseConfig) start() (pid, pidFD int, err error) {
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
	Namespaces{Flags: c.Cloneflags, User: c.UserNS}.Apply(attr)
	pid, err = syscall.ForkExec("/proc/self/exe", []string{"tollgate-sandbox-helper"},
		&syscall.ProcAttr{Dir: c.Confined.Dir, Env: []string{Env + "=" + HelperMode},
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
// left of the tree, and returns the exit status and the number of
// processes it could not stop.
func supervise(child, childFD int, stop <-chan os.Signal, s stopper) (code, left int) {
	exited := make(chan syscall.WaitStatus, 1)
	go reap(child, exited)
	var ws syscall.WaitStatus
	ended := false
	select {
	case ws = <-exited:
		ended = true
	case <-stop:
	}
	if !ended || hasChildren() {
		left = s.stop(childFD)
	}
	if !ended {
		// With no child left, the reaper has the shell's status or is
		// about to send it.
		wait := time.Second
		if left > 0 {
			wait = 0
		}
		select {
		case ws = <-exited:
			ended = true
		case <-time.After(wait):
		}
	}
	switch {
	case !ended:
		return 128 + int(syscall.SIGKILL), left
	case ws.Signaled():
		return 128 + int(ws.Signal()), left
	}
	return ws.ExitStatus(), left
}

// reap waits for every child: the supervised one, whose status it sends,
// and the orphans that come to the subreaper, so that they do not pile up
// as zombies (counted against the process limit) while the shell runs,
// and so that killed ones are gone. It returns when no child is left.
func reap(child int, exited chan<- syscall.WaitStatus) {
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

// stopper kills the supervisor's tree.
type stopper struct {
	budget time.Duration
	// spare (tests only): the command name of processes treated as ones
	// the supervisor may not signal.
	spare string
}

// stop kills the child's process group, then every descendant of the
// supervisor, and keeps killing until it has no child left, and returns
// 0; or, after its budget (processes it may not kill, or that do not
// die), the number of processes still alive below it.
//
// No child, no descendant: whatever it kills, that process's children
// become the subreaper's, however they got there (a chain of setsid -f,
// each link living a millisecond, that the walks of /proc never caught
// alive; or forking in a loop, each link living 40 us). So it kills its
// children over and over, as fast as it can list them
// (/proc/self/task/*/children), each through a pidfd, and the reaper takes
// them away; a process forking faster than it kills only makes more
// children to kill, and one sent SIGKILL forks no more. A first walk of
// /proc kills the whole tree at once, where the children alone would take
// a generation at a time; a last one checks that none is left.
func (s stopper) stop(childFD int) (left int) {
	deadline := time.Now().Add(s.budget)
	if childFD >= 0 {
		if unix.PidfdSendSignal(childFD, unix.SIGKILL, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP) != nil {
			_ = unix.PidfdSendSignal(childFD, unix.SIGKILL, nil, 0) // before Linux 6.9
		}
	}
	self := os.Getpid()
	killed := map[proc]bool{}
	walk := func() (found bool) {
		for _, p := range descendants(self) {
			if !killed[p] {
				killed[p], found = true, true
				if !s.spared(p.pid) {
					p.kill()
				}
			}
		}
		return found
	}
	signalled := map[int]bool{} // children, by pid: only to know when to pause
	kids := func() (found, ok bool) {
		pids, ok := children()
		for _, pid := range pids {
			if !s.spared(pid) && killChild(pid, self) && !signalled[pid] {
				signalled[pid], found = true, true
			}
		}
		return found, ok
	}
	walk()
	const minPause, maxPause = 20 * time.Microsecond, time.Millisecond
	pause := minPause
	for {
		var found bool
		if !hasChildren() {
			if !walk() {
				return 0
			}
			found = true // no child, but a descendant: cannot be
		} else if f, ok := kids(); ok {
			found = f
		} else {
			found = walk() // no children files: slower
		}
		switch {
		case time.Now().After(deadline):
			return len(descendants(self))
		case found:
			pause = minPause
		default:
			// Only processes killed already, not yet dead or reaped (or
			// that may not be killed): let them go.
			time.Sleep(pause)
			pause = min(2*pause, maxPause)
		}
	}
}

// spared (tests only) says whether pid is one the supervisor is to treat
// as a process it may not signal.
func (s stopper) spared(pid int) bool {
	return s.spare != "" && proc{pid: pid}.comm() == s.spare
}

// children lists the supervisor's children, read from each of its
// threads' children file (an orphan goes to any thread of the subreaper).
// ok is false where the kernel has none (CONFIG_PROC_CHILDREN). A list
// read while processes come and go may miss one, which the next read
// finds.
func children() (pids []int, ok bool) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, false
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			if _, serr := os.Stat("/proc/self/task/" + t.Name()); serr == nil {
				return nil, false // the thread is there, its file is not
			}
			continue // the thread ended
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids, true
}

// killChild sends SIGKILL to the process pid if it is the supervisor's
// child (a zombie included, harmlessly), and says whether it did. A pidfd
// names one process, whatever becomes of its pid, and waitid on it fails
// unless that process is the caller's child.
func killChild(pid, self int) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false
		}
		// No pidfd (before Linux 5.3, or no fd left): by its parent in
		// /proc, if the reaper does not take it and its pid is not reused
		// in between.
		if ppid, state, _, ok := procStat(pid); ok && ppid == self && state != 'Z' && state != 'X' {
			return unix.Kill(pid, unix.SIGKILL) == nil
		}
		return false
	}
	defer unix.Close(fd)
	var info unix.Siginfo
	for {
		err = unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil)
		if err != unix.EINTR {
			break
		}
	}
	if err == unix.EINVAL { // no P_PIDFD (before Linux 5.4): by its parent
		if ppid, _, _, ok := procStat(pid); ok && ppid == self {
			err = nil
		}
	}
	if err != nil { // ECHILD: not a child (its pid was reused)
		return false
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
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

// comm is p's command name.
func (p proc) comm() string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/comm")
	return strings.TrimSpace(string(b))
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
