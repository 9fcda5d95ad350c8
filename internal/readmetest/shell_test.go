//go:build unix

package readmetest

// Cutting a block into commands, and their markers.

import (
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

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
	// prints: texts its output must show ("# prints: TEXT").
	prints []string
}

// splitCommands cuts a block into complete shell commands: lines joined by
// a trailing backslash, here-documents, and whatever else bash -n says is
// not finished yet (a quote or a loop open).
func splitCommands(text string, first int) ([]command, error) {
	lines := strings.Split(text, "\n")
	var out []command
	last := -2 // the line a "# prints:" line may follow: a command's last, or another such line
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
			if text, ok := strings.CutPrefix(trim, "# prints:"); ok {
				if last != i-1 {
					return out, fmt.Errorf("line %d: a # prints: line must come right after the command whose output it checks", first+i)
				}
				c := &out[len(out)-1]
				c.prints = append(c.prints, strings.TrimSpace(text))
				last = i
			}
			continue
		}
		start := i
		acc := []string{l}
		for {
			last := acc[len(acc)-1]
			if delim, tabs := heredoc(last); delim != "" {
				for i++; i < len(lines); i++ {
					acc = append(acc, lines[i])
					body := lines[i]
					if tabs {
						body = strings.TrimLeft(body, "\t")
					}
					if body == delim {
						break
					}
				}
				if i == len(lines) {
					return out, fmt.Errorf("line %d: here-document %s not ended", first+start, delim)
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
		last = i
	}
	return out, nil
}

// shows reports whether a command's output shows text: it holds it, white
// space in either counting as one space wherever it is a run (the
// columns of a table, a line break).
func shows(output, text string) bool {
	flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	return strings.Contains(flat(output), flat(text))
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
	case strings.HasPrefix(cm, "prints:"):
		text := strings.TrimSpace(strings.TrimPrefix(cm, "prints:"))
		if text == "" {
			return errors.New(`"# prints:" names nothing`)
		}
		c.prints = append(c.prints, text)
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
			heredoc = heredoc || op == "<<" || op == "<<-"
			toks = append(toks, token{op: op})
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return toks, comments
}

// heredoc is the delimiter of the here-document a line opens ("" if none),
// and whether it is a <<- one (tabs before the delimiter allowed).
func heredoc(line string) (delim string, tabs bool) {
	toks, _ := lex(line)
	for i, tk := range toks {
		if (tk.op == "<<" || tk.op == "<<-") && i+1 < len(toks) && toks[i+1].op == "" {
			return toks[i+1].word, tk.op == "<<-"
		}
	}
	return "", false
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
		case strings.ContainsAny(tk.op, "<>"):
			// a redirection or a here-document: its target or delimiter
			// follows (lex stops before a here-document's body)
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
		`tollgate questions list   # prints: hitl_call_1_2`,
		`tollgate run $'$ ls' \`,
		`    --policy p.yaml   # you type: a`,
		"# prints: `ls`: ran, exit 0",
		`# prints: the second check`,
		`# prose`,
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
		{text: "tollgate questions list   # prints: hitl_call_1_2", line: 23, prints: []string{"hitl_call_1_2"}},
		{text: "tollgate run $'$ ls' \\\n    --policy p.yaml   # you type: a", line: 24, stdin: []string{"a"}, prints: []string{"`ls`: ran, exit 0", "the second check"}},
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

// TestPrintsMarker: a "# prints:" line belongs to the command right before
// it; anywhere else it is an error, never prose that checks nothing.
func TestPrintsMarker(t *testing.T) {
	for _, block := range []string{
		"# prints: nothing before it",
		"tollgate version\n\n# prints: after a blank line",
		"tollgate version\n# prose\n# prints: after prose",
		"# Ctrl-C in the first terminal\n# prints: after a Ctrl-C",
		"tollgate version   # prints:",
	} {
		if cmds, err := splitCommands(block, 1); err == nil {
			t.Errorf("%q: no error (%#v)", block, cmds)
		}
	}
}

func TestShows(t *testing.T) {
	const out = "THREAD  QUESTION       TOOL  LEFT  ASKS\ntour    hitl_call_1_2  bash  3m0s  rm -r logs\n"
	for _, tc := range []struct {
		text string
		want bool
	}{
		{"hitl_call_1_2", true},
		{"tour hitl_call_1_2 bash", true}, // columns: one space matches a run
		{"ASKS tour", true},               // a line break too
		{"hitl_call_1_3", false},
		{"rm -rf logs", false},
	} {
		if got := shows(out, tc.text); got != tc.want {
			t.Errorf("shows(..., %q) = %v, want %v", tc.text, got, tc.want)
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
