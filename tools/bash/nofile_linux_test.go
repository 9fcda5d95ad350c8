package bash_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

// nofileEnv is set in the environment of the test binary started to run
// TestConfinedCommandKeepsTheSoftNofileLimit with a lowered soft limit.
const nofileEnv = "TOLLGATE_TEST_LOWERED_NOFILE"

// TestConfinedCommandKeepsTheSoftNofileLimit: a confined command starts
// with the soft RLIMIT_NOFILE the agent's process started with, as an
// unconfined one does. Go raises its own soft limit at start and restores
// the original in what it execs (syscall.Exec, os/exec); the helper, a Go
// program, raised its own, and a raw execve would hand the raised one to
// the command.
//
// It runs in a process of its own whose soft limit is below the hard one
// (here they are often equal, and Go changes nothing then).
func TestConfinedCommandKeepsTheSoftNofileLimit(t *testing.T) {
	needSandbox(t)
	if os.Getenv(nofileEnv) == "" {
		child := exec.Command(os.Args[0], "-test.run=^TestConfinedCommandKeepsTheSoftNofileLimit$", "-test.count=1", "-test.v")
		child.Env = append(os.Environ(), nofileEnv+"=1")
		out, err := child.CombinedOutput()
		switch {
		case err != nil:
			t.Fatalf("in a process of its own: %v\n%s", err, out)
		case strings.Contains(string(out), "--- SKIP"):
			t.Skipf("in a process of its own:\n%s", out)
		case !strings.Contains(string(out), "--- PASS: TestConfinedCommandKeepsTheSoftNofileLimit"):
			t.Fatalf("in a process of its own, the test did not run:\n%s", out)
		}
		return
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max < 512 {
		t.Skipf("hard RLIMIT_NOFILE %d", lim.Max)
	}
	// As a shell's ulimit -Sn, or systemd's default (1024 soft, more hard),
	// would have left it before the agent started.
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: 256, Max: lim.Max}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	want, err := bash.Run(context.Background(), &bash.Options{Dir: dir, Profile: bash.Unconfined}, "ulimit -Sn")
	if err != nil || strings.TrimSpace(want.Stdout) != "256" {
		t.Fatalf("unconfined: %+v %v", want, err)
	}
	for _, p := range confined {
		r, err := bash.Run(context.Background(), &bash.Options{Dir: dir, Profile: p}, "ulimit -Sn")
		if err != nil || r.Stdout != want.Stdout {
			t.Errorf("%s: soft RLIMIT_NOFILE %q (%v), want %q as unconfined", p, r.Stdout, err, want.Stdout)
		}
	}
}
