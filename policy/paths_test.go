package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/policy/shell"
)

func TestPathInside(t *testing.T) {
	t.Parallel()
	cases := []struct {
		p, dir string
		want   bool
	}{
		{"/home/me/p/a.go", "/home/me/p", true},
		{"/home/me/p", "/home/me/p", true},
		{"/home/me/p/", "/home/me/p/", true},
		{"a/b.go", "/home/me/p", true},
		{"./a/../b.go", "/home/me/p", true},
		{"/home/me/p/../q/x", "/home/me/p", false},
		{"../x", "/home/me/p", false},
		{"a/../../x", "/home/me/p", false},
		{"/home/me/pq/x", "/home/me/p", false}, // a sibling sharing the prefix
		{"/etc/passwd", "/home/me/p", false},
		{"~/x", "/home/me/p", false},
		{"", "/home/me/p", false},
		{"/home/me/p/x", "", false},
		{"/home/me/p/x", "relative/dir", false},
		{"/home/me/p/x\x00", "/home/me/p", false},
		{"/anything", "/", true},
	}
	for _, c := range cases {
		if got := PathInside(c.p, c.dir); got != c.want {
			t.Errorf("PathInside(%q, %q) = %v, want %v", c.p, c.dir, got, c.want)
		}
	}
}

// Conditions read dir and call the path helpers; a call without a
// directory has no path inside it.
func TestPathConditions(t *testing.T) {
	t.Parallel()
	p, err := Parse("paths.yaml", []byte(`version: 1
default: ask
rules:
  - name: edits-inside
    tool: Write
    when: path_inside(args.file_path, dir) && !path_secret(args.file_path) && !path_in_git(args.file_path)
    action: allow
  - name: git-dir
    tool: Write
    when: path_in_git(args.file_path)
    action: block
    reason: git runs what .git holds
tests:
  - {tool: Write, dir: /p, args: {file_path: /p/a.go, content: x}, want: allow}
  - {tool: Write, dir: /p, args: {file_path: /p/.git/hooks/pre-commit, content: x}, want: block}
  - {tool: Write, dir: /p, args: {file_path: /p/.env, content: x}, want: ask}
  - {tool: Write, dir: /p, args: {file_path: /q/a.go, content: x}, want: ask}
  - {tool: Write, args: {file_path: /p/a.go, content: x}, want: ask}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := p.RunTests(context.Background(), p.Tests())
	if !rep.OK() || rep.Passed != 5 {
		t.Fatalf("%d passed, %d failed: %+v", rep.Passed, rep.Failed, rep.Results)
	}
	if d := p.Evaluate(context.Background(), Call{Tool: "Write", Dir: "/p", Args: map[string]any{"file_path": 5}}); d.Action != Ask || d.Rule != RuleError {
		t.Errorf("a path that is not a string: %s by %s, want ask by %s", d.Action, d.Rule, RuleError)
	}
}

func TestMaxTimeout(t *testing.T) {
	t.Parallel()
	p, err := Parse("t.yaml", []byte(`version: 1
timeout: 2m
rules:
  - {name: slow, tool: a, action: ask, timeout: 10m}
  - {name: quick, tool: b, action: ask, timeout: 30s}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.MaxTimeout().String(); got != "10m0s" {
		t.Errorf("MaxTimeout = %s, want the longest ask's 10m0s", got)
	}
}

func TestURLHost(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://Docs.Python.org/3/library/": "docs.python.org",
		"http://example.com:8080/x":          "example.com",
		"https://example.com./":              "example.com",
		"https://evil.com@docs.python.org/":  "",
		"file:///etc/passwd":                 "",
		"ftp://example.com/":                 "",
		"docs.python.org/3":                  "",
		"https://[::1]:80/":                  "::1",
		"%":                                  "",
	} {
		if got := URLHost(in); got != want {
			t.Errorf("URLHost(%q) = %q, want %q", in, got, want)
		}
	}
}

// Symbolic links that exist on this machine are resolved: a link inside
// the project that points out of it, or a dangling one (a write through
// it creates its target), is not inside, by path_inside nor by the shell
// analysis's absolute paths; one that points inside is.
func TestPathInsideResolvesLinks(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	proj, out := filepath.Join(root, "proj"), filepath.Join(root, "out")
	for _, d := range []string{filepath.Join(proj, "src"), out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(proj, "src", "a.go"), filepath.Join(out, "secret")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"proj/away":     out,                               // a directory outside
		"proj/src/pw":   filepath.Join(out, "secret"),      // a file outside
		"proj/dangling": filepath.Join(out, "new", "file"), // a write would create it
		"proj/inner":    filepath.Join(proj, "src"),        // inside
		"projlink":      proj,                              // the project by another name
		"proj/src/up":   "..",                              // relative, inside
		"proj/src/upup": "../..",                           // relative, out
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	j := func(parts ...string) string { return filepath.Join(append([]string{root}, parts...)...) }
	cases := []struct {
		p, dir string
		want   bool
	}{
		{j("proj/src/a.go"), proj, true},
		{j("proj/src/new.go"), proj, true},      // does not exist yet
		{j("proj/new/dir/x.go"), proj, true},    // nor its directory
		{j("proj/inner/a.go"), proj, true},      // a link inside to inside
		{j("proj/src/up/src/a.go"), proj, true}, // a relative link inside
		{j("projlink/src/a.go"), j("projlink"), true},
		{j("proj/away/secret"), proj, false},
		{j("proj/away/new"), proj, false},
		{j("proj/away"), proj, false},
		{j("proj/src/pw"), proj, false},
		{j("proj/dangling"), proj, false},
		{j("proj/dangling/x"), proj, false},
		{j("proj/src/upup/out/secret"), proj, false},
		{"away/secret", proj, false}, // relative to dir
		{"src/a.go", proj, true},
		{j("proj") + strings.Repeat("/a", 4000), proj, false}, // longer than any system opens
	}
	for _, c := range cases {
		if got := PathInside(c.p, c.dir); got != c.want {
			t.Errorf("PathInside(%q, %q) = %v, want %v", c.p, c.dir, got, c.want)
		}
	}

	// The shell analysis: an absolute path inside the project is inside
	// (it was outside, and asked, whatever the directory); one through a
	// link out of it, or outside, or computed, or a pattern, is not.
	p, err := Parse("shell.yaml", []byte(`version: 1
default: ask
shell:
  Bash: command
rules:
  - name: reads
    tool: Bash
    command: [cat]
    action: allow
  - name: outside
    tool: Bash
    command: "*"
    when: command.outside.size() > 0
    action: ask
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	for cmd, want := range map[string]Action{
		"cat " + j("proj/src/a.go"):                                           Allow,
		"cat " + j("proj/src/a.go") + " src/a.go":                             Allow,
		"cat " + j("proj/away/secret"):                                        Ask,
		"cat " + j("proj/src/pw"):                                             Ask,
		"cat " + j("out/secret"):                                              Ask,
		"cat " + j("proj/../out/secret"):                                      Ask,
		"cat " + j("proj/src") + "/*.go":                                      Ask,
		"cat " + j("proj") + "/$f":                                            Ask,
		"cat " + j("proj/src/a.go") + " " + j("out/secret"):                   Ask,
		"cat " + j("proj/src/a.go") + " > " + j("out/copy"):                   Ask,
		"cat " + strings.Repeat(j("proj/src/a.go")+" ", 20):                   Allow,
		"cat " + strings.Repeat(j("proj/src/a.go")+" ", 20) + j("out/secret"): Ask,
	} {
		if d := p.Evaluate(context.Background(), Call{Tool: "Bash", Args: map[string]any{"command": cmd}, Dir: proj}); d.Action != want {
			t.Errorf("%s in %s: %s (%s), want %s", cmd, proj, d.Action, d.Reason, want)
		}
		// The same command string in another directory: the analysis's
		// memo of the first is not this one's.
		if d := p.Evaluate(context.Background(), Call{Tool: "Bash", Args: map[string]any{"command": cmd}, Dir: j("elsewhere")}); d.Action != Ask {
			t.Errorf("%s in %s: %s, want ask", cmd, j("elsewhere"), d.Action)
		}
	}
}

// A command naming more files than links.names looks up is taken to
// reach outside (it is asked), not left unchecked; one under the bound is
// as it was.
func TestLinkedNamesBound(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	many := &shell.Command{Name: "cat"}
	for i := range maxLinkChecks + 1 {
		many.Files = append(many.Files, fmt.Sprintf("f%d", i))
	}
	if out, _ := newLinks(nil, dir).names(many); len(out) != 1 || !strings.Contains(out[0], "too many to check") {
		t.Errorf("%d files: outside %q", len(many.Files), out)
	}
	many.Files = many.Files[:maxLinkChecks]
	if out, secrets := newLinks(nil, dir).names(many); out != nil || secrets != nil {
		t.Errorf("%d plain files: outside %q, secrets %q", len(many.Files), out, secrets)
	}
}

// A relative name after a cd is relative to where the cd went: a link
// there that leads out of the project, into .git or to a secret is
// noted as the same link in the project's own directory is, however the
// string enters the directory (cd, pushd, a subshell, an absolute path
// inside the project, one cd after another).
func TestLinksAfterCd(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	proj := filepath.Join(root, "proj")
	for _, d := range []string{"proj/sub/deeper", "proj/.git/hooks", "out"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "out/secret"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(proj, ".env"), []byte("KEY=x"), 0o600)
	os.WriteFile(filepath.Join(proj, "sub/plain.txt"), []byte("x"), 0o644)
	for link, to := range map[string]string{
		"sub/n.txt": "../../out/secret", "sub/e.txt": "../.env", "sub/hooks": "../.git/hooks",
		"sub/deeper/n.txt": "../../../out/secret",
	} {
		if err := os.Symlink(to, filepath.Join(proj, link)); err != nil {
			t.Fatal(err)
		}
	}
	p := linkPolicy(t, "cat, cd, pushd, echo")
	for cmd, want := range map[string]Action{
		"cd sub && cat plain.txt":                               Allow,
		"cat sub/plain.txt":                                     Allow,
		"cd sub && cat n.txt":                                   Ask,
		"cd sub; cat e.txt":                                     Ask,
		"(cd sub && cat n.txt)":                                 Ask,
		"pushd sub && cat n.txt":                                Ask,
		"cd " + filepath.Join(proj, "sub") + " && cat n.txt":    Ask,
		"cd sub && cd deeper && cat n.txt":                      Ask,
		"cd sub && echo x > hooks/pre-commit":                   Ask,
		"cat n.txt":                                             Allow, // no such file in the project's own directory
		"cd sub/deeper && cat plain.txt":                        Allow,
		strings.Repeat("cd a && cd b && ", 5) + "cat plain.txt": Ask, // more directories than are looked in
	} {
		if d := p.Evaluate(context.Background(), Call{Tool: "Bash", Args: map[string]any{"command": cmd}, Dir: proj}); d.Action != want {
			t.Errorf("%s: %s (%s), want %s", cmd, d.Action, d.Reason, want)
		}
	}
}
