package bash_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

func init() { agentMain = treeAgent }

// agentConfig is what a test tells the agent process.
type agentConfig struct {
	Profile bash.Profile  `json:"profile"`
	NoPidNS bool          `json:"no_pid_ns"`
	Dir     string        `json:"dir"`
	Cmd     string        `json:"cmd"`
	Timeout time.Duration `json:"timeout"`
	// CancelOn: the agent cancels the command once a file matches one of
	// these patterns.
	CancelOn []string `json:"cancel_on"`
	// Result is where the agent writes the command's outcome.
	Result string `json:"result"`
}

type agentResult struct {
	bash.Result
	Err string `json:"err"`
}

// treeAgent runs one command, writes its outcome and stays alive: what a
// test sees die afterwards did not die with the agent.
func treeAgent(config string) {
	var a agentConfig
	if err := json.Unmarshal([]byte(config), &a); err != nil {
		panic(err)
	}
	if a.NoPidNS {
		bash.WithoutPidNamespace()
	}
	ctx, cancel := context.WithCancel(context.Background())
	if len(a.CancelOn) > 0 {
		go func() {
			for !matches(a.CancelOn) {
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
		}()
	}
	r, err := bash.Run(ctx, &bash.Options{Dir: a.Dir, Profile: a.Profile, Timeout: a.Timeout}, a.Cmd)
	out := agentResult{Result: r}
	if err != nil {
		out.Err = err.Error()
	}
	data, _ := json.Marshal(out)
	if err := os.WriteFile(a.Result+".tmp", data, 0o600); err != nil {
		panic(err)
	}
	if err := os.Rename(a.Result+".tmp", a.Result); err != nil {
		panic(err)
	}
	time.Sleep(time.Minute) // killed by the test
	os.Exit(0)
}

func matches(patterns []string) bool {
	for _, p := range patterns {
		if m, _ := filepath.Glob(p); len(m) > 0 {
			return true
		}
	}
	return false
}

// treeCmd is the command of TestTreeDies: it leaves a process behind in
// each way a command can, a background job, a nohup, a setsid child and a
// daemon (forked twice, setsid, orphaned), waits until they are all up,
// says so ($TMPDIR/started), then sleeps in the foreground (unless EXIT is
// set). Each process, once its sleep is over, writes its marker (in the
// working directory where it may, and in $TMPDIR). All of them carry TOKEN
// in their environment.
const treeCmd = `export TOLLGATE_TREE_TOKEN=TOKEN; T=$TMPDIR; W=$PWD
(touch "$T/up-bg"; sleep 3; touch "$W/marker-bg" "$T/marker-bg") &
nohup sh -c 'touch "$0/up-nohup"; sleep 3; touch "$1/marker-nohup" "$0/marker-nohup"' "$T" "$W" >/dev/null 2>&1 &
setsid sh -c 'touch "$0/up-setsid"; sleep 3; touch "$1/marker-setsid" "$0/marker-setsid"' "$T" "$W" &
(setsid sh -c 'touch "$0/up-daemon"; sleep 3; touch "$1/marker-daemon" "$0/marker-daemon"' "$T" "$W" &)
until [ -e "$T/up-bg" ] && [ -e "$T/up-nohup" ] && [ -e "$T/up-setsid" ] && [ -e "$T/up-daemon" ]; do sleep 0.01; done
echo y; touch "$T/started"
EXIT || { sleep 3; echo z; touch "$W/marker-fg" "$T/marker-fg"; }`

// TestTreeDies: nothing of a command runs once the agent's process is
// killed (SIGKILL), once the command timed out or was cancelled, or once
// its shell ended, whatever it left in the background, in another process
// group or session, for every profile, with and without a PID namespace
// for the confined ones. Each case takes a little over the command's
// sleeps (3s); all of them run at once (they mostly sleep: go test's
// -parallel, the number of processors, would run them a few at a time)
// and each reports in its subtest.
func TestTreeDies(t *testing.T) {
	configs := []struct {
		name    string
		profile bash.Profile
		noPidNS bool
	}{
		{"unconfined", bash.Unconfined, false},
		{"read-only", bash.ReadOnly, false},
		{"workspace-write", bash.WorkspaceWrite, false},
		{"read-only-no-pid-namespace", bash.ReadOnly, true},
		{"workspace-write-no-pid-namespace", bash.WorkspaceWrite, true},
	}
	sandboxErr := bash.Check().Enforceable(bash.WorkspaceWrite)
	type run struct {
		name, skip string
		errs       chan []string
	}
	var (
		runs []run
		wg   sync.WaitGroup
	)
	defer wg.Wait() // with -run, a case may have no subtest to wait for it
	for _, c := range configs {
		for _, ending := range []string{"agent-killed", "timeout", "cancelled", "shell-exits"} {
			r := run{name: c.name + "/" + ending, errs: make(chan []string, 1)}
			switch {
			case c.profile == bash.Unconfined:
			case sandboxErr != nil:
				r.skip = sandboxErr.Error()
			case !c.noPidNS && !bash.Check().PidNS:
				r.skip = "no PID namespace here: the -no-pid-namespace case is this one"
			}
			if r.skip == "" {
				wg.Go(func() { r.errs <- treeDies(t, c.profile, c.noPidNS, ending) })
			}
			runs = append(runs, r)
		}
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			if r.skip != "" {
				needSandbox(t) // fails under CI=true
				t.Skip(r.skip)
			}
			for _, e := range <-r.errs {
				t.Error(e)
			}
		})
	}
}

// treeDies runs one case of TestTreeDies and returns its failures; t is
// the parent test's, for its temporary directories and clean-ups.
func treeDies(t *testing.T, profile bash.Profile, noPidNS bool, ending string) (errs []string) {
	fail := func(format string, args ...any) []string {
		return append(errs, fmt.Sprintf(format, args...))
	}
	tmp, work := t.TempDir(), t.TempDir()
	token := "tgtree" + strings.ToLower(rand.Text())
	exit := "false"
	if ending == "shell-exits" {
		exit = "true"
	}
	cmd := strings.NewReplacer("TOKEN", token, "EXIT", exit).Replace(treeCmd)
	started := []string{filepath.Join(tmp, "started"), filepath.Join(tmp, "*", "started")}
	a := agentConfig{Profile: profile, NoPidNS: noPidNS, Dir: work, Cmd: cmd, Result: filepath.Join(tmp, "result.json")}
	switch ending {
	case "timeout":
		a.Timeout = 1500 * time.Millisecond
	case "cancelled":
		a.CancelOn = started
	}
	cfg, _ := json.Marshal(a)
	agent := exec.Command(os.Args[0], "-test.run=^$")
	agent.Env = append(os.Environ(), agentEnv+"="+string(cfg), "TMPDIR="+tmp)
	agent.Stdout, agent.Stderr = os.Stderr, os.Stderr
	if err := agent.Start(); err != nil {
		return fail("%v", err)
	}
	t.Cleanup(func() {
		_ = agent.Process.Kill()
		_ = agent.Wait()
	})
	result := func() (agentResult, bool) {
		var r agentResult
		data, err := os.ReadFile(a.Result)
		return r, err == nil && json.Unmarshal(data, &r) == nil
	}
	deadline := time.Now().Add(15 * time.Second)
	if ending == "agent-killed" {
		for !matches(started) {
			if r, ok := result(); ok {
				return fail("the command ended before it started: %+v", r)
			}
			if time.Now().After(deadline) {
				return fail("the command did not start")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := agent.Process.Signal(os.Kill); err != nil {
			return fail("%v", err)
		}
		_ = agent.Wait()
	} else {
		r, ok := result()
		for ; !ok; r, ok = result() {
			if time.Now().After(deadline) {
				return fail("the command did not end")
			}
			time.Sleep(10 * time.Millisecond)
		}
		switch {
		case ending == "timeout" && (!r.TimedOut || r.Stdout != "y\n"):
			return fail("not timed out after it started: %+v", r)
		case ending == "cancelled" && !strings.Contains(r.Err, "context canceled"):
			return fail("not cancelled: %+v", r)
		case ending == "shell-exits" && (r.Err != "" || r.ExitCode != 0 || r.Stdout != "y\n"):
			return fail("%+v", r)
		}
	}
	// Every process of the command was sleeping when it ended: a moment
	// later none may be left, and none may ever write its marker.
	ended := time.Now()
	time.Sleep(500 * time.Millisecond)
	if left := processesWith(token, agent.Process.Pid); len(left) > 0 {
		errs = fail("processes of the command are left: %s", strings.Join(left, "; "))
	}
	time.Sleep(time.Until(ended.Add(3500 * time.Millisecond)))
	for _, p := range []string{filepath.Join(work, "marker-*"), filepath.Join(tmp, "marker-*"), filepath.Join(tmp, "*", "marker-*")} {
		if m, _ := filepath.Glob(p); len(m) > 0 {
			errs = fail("ran after the end: %v", m)
		}
	}
	return errs
}

// processesWith lists the processes (but not, the agent) whose command
// line or environment holds token.
func processesWith(token string, not int) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == not || pid == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if bytes.Contains(cmdline, []byte(token)) || bytes.Contains(environ, []byte(token)) {
			out = append(out, e.Name()+" "+string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	}
	return out
}

// TestSupervisedExitStatus: the supervisor reports the shell's status as
// the shell itself would have, a signal included, and gives it the
// working directory's PWD.
func TestSupervisedExitStatus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for cmd, want := range map[string]int{`exit 3`: 3, `kill -9 $$`: 137, `kill -TERM $$`: 143, `[ "$PWD" = "` + dir + `" ]`: 0} {
		r, err := bash.Run(context.Background(), &bash.Options{Dir: dir}, cmd)
		if err != nil || r.ExitCode != want {
			t.Errorf("%s: %+v %v, want exit %d", cmd, r, err, want)
		}
	}
}
