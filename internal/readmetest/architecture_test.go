//go:build unix

package readmetest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestArchitecture keeps docs/ARCHITECTURE.md true of the code as far as a
// test can: every relative link names a file that exists (and a heading
// it has), and every Go name the page quotes (`Host.kick`,
// `agent.ErrParked`, `runHelper`) is still declared in a non-test Go file
// of the module, so that a rename or a removal fails here rather than
// leaving the map pointing at nothing.
func TestArchitecture(t *testing.T) {
	root := repoRoot(t)
	text, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := parseMarkdown(string(text))
	t.Run("links", func(t *testing.T) { checkLinks(t, filepath.Join(root, "docs"), "ARCHITECTURE.md", doc) })
	t.Run("names", func(t *testing.T) {
		declared := goDeclarations(t, root)
		for i, line := range strings.Split(string(text), "\n") {
			for _, m := range quotedRE.FindAllStringSubmatch(line, -1) {
				name := m[1]
				if !goName(name) {
					continue
				}
				last := name[strings.LastIndex(name, ".")+1:]
				if !declared[last] {
					t.Errorf("ARCHITECTURE.md:%d: `%s`: no non-test Go file declares %s", i+1, name, last)
				}
			}
		}
	})
}

// quotedRE finds what the page quotes as code.
var quotedRE = regexp.MustCompile("`([^`]+)`")

// goName reports whether a quoted text reads as a Go name the page means
// as one: an identifier, or a dotted one (package.Name, Type.Method), with
// a capital letter or a dot or a lower-case camel hump — not a word in
// snake_case (an event type, a flag value) or in capitals only (an SQLSTATE).
func goName(s string) bool {
	if !identRE.MatchString(s) || strings.Contains(s, "_") || strings.ToUpper(s) == s {
		return false
	}
	return strings.Contains(s, ".") || strings.ToLower(s) != s
}

var identRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*$`)

// declRE finds the names a Go file declares: functions and methods,
// types, and what a const, var or type block or a struct lists.
var declRE = regexp.MustCompile(`(?m)^(?:func (?:\([^)]*\) )?([A-Za-z0-9_]+)|(?:type|const|var) ([A-Za-z0-9_]+)|\t+([A-Za-z0-9_]+)(?:,\s*[A-Za-z0-9_]+)*\s+[^\s=:(]|\t+([A-Za-z0-9_]+)\s*=[^=])`)

func goDeclarations(t *testing.T, root string) map[string]bool {
	declared := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range declRE.FindAllStringSubmatch(string(b), -1) {
			for _, name := range m[1:] {
				if name != "" {
					declared[name] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return declared
}
