package main

import (
	"os"
	"testing"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

// TestMain lets the test binary be the bash tool's helper, as main does.
func TestMain(m *testing.M) {
	bash.MaybeRunHelper()
	os.Exit(m.Run())
}

// The README's library quick start (a copy of this package's main.go; the
// README test checks they are the same) does what the README says. The
// questions are asked in parallel, so they may come in any order.
func Example() {
	main()
	// Unordered output:
	// asked: rm logs/old.log (needs human review, 180s to answer)
	// asked: rm -r logs (needs human review, 180s to answer)
	// asked: git push (needs human review, 180s to answer)
	// `ls`: ran, exit 0
	// `rm logs/old.log`: ran, exit 0
	// `rm logs/new.log` (edited from `rm -r logs`): ran, exit 0
	// `git push`: denied: not before the review
	// `dd if=/dev/zero of=disk.img`: blocked by the policy: destructive I/O
}
