package policy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/policy/shell"
)

// Command strings that read through a symbolic link out of the project,
// into .git or to a secret by ways the names alone do not show — a loop's
// value, a name with pattern characters, a link followed by "..", a
// pattern, a tool that follows links, the files find hands on — ask.
func TestLinksOtherWaysAsk(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	proj := filepath.Join(root, "proj")
	for _, d := range []string{"proj/sub/deeper", "proj/.git/hooks", "out", "proj/x[1]"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "out/secret"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(proj, ".env"), []byte("KEY=x"), 0o600)
	for link, to := range map[string]string{
		"sub/n.txt": "../../out/secret", "sub/e.txt": "../.env",
		"x[1]/n.txt":    "../../out/secret", // a directory whose name holds [ ]
		"l*":            ".env",             // a file whose name holds *
		"sub/deeper/up": "../..",            // up/.. is proj/.. to the kernel, proj/sub/deeper by name
	} {
		if err := os.Symlink(to, filepath.Join(proj, link)); err != nil {
			t.Fatal(err)
		}
	}
	p := linkPolicy(t, "cat, cd, pushd, echo, grep, find, rg, head")
	for _, cmd := range []string{
		// cdDirs skips a target holding $: the analysis knows the loop's value and notes nothing.
		`for d in sub; do cd "$d"; cat n.txt; done`,
		// linkedNames skips the same names.
		`for f in sub/e.txt; do cat $f; done`,
		// cdDirs and linkedNames skip quoted names holding [ ] * ...: not patterns, but never looked up.
		`cd 'x[1]' && cat n.txt`,
		`cat 'x[1]/n.txt'`,
		`cat 'l*'`,
		// path.Join drops link/.. before the link is resolved; the kernel (and cd -P) do not.
		`cat sub/deeper/up/../out/secret`,
		`cd sub/deeper && cat up/../out/secret`,
		`cd -P sub/deeper/up/.. && cat out/secret`,
		// patterns are not looked up: the links they match are read.
		`cat sub/*.txt`,
		`head sub/?.txt`,
		// tools that follow links they find.
		`grep -R KEY sub`,
		`rg -L KEY sub`,
		`find sub -exec cat {} +`,
	} {
		if d := p.Evaluate(context.Background(), Call{Tool: "Bash", Args: map[string]any{"command": cmd}, Dir: proj}); d.Action != Ask {
			t.Errorf("%s: %s (%s), want ask", cmd, d.Action, d.Reason)
		}
	}
}

// The look-ups of one evaluation are bounded: a long relative cd target
// made every later short name a long path to resolve (a 7.5 KB string took
// 20 s, a 38 KB one 5 min 24 s, for one call); a path deeper than
// maxLinkDepth, and look-ups past maxLinkLookups, are taken to reach
// outside instead.
func TestLinkLookUpsBounded(t *testing.T) {
	t.Parallel()
	proj := t.TempDir()
	names := ""
	for i := range 31 {
		names += " x" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	cmd := "cd " + strings.Repeat("a/", 900) + " && " + strings.Repeat("cat"+names+"; ", 40)
	a, err := shell.Parse(cmd)
	if err != nil {
		t.Fatal(err)
	}
	l := newLinks(a.Commands, proj)
	deep, past := 0, 0
	for i := range a.Commands {
		out, _ := l.names(&a.Commands[i])
		for _, o := range out {
			deep += strings.Count(o, "too deep to check")
			past += strings.Count(o, "more files than can be checked")
		}
	}
	if l.left != 0 || deep == 0 || past == 0 {
		t.Errorf("look-ups left %d; %d names too deep, %d past the bound: want none left, and both noted", l.left, deep, past)
	}
	p := linkPolicy(t, "cat, cd")
	if d := p.Evaluate(context.Background(), Call{Tool: "Bash", Args: map[string]any{"command": cmd}, Dir: proj}); d.Action != Ask {
		t.Errorf("a %d-byte string past the bounds: %s (%s), want ask", len(cmd), d.Action, d.Reason)
	}
}

// Subshells' cds are followed from one another (the analysis does not say
// that cd web happens in a subshell the next cd is not in): four of them
// are still within maxCdDirs, and a harmless string is allowed.
func TestSubshellCdsAllowed(t *testing.T) {
	t.Parallel()
	proj := t.TempDir()
	p := linkPolicy(t, "ls, cd")
	cmd := "(cd web && ls) && (cd api && ls) && (cd cli && ls) && (cd docs && ls)"
	if d := p.Evaluate(context.Background(), Call{Tool: "Bash", Args: map[string]any{"command": cmd}, Dir: proj}); d.Action != Allow {
		t.Errorf("%s: %s (%s), want allow", cmd, d.Action, d.Reason)
	}
}

// linkPolicy allows the commands, unless one reaches outside the call's
// directory or names a secret: then it asks.
func linkPolicy(t *testing.T, commands string) *Policy {
	t.Helper()
	p, err := Parse("links.yaml", []byte(`version: 1
default: ask
shell:
  Bash: command
rules:
  - name: allowed
    tool: Bash
    command: [`+commands+`]
    action: allow
    allow_writes: true
  - name: outside
    tool: Bash
    command: "*"
    when: command.outside.size() > 0 || command.secrets.size() > 0
    action: ask
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
