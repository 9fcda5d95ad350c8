package shell

import (
	"errors"
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Plain is a command string made of simple commands and nothing else:
// literal words (quoted or not, but no expansion, pattern, brace or
// tilde the shell would act on), joined by ";" (or a newline), "&&",
// "||" and pipes. It is what a rule learned from one call is compared
// with word for word (package policy/learn): two plain strings with the
// same commands, words, redirections and operators run the same programs
// with the same arguments, however they are quoted.
type Plain struct {
	Commands []PlainCommand `json:"commands"`
	// Ops are the operators between consecutive commands: ";" (a
	// semicolon or a newline), "&&", "||", "|" or "|&"; one fewer than
	// Commands. Pipes bind tighter than && and ||, and those than ";", as
	// in the shell, so the list and its operators say how the string is
	// grouped.
	Ops []string `json:"ops,omitempty"`
}

// PlainCommand is one simple command of a [Plain] string.
type PlainCommand struct {
	// Env are the NAME=value assignments written before the command's
	// name, the value after quote removal.
	Env []string `json:"env,omitempty"`
	// Words are the command's name and its arguments after quote removal.
	Words []string `json:"words"`
	// Redirects are the command's redirections, in order.
	Redirects []PlainRedirect `json:"redirects,omitempty"`
}

// PlainRedirect is one redirection of a [PlainCommand].
type PlainRedirect struct {
	// FD is the descriptor written before the operator ("2" in 2>&1).
	FD string `json:"fd,omitempty"`
	// Op is the operator: ">", ">>", "<", "<>", ">&", "<&", ">|", "&>",
	// "&>>", "<<<", "<<" or "<<-".
	Op string `json:"op"`
	// Word is the target after quote removal (a file, a descriptor, a
	// here-string); for a here-document, its delimiter as written
	// ('EOF' and EOF differ: one expands the body, the other does not).
	Word string `json:"word"`
	// Body is a here-document's body as written.
	Body string `json:"body,omitempty"`
}

// ErrNotPlain is wrapped by the error of [ReadPlain] for a string that
// parses but is not plain; the message says what is not.
var ErrNotPlain = errors.New("shell: not a plain list of simple commands")

// ReadPlain reads src as bash and returns it as a [Plain] string, or an
// error saying why it is not one: it does not parse, or it uses anything
// beyond simple commands of literal words (subshells, groups, loops,
// functions, background jobs, negation, parameters, substitutions,
// arithmetic, patterns, braces, a leading tilde, $'...' strings, arrays,
// named descriptors). Comments are not part of a command.
//
// It says nothing of what the commands do: [Parse] does. A caller that
// allows by the words (a learned rule) needs both: the analysis finding
// nothing to review, and the string plain.
func ReadPlain(src string) (*Plain, error) {
	if len(src) > MaxInput {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrNotPlain, MaxInput)
	}
	p := getParser(syntax.LangBash)
	f, err := p.Parse(strings.NewReader(src), "")
	putParser(syntax.LangBash, p)
	if err != nil {
		return nil, &ParseError{Err: err}
	}
	r := &plainReader{src: src, out: &Plain{}}
	for i, s := range f.Stmts {
		if i > 0 {
			r.out.Ops = append(r.out.Ops, ";")
		}
		if err := r.stmt(s); err != nil {
			return nil, err
		}
	}
	if len(r.out.Commands) == 0 {
		return nil, fmt.Errorf("%w: it runs no command", ErrNotPlain)
	}
	return r.out, nil
}

type plainReader struct {
	src string
	out *Plain
}

func notPlain(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrNotPlain, fmt.Sprintf(format, a...))
}

func (r *plainReader) stmt(s *syntax.Stmt) error {
	switch {
	case s.Negated:
		return notPlain("negates a command (!)")
	case s.Background || s.Coprocess || s.Disown:
		return notPlain("runs a command in the background")
	}
	switch c := s.Cmd.(type) {
	case *syntax.CallExpr:
		return r.call(c, s.Redirs)
	case *syntax.BinaryCmd:
		if len(s.Redirs) > 0 {
			return notPlain("redirects a list of commands")
		}
		if err := r.stmt(c.X); err != nil {
			return err
		}
		r.out.Ops = append(r.out.Ops, c.Op.String())
		return r.stmt(c.Y)
	case nil:
		return notPlain("has a redirection without a command")
	}
	return notPlain("uses a compound command (%s)", strings.TrimPrefix(fmt.Sprintf("%T", s.Cmd), "*syntax."))
}

func (r *plainReader) call(c *syntax.CallExpr, redirs []*syntax.Redirect) error {
	if len(c.Args) == 0 {
		return notPlain("assigns variables without running a command")
	}
	var cmd PlainCommand
	for _, a := range c.Assigns {
		if a.Append || a.Naked || a.Index != nil || a.Array != nil || a.Name == nil {
			return notPlain("assigns a variable other than NAME=value")
		}
		v := ""
		if a.Value != nil {
			var err error
			if v, err = plainWord(a.Value, true); err != nil {
				return err
			}
		}
		cmd.Env = append(cmd.Env, a.Name.Value+"="+v)
	}
	for _, w := range c.Args {
		v, err := plainWord(w, false)
		if err != nil {
			return err
		}
		cmd.Words = append(cmd.Words, v)
	}
	for _, rd := range redirs {
		pr, err := r.redirect(rd)
		if err != nil {
			return err
		}
		cmd.Redirects = append(cmd.Redirects, pr)
	}
	r.out.Commands = append(r.out.Commands, cmd)
	return nil
}

func (r *plainReader) redirect(rd *syntax.Redirect) (PlainRedirect, error) {
	out := PlainRedirect{Op: rd.Op.String()}
	if rd.N != nil {
		if !isDigits(rd.N.Value) {
			return out, notPlain("redirects a named descriptor ({%s})", rd.N.Value)
		}
		out.FD = rd.N.Value
	}
	switch rd.Op {
	case syntax.Hdoc, syntax.DashHdoc:
		if rd.Word == nil {
			return out, notPlain("has a here-document without a delimiter")
		}
		out.Word = r.text(rd.Word)
		if rd.Hdoc != nil {
			for _, p := range rd.Hdoc.Parts {
				if _, ok := p.(*syntax.Lit); !ok {
					return out, notPlain("has a here-document that expands parameters or runs commands")
				}
			}
			out.Body = r.text(rd.Hdoc)
		}
		return out, nil
	}
	if rd.Word == nil {
		return out, notPlain("has a redirection without a target")
	}
	v, err := plainWord(rd.Word, false)
	if err != nil {
		return out, err
	}
	out.Word = v
	return out, nil
}

// text is a node's source text.
func (r *plainReader) text(n syntax.Node) string {
	start, end := int(n.Pos().Offset()), int(n.End().Offset())
	if start < 0 || end > len(r.src) || start > end {
		return ""
	}
	return r.src[start:end]
}

// plainWord removes the quotes and escapes of a word that the shell
// expands to exactly one word of that value, and refuses any other: one
// with a parameter, a substitution, arithmetic, an unquoted pattern
// character or brace, a tilde the shell expands, $'...' or $"...".
// assigned says the word is an assignment's value, where a tilde after
// ':' expands too.
func plainWord(w *syntax.Word, assigned bool) (string, error) {
	for i, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			v := p.Value
			if i == 0 && strings.HasPrefix(v, "~") || strings.Contains(v, "=~") || assigned && strings.Contains(v, ":~") {
				return "", notPlain("has a tilde the shell may expand to a home directory")
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", notPlain("has a $'...' string")
			}
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", notPlain("has a $\"...\" string")
			}
			for _, q := range p.Parts {
				if _, ok := q.(*syntax.Lit); !ok {
					return "", notPlain("expands something inside double quotes")
				}
			}
		case *syntax.ParamExp:
			return "", notPlain("expands a parameter")
		case *syntax.CmdSubst, *syntax.ProcSubst:
			return "", notPlain("substitutes a command's output")
		case *syntax.ArithmExp:
			return "", notPlain("has arithmetic")
		default:
			return "", notPlain("has a word the shell expands (%s)", strings.TrimPrefix(fmt.Sprintf("%T", p), "*syntax."))
		}
	}
	if hasBrace(w) {
		return "", notPlain("has an unquoted {, where the shell may expand braces")
	}
	u := (&walker{}).unquote(w)
	if !u.static || u.glob {
		return "", notPlain("has an unquoted pattern the shell may replace by file names")
	}
	return u.val, nil
}

// KnowsFiles reports whether the analysis knows which arguments of the
// command name files (its [Command.Files] are its operands and option
// values that are files), rather than taking every operand for one, as
// it does for a command it does not know.
func KnowsFiles(name string) bool {
	_, ok := fileRules[name]
	return ok
}
