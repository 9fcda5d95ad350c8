package bash_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

// TestMain lets the test binary be the sandbox helper of the tools it
// builds, and an agent process that TestConfinedDiesWithAgent kills.
func TestMain(m *testing.M) {
	bash.MaybeRunHelper()
	if dir := os.Getenv("TOLLGATE_BASH_TEST_AGENT_DIR"); dir != "" {
		_, err := bash.Run(context.Background(), &bash.Options{Dir: dir, Profile: bash.WorkspaceWrite},
			"touch started; (sleep 2; touch marker) & wait")
		fmt.Println(err)
		os.Exit(0)
	}
	os.Exit(m.Run())
}
