package bash

import (
	"context"
	"os"
	"runtime"
	"strconv"
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
			type res struct {
				r   Result
				err error
			}
			done := make(chan res)
			go func() {
				runtime.LockOSThread() // never unlocked: the thread is filtered
				prog := []unix.SockFilter{
					{Code: 0x20, K: 0},                // ld [nr]
					{Code: 0x15, Jt: 0, Jf: 1, K: 63}, // jeq uname
					{Code: 0x06, K: 0x00050000 | 1},   // ret ERRNO(EPERM)
					{Code: 0x06, K: 0x7fff0000},       // ret ALLOW
				}
				fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
				if _, _, e := unix.Syscall(unix.SYS_PRCTL, unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog))); e != 0 {
					done <- res{err: e}
					return
				}
				r, err := Run(context.Background(), &Options{Dir: dir, Profile: ReadOnly}, "uname")
				done <- res{r: r}
				_ = err
			}()
			got := <-done
			if got.err != nil {
				t.Skipf("cannot install a seccomp filter: %v", got.err)
			}
			if got.r.ExitCode == 0 && got.r.Stdout == "Linux\n" {
				t.Fatalf("uname ran in a command whose thread refuses it (spare used: %v)", spareUses.Load() != uses)
			}
		})
	}
}
