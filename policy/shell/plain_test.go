package shell_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/tollgate-ai/tollgate/policy/shell"
)

func TestReadPlain(t *testing.T) {
	for src, want := range map[string]*shell.Plain{
		"git diff":                          {Commands: []shell.PlainCommand{{Words: []string{"git", "diff"}}}},
		`"g"'i't\ x "a\"b" 'c\d' # comment`: {Commands: []shell.PlainCommand{{Words: []string{"git x", `a"b`, `c\d`}}}},
		"a && b || c | d |& e; f\ng": {Commands: []shell.PlainCommand{
			{Words: []string{"a"}}, {Words: []string{"b"}}, {Words: []string{"c"}}, {Words: []string{"d"}}, {Words: []string{"e"}}, {Words: []string{"f"}}, {Words: []string{"g"}}},
			Ops: []string{"&&", "||", "|", "|&", ";", ";"}},
		"A=1 B='x y' go test 2>&1 >out <in": {Commands: []shell.PlainCommand{{Env: []string{"A=1", "B=x y"}, Words: []string{"go", "test"},
			Redirects: []shell.PlainRedirect{{FD: "2", Op: ">&", Word: "1"}, {Op: ">", Word: "out"}, {Op: "<", Word: "in"}}}}},
		"cat <<'EOF'\n$x\nEOF":   {Commands: []shell.PlainCommand{{Words: []string{"cat"}, Redirects: []shell.PlainRedirect{{Op: "<<", Word: "'EOF'", Body: "$x\nEOF"}}}}},
		"git log HEAD~3 a\\~":    {Commands: []shell.PlainCommand{{Words: []string{"git", "log", "HEAD~3", "a~"}}}},
		"echo '*' \\? \"{a,b}\"": {Commands: []shell.PlainCommand{{Words: []string{"echo", "*", "?", "{a,b}"}}}},
	} {
		got, err := shell.ReadPlain(src)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ReadPlain(%q) = %+v, %v; want %+v", src, got, err, want)
		}
	}
	for _, src := range []string{
		"", "# only a comment", "echo $x", "echo ${x}", "echo $(id)", "echo `id`", "echo $((1+1))", "echo <(id)", "echo *.go",
		"echo a?", "echo [ab]", "echo {a,b}", "echo ~", "echo ~/x", "echo x=~", "x=~/y echo", "x=a:~/b echo", "echo $'\\x41'", `echo $"x"`,
		"echo \"$x\"", "(echo)", "{ echo; }", "echo &", "! echo", "if a; then b; fi", "while a; do b; done", "f() { a; }",
		"x=1", "> out", "[[ a ]]", "((x++))", "declare x=1", "let x=1", "time echo", "echo {fd}>x", "a=(1 2) echo",
		"cat <<EOF\n$x\nEOF", "echo @(a|b)", "coproc echo",
	} {
		if got, err := shell.ReadPlain(src); err == nil {
			t.Errorf("ReadPlain(%q) = %+v, want an error", src, got)
		} else if src != "" && src != "# only a comment" && !errors.Is(err, shell.ErrNotPlain) {
			var pe *shell.ParseError
			if !errors.As(err, &pe) {
				t.Errorf("ReadPlain(%q): %v, want ErrNotPlain or a ParseError", src, err)
			}
		}
	}
}

func TestKnowsFiles(t *testing.T) {
	for name, want := range map[string]bool{"cat": true, "grep": true, "git": true, "npm": false, "make": false} {
		if got := shell.KnowsFiles(name); got != want {
			t.Errorf("KnowsFiles(%q) = %v, want %v", name, got, want)
		}
	}
}
