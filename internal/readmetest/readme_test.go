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
//
// Any other comment is prose, and so is a line that is only a comment,
// except "# Ctrl-C ...".
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
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"
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
	{"serve", `(default "sqlite:tollgate.db")`},
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

func TestSplitCommands(t *testing.T) {
	block := strings.Join([]string{
		`cd "$(mktemp -d)"   # a comment`,
		`# prose`,
		``,
		`cat > f.yaml <<'EOF'   # you type: a; d; not today`,
		`a: 1 # needs: network`,
		`EOF`,
		`tollgate run $'$ ls\n$ rm x' \`,
		`    --policy p.yaml   # exits 3: waiting`,
		`# Ctrl-C in the first terminal`,
		`echo 'a`,
		`b' | wc -l   # needs: ANTHROPIC_API_KEY, network (Ollama)`,
		`tollgate serve   # until Ctrl-C: the service`,
		`tollgate sandbox check   # exits 1 where the kernel cannot`,
	}, "\n")
	cmds, err := splitCommands(block, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []command{
		{text: `cd "$(mktemp -d)"   # a comment`, line: 10},
		{text: "cat > f.yaml <<'EOF'   # you type: a; d; not today\na: 1 # needs: network\nEOF", line: 13, stdin: []string{"a", "d", "not today"}},
		{text: "tollgate run $'$ ls\\n$ rm x' \\\n    --policy p.yaml   # exits 3: waiting", line: 16, exit: 3},
		{text: "# Ctrl-C in the first terminal", line: 18, ctrlC: true},
		{text: "echo 'a\nb' | wc -l   # needs: ANTHROPIC_API_KEY, network (Ollama)", line: 19, needs: []string{"ANTHROPIC_API_KEY", "network"}},
		{text: "tollgate serve   # until Ctrl-C: the service", line: 21, until: true},
		{text: "tollgate sandbox check   # exits 1 where the kernel cannot", line: 22, exit: 1, exitOrZero: true},
	}
	if len(cmds) != len(want) {
		t.Fatalf("got %d commands, want %d: %#v", len(cmds), len(want), cmds)
	}
	for i := range want {
		if fmt.Sprintf("%#v", cmds[i]) != fmt.Sprintf("%#v", want[i]) {
			t.Errorf("command %d:\n got  %#v\n want %#v", i, cmds[i], want[i])
		}
	}
}

func TestSimpleCommands(t *testing.T) {
	for _, tc := range []struct {
		line string
		want [][]string
	}{
		{`X=1 Y=2 tollgate run --thread t1 '$ ls' </dev/null 2>&1   # c`, [][]string{{"tollgate", "run", "--thread", "t1", "$ ls"}}},
		{`source <(tollgate completion bash)`, [][]string{{"source"}, {"tollgate", "completion", "bash"}}},
		{`tollgate token new --name a >> t.yaml && echo "x # y" | wc`, [][]string{{"tollgate", "token", "new", "--name", "a"}, {"echo", "x # y"}, {"wc"}}},
		{`tollgate run $'a\n$ rm -r x' --dir=/tmp`, [][]string{{"tollgate", "run", "a\n$ rm -r x", "--dir=/tmp"}}},
		{"cat > p.yaml <<'EOF'\ntollgate: no\nEOF", [][]string{{"cat"}}},
	} {
		got := simpleCommands(tc.line)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s:\n got  %q\n want %q", tc.line, got, tc.want)
		}
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

// ---------------------------------------------------------------------------
// The README, cut into sections, blocks and commands.

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

// command is one command of a ```sh block, as the README shows it.
type command struct {
	text  string
	line  int
	ctrlC bool // a "# Ctrl-C ..." line: stop what runs until Ctrl-C
	needs []string
	until bool // runs until Ctrl-C
	exit  int
	// exitOrZero: "exits N where ...": 0 or N.
	exitOrZero bool
	stdin      []string
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

var heredocRE = regexp.MustCompile(`<<(-?)\s*['"]?([A-Za-z_][A-Za-z0-9_]*)['"]?`)

// splitCommands cuts a block into complete shell commands: lines joined by
// a trailing backslash, here-documents, and whatever else bash -n says is
// not finished yet (a quote or a loop open).
func splitCommands(text string, first int) ([]command, error) {
	lines := strings.Split(text, "\n")
	var out []command
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trim := strings.TrimSpace(l)
		if trim == "" {
			continue
		}
		if strings.HasPrefix(trim, "#") {
			if strings.HasPrefix(trim, "# Ctrl-C") {
				out = append(out, command{text: trim, line: first + i, ctrlC: true})
			}
			continue
		}
		start := i
		acc := []string{l}
		for {
			last := acc[len(acc)-1]
			if m := heredocRE.FindStringSubmatch(stripComment(last)); m != nil {
				for i++; i < len(lines); i++ {
					acc = append(acc, lines[i])
					body := lines[i]
					if m[1] == "-" {
						body = strings.TrimLeft(body, "\t")
					}
					if body == m[2] {
						break
					}
				}
				if i == len(lines) {
					return out, fmt.Errorf("line %d: here-document %s not ended", first+start, m[2])
				}
			}
			joined := strings.Join(acc, "\n")
			if !strings.HasSuffix(last, `\`) && bashComplete(joined) {
				break
			}
			i++
			if i == len(lines) {
				return out, fmt.Errorf("line %d: the command does not end in its block", first+start)
			}
			acc = append(acc, lines[i])
		}
		c := command{text: strings.Join(acc, "\n"), line: first + start}
		_, comments := lex(c.text)
		for _, cm := range comments {
			if err := c.parseMarker(cm); err != nil {
				return out, fmt.Errorf("line %d: %v", first+start, err)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

func bashComplete(s string) bool {
	return exec.Command("bash", "-n", "-c", s).Run() == nil
}

var exitsRE = regexp.MustCompile(`^exits (\d+)\b( where\b)?`)

func (c *command) parseMarker(cm string) error {
	switch {
	case cm == "":
	case strings.HasPrefix(cm, "needs:"):
		for _, w := range strings.Split(strings.TrimPrefix(cm, "needs:"), ",") {
			if f := strings.Fields(w); len(f) > 0 {
				c.needs = append(c.needs, f[0])
			}
		}
		if len(c.needs) == 0 {
			return errors.New(`"# needs:" names nothing`)
		}
	case strings.HasPrefix(cm, "until Ctrl-C"):
		c.until = true
	case strings.HasPrefix(cm, "exits"):
		m := exitsRE.FindStringSubmatch(cm)
		if m == nil {
			return fmt.Errorf("%q: want # exits N", cm)
		}
		c.exit, _ = strconv.Atoi(m[1])
		c.exitOrZero = m[2] != ""
	case strings.HasPrefix(cm, "you type:"):
		for _, a := range strings.Split(strings.TrimPrefix(cm, "you type:"), ";") {
			c.stdin = append(c.stdin, strings.TrimSpace(a))
		}
	}
	return nil
}

// ---------------------------------------------------------------------------
// A small shell lexer: enough to find comments and the words of simple
// commands in the README's commands.

type token struct {
	word string // the word, unquoted
	op   string // or an operator: "|", "&&", ";", "(", ")", "<", ...
}

// lex reads a command line. It stops at a comment or a here-document's
// body (the line after "<<").
func lex(s string) (toks []token, comments []string) {
	var w strings.Builder
	inWord, heredoc := false, false
	flush := func() {
		if inWord {
			toks = append(toks, token{word: w.String()})
			w.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\n':
			flush()
			if heredoc {
				return toks, comments
			}
			toks = append(toks, token{op: ";"})
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				end = len(s) - i
			}
			comments = append(comments, strings.TrimSpace(s[i+1:i+end]))
			i += end - 1
		case c == '\\':
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					w.WriteByte(s[i])
					inWord = true
				}
			}
		case c == '\'':
			inWord = true
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				end = len(s) - i - 1
			}
			w.WriteString(s[i+1 : i+1+end])
			i += end + 1
		case c == '$' && i+1 < len(s) && s[i+1] == '\'':
			inWord = true
			for i += 2; i < len(s) && s[i] != '\''; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
					switch s[i] {
					case 'n':
						w.WriteByte('\n')
					case 't':
						w.WriteByte('\t')
					default:
						w.WriteByte(s[i])
					}
					continue
				}
				w.WriteByte(s[i])
			}
		case c == '"':
			inWord = true
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
		case (c == '$' || c == '<') && i+1 < len(s) && s[i+1] == '(':
			flush()
			toks = append(toks, token{op: "("})
			i++
		case c == '(' || c == ')':
			flush()
			toks = append(toks, token{op: string(c)})
		case c == '|' || c == '&' || c == ';':
			flush()
			op := string(c)
			if i+1 < len(s) && (s[i+1] == c || c == '|' && s[i+1] == '&') {
				op += string(s[i+1])
				i++
			}
			toks = append(toks, token{op: op})
		case c == '<' || c == '>':
			// A file descriptor number just before is part of it.
			if inWord && strings.Trim(w.String(), "0123456789") == "" {
				w.Reset()
				inWord = false
			}
			flush()
			op := string(c)
			for i+1 < len(s) && strings.IndexByte("<>&-", s[i+1]) >= 0 {
				i++
				op += string(s[i])
			}
			if op == "<<" || op == "<<-" {
				op, heredoc = "<<", true
			}
			toks = append(toks, token{op: op})
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return toks, comments
}

// comment is the comment at the end of a line ("" if none).
func comment(line string) string {
	_, c := lex(line)
	if len(c) == 0 {
		return ""
	}
	return c[0]
}

// stripComment is the line without its comment, for finding "<<" in it.
func stripComment(line string) string {
	if c := comment(line); c != "" {
		if i := strings.LastIndex(line, "#"+c); i >= 0 {
			return line[:i]
		}
		if i := strings.LastIndex(line, "# "+c); i >= 0 {
			return line[:i]
		}
	}
	return line
}

var assignmentRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// simpleCommands are the words of each simple command of s, without
// variable assignments before the command and without redirections.
func simpleCommands(s string) [][]string {
	toks, _ := lex(s)
	var out [][]string
	var cur []string
	end := func() {
		if len(cur) > 0 {
			out = append(out, cur)
		}
		cur = nil
	}
	skipNext := false
	for _, tk := range toks {
		switch {
		case tk.op == "<<":
			// the delimiter word follows; the body is not lexed
			skipNext = true
		case tk.op != "" && (strings.ContainsAny(tk.op, "<>")):
			skipNext = true
		case tk.op != "":
			end()
		case skipNext:
			skipNext = false
		case len(cur) == 0 && assignmentRE.MatchString(tk.word):
		default:
			cur = append(cur, tk.word)
		}
	}
	end()
	return out
}

// ---------------------------------------------------------------------------
// The CLI as its help describes it.

type cli struct {
	t     *testing.T
	path  string
	helps map[string]string
}

// help is the output of tollgate ARGS... --help (tollgate --help with no
// args); it must exit 0.
func (c *cli) help(args ...string) string {
	key := strings.Join(args, " ")
	if h, ok := c.helps[key]; ok {
		return h
	}
	cmd := exec.Command(c.path, append(slices.Clone(args), "--help")...)
	out, err := cmd.CombinedOutput()
	h := string(out)
	if err != nil {
		h = ""
	}
	c.helps[key] = h
	return h
}

// listed are the first words of the lines under heading (such as
// "commands:") in a help text, up to the next blank line.
func listed(help, heading string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(help, "\n") {
		switch {
		case strings.TrimSpace(l) == heading:
			in = true
		case in && strings.TrimSpace(l) == "":
			return out
		case in && strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "    "):
			if f := strings.Fields(l); len(f) > 0 {
				out = append(out, f[0])
			}
		}
	}
	return out
}

func (c *cli) commands() []string { return listed(c.help(), "commands:") }

// verbs are a command's subcommands: under "subcommands:", or named in its
// usage lines (tollgate questions list ...).
func (c *cli) verbs(name string) []string {
	h := c.help(name)
	out := listed(h, "subcommands:")
	usage, _, _ := strings.Cut(h, "\n\n")
	re := regexp.MustCompile(`tollgate ` + regexp.QuoteMeta(name) + ` ([a-z][a-z-]*)\b`)
	for _, m := range re.FindAllStringSubmatch(usage, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

func hasFlag(help, flag string) bool {
	return regexp.MustCompile(`(?m)(^|[\s\[])--?` + regexp.QuoteMeta(flag) + `([\s=\]]|$)`).MatchString(help)
}

// checkTollgate checks the arguments of one tollgate command line.
func checkTollgate(c *cli, args []string) error {
	if len(args) == 0 {
		return errors.New("tollgate with no command")
	}
	name, rest := args[0], args[1:]
	help := c.help()
	if !strings.HasPrefix(name, "-") {
		if !slices.Contains(c.commands(), name) {
			return fmt.Errorf("tollgate %s: no such command (tollgate --help lists %s)", name, strings.Join(c.commands(), ", "))
		}
		help = c.help(name)
		if verbs := c.verbs(name); len(verbs) > 0 {
			if len(rest) == 0 || !slices.Contains(verbs, rest[0]) {
				return fmt.Errorf("tollgate %s: want one of its subcommands %s", name, strings.Join(verbs, ", "))
			}
			help = c.help(name, rest[0])
			rest = rest[1:]
		}
		if help == "" {
			return fmt.Errorf("tollgate %s --help fails", strings.Join(args[:len(args)-len(rest)], " "))
		}
	} else {
		rest = args
	}
	for _, w := range rest {
		if !strings.HasPrefix(w, "-") || w == "-" || w == "--" {
			continue
		}
		flag, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if !hasFlag(help, flag) {
			return fmt.Errorf("%s: not a flag its help lists", w)
		}
	}
	return nil
}

var ciTestRE = regexp.MustCompile(`(?m)^\s*go test( -\S+)* \./\.\.\.\s*$`)

// checkCommand checks a command without running it: its go commands and
// tollgate command lines.
func checkCommand(cmd command, c *cli, root, module string) error {
	if cmd.ctrlC {
		return nil
	}
	for _, words := range simpleCommands(cmd.text) {
		switch words[0] {
		case "tollgate":
			if err := checkTollgate(c, words[1:]); err != nil {
				return err
			}
		case "go":
			if err := checkGo(cmd, words, c, root, module); err != nil {
				return err
			}
		}
	}
	if cmd.until && !isServe(cmd.text) {
		return errors.New("# until Ctrl-C: the test knows how to check only tollgate serve")
	}
	for _, n := range cmd.needs {
		if n != "network" && n != "postgres" && !regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`).MatchString(n) {
			return fmt.Errorf("# needs: %s: want network, postgres or an environment variable", n)
		}
	}
	return nil
}

func checkGo(cmd command, words []string, c *cli, root, module string) error {
	switch {
	case len(words) >= 3 && words[1] == "run" && words[2] == "./cmd/tollgate":
		return checkTollgate(c, words[3:])
	case len(words) == 3 && words[1] == "test" && words[2] == "./...":
		ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
		if err != nil {
			return fmt.Errorf("go test ./... is the README's test command, but: %v", err)
		}
		if !ciTestRE.Match(ci) {
			return errors.New(".ci/run no longer runs go test ./..., the README's test command")
		}
		return nil
	case len(words) == 3 && words[1] == "install" && strings.HasSuffix(words[2], "@latest"):
		pkg := strings.TrimSuffix(words[2], "@latest")
		if pkg != module+"/cmd/tollgate" {
			return fmt.Errorf("go install %s: this module's command is %s/cmd/tollgate", pkg, module)
		}
		if !slices.Contains(cmd.needs, "network") {
			return errors.New("go install ...@latest downloads: mark it # needs: network")
		}
		return nil
	}
	return fmt.Errorf("%s: the README test does not know how to check this go command", strings.Join(words, " "))
}

func isServe(text string) bool {
	for _, w := range simpleCommands(text) {
		if len(w) >= 2 && w[0] == "tollgate" && w[1] == "serve" ||
			len(w) >= 4 && w[0] == "go" && w[1] == "run" && w[3] == "serve" {
			return true
		}
	}
	return false
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
				t.Errorf("README:%d: link to %s: %v", l.line, target, err)
				continue
			}
			if frag == "" {
				continue
			}
			hs, ok := headingsOf[path]
			if !ok {
				b, err := os.ReadFile(filepath.Join(root, path))
				if err != nil {
					t.Errorf("README:%d: link to %s: %v", l.line, target, err)
					continue
				}
				hs = parseMarkdown(string(b))[0].headings
				headingsOf[path] = hs
			}
			if !hs[frag] {
				t.Errorf("README:%d: link to %s: %s has no heading #%s", l.line, target, path, frag)
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

// ---------------------------------------------------------------------------
// Running a section.

func runSection(t *testing.T, dir, bin string, cmds []command) {
	for _, c := range cmds {
		if len(c.needs) > 0 {
			continue
		}
		for _, words := range simpleCommands(c.text) {
			if p := words[0]; !shellBuiltin[p] && p != "go" && !strings.Contains(p, "/") {
				if _, err := exec.LookPath(p); err != nil && p != "tollgate" {
					requirement(t, "README:%d: %s is not installed", c.line, p)
				}
			}
		}
	}
	s := startSession(t, dir, bin)
	defer s.end()
	checkout := false
	for _, c := range cmds {
		if c.ctrlC {
			if s.fg == nil {
				t.Fatalf("README:%d: %s, but nothing runs until Ctrl-C", c.line, c.text)
			}
			s.stopFg(c.line)
			continue
		}
		if len(c.needs) > 0 {
			t.Logf("README:%d: not run (needs %s): %s", c.line, strings.Join(c.needs, ", "), c.text)
			continue
		}
		text := strings.ReplaceAll(c.text, readmeAddr, s.addr)
		words := simpleCommands(text)
		if len(words) == 1 && words[0][0] == "go" {
			if w := words[0]; len(w) >= 3 && w[1] == "run" && w[2] == "./cmd/tollgate" {
				// In a checkout, go run ./cmd/tollgate is the command the
				// test built.
				checkout = true
				text = strings.Replace(text, "go run ./cmd/tollgate", "tollgate", 1)
			} else {
				t.Logf("README:%d: checked, not run: %s", c.line, c.text)
				continue
			}
		}
		if c.until {
			if s.fg != nil {
				s.stopFg(c.line)
			}
			s.startFg(c, text)
			continue
		}
		status, out := s.run(c, text)
		ok := status == c.exit
		if c.exitOrZero {
			ok = status == 0 || status == c.exit && os.Getenv("CI") != "true"
		}
		if !ok {
			want := strconv.Itoa(c.exit)
			if c.exitOrZero {
				want = "0"
			}
			t.Errorf("README:%d: %s\n  exit status %d, want %s; output:\n%s", c.line, c.text, status, want, indent(out))
		} else {
			t.Logf("README:%d: %s: exit %d\n%s", c.line, firstLine(c.text), status, indent(out))
		}
		if s.fg != nil {
			s.fg.settle(t, c.line)
		}
	}
	if s.fg != nil {
		s.stopFg(0)
	}
	s.end()
	allowed := func(name string) bool { return checkout && strings.HasPrefix(name, "tollgate.db") }
	entries, _ := os.ReadDir(s.start)
	for _, e := range entries {
		if !allowed(e.Name()) {
			t.Errorf("the section left %s in the directory it started in: a reader's current directory (cd to a temporary one first)", e.Name())
		}
	}
}

var shellBuiltin = map[string]bool{
	"cd": true, "export": true, "source": true, ".": true, "echo": true, "printf": true,
	"test": true, "[": true, "true": true, "false": true, "unset": true, "set": true, "read": true, "wait": true, "kill": true,
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func indent(s string) string {
	const max = 6000
	if len(s) > max {
		s = s[:max/2] + "\n...\n" + s[len(s)-max/2:]
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// session is one bash process that runs a section's commands, so that cd
// and export carry from one command to the next. Each command's status
// comes back on file descriptor 3.
type session struct {
	t      *testing.T
	start  string // the directory it starts in
	work   string // the test's own files: stdin, output
	env    []string
	addr   string // where a tollgate serve of this section listens
	sh     *exec.Cmd
	in     io.WriteCloser
	status chan string
	n      int
	fg     *service
	ended  bool
}

func startSession(t *testing.T, dir, bin string) *session {
	s := &session{t: t, start: filepath.Join(dir, "start"), work: filepath.Join(dir, "work"), addr: freeAddr(t)}
	home, tmp := filepath.Join(dir, "home"), filepath.Join(dir, "tmp")
	for _, d := range []string{s.start, s.work, home, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "TOLLGATE_"), k == "HOME", k == "TMPDIR", k == "PATH", k == "PWD", k == "OLDPWD",
			k == "CDPATH", k == "BASH_ENV", k == "ENV", k == "EDITOR", k == "VISUAL":
			continue
		}
		s.env = append(s.env, kv)
	}
	s.env = append(s.env, "HOME="+home, "TMPDIR="+tmp, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"TOLLGATE_ADDR="+s.addr)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(s.work, "bash.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.sh = exec.Command("bash", "--noprofile", "--norc")
	s.sh.Dir, s.sh.Env = s.start, s.env
	s.sh.Stdout, s.sh.Stderr = log, log
	s.sh.ExtraFiles = []*os.File{w}
	s.sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if s.in, err = s.sh.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.sh.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	log.Close()
	s.status = make(chan string)
	go func() {
		defer close(s.status)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			s.status <- sc.Text()
		}
	}()
	t.Cleanup(s.end)
	return s
}

// send writes script to bash and waits for its one line on fd 3.
func (s *session) send(script string, timeout time.Duration) (string, error) {
	if _, err := io.WriteString(s.in, script); err != nil {
		return "", fmt.Errorf("bash is gone: %v", err)
	}
	select {
	case l, ok := <-s.status:
		if !ok {
			return "", errors.New("bash exited")
		}
		return l, nil
	case <-time.After(timeout):
		return "", fmt.Errorf("no end after %v", timeout)
	}
}

// run runs one command in the session and returns its status and output.
func (s *session) run(c command, text string) (int, string) {
	s.n++
	in := "/dev/null"
	if c.stdin != nil {
		in = filepath.Join(s.work, fmt.Sprintf("in%d", s.n))
		if err := os.WriteFile(in, []byte(strings.Join(c.stdin, "\n")+"\n"), 0o644); err != nil {
			s.t.Fatal(err)
		}
	}
	out := filepath.Join(s.work, fmt.Sprintf("out%d", s.n))
	line, err := s.send(fmt.Sprintf("{ %s\n} <%s >%s 2>&1 3>&-; printf '%%s\\n' \"$?\" >&3\n", text, shQuote(in), shQuote(out)), commandTimeout)
	b, _ := os.ReadFile(out)
	if err != nil {
		s.t.Fatalf("README:%d: %s\n  %v; output so far:\n%s", c.line, c.text, err, indent(string(b)))
	}
	status, err := strconv.Atoi(line)
	if err != nil {
		s.t.Fatalf("README:%d: bash said %q", c.line, line)
	}
	return status, string(b)
}

// state is the session's current directory and environment, for a command
// the test starts itself.
func (s *session) state() (string, []string) {
	envFile := filepath.Join(s.work, "env")
	dir, err := s.send(fmt.Sprintf("env -0 >%s; printf '%%s\\n' \"$PWD\" >&3\n", shQuote(envFile)), 10*time.Second)
	if err != nil {
		s.t.Fatal(err)
	}
	b, err := os.ReadFile(envFile)
	if err != nil {
		s.t.Fatal(err)
	}
	env := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	return dir, env
}

func (s *session) end() {
	if s.ended {
		return
	}
	s.ended = true
	if s.fg != nil {
		s.fg.kill()
		s.fg = nil
	}
	s.in.Close()
	done := make(chan struct{})
	go func() { s.sh.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
	// Whatever the section left running in the background.
	syscall.Kill(-s.sh.Process.Pid, syscall.SIGKILL)
	<-done
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// service is a command that runs until Ctrl-C: tollgate serve.
type service struct {
	c      command
	cmd    *exec.Cmd
	base   string // http://host:port
	done   chan struct{}
	status int
	log    string
}

func (s *session) startFg(c command, text string) {
	t := s.t
	dir, env := s.state()
	s.n++
	logPath := filepath.Join(s.work, fmt.Sprintf("serve%d.log", s.n))
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command("bash", "-c", text)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	srv := &service{c: c, cmd: cmd, base: "http://" + serveAddr(text, env), done: make(chan struct{}), log: logPath}
	go func() {
		cmd.Wait()
		srv.status = cmd.ProcessState.ExitCode()
		close(srv.done)
	}()
	s.fg = srv
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-srv.done:
			t.Fatalf("README:%d: %s\n  exited with status %d before it answered /healthz:\n%s", c.line, c.text, srv.status, srv.output())
		default:
		}
		if body, code, err := get(srv.base + "/healthz"); err == nil && code == 200 && strings.TrimSpace(body) == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("README:%d: %s\n  /healthz did not answer in 30s:\n%s", c.line, c.text, srv.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, code, err := get(srv.base + "/readyz"); err != nil || code != 200 {
		t.Errorf("README:%d: /readyz: %d %v", c.line, code, err)
	}
	if body, code, err := get(srv.base + "/"); err != nil || code != 200 || !strings.Contains(body, "<html") {
		t.Errorf("README:%d: the page at %s/: %d %v\n%s", c.line, srv.base, code, err, indent(body))
	}
	t.Logf("README:%d: %s: up at %s", c.line, firstLine(c.text), srv.base)
	srv.settle(t, c.line)
}

// stopFg presses Ctrl-C: SIGINT to the service's process group, which
// must then exit 0.
func (s *session) stopFg(line int) {
	srv := s.fg
	s.fg = nil
	syscall.Kill(-srv.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-srv.done:
	case <-time.After(30 * time.Second):
		srv.kill()
		s.t.Fatalf("README:%d: %s did not stop within 30s of Ctrl-C:\n%s", line, srv.c.text, srv.output())
	}
	if srv.status != 0 {
		s.t.Errorf("README:%d: %s\n  exit status %d after Ctrl-C, want 0:\n%s", srv.c.line, srv.c.text, srv.status, srv.output())
	}
}

func (srv *service) kill() {
	syscall.Kill(-srv.cmd.Process.Pid, syscall.SIGKILL)
	<-srv.done
}

func (srv *service) output() string {
	b, _ := os.ReadFile(srv.log)
	return indent(string(b))
}

// settle waits until none of the service's runs is active: each thread
// with an unfinished run is parked on a question still open.
func (srv *service) settle(t *testing.T, line int) {
	deadline := time.Now().Add(settleTimeout)
	for {
		quiet, err := srv.quiet()
		if err != nil {
			t.Errorf("README:%d: asking the service about its runs: %v", line, err)
			return
		}
		if quiet {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("README:%d: the service's runs are still active after %v:\n%s", line, settleTimeout, srv.output())
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (srv *service) quiet() (bool, error) {
	body, code, err := get(srv.base + "/v1/threads?status=running")
	if err != nil {
		return false, err
	}
	if code == http.StatusUnauthorized || code == http.StatusForbidden {
		return true, nil // not dev mode: nothing to see without a token
	}
	var list struct {
		Threads []struct {
			ID       string `json:"id"`
			RunState string `json:"run_state"`
		} `json:"threads"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		return false, fmt.Errorf("%d %s: %v", code, body, err)
	}
	for _, th := range list.Threads {
		if th.RunState != "parked" {
			return false, nil
		}
		body, _, err := get(srv.base + "/v1/threads/" + th.ID)
		if err != nil {
			return false, err
		}
		var one struct {
			Pending []json.RawMessage `json:"pending_questions"`
		}
		if err := json.Unmarshal([]byte(body), &one); err != nil {
			return false, err
		}
		if len(one.Pending) == 0 {
			return false, nil // answered: about to resume
		}
	}
	return true, nil
}

// serveAddr is where a tollgate serve command line listens.
func serveAddr(text string, env []string) string {
	for _, w := range simpleCommands(text) {
		for i, a := range w {
			v, ok := strings.CutPrefix(a, "--addr=")
			if !ok && a == "--addr" && i+1 < len(w) {
				v, ok = w[i+1], true
			}
			if ok {
				if strings.HasPrefix(v, ":") {
					v = "127.0.0.1" + v
				}
				return v
			}
		}
	}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "TOLLGATE_ADDR="); ok {
			return v
		}
	}
	return readmeAddr
}

func get(url string) (string, int, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b), resp.StatusCode, err
}
