package bash_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

// TestMain lets the test binary be the sandbox helper of the tools it
// builds, and an agent process that TestConfinedDiesWithAgent kills.
func TestMain(m *testing.M) {
	bash.MaybeRunHelper()
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
	if dir := os.Getenv("TOLLGATE_BASH_TEST_AGENT_DIR"); dir != "" {
		_, err := bash.Run(context.Background(), &bash.Options{Dir: dir, Profile: bash.WorkspaceWrite},
			"touch started; (sleep 2; touch marker) & wait")
		fmt.Println(err)
		os.Exit(0)
	}
	os.Exit(m.Run())
}
