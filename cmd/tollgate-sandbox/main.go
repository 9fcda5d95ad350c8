// Command tollgate-sandbox is the sandbox helper of the bash tool alone:
// the process tollgate starts for every command it runs, which confines
// the command (namespaces, the mount view, rlimits, Landlock, seccomp)
// and execs the shell, or supervises an unconfined one. It imports only
// package internal/sandboxhelper, so that it starts in a fraction of the
// time tollgate itself takes (see bench/README.md).
//
//	go install ./cmd/...   # tollgate, tollgate-hook and tollgate-sandbox, side by side
//	tollgate sandbox check # helper: .../tollgate-sandbox
//
// tollgate uses it when it is next to its own executable, no one but root
// or tollgate's user can replace it, and it is from the same build
// (package tools/bash, HelperName); otherwise tollgate re-executes itself,
// as it did before, and sandbox check says why. It is not run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/tollgate-ai/tollgate/internal/sandboxhelper"
)

func main() {
	sandboxhelper.Main() // does not return when tollgate started it
	fmt.Fprintln(os.Stderr, "tollgate-sandbox is the sandbox helper tollgate starts for each command of its bash tool; it is not run by hand (see tollgate sandbox check)")
	os.Exit(2)
}
