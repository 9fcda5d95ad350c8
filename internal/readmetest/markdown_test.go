//go:build unix

package readmetest

// The README, cut into sections and blocks.

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

type section struct {
	title  string
	line   int
	blocks []block
	links  []link
	// headings are the anchors of every heading of the file (shared by
	// all sections).
	headings map[string]bool
	cmds     []command
	cut      bool
}

type block struct {
	lang string
	text string
	line int // the README line of the block's first line of code
	// goFile is the last link to a .go file before the block.
	goFile string
	// afterGo: the block before it in the section is a go block.
	afterGo bool
}

type link struct {
	target string
	line   int
}

var (
	fenceRE = regexp.MustCompile("^( *)```\\s*([A-Za-z0-9_+-]*)\\s*$")
	linkRE  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

func parseMarkdown(text string) []*section {
	headings := map[string]bool{}
	cur := &section{title: "(top)", line: 1, headings: headings}
	doc := []*section{cur}
	lines := strings.Split(text, "\n")
	var lastGo string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			indent, lang := len(m[1]), m[2]
			var code []string
			j := i + 1
			for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
				code = append(code, trimIndent(lines[j], indent))
			}
			afterGo := len(cur.blocks) > 0 && cur.blocks[len(cur.blocks)-1].lang == "go"
			cur.blocks = append(cur.blocks, block{lang: lang, text: strings.Join(code, "\n"), line: i + 2, goFile: lastGo, afterGo: afterGo})
			i = j
			continue
		}
		if strings.HasPrefix(l, "#") {
			title := strings.TrimSpace(strings.TrimLeft(l, "#"))
			headings[anchor(title)] = true
			if strings.HasPrefix(l, "## ") {
				cur = &section{title: title, line: i + 1, headings: headings}
				doc = append(doc, cur)
				lastGo = ""
			}
		}
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			cur.links = append(cur.links, link{m[1], i + 1})
			if path, _, _ := strings.Cut(m[1], "#"); strings.HasSuffix(path, ".go") {
				lastGo = path
			}
		}
	}
	return doc
}

func trimIndent(l string, n int) string {
	for ; n > 0 && strings.HasPrefix(l, " "); n-- {
		l = l[1:]
	}
	return l
}

// anchor is the id GitHub gives a heading.
func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// commands are the section's shell commands, in order.
func (s *section) commands(t *testing.T) []command {
	t.Helper()
	if s.cut {
		return s.cmds
	}
	s.cut = true
	for _, b := range s.blocks {
		switch b.lang {
		case "sh", "bash", "shell", "console":
		default:
			continue
		}
		cmds, err := splitCommands(b.text, b.line)
		if err != nil {
			t.Errorf("README:%d: %v", b.line, err)
		}
		s.cmds = append(s.cmds, cmds...)
	}
	return s.cmds
}

// ---------------------------------------------------------------------------
// Checks of the README as a document.

func checkLinks(t *testing.T, root, name string, doc []*section) {
	headingsOf := map[string]map[string]bool{name: doc[0].headings}
	for _, s := range doc {
		for _, l := range s.links {
			target := l.target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			if path == "" {
				path = name
			} else if _, err := os.Stat(filepath.Join(root, path)); err != nil {
				t.Errorf("%s:%d: link to %s: %v", name, l.line, target, err)
				continue
			}
			if frag == "" {
				continue
			}
			hs, ok := headingsOf[path]
			if !ok {
				b, err := os.ReadFile(filepath.Join(root, path))
				if err != nil {
					t.Errorf("%s:%d: link to %s: %v", name, l.line, target, err)
					continue
				}
				hs = parseMarkdown(string(b))[0].headings
				headingsOf[path] = hs
			}
			if !hs[frag] {
				t.Errorf("%s:%d: link to %s: %s has no heading #%s", name, l.line, target, path, frag)
			}
		}
	}
}

func checkGoBlocks(t *testing.T, root string, doc []*section) {
	n := 0
	for _, s := range doc {
		for _, b := range s.blocks {
			if b.lang == "text" && b.afterGo {
				checkOutputBlock(t, root, b)
			}
			if b.lang != "go" {
				continue
			}
			n++
			if b.goFile == "" {
				t.Errorf("README:%d: a go block must follow a link to the .go file it shows (which a test compiles)", b.line)
				continue
			}
			src, err := os.ReadFile(filepath.Join(root, b.goFile))
			if err != nil {
				t.Errorf("README:%d: %v", b.line, err)
				continue
			}
			if got, want := strings.TrimRight(b.text, "\n"), strings.TrimRight(string(src), "\n"); got != want {
				t.Errorf("README:%d: the go block is not %s as it is; copy the file into the README again.\n%s",
					b.line, b.goFile, firstDifference(got, want))
			}
		}
	}
	if n == 0 {
		t.Error("README: no go block: the library quick start is gone")
	}
}

var outputRE = regexp.MustCompile(`(?m)^\s*// (Unordered output|Output):\n((?:\s*//.*\n)*)`)

// checkOutputBlock checks that a text block after a go block is the output
// the example tests of the go file's package pin.
func checkOutputBlock(t *testing.T, root string, b block) {
	dir := filepath.Join(root, filepath.Dir(b.goFile))
	tests, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	var outputs []string
	for _, f := range tests {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range outputRE.FindAllStringSubmatch(string(src), -1) {
			var lines []string
			for _, l := range strings.Split(strings.TrimRight(m[2], "\n"), "\n") {
				l = strings.TrimPrefix(strings.TrimSpace(l), "//")
				lines = append(lines, strings.TrimPrefix(l, " "))
			}
			outputs = append(outputs, strings.Join(lines, "\n"))
			if strings.Join(lines, "\n") == strings.TrimRight(b.text, "\n") {
				return
			}
		}
	}
	t.Errorf("README:%d: the output shown is not what an example test in %s pins:\n%s", b.line, filepath.Dir(b.goFile),
		firstDifference(strings.TrimRight(b.text, "\n"), strings.Join(outputs, "\n---\n")))
}

func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("first difference, line %d of the block:\n  README: %q\n  file:   %q", i+1, gl, wl)
		}
	}
	return ""
}

var tableRowRE = regexp.MustCompile("(?m)^\\|\\s*`tollgate ([a-z][a-z-]*)")

func checkCommandTable(t *testing.T, readme string, c *cli) {
	var inTable []string
	for _, m := range tableRowRE.FindAllStringSubmatch(readme, -1) {
		inTable = append(inTable, m[1])
	}
	commands := c.commands()
	if len(commands) == 0 {
		t.Fatal("tollgate --help lists no commands")
	}
	for _, name := range commands {
		if !slices.Contains(inTable, name) {
			t.Errorf("README: the table of commands lacks tollgate %s", name)
		}
	}
	for _, name := range inTable {
		if !slices.Contains(commands, name) {
			t.Errorf("README: the table of commands has tollgate %s, which tollgate --help does not list", name)
		}
	}
}

func checkEnvNames(t *testing.T, root, readme string) {
	re := regexp.MustCompile(`\bTOLLGATE_[A-Z0-9_]*[A-Z0-9]\b`)
	want := map[string]bool{}
	for _, n := range re.FindAllString(readme, -1) {
		want[n] = true
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || len(want) == 0 {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, n := range re.FindAllString(string(b), -1) {
			delete(want, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for n := range want {
		t.Errorf("README names %s, which no Go file of the module does", n)
	}
}
