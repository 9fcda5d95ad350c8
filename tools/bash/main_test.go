package bash_test

import (
	"os"
	"testing"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

// TestMain lets the test binary be the sandbox helper of the tools it
// builds.
func TestMain(m *testing.M) {
	bash.MaybeRunHelper()
	os.Exit(m.Run())
}
