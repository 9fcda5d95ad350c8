package bash

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tollgate-ai/tollgate/internal/sandboxhelper"
	"golang.org/x/sys/unix"
)

// A spare is a sandbox helper started before the command it will run is
// known: in the namespaces every confined command gets (new ones of its
// own), its runtime started, waiting for a configuration, which is all
// that differs from one command to the next. The clone into new
// namespaces, the exec of the helper and the start of its runtime are
// then off the command's path: about half of what a confined `true`
// takes (bench/README.md). Each spare runs one command, and the next is
// started once no command has started for a moment (askSpare); nothing
// is confined, no TMPDIR made, no view built before the configuration
// comes, as for a helper started for the command, so a command in a
// spare is confined exactly as in a new one.
//
// A spare is started and kept by one goroutine locked to its thread for
// the life of the process (spareThread), because a parent-death signal
// fires when the thread that started the child ends: the spare dies
// with the process, as every helper does, and never with a command's
// thread. Only a process that turned them on has spares
// (UseSpareHelpers: one that does not confine itself), only for the
// helpers of a PID namespace (the others run under the supervisor), and
// only for a command whose output is not a file (os/exec hands a file
// to the helper itself, a spare has pipes).
//
// A spare is not used, and is killed and reaped, when it could differ
// from a helper started for the command: when the process has since
// chosen another helper binary (SetHelper) or other namespaces; when
// anything the helper inherits rather than takes from its configuration
// reads otherwise than when the spare started (inherited: credentials,
// capabilities, umask, rlimits, cgroup, namespaces, ...; found by review:
// a process that dropped root after its spare started ran its next
// command as uid 0); when any mount of the process's namespace was made,
// changed or unmounted since (mountsMoved: its mount namespace is a copy
// of the one at its start, and the command must see the file systems as
// they are; a comparison of mountinfo's text was fooled, found by
// review); and when it is no longer running.
type spare struct {
	cmd    *exec.Cmd
	after  func(start error) error
	cancel context.CancelFunc
	cfg    struct {
		sync.Mutex
		c   sandboxhelper.Config
		tmp func() (string, error)
	}
	stdout, stderr lateWriter
	helper         string
	ns             namespaces
	state          []byte // inherited when it was started
	mounts         int    // the mount watch of the check at its use, opened before it was started
	watch          int    // the waiter's own mount watch (a poll clears the flag: one each)
	wake           struct {
		sync.Mutex
		fd     int // an eventfd that ends the waiter (wait)
		closed bool
	}
}

// spares holds the spare, if one is ready; spareReq asks spareThread for
// one; spareHelpers says whether the process has spares (UseSpareHelpers).
var (
	spareHelpers atomic.Bool

	spares struct {
		sync.Mutex
		ready    *spare
		starting bool
		started  chan struct{} // closed when the one starting is ready, or failed
		idle     *time.Timer   // asks for one (askSpare)
		ns       namespaces
	}
	spareReq  = make(chan namespaces, 1)
	spareOnce sync.Once
)

// spareThread starts spares for as long as the process lives, on a
// thread of its own (see spare).
func spareThread() {
	runtime.LockOSThread() // never unlocked: the spares' parent-death signal is this thread's
	for ns := range spareReq {
		s, err := startSpare(ns)
		if err == nil && !spareHelpers.Load() { // turned off while it started
			s.discard()
			closeAll([]int{s.watch, s.wake.fd}) // no waiter has them
			err = errors.New("spares turned off")
		}
		spares.Lock()
		spares.starting = false
		if err == nil {
			spares.ready = s
			go s.wait()
		}
		close(spares.started)
		spares.Unlock()
	}
}

// wait waits while s is ready for a command, and discards it (kills and
// reaps it) as soon as it ends (killed while it waited: no zombie until
// the next command), is stopped or traced (found by review: a stopped
// spare, taken, held its command until its timeout), any mount of the
// process's namespace moves (found by review: the spare's copy of the
// namespace kept a file system unmounted since busy), or it has waited
// spareMaxWait (an idle agent keeps no helper that others could trace or
// enter for long; the next is started when commands come again). It ends
// when s is taken or discarded (stopWaiting).
func (s *spare) wait() {
	fds := []unix.PollFd{{Fd: int32(s.wake.fd), Events: unix.POLLIN}, {Fd: int32(s.watch), Events: unix.POLLPRI}}
	if pidfd, err := unix.PidfdOpen(s.cmd.Process.Pid, 0); err == nil { // readable once it ends
		defer unix.Close(pidfd)
		fds = append(fds, unix.PollFd{Fd: int32(pidfd), Events: unix.POLLIN})
	}
	defer func() {
		s.wake.Lock()
		s.wake.closed = true
		unix.Close(s.wake.fd)
		unix.Close(s.watch)
		s.wake.Unlock()
	}()
	maxWait := spareMaxWait
	if d := spareMaxWaitTest.Load(); d != 0 {
		maxWait = time.Duration(d)
	}
	for deadline := time.Now().Add(maxWait); ; {
		wait := min(time.Until(deadline), time.Second) // a stop is looked for each second
		if wait <= 0 {
			break
		}
		n, err := unix.Poll(fds, int((wait+time.Millisecond-1)/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		if err == nil && fds[0].Revents != 0 {
			return // taken or discarded
		}
		if err != nil || n > 0 || s.exited() || s.stopped() {
			break
		}
	}
	spares.Lock()
	gone := spares.ready == s
	if gone {
		spares.ready = nil
	}
	spares.Unlock()
	if gone {
		s.discard()
	}
}

// spareMaxWait is how long a spare waits for a command before it is
// discarded; spareMaxWaitTest, if set, is used instead (by tests).
const spareMaxWait = time.Minute

var spareMaxWaitTest atomic.Int64

// stopWaiting ends the waiter of s (wait), if it has not ended.
func (s *spare) stopWaiting() {
	s.wake.Lock()
	defer s.wake.Unlock()
	if !s.wake.closed {
		_, _ = unix.Write(s.wake.fd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	}
}

// takeSpare returns the spare, if one is ready that fits (the helper
// binary and ns; what it inherited and the mounts unchanged, see spare),
// or nil. One that is starting is waited for (until ctx is done): a
// helper started for the command meanwhile would compete with it. It runs
// on the command's thread, the one a helper started for the command would
// be started from.
func takeSpare(ctx context.Context, ns namespaces) *spare {
	if !spareHelpers.Load() {
		discardSpare() // one started before the process turned them off
		return nil
	}
	helper, _, err := helperPath()
	if err != nil {
		return nil
	}
	spares.Lock()
	if spares.ready == nil && spares.starting {
		started := spares.started
		spares.Unlock()
		select {
		case <-started:
		case <-ctx.Done():
		}
		spares.Lock()
	}
	s := spares.ready
	spares.ready = nil
	if spares.idle != nil {
		spares.idle.Stop()
	}
	spares.Unlock()
	if s == nil {
		return nil
	}
	if s.helper != helper || s.ns != ns || s.exited() || s.stopped() || !bytes.Equal(s.state, inherited(helper)) || mountsMoved(s.mounts) {
		s.discard()
		return nil
	}
	if spareTakenTest != nil {
		spareTakenTest(s)
	}
	spareUses.Add(1)
	return s
}

// discardSpare discards the spare that is ready, if any.
func discardSpare() {
	spares.Lock()
	s := spares.ready
	spares.ready = nil
	spares.Unlock()
	if s != nil {
		s.discard()
	}
}

// spareUses counts the spares taken (for tests: one whose state matches
// is used); spareTakenTest, if set, is called with each once it passed
// the checks (a test ends it there).
var (
	spareUses      atomic.Int64
	spareTakenTest func(*spare)
)

// askSpare asks for a spare in namespaces ns once no confined command
// has started for spareIdle (takeSpare puts it off), unless one is ready
// or starting. A spare's start (a fork of this process, whose page tables
// it copies, then the helper's start) would compete with a command that
// runs meanwhile: commands back to back run in helpers started for them,
// as without spares, and the spare is for one that comes after a pause,
// as a model's next tool call does.
func askSpare(ns namespaces) {
	if !spareHelpers.Load() {
		return
	}
	spares.Lock()
	defer spares.Unlock()
	if spares.ready != nil || spares.starting {
		return
	}
	if spares.idle == nil {
		spares.idle = time.AfterFunc(spareIdle, func() {
			spares.Lock()
			ask := spareHelpers.Load() && spares.ready == nil && !spares.starting
			if ask {
				spares.starting, spares.started = true, make(chan struct{})
			}
			ns := spares.ns
			spares.Unlock()
			if ask {
				spareOnce.Do(func() { go spareThread() })
				spareReq <- ns
			}
		})
	}
	spares.ns = ns
	spares.idle.Reset(spareIdle)
}

// spareIdle is how long no confined command must have started before a
// spare is started.
const spareIdle = 10 * time.Millisecond

// startSpare starts a helper in new namespaces ns, left waiting for its
// configuration. What it inherits is read before and after its start, on
// the thread that starts it: a change while it started discards it.
func startSpare(ns namespaces) (*spare, error) {
	helper, _, err := helperPath()
	if err != nil {
		return nil, err
	}
	var fds [3]int // the two mount watches and the waiter's eventfd
	for i := range fds {
		if i < 2 {
			fds[i], err = watchMounts()
		} else {
			fds[i], err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		}
		if err != nil {
			closeAll(fds[:i])
			return nil, err
		}
	}
	s := &spare{helper: helper, ns: ns, mounts: fds[0], watch: fds[1], state: inherited(helper)}
	s.wake.fd = fds[2]
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	ns.Apply(attr)
	data := func() ([]byte, error) {
		s.cfg.Lock()
		defer s.cfg.Unlock()
		if s.cfg.tmp != nil {
			var err error
			if s.cfg.c.Tmp, err = s.cfg.tmp(); err != nil {
				return nil, err
			}
		}
		return json.Marshal(s.cfg.c)
	}
	cmd, after, err := selfCommand(ctx, sandboxhelper.HelperMode, data, "", attr, "sandbox helper")
	if err != nil {
		cancel()
		closeAll(fds[:])
		return nil, err
	}
	cmd.Cancel = killGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	cmd.Stdout, cmd.Stderr = &s.stdout, &s.stderr
	if err := cmd.Start(); err != nil {
		cancel()
		closeAll(fds[:])
		return nil, after(err)
	}
	s.cmd, s.after = cmd, after
	if !bytes.Equal(s.state, inherited(helper)) || mountsMoved(s.mounts) { // changed while it started
		s.discard()
		closeAll(fds[1:]) // no waiter has them
		return nil, errors.New("the process's state or mounts changed while the spare started")
	}
	return s, nil
}

// command makes s the helper of the command that c configures (tmp
// makes its TMPDIR, see helperCommand); ctx is the command's.
func (s *spare) command(ctx context.Context, c sandboxhelper.Config, tmp func() (string, error)) command {
	s.cfg.Lock()
	s.cfg.c, s.cfg.tmp = c, tmp
	s.cfg.c.Protocol = sandboxhelper.Protocol()
	s.cfg.Unlock()
	unix.Close(s.mounts)
	s.stopWaiting()
	context.AfterFunc(ctx, s.cancel) // the command's timeout and cancellation kill it (cmd.Cancel)
	return command{Cmd: s.cmd, after: s.after, output: func(stdout, stderr io.Writer) {
		s.stdout.set(stdout)
		s.stderr.set(stderr)
	}}
}

// exited says whether s is gone (killed while it waited): it is left to
// be waited for.
func (s *spare) exited() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, s.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err != nil || info.Signo != 0
}

// stopped says whether s is stopped or stopped by a tracer (the state of
// /proc/PID/stat is T or t): it would not run its command.
func (s *spare) stopped() bool {
	var buf [512]byte
	fd, err := unix.Open("/proc/"+strconv.Itoa(s.cmd.Process.Pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return true
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf[:])
	if err != nil {
		return true
	}
	st := buf[:n]
	i := bytes.LastIndexByte(st, ')')
	return i < 0 || i+2 >= len(st) || st[i+2] == 'T' || st[i+2] == 't'
}

// closeAll closes the descriptors fds.
func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// discard kills s, which never got a configuration.
func (s *spare) discard() {
	_ = s.cmd.Cancel()
	_ = s.after(errors.New("discarded"))
	s.cancel()
	unix.Close(s.mounts)
	s.stopWaiting()
	go func() { _ = s.cmd.Wait() }()
}

// lateWriter writes to a writer set after the process started (what a
// spare writes before, it has none, is dropped).
type lateWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lateWriter) set(w io.Writer) {
	l.mu.Lock()
	l.w = w
	l.mu.Unlock()
}

func (l *lateWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return len(p), nil
	}
	return l.w.Write(p)
}
