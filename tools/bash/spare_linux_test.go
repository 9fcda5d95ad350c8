package bash

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// freshProcessEnv is set in the environment of a test binary started to
// run one test in a process of its own.
const freshProcessEnv = "TOLLGATE_TEST_FRESH_PROCESS"

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
	// mayFail: a helper started for the command may be unable to run
	// (as uid 4242 it cannot start the test binary, in a directory only
	// root reads); what must not happen is a command run as before.
	cases := []struct {
		name, cmd, want string
		mayFail         bool
		change          func() (undo func())
	}{
		{"umask", "umask", "0077\n", false, func() func() {
			old := syscall.Umask(0o077)
			return func() { syscall.Umask(old) }
		}},
		{"rlimit", "ulimit -Sl", "16\n", false, func() func() {
			var old unix.Rlimit
			if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
				t.Fatal(err)
			}
			if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 16 << 10, Max: old.Max}); err != nil {
				t.Fatal(err)
			}
			return func() { _ = unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old) }
		}},
		{"gid", "id -g", "4242\n", false, func() func() {
			if err := syscall.Setresgid(4242, 4242, 0); err != nil {
				t.Fatal(err)
			}
			return func() { _ = syscall.Setresgid(0, 0, 0) }
		}},
		{"uid", "id -u", "4242\n", true, func() func() {
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
			if err != nil && tc.mayFail && got.Stdout == "" {
				t.Logf("%s: not run: %v", tc.cmd, err)
				return
			}
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

// TestSpareUsedWhenNothingChanged: a spare whose process state and
// mounts are as when it started is used (the comparison does not discard
// every spare), and one is not used after a mount and an unmount.
//
// It runs in a process of its own: other tests of this binary change the
// threads' credentials and back (setuid, groups), after which one thread's
// session keyring can read otherwise than another's, and a spare started
// on one is then rightly not used for a command on the other.
func TestSpareUsedWhenNothingChanged(t *testing.T) {
	if os.Getenv(freshProcessEnv) == "" {
		child := exec.Command(os.Args[0], "-test.run=^TestSpareUsedWhenNothingChanged$", "-test.count=1", "-test.v")
		child.Env = append(os.Environ(), freshProcessEnv+"=1")
		out, err := child.CombinedOutput()
		switch {
		case err != nil:
			t.Fatalf("in a process of its own: %v\n%s", err, out)
		case bytes.Contains(out, []byte("--- SKIP")):
			t.Skipf("in a process of its own:\n%s", out)
		case !bytes.Contains(out, []byte("--- PASS: TestSpareUsedWhenNothingChanged")):
			t.Fatalf("in a process of its own, the test did not run:\n%s", out)
		}
		return
	}
	dir := t.TempDir()
	// Another process may mount or unmount something on the machine
	// meanwhile: a try is counted only when a watch opened before it saw
	// no change.
	for used, tries := 0, 0; used < 3; tries++ {
		if tries == 20 {
			t.Skip("the mounts of this namespace changed during every try")
		}
		fd, err := watchMounts()
		if err != nil {
			t.Fatal(err)
		}
		spareReady(t, dir)
		n := spareUses.Load()
		runIn(t, dir, "true")
		moved := mountsMoved(fd)
		unix.Close(fd)
		switch {
		case spareUses.Load() == n+1:
			used++
		case !moved:
			t.Fatal("a spare started with the process's state and mounts as they are was not used")
		}
	}
	spareReady(t, dir)
	m := filepath.Join(dir, "m")
	if err := os.Mkdir(m, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", m, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	if err := unix.Unmount(m, 0); err != nil {
		t.Fatal(err)
	}
	n := spareUses.Load()
	runIn(t, dir, "true")
	if spareUses.Load() != n {
		t.Fatal("a spare started before a mount and an unmount was used")
	}
}

// TestMountsMoved: the mount watch says so after a mount and an unmount
// (the table reads the same), a bind mount replaced at the same path, and
// a mount in a sub-directory of a bound path; not when nothing changed.
func TestMountsMoved(t *testing.T) {
	dir := t.TempDir()
	a, b, m := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "m")
	for _, d := range []string{a, b, m, filepath.Join(a, "sub"), filepath.Join(b, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount(a, m, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind mount here: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(m, unix.MNT_DETACH) })
	cases := []struct {
		name   string
		change func() error
	}{
		{"nothing", func() error { return nil }},
		{"mount and unmount", func() error {
			if err := unix.Mount("tmpfs", b, "tmpfs", 0, "size=64k"); err != nil {
				return err
			}
			return unix.Unmount(b, 0)
		}},
		{"bind replaced at the same path", func() error {
			if err := unix.Unmount(m, 0); err != nil {
				return err
			}
			return unix.Mount(b, m, "", unix.MS_BIND, "")
		}},
		{"mount under a bound path", func() error {
			if err := unix.Mount("tmpfs", filepath.Join(m, "sub"), "tmpfs", 0, "size=64k"); err != nil {
				return err
			}
			return unix.Unmount(filepath.Join(m, "sub"), 0)
		}},
		{"remount read-only", func() error {
			return unix.Mount("", m, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, "")
		}},
	}
	for _, tc := range cases {
		fd, err := watchMounts()
		if err != nil {
			t.Fatal(err)
		}
		if err := tc.change(); err != nil {
			unix.Close(fd)
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := mountsMoved(fd)
		unix.Close(fd)
		if want := tc.name != "nothing"; got != want {
			t.Errorf("%s: mountsMoved = %v, want %v", tc.name, got, want)
		}
	}
}

// TestSpareLeavesNothing: spares taken, discarded and gone leave no
// descriptor in this process and no zombie child, also when no command
// comes after one is killed.
func TestSpareLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	spareReady(t, dir)
	beforeNames := openFDNames(t)
	before := len(beforeNames)
	m := filepath.Join(dir, "m")
	if err := os.Mkdir(m, 0o755); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		spareReady(t, dir)
		runIn(t, dir, "true") // taken
		spareReady(t, dir)
		old := syscall.Umask(0o077)
		runIn(t, dir, "true") // discarded: another umask
		syscall.Umask(old)
		s := spareReady(t, dir)
		if err := syscall.Kill(s.cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for !s.exited() {
			time.Sleep(time.Millisecond)
		}
		runIn(t, dir, "true") // discarded: gone
	}
	s := spareReady(t, dir)
	if err := syscall.Kill(s.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for !s.exited() {
		time.Sleep(time.Millisecond)
	}
	for deadline := time.Now().Add(5 * time.Second); len(zombies(t)) > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // a spare killed while it waits is reaped with no command to come
	}
	if z := zombies(t); len(z) > 0 {
		t.Errorf("a spare killed while it waited is left a zombie: %v", z)
	}
	spareReady(t, dir)
	var after int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		// A discarded spare's output pipes close when its Wait, in a
		// goroutine of its own, returns.
		if after = openFDs(t); after <= before || time.Now().After(deadline) {
			break
		}
	}
	if after > before {
		t.Errorf("%d descriptors open after 15 spares, %d before:\n%v\nbefore:\n%v", after, before, openFDNames(t), beforeNames)
	}
	if z := zombies(t); len(z) > 0 {
		t.Errorf("zombie children: %v", z)
	}
}

func openFDs(t *testing.T) int {
	return len(openFDNames(t))
}

// openFDNames are this process's descriptors and what each is (a pipe, a
// pidfd, a file), for a failure to say which one stayed.
func openFDNames(t *testing.T) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fd := range fds {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		names = append(names, fd.Name()+"→"+target)
	}
	return names
}

// zombies are this process's children that have exited and are not
// waited for.
func zombies(t *testing.T) []string {
	t.Helper()
	var z []string
	for _, c := range children(os.Getpid()) {
		if c.state == "Z" {
			z = append(z, strconv.Itoa(c.pid)+" "+c.cmdline)
		}
	}
	return z
}

// child is a process's child, as /proc shows it.
type child struct {
	pid            int
	state, cmdline string
}

// children are the children of pid.
func children(pid int) []child {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var cs []child
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		c := child{state: f[0]}
		c.pid, _ = strconv.Atoi(filepath.Base(filepath.Dir(p)))
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		c.cmdline = string(cmdline)
		cs = append(cs, c)
	}
	return cs
}

// BenchmarkInherited: the comparison on a spare's path (what inherited
// reads).
func BenchmarkInherited(b *testing.B) {
	helper, _, err := helperPath()
	if err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		inherited(helper)
	}
}

// TestSpareResolvesPathsAtUse: what the configuration names by path (the
// working directory, masked files) is looked up when the configuration
// comes, in a spare as in a helper started for the command: a directory
// replaced by another of the same name, and a masked file made, after
// the spare started, are the current ones.
func TestSpareResolvesPathsAtUse(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "f"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	spareReady(t, dir)
	if err := os.Rename(work, work+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{"f": "new", "secret": "hidden"} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n := spareUses.Load()
	r, err := Run(context.Background(), &Options{Dir: work, Profile: ReadOnly, Masked: []string{filepath.Join(work, "secret")}},
		"cat f; cat secret; pwd")
	if err != nil {
		t.Fatal(err)
	}
	if spareUses.Load() != n+1 {
		t.Skip("the spare was not used (another process's mount?)")
	}
	if want := "new" + work + "\n"; r.Stdout != want {
		t.Fatalf("the command in a spare printed %q (stderr %q), want %q", r.Stdout, r.Stderr, want)
	}
}
