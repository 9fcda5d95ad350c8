package policy

import (
	"context"
	"testing"
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
