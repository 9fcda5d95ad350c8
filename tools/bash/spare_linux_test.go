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
