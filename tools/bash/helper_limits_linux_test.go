package bash_test

import (
	"context"
	"testing"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

// TestHelperUnderLowMemoryLimit: a memory limit far below a Go program's
// address space bounds the command, not the helper on its way to it (the
// limits were set first, and a helper whose runtime mapped memory again
// died: a race-built one in setupView).
func TestHelperUnderLowMemoryLimit(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	for _, p := range confined {
		r, err := bash.Run(context.Background(), &bash.Options{Dir: dir, Profile: p, Limits: bash.Limits{Memory: 32 << 20}}, "echo ran")
		if err != nil || r.Stdout != "ran\n" {
			t.Errorf("%s under a 32 MB address space: %+v %v", p, r, err)
		}
	}
}
