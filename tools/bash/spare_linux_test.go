package bash

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// readySpare waits for the spare helper to be ready and returns it (left
// in place).
func readySpare(t *testing.T) *spare {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		spares.Lock()
		s := spares.ready
		spares.Unlock()
		if s != nil {
			return s
		}
	}
	t.Fatal("no spare helper after 10s")
	return nil
}

// TestSpareGoneOrStale: a spare helper killed while it waited, or started
// before the mount table changed, is not used: the command runs in a
// helper started for it (no error), and sees what was mounted since.
func TestSpareGoneOrStale(t *testing.T) {
	if err := Check().Enforceable(ReadOnly); err != nil || !Check().PidNS || !Check().MountNS {
		t.Skip("no spares here: confined commands without a PID and a mount namespace")
	}
	dir := t.TempDir()
	run := func(cmd string) Result {
		t.Helper()
		r, err := Run(context.Background(), &Options{Dir: dir, Profile: ReadOnly}, cmd)
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("%s: %+v %v", cmd, r, err)
		}
		return r
	}
	run("true") // asks for a spare
	s := readySpare(t)
	if err := syscall.Kill(s.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for !s.exited() {
		time.Sleep(time.Millisecond)
	}
	run("true")

	readySpare(t)
	sub := filepath.Join(dir, "mnt")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(sub, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(sub, "f"), []byte("mounted since"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run("cat mnt/f"); r.Stdout != "mounted since" {
		t.Fatalf("the command saw %q in a file system mounted after its spare started", r.Stdout)
	}
}

// spareReady runs a confined command in dir (which asks for a spare) and
// waits for the spare to be ready; it skips where there are no spares.
func spareReady(t *testing.T, dir string) *spare {
	t.Helper()
	if err := Check().Enforceable(ReadOnly); err != nil || !Check().PidNS || !Check().MountNS {
		t.Skip("no spares here: confined commands without a PID and a mount namespace")
	}
	if _, err := Run(context.Background(), &Options{Dir: dir, Profile: ReadOnly}, "true"); err != nil {
		t.Fatal(err)
	}
	return readySpare(t)
}

// runIn runs cmd read-only in dir and returns its stdout (a failure to
// run, or a non-zero exit, is fatal).
func runIn(t *testing.T, dir, cmd string) string {
	t.Helper()
	r, err := Run(context.Background(), &Options{Dir: dir, Profile: ReadOnly}, cmd)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("%s: %+v %v", cmd, r, err)
	}
	return r.Stdout
}

// TestSpareTakesTheProcessStateOfItsUse: a command run in a spare runs
// with the process state a helper started for it would have — the umask,
// the rlimits the helper leaves alone, the groups and the gid, the uid —
// not the state the process had when the spare started (found by review:
// a process that dropped root after its spare started ran its next
// command as uid 0).
func TestSpareTakesTheProcessStateOfItsUse(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changes its uid and gid: needs root")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // readable by the uid the test drops to
		t.Fatal(err)
	}
	cases := []struct {
		name, cmd, want string
		change          func() (undo func())
	}{
		{"umask", "umask", "0077\n", func() func() {
			old := syscall.Umask(0o077)
			return func() { syscall.Umask(old) }
		}},
		{"rlimit", "ulimit -Sl", "16\n", func() func() {
			var old unix.Rlimit
			if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
				t.Fatal(err)
			}
			if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 16 << 10, Max: old.Max}); err != nil {
				t.Fatal(err)
			}
			return func() { _ = unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old) }
		}},
		{"gid", "id -g", "4242\n", func() func() {
			if err := syscall.Setresgid(4242, 4242, 0); err != nil {
				t.Fatal(err)
			}
			return func() { _ = syscall.Setresgid(0, 0, 0) }
		}},
		{"uid", "id -u", "4242\n", func() func() {
			if err := syscall.Setresuid(4242, 4242, 0); err != nil {
				t.Fatal(err)
			}
			return func() { _ = syscall.Setresuid(0, 0, 0) }
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spareReady(t, dir)
			undo := tc.change()
			got, err := Run(context.Background(), &Options{Dir: dir, Profile: ReadOnly}, tc.cmd)
			undo()
			if err != nil || got.ExitCode != 0 {
				t.Fatalf("%s: %+v %v", tc.cmd, got, err)
			}
			if got.Stdout != tc.want {
				t.Fatalf("%s printed %q, want %q: the command ran with the state its spare started with", tc.cmd, got.Stdout, tc.want)
			}
		})
	}
}

// TestSpareSeesTheMountsOfItsUse: a command run in a spare sees the
// mounts as they are when it runs: a file system replaced by another at
// the same path since the spare started, and a bind mount replaced by one
// of another directory of the same name (found by review: mount ids and
// device numbers are reused, /proc/self/mountinfo read the same, and the
// command saw the old directory), and a file system mounted in a
// sub-directory of its working directory.
func TestSpareSeesTheMountsOfItsUse(t *testing.T) {
	dir := t.TempDir()
	m, a := filepath.Join(dir, "m"), filepath.Join(dir, "a")
	for _, d := range []string{m, a} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mountTmpfs := func(path string) {
		t.Helper()
		if err := unix.Mount("tmpfs", path, "tmpfs", 0, "size=64k"); err != nil {
			t.Skipf("cannot mount a tmpfs here: %v", err)
		}
		t.Cleanup(func() { _ = unix.Unmount(path, unix.MNT_DETACH) })
	}
	unmount := func(path string) {
		t.Helper()
		if err := unix.Unmount(path, 0); err != nil {
			t.Fatal(err)
		}
	}

	mountTmpfs(m)
	write(filepath.Join(m, "f"), "old")
	spareReady(t, dir)
	unmount(m)
	mountTmpfs(m)
	write(filepath.Join(m, "f"), "new")
	if got := runIn(t, dir, "cat m/f"); got != "new" {
		t.Fatalf("the command saw %q in a file system replaced at the same path after its spare started", got)
	}

	unmount(m)
	write(filepath.Join(a, "f"), "old")
	if err := unix.Mount(a, m, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	spareReady(t, dir)
	unmount(m)
	if err := os.Rename(a, a+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(a, 0o755); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(a, "f"), "new")
	if err := unix.Mount(a, m, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if got := runIn(t, dir, "cat m/f"); got != "new" {
		t.Fatalf("the command saw %q under a bind mount replaced after its spare started", got)
	}

	spareReady(t, dir)
	sub := filepath.Join(a, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(sub)
	write(filepath.Join(sub, "g"), "mounted since")
	if got := runIn(t, dir, "cat a/sub/g"); got != "mounted since" {
		t.Fatalf("the command saw %q in a file system mounted in its working directory after its spare started", got)
	}
}
