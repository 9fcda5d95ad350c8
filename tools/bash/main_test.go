package bash_test

import (
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/pgtest"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

// agentEnv, set, makes the test binary an agent process that runs one
// command (agentMain, see TestTreeDies), with this configuration.
const agentEnv = "TOLLGATE_BASH_TEST_AGENT"

// agentMain is the agent process; it does not return. Nil where the tests
// have none.
var agentMain func(config string)

// helperEnv names a helper binary (cmd/tollgate-sandbox) the tests start
// in place of the test binary (.ci/run runs them both ways).
const helperEnv = "TOLLGATE_TEST_SANDBOX_HELPER"

// probes are the modes of the test binary that commands run to attack the
// sandbox (os.Args[1] names one; it gets the rest).
var probes = map[string]func(args []string){}

// TestMain lets the test binary be the sandbox helper (and the supervisor)
// of the tools it builds (or the binary helperEnv names), and an agent process that tests kill.
func TestMain(m *testing.M) {
	bash.MaybeRunHelper()
	bash.UseSpareHelpers(true) // the tests' process does not confine itself, but for TestSpareTakesTheLandlockDomainOfItsUse, which turns them off
	if path := os.Getenv(helperEnv); path != "" {
		if err := bash.SetHelper(path); err != nil {
			fmt.Fprintln(os.Stderr, helperEnv+":", err)
			os.Exit(2)
		}
	}
	if len(os.Args) == 3 && os.Args[1] == "tollgate-unix-client" {
		// Run by a confined command: connect to a UNIX socket outside.
		c, err := net.Dial("unix", os.Args[2])
		if err != nil {
			fmt.Println("dial:", err)
			os.Exit(3)
		}
		c.Write([]byte("from the sandbox"))
		c.Close()
		os.Exit(0)
	}
	if len(os.Args) >= 2 && probes[os.Args[1]] != nil {
		probes[os.Args[1]](os.Args[2:])
		os.Exit(0)
	}
	if cfg := os.Getenv(agentEnv); cfg != "" && agentMain != nil {
		agentMain(cfg)
	}
	pgtest.Main(m)
}
