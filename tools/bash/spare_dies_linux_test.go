package bash_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

func init() { probes["tollgate-spare-agent"] = spareAgent }

// spareAgent runs a confined command in args[0], waits for its spare
// helper (a child running the helper, left after the command), prints the
// spare's pid and waits to be killed.
func spareAgent(args []string) {
	if _, err := bash.Run(context.Background(), &bash.Options{Dir: args[0], Profile: bash.ReadOnly}, "true"); err != nil {
		fmt.Println("run:", err)
		os.Exit(3)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if pids := bash.HelperChildren(os.Getpid()); len(pids) > 0 {
			fmt.Println(pids[0])
			time.Sleep(time.Minute) // killed by the test
		}
	}
	fmt.Println("no spare")
	os.Exit(3)
}

// TestSpareDiesWithTheProcess: the spare helper a process keeps waiting
// for its next confined command dies when the process is killed.
func TestSpareDiesWithTheProcess(t *testing.T) {
	if err := bash.Check().Enforceable(bash.ReadOnly); err != nil || !bash.Check().PidNS || !bash.Check().MountNS {
		t.Skip("no spares here: confined commands without a PID and a mount namespace")
	}
	agent := exec.Command(os.Args[0], "tollgate-spare-agent", t.TempDir())
	out, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	spare, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		_ = agent.Process.Kill()
		_ = agent.Wait()
		t.Fatalf("the agent said %q", line)
	}
	if err := agent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = agent.Wait()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", spare))
		s := string(b)
		if err != nil || strings.Contains(s[strings.LastIndexByte(s, ')')+1:], " Z ") || !strings.Contains(s, "tollgate-sandb") && !strings.Contains(s, "bash.test") {
			return // gone, dead (its new parent reaps it), or its pid reused
		}
		if time.Now().After(deadline) {
			t.Fatalf("the spare helper %d outlived its process by 10s: %s", spare, s)
		}
	}
}
