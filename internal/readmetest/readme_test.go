//go:build unix

package readmetest

// TestREADME runs README.md as a reader would, and fails when the README
// and the code part ways: a command or a flag renamed, an exit status
// changed, a file moved, the quick start edited in one place only.
//
// # How the README is run
//
// The README is cut into sections at its "## " headings. Each section runs
// in a bash session of its own, started in an empty directory, with HOME and
// TMPDIR inside the test's temporary directory (so `cd "$(mktemp -d)"` stays
// there), no TOLLGATE_* variable but TOLLGATE_ADDR, and first on PATH a
// directory holding `tollgate`, built from ./cmd/tollgate. The commands of
// each ```sh block run in that session one at a time, in order; each reads
// /dev/null, has a minute, and must exit 0. A section must not leave files
// in the directory it starts in (it should cd to a temporary directory
// first), except ./tollgate.db* in a section that shows `go run
// ./cmd/tollgate`: that runs in a checkout, where they are git-ignored.
//
// A comment after a command may start with a marker:
//
//	# needs: WHAT, ...   never run here: WHAT is an environment variable (an
//	                     API key), postgres or network. Its tollgate command
//	                     line is still checked against the CLI (below).
//	# until Ctrl-C ...   runs until stopped (tollgate serve): started, then
//	                     /healthz, /readyz and the page must answer; stopped
//	                     with SIGINT, and then it must exit 0, at a line
//	                     "# Ctrl-C ...", when the next such command starts,
//	                     or at the end of the section.
//	# exits N ...        must exit with status N; "# exits N where ..."
//	                     allows 0 or N (only 0 when CI=true).
//	# you type: A; B     the lines A and B are the command's stdin (tollgate
//	                     run reads one answer a line when stdin is not a
//	                     terminal).
//	# prints: TEXT       its output (stdout and stderr; a service's, once
//	                     stopped) must show TEXT, white space in either
//	                     counting as one space wherever it is a run (the
//	                     columns of a table, a line break). For what the
//	                     command shows, where that is the point: an exit
//	                     status alone does not tell that ls ran.
//
// "# prints: TEXT" may also stand alone on the lines right after its
// command (no blank line between), once for each TEXT, when the command's
// own comment says something else; anywhere else it is an error. Any other
// comment is prose, and so is a line that is only a comment, except
// "# Ctrl-C ..." and "# prints: ...".
//
// # What else is checked
//
//   - go commands: `go run ./cmd/tollgate ARGS` runs as `tollgate ARGS`;
//     `go test ./...` is not run (it runs this test) but must be what .ci/run
//     runs; `go install M/cmd/tollgate@latest` must name this module and
//     need the network. Any other go command fails the test until the test
//     learns how to check it.
//   - 127.0.0.1:8080 in a command is replaced by a free port, which
//     TOLLGATE_ADDR names too; the defaults the README states (that address,
//     the stores, the model) must be the ones the commands' help gives.
//   - While a service started here is up, each command is followed by a wait
//     until no run is active, as a reader waits for the page to change.
//   - Every tollgate command line, run or not, names a command of `tollgate
//     --help` (and a subcommand its help lists), and each flag on it is in
//     that command's help.
//   - The table of commands names every command of `tollgate --help` and no
//     other; every TOLLGATE_* variable named is in the Go source; every
//     relative link points at a file (and heading); each ```go block is the
//     whole .go file that the last link before it names, and a ```text
//     block right after it is the output an example test of that package
//     pins.
//
// go test -short does the checks but runs no command.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const (
	// readmeAddr is the address the README's commands use; they are run
	// against a free port instead.
	readmeAddr = "127.0.0.1:8080"
	// commandTimeout bounds one command, and settleTimeout the wait for a
	// service's runs to stop being active.
	commandTimeout = time.Minute
	settleTimeout  = 20 * time.Second
)

// defaults are what the README says a command does with no flags, as that
// command's help must say it.
var defaults = []struct{ command, help string }{
	{"serve", `(default "127.0.0.1:8080")`},
	{"serve", `(default "sqlite:~/.local/state/tollgate/tollgate.db")`},
	{"serve", `(default "demo")`},
	{"serve", `(default "workspace-write")`},
	{"run", `(default "memory")`},
	{"run", `(default "demo")`},
}

func TestREADME(t *testing.T) {
	root := repoRoot(t)
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := parseMarkdown(string(text))
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "tollgate"), "./cmd/tollgate")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/tollgate: %v\n%s", err, out)
	}
	cli := &cli{t: t, path: filepath.Join(bin, "tollgate"), helps: map[string]string{}}
	module := modulePath(t, root)

	t.Run("links", func(t *testing.T) { checkLinks(t, root, "README.md", doc) })
	t.Run("go blocks", func(t *testing.T) { checkGoBlocks(t, root, doc) })
	t.Run("command table", func(t *testing.T) { checkCommandTable(t, string(text), cli) })
	t.Run("environment variables", func(t *testing.T) { checkEnvNames(t, root, string(text)) })
	t.Run("defaults", func(t *testing.T) {
		for _, d := range defaults {
			if !strings.Contains(cli.help(d.command), d.help) {
				t.Errorf("README: tollgate %s's help no longer says %s", d.command, d.help)
			}
		}
	})
	t.Run("command lines", func(t *testing.T) {
		for _, s := range doc {
			for _, c := range s.commands(t) {
				if err := checkCommand(c, cli, root, module); err != nil {
					t.Errorf("README:%d: %s\n  %v", c.line, c.text, err)
				}
			}
		}
	})
	t.Run("the checks catch rot", func(t *testing.T) {
		for _, line := range []string{
			"tollgate serv",                           // a command renamed
			"tollgate serve --adr 127.0.0.1:8080",     // a flag renamed
			"tollgate questions lsit",                 // a subcommand renamed
			"tollgate questions list --tread t1",      // a subcommand's flag
			"X=1 tollgate run --no-wiat '$ ls'",       // after an assignment
			"source <(tollgate completion tcsh)",      // inside a substitution
			"tollgate version && tollgate policy tst", // after an operator
			"go run ./cmd/tollgate serve --dri /tmp",  // go run
			"go build ./...",                          // a go command it cannot check
		} {
			cmds, err := splitCommands(line, 1)
			if err != nil || len(cmds) != 1 {
				t.Fatalf("%s: %v %v", line, cmds, err)
			}
			if err := checkCommand(cmds[0], cli, root, module); err == nil {
				t.Errorf("%s: no error", line)
			}
		}
	})
	if t.Failed() {
		t.Fatal("not running the README's commands: fix the above first")
	}
	if testing.Short() {
		t.Skip("-short: the README's commands are not run")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		requirement(t, "bash is not installed")
	}
	tmp := t.TempDir()
	for i, s := range doc {
		cmds := s.commands(t)
		if len(cmds) == 0 {
			continue
		}
		t.Run(s.title, func(t *testing.T) {
			dir := filepath.Join(tmp, fmt.Sprintf("section%d", i))
			runSection(t, dir, bin, cmds)
		})
	}
}

// requirement skips the test for something missing on this machine, or
// fails it under CI, which must have everything.
func requirement(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (CI=true: required)", args...)
	}
	t.Skipf(format, args...)
}

func repoRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

func modulePath(t *testing.T, root string) string {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^module\s+(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod names no module")
	}
	return string(m[1])
}
