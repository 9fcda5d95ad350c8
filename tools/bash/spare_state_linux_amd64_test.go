package bash

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestSpareTakesTheSeccompFilterOfItsUse: a thread that installed a
// seccomp filter (here: uname refused) after its spare started runs its
// next command under that filter, as a helper started for it would —
// with 20 supplementary groups, and with 2000, where the Seccomp lines
// of /proc/thread-self/status are past what inherited reads of it.
func TestSpareTakesTheSeccompFilterOfItsUse(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("installs a filter without no_new_privs, sets its groups: needs root")
	}
	old, err := syscall.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setgroups(old) })
	for _, n := range []int{20, 2000} {
		t.Run(strconv.Itoa(n)+" groups", func(t *testing.T) {
			groups := make([]int, n)
			for i := range groups {
				groups[i] = 10000 + i
			}
			if err := syscall.Setgroups(groups); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			spareReady(t, dir)
			uses := spareUses.Load()
			got, err := unameOnRefusingThread(dir)
			if err != nil {
				t.Skipf("cannot install a seccomp filter: %v", err)
			}
			if got.ExitCode == 0 && got.Stdout == "Linux\n" {
				t.Fatalf("uname ran in a command whose thread refuses it (spare used: %v)", spareUses.Load() != uses)
			}
		})
	}
}

// TestSpareTakesTheSecondSeccompFilterOfItsUse: a process already under a
// seccomp filter (mode 2) when its spare started, whose thread installed
// a second one (here: uname refused) since, runs its next command under
// both, as a helper started for it would: the mode reads 2 at both ends,
// the number of filters (Seccomp_filters) does not.
func TestSpareTakesTheSecondSeccompFilterOfItsUse(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("installs filters without no_new_privs: needs root")
	}
	if st, err := os.ReadFile("/proc/self/status"); err != nil || !strings.Contains(string(st), "Seccomp_filters:") {
		t.Skip("no Seccomp_filters in /proc/self/status (Linux < 5.9)")
	}
	// The first filter allows everything, on every thread of the process
	// (TSYNC), the spare's among them; it stays for the rest of the tests.
	allow := []unix.SockFilter{{Code: 0x06, K: 0x7fff0000}} // ret ALLOW
	fprog := unix.SockFprog{Len: uint16(len(allow)), Filter: &allow[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		t.Skipf("cannot install a seccomp filter on every thread: %v", e)
	}
	dir := t.TempDir()
	spares.Lock()
	s := spares.ready // started before the first filter
	spares.ready = nil
	spares.Unlock()
	if s != nil {
		s.discard()
	}
	spareReady(t, dir)
	uses := spareUses.Load()
	got, err := unameOnRefusingThread(dir)
	if err != nil {
		t.Skipf("cannot install a second seccomp filter: %v", err)
	}
	if got.ExitCode == 0 && got.Stdout == "Linux\n" {
		t.Fatalf("uname ran in a command whose thread refuses it (spare used: %v)", spareUses.Load() != uses)
	}
}

// unameOnRefusingThread runs uname read-only in dir from a thread that
// installed a seccomp filter refusing uname (err: it could not).
func unameOnRefusingThread(dir string) (r Result, err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread is filtered
		prog := []unix.SockFilter{
			{Code: 0x20, K: 0},                // ld [nr]
			{Code: 0x15, Jt: 0, Jf: 1, K: 63}, // jeq uname
			{Code: 0x06, K: 0x00050000 | 1},   // ret ERRNO(EPERM)
			{Code: 0x06, K: 0x7fff0000},       // ret ALLOW
		}
		fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
		if _, _, e := unix.Syscall(unix.SYS_PRCTL, unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog))); e != 0 {
			err = e
			return
		}
		r, _ = Run(context.Background(), &Options{Dir: dir, Profile: ReadOnly}, "uname")
	}()
	<-done
	return r, err
}
