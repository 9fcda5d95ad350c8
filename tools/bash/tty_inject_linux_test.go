package bash

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const ttyAgentEnv = "TOLLGATE_TEST_TTY_AGENT"

// The tty agent: like `tollgate sandbox exec` run in a terminal, it runs
// one confined command with the process's stdout and stderr (the
// terminal, its controlling one) as Options.Stdout and Stderr.
func init() {
	dir := os.Getenv(ttyAgentEnv)
	if dir == "" {
		return
	}
	MaybeRunHelper()
	r, err := Run(context.Background(), &Options{Dir: dir, Profile: ReadOnly, Stdout: os.Stdout, Stderr: os.Stderr},
		`perl -e 'ioctl(STDOUT, 0x5412, $_) or die "TIOCSTI: $!\n" for split //, "echo INJECTED-BY-CONFINED-COMMAND\n"'`)
	fmt.Fprintf(os.Stderr, "agent: %+v %v\n", r, err)
	os.Exit(0)
}

// TestConfinedCommandCannotTypeIntoTerminal: a confined command given the
// caller's terminal as its output (tollgate sandbox exec in a terminal:
// Options.Stdout is os.Stdout, passed to the helper as it is) must not
// push input into that terminal (TIOCSTI): what it types there, the
// user's shell runs unconfined once tollgate exits.
func TestConfinedCommandCannotTypeIntoTerminal(t *testing.T) {
	if err := Check().Enforceable(ReadOnly); err != nil {
		t.Skip(err)
	}
	if b, _ := os.ReadFile("/proc/sys/dev/tty/legacy_tiocsti"); strings.TrimSpace(string(b)) == "0" {
		t.Skip("TIOCSTI disabled on this kernel")
	}
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("no perl")
	}
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	go func() { // drain what the terminal shows
		b := make([]byte, 4096)
		for {
			if _, err := master.Read(b); err != nil {
				return
			}
		}
	}()
	agent := exec.Command(os.Args[0], "-test.run=^$")
	agent.Env = append(os.Environ(), ttyAgentEnv+"="+t.TempDir())
	agent.Stdin, agent.Stdout = slave, slave
	var stderr strings.Builder
	agent.Stderr = &stderr
	agent.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := agent.Run(); err != nil {
		t.Fatalf("agent: %v %s", err, stderr.String())
	}
	t.Logf("agent: %s", stderr.String())
	// What the user's shell would read next from the terminal.
	fd := int(slave.Fd()) // once: each call of Fd makes the file blocking again
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	buf := make([]byte, 4096)
	k, _ := unix.Read(fd, buf)
	if k > 0 && strings.Contains(string(buf[:k]), "INJECTED") {
		t.Fatalf("a read-only command typed into its caller's terminal, which the shell there would run unconfined: %q", buf[:k])
	}
}
