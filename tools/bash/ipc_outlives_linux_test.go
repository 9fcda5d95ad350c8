package bash

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestConfinedCommandLeavesNoIPC: a read-only command shares the host's
// IPC namespace (no CLONE_NEWIPC; seccomp and Landlock leave System V
// IPC alone): it can make a shared memory segment, a message queue or a
// semaphore set that outlives it (memory held after the call, state the
// next command or another process reads), and reach the host's own
// segments of its uid. Nothing of a command may outlive the call.
func TestConfinedCommandLeavesNoIPC(t *testing.T) {
	if err := Check().Enforceable(ReadOnly); err != nil {
		t.Skip(err)
	}
	if _, err := exec.LookPath("ipcmk"); err != nil {
		t.Skip("no ipcmk")
	}
	r, err := Run(context.Background(), &Options{Dir: t.TempDir(), Profile: ReadOnly},
		`ipcmk -M 1048576 -p 0600 && ipcmk -Q -p 0600`)
	if err != nil {
		t.Fatalf("%+v %v", r, err)
	}
	var ids []int
	for _, l := range strings.Split(r.Stdout, "\n") {
		var id int
		if _, err := fmt.Sscanf(l[strings.LastIndexByte(l, ' ')+1:], "%d", &id); err == nil && strings.Contains(l, "id") {
			ids = append(ids, id)
		}
	}
	t.Logf("%q %q", r.Stdout, r.Stderr)
	if len(ids) > 0 {
		if _, err := unix.SysvShmCtl(ids[0], unix.IPC_STAT, &unix.SysvShmDesc{}); err == nil {
			_, _ = unix.SysvShmCtl(ids[0], unix.IPC_RMID, nil)
			t.Errorf("a read-only command left a 1 MiB shared memory segment (id %d) in the host's IPC namespace", ids[0])
		}
	}
	if len(ids) > 1 {
		_ = exec.Command("ipcrm", "-q", fmt.Sprint(ids[1])).Run()
	}
}
