//go:build linux

package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

// TestSandboxShort runs go run ./bench sandbox with few starts (and
// without tollgate, whose build takes minutes) so that the benchmark
// cannot rot: every kind ran and has a row. It checks no timing.
func TestSandboxShort(t *testing.T) {
	if err := bash.Check().Enforceable(bash.ReadOnly); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI: the sandbox must be enforced here: %v", err)
		}
		t.Skip(err)
	}
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"sandbox", "-n", "2", "-rounds", "1", "-tollgate", "none"}, &out, &errb); err != nil {
		t.Fatalf("bench sandbox: %v\n%s", err, errb.String())
	}
	for _, want := range []string{"raw: bash -c true", "read-only, helper tollgate-sandbox ", "workspace-write, helper tollgate-sandbox (cgo)", "unconfined (supervised), helper tollgate-sandbox", "load average"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
}
