package bash

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestSpareTakesTheLandlockDomainOfItsUse: a thread that put itself in a
// Landlock domain (here: no regular file may be made) runs its next
// command within that domain, as a helper started for it (a fork
// inherits the domain) would: the command makes no file. The kernel
// cannot say that a process entered a domain after its spare started: a
// process that confines itself has no spares (UseSpareHelpers(false),
// the default; the spare waiting is discarded), and its command runs in
// a helper started for it. The "fresh" case (the spare killed first)
// shows what a helper started for the command does.
func TestSpareTakesTheLandlockDomainOfItsUse(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("restricts itself without no_new_privs (which would change the inherited state): needs CAP_SYS_ADMIN")
	}
	for _, fresh := range []bool{true, false} {
		name := "spare"
		if fresh {
			name = "fresh"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := spareReady(t, dir)
			if fresh {
				if err := syscall.Kill(s.cmd.Process.Pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				for {
					spares.Lock()
					r := spares.ready
					spares.Unlock()
					if r != s {
						break
					}
					time.Sleep(time.Millisecond)
				}
			}
			if !fresh {
				UseSpareHelpers(false)
				t.Cleanup(func() { UseSpareHelpers(true) })
				spares.Lock()
				r := spares.ready
				spares.Unlock()
				if r != nil {
					t.Fatal("a spare is left waiting once spares are turned off")
				}
			}
			n := spareUses.Load()
			done := make(chan error)
			go func() {
				runtime.LockOSThread() // never unlocked: the thread is confined and ends with the goroutine
				attr := [3]uint64{unix.LANDLOCK_ACCESS_FS_MAKE_REG}
				fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
				if e != 0 {
					done <- e
					return
				}
				defer unix.Close(int(fd))
				if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); e != 0 {
					done <- e
					return
				}
				if f, err := os.Create(filepath.Join(dir, "probe")); err == nil {
					f.Close()
					done <- errors.New("the thread's Landlock domain does not refuse a new file")
					return
				}
				_, err := Run(context.Background(), &Options{Dir: dir, Profile: WorkspaceWrite}, "echo x > f")
				t.Logf("spare used: %v, run: %v", spareUses.Load() != n, err)
				done <- nil
			}()
			if err := <-done; err != nil {
				t.Skipf("cannot put a thread in a Landlock domain: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, "f")); err == nil {
				t.Fatalf("the command made a file its process's Landlock domain refuses (spare used: %v): a helper started for it would be in that domain", spareUses.Load() != n)
			}
			if spareUses.Load() != n {
				t.Fatal("a spare was used with spares turned off")
			}
		})
	}
}

// TestSpareStoppedIsNotUsed: a spare stopped while it waits (SIGSTOP, by
// any process of the user, e.g. an unconfined command) is not taken: the
// command runs in a helper started for it, as when the spare is killed,
// rather than wait for its timeout.
func TestSpareStoppedIsNotUsed(t *testing.T) {
	dir := t.TempDir()
	s := spareReady(t, dir)
	pid := s.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	for {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || stoppedState(st) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	r, err := Run(context.Background(), &Options{Dir: dir, Profile: ReadOnly, Timeout: 15 * time.Second}, "echo ran")
	if err != nil || r.Stdout != "ran\n" {
		t.Fatalf("a command given a stopped spare did not run: %+v %v", r, err)
	}
}

// stoppedState says whether a /proc/PID/stat line's state is T (stopped).
func stoppedState(st []byte) bool {
	for i := len(st) - 1; i > 0; i-- {
		if st[i] == ')' {
			return i+2 < len(st) && st[i+2] == 'T'
		}
	}
	return false
}

// setAllThreads sets the scheduling policy and priority of every thread
// of the process (as chrt -a does).
func setAllThreads(t *testing.T, policy, prio int) {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		p := int32(prio)
		if _, _, e := unix.Syscall(unix.SYS_SCHED_SETSCHEDULER, uintptr(tid), uintptr(policy), uintptr(unsafe.Pointer(&p))); e != 0 && e != unix.ESRCH {
			t.Skipf("sched_setscheduler: %v", e)
		}
	}
}

// TestSpareTakesTheSchedulingPriorityOfItsUse: a process whose real-time
// priority was changed (chrt -a -r -p 2) after its spare started, the
// policy the same, runs its next command at the new priority, as a
// helper started for it (a fork inherits policy and priority) would.
func TestSpareTakesTheSchedulingPriorityOfItsUse(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sets a real-time priority: needs root")
	}
	if _, err := os.Stat("/usr/bin/chrt"); err != nil {
		t.Skip("no chrt")
	}
	dir := t.TempDir()
	t.Cleanup(func() { setAllThreads(t, 0 /* SCHED_OTHER */, 0) })
	setAllThreads(t, unix.SCHED_RR, 1)
	spares.Lock()
	s := spares.ready // started before the priority was set
	spares.ready = nil
	spares.Unlock()
	if s != nil {
		s.discard()
	}
	spareReady(t, dir)
	setAllThreads(t, unix.SCHED_RR, 2)
	n := spareUses.Load()
	got := runIn(t, dir, "chrt -p $$")
	setAllThreads(t, 0 /* SCHED_OTHER */, 0)
	if !strings.Contains(got, "priority: 2") {
		t.Fatalf("the command ran with %q (spare used: %v), want priority 2: a helper started for it has the process's priority", got, spareUses.Load() != n)
	}
}

// TestSpareKeepsNoUnmountedFileSystem: a file system unmounted after the
// spare started is not kept mounted by the spare, whose mount namespace
// is a copy of the process's at its start, until the next command
// discards it (an unmounted disk would stay busy: its device could not
// be released while the agent waits for its next tool call). A helper
// started for a command holds its copy only while the command runs.
func TestSpareKeepsNoUnmountedFileSystem(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "m")
	if err := os.Mkdir(m, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", m, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(m, unix.MNT_DETACH) })
	s := spareReady(t, dir)
	if err := unix.Unmount(m, 0); err != nil {
		t.Fatal(err)
	}
	holds := func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/mountinfo")
		return err == nil && strings.Contains(string(b), " "+m+" ")
	}
	for deadline := time.Now().Add(10 * time.Second); holds() && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	if holds() {
		t.Fatalf("10s after its unmount, the spare helper still has %s mounted", m)
	}
}

// TestSpareComparesAllOfALongStatus: with many supplementary groups
// (here 2000: an LDAP user may have as many), /proc/thread-self/status
// is longer than inherited reads of it, and what comes after its Groups
// line — signal masks, capabilities, no_new_privs, seccomp, the CPUs
// allowed — is not compared: a thread whose CPUs were narrowed after its
// spare started runs its next command on every CPU, unlike a helper
// started for it.
func TestSpareComparesAllOfALongStatus(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sets its supplementary groups: needs root")
	}
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil || all.Count() < 2 {
		t.Skip("needs two CPUs")
	}
	old, err := syscall.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	groups := make([]int, 2000)
	for i := range groups {
		groups[i] = 10000 + i
	}
	if err := syscall.Setgroups(groups); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setgroups(old) })
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	spareReady(t, dir)
	n := spareUses.Load()
	done := make(chan string)
	go func() {
		runtime.LockOSThread() // never unlocked: its affinity is narrowed
		var one unix.CPUSet
		one.Set(0)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			done <- "error: " + err.Error()
			return
		}
		r, err := Run(context.Background(), &Options{Dir: dir, Profile: ReadOnly}, "grep Cpus_allowed_list /proc/self/status")
		if err != nil {
			done <- "error: " + err.Error()
			return
		}
		done <- r.Stdout
	}()
	got := <-done
	if !strings.HasSuffix(strings.TrimSpace(got), "\t0") {
		t.Fatalf("the command ran with %q (spare used: %v), want CPU 0 only, as its thread", got, spareUses.Load() != n)
	}
}

// TestSpareWaitsABoundedTime: a spare that no command took within
// spareMaxWait is discarded (killed and reaped: no helper is left that
// others could trace or enter while the agent is idle), and none is
// started until commands come again.
func TestSpareWaitsABoundedTime(t *testing.T) {
	discardSpare()
	spareMaxWaitTest.Store(int64(300 * time.Millisecond))
	t.Cleanup(func() { spareMaxWaitTest.Store(0) })
	dir := t.TempDir()
	s := spareReady(t, dir)
	pid := s.cmd.Process.Pid
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		spares.Lock()
		r := spares.ready
		spares.Unlock()
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); r == nil && err != nil {
			time.Sleep(time.Second) // another would be started meanwhile
			spares.Lock()
			r, starting := spares.ready, spares.starting
			spares.Unlock()
			if r != nil || starting {
				t.Fatal("a spare was started again with no command since")
			}
			return
		}
	}
	t.Fatalf("the spare %d waited 10s, its limit 300ms: it is still there, or not reaped", pid)
}

// TestSpareEndedBeforeItsConfigurationFallsBack: a spare that ends after
// takeSpare looked at it, before its configuration is sent, ran nothing:
// the command runs in a helper started for it, rather than fail with
// "sending the configuration: broken pipe".
func TestSpareEndedBeforeItsConfigurationFallsBack(t *testing.T) {
	dir := t.TempDir()
	spareTakenTest = func(s *spare) {
		_ = syscall.Kill(s.cmd.Process.Pid, syscall.SIGKILL)
		for !s.exited() {
			time.Sleep(time.Millisecond)
		}
	}
	defer func() { spareTakenTest = nil }()
	// A spare may be refused for a change elsewhere (a mount on the
	// machine): a try counts once one was taken.
	for tries := 0; ; tries++ {
		if tries == 5 {
			t.Skip("no spare was taken in 5 tries")
		}
		spareReady(t, dir)
		n := spareUses.Load()
		r, err := Run(context.Background(), &Options{Dir: dir, Profile: ReadOnly}, "echo ran")
		if err != nil || r.Stdout != "ran\n" {
			t.Fatalf("the command did not run after its spare ended: %+v %v", r, err)
		}
		if spareUses.Load() == n+1 {
			return
		}
	}
}
