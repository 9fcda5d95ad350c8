package shell

import (
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// Dialect is the shell language a command string is written in.
type Dialect string

// The dialects [Parser] understands. The zero value means [Bash].
const (
	Bash  Dialect = "bash"
	POSIX Dialect = "posix"
	Zsh   Dialect = "zsh"
	Mksh  Dialect = "mksh"
)

func (d Dialect) variant() (syntax.LangVariant, error) {
	switch d {
	case "", Bash:
		return syntax.LangBash, nil
	case POSIX:
		return syntax.LangPOSIX, nil
	case Zsh:
		return syntax.LangZsh, nil
	case Mksh:
		return syntax.LangMirBSDKorn, nil
	}
	return 0, fmt.Errorf("shell: unknown dialect %q", string(d))
}

// Limits that keep the analysis of hostile input bounded. Input beyond them is
// not analysed further and needs review.
const (
	// DefaultMaxDepth is how deeply command strings may nest
	// (bash -c "sh -c '...'") before the analysis stops and asks.
	DefaultMaxDepth = 6
	// MaxInput is the longest command string that is analysed.
	MaxInput = 64 << 10
	// maxCommands bounds the commands collected from one string.
	maxCommands = 1000
	// maxFields bounds the words one brace expansion may produce.
	maxFields = 256
	// maxWords and maxBytes bound the words brace expansion produces in
	// one string, and the bytes of those words and of the arguments of
	// the commands collected (a wrapper's command repeats the words after
	// it, so chains of wrappers would otherwise cost quadratic memory).
	maxWords = 1 << 14
	maxBytes = 1 << 20
	// maxWrappers bounds the launchers one command runs under
	// (xargs xargs ... ls).
	maxWrappers = 16
	// maxVars bounds the variables noted for one command.
	maxVars = 256
)

// Analysis is what a command string would run, as far as a static reading can
// tell.
type Analysis struct {
	// Source is the analysed command string.
	Source string `json:"source"`
	// Commands are every simple command the string can run, in source order,
	// including those in substitutions, function bodies, nested shell strings
	// and behind wrappers such as sudo, env or xargs (a wrapper is a command
	// too, followed by the command it runs).
	Commands []Command `json:"commands"`
	// Review lists reasons, not tied to one command, why a person must look at
	// the string: it does not parse, it defines functions, it changes
	// variables that change how commands run, it hides characters, ...
	Review []string `json:"review,omitempty"`
	// Err is the parse error Parse returned, if any: the string, or one
	// nested in it, does not parse.
	Err error `json:"-"`
}

// Command is one simple command.
type Command struct {
	// Name is the command as it is looked up: quotes and backslashes removed
	// (r''m and \rm are both "rm"), and a path in a system directory reduced to
	// its base name (/usr/bin/rm is "rm"). Other paths stay as written
	// ("./rm"). Empty when Dynamic, or for a statement made only of
	// redirections (> file).
	Name string `json:"name"`
	// Path is the command word after quote removal, or its source text when
	// Dynamic.
	Path string `json:"path"`
	// Args are the arguments after quote removal and brace expansion. An
	// argument computed at run time ($x, $(...)) is kept as written in the
	// source and DynamicArgs is set.
	Args []string `json:"args"`
	// Redirects are the command's redirections, including those of the
	// compound commands around it ({ ...; } > file).
	Redirects []Redirect `json:"redirects"`
	// Env holds NAME=value assignments that apply to this command.
	Env []string `json:"env"`
	// Via names the launchers this command runs under, outermost first:
	// "sudo", "xargs", "find -exec", "bash -c", ...
	Via []string `json:"via"`
	// Dynamic is set when the command name is computed at run time ($cmd,
	// $(...), a glob, a brace expansion): no rule can know what runs.
	Dynamic bool `json:"dynamic"`
	// DynamicArgs is set when some argument is only known at run time,
	// including arguments xargs reads from its input.
	DynamicArgs bool `json:"dynamic_args"`
	// Writes is set when a redirection opens a file for writing.
	Writes bool `json:"writes"`
	// Review lists reasons why a person must look at this command (an
	// option that runs programs or writes files, eval, a script the analysis
	// cannot read, ...).
	Review []string `json:"review"`
	// Files are the files the command names: operands and option values
	// that are file names, files named inside its scripts (sed r), and
	// git's REV:path; computed ones as their source text. For a command the
	// analysis does not know, every operand and every --name=value.
	// Redirection targets are in Redirects.
	Files []string `json:"files"`
	// Outside lists what may lie outside the working directory: a file or
	// redirection target that is absolute, starts with ~, climbs out with
	// .., is a pattern that can match .., or is computed at run time;
	// arguments xargs supplies; cd without a directory. Empty when every
	// file the command names stays inside (symbolic links are trusted).
	Outside []string `json:"outside"`
	// Unknown lists, of Outside, what may name any file at all, inside the
	// working directory too: a file named at run time ($f, $(...), a
	// redirection to a computed name), arguments xargs supplies, the files
	// named in a file (--files0-from, sha256sum -c), jq modules. Their
	// names are not checked for secrets, so a policy that lets the kernel
	// confine reads outside the working directory still asks about these.
	Unknown []string `json:"unknown"`
	// Secrets lists what may hold credentials: files whose names are on
	// the analysis's list (.env, *.pem, id_rsa, .ssh/, ...; patterns
	// matched as any name they may match, in any case), expansions of
	// variables that may hold secrets ($API_KEY, or any variable named in
	// capitals that is not known to be harmless), and the environment as
	// a whole (jq env, awk ENVIRON).
	Secrets []string `json:"secrets"`

	// stdin holds the commands whose output this one reads on its
	// standard input (the left side of a pipe), subst those of its own
	// substitutions: what Effects needs to see curl URL | sh.
	stdin, subst span
}

// Redirect is one redirection.
type Redirect struct {
	// Op is the operator: ">", ">>", "<", "<>", ">&", "<&", ">|", "&>",
	// "&>>", "<<", "<<-", "<<<".
	Op string `json:"op"`
	// FD is the file descriptor written before the operator ("2" in 2>x),
	// empty when implied.
	FD string `json:"fd,omitempty"`
	// Target is the file name, the descriptor duplicated (for >&2), or the
	// word of a here-string; empty for here-documents. Its source text when
	// Dynamic.
	Target string `json:"target"`
	// Dynamic is set when Target is computed at run time. A process
	// substitution (< <(cmd)) is not: it is a pipe, and Target its text.
	Dynamic bool `json:"dynamic,omitempty"`
	// Writes is set when the redirection opens a file for writing; writing to
	// /dev/null, /dev/tty or a duplicated descriptor does not count, nor
	// does writing to /dev/stdout, /dev/stderr or /dev/fd/N unless that
	// descriptor may be open on a file (3<f >/dev/fd/3 writes f; so does
	// exec >f; echo x >/dev/stdout).
	Writes bool `json:"writes"`

	pipe bool // a process substitution, <(cmd) or >(cmd)
}

// NeedsReview reports whether any part of the string needs a person: the
// analysis-wide reasons or any command's.
func (a *Analysis) NeedsReview() bool {
	if len(a.Review) > 0 {
		return true
	}
	for i := range a.Commands {
		if len(a.Commands[i].Review) > 0 {
			return true
		}
	}
	return false
}

// Reasons lists every reason for review, each command's prefixed with its
// name.
func (a *Analysis) Reasons() []string {
	out := append([]string(nil), a.Review...)
	for i := range a.Commands {
		c := &a.Commands[i]
		for _, r := range c.Review {
			out = append(out, c.label()+": "+r)
		}
	}
	return out
}

// Names returns the name of every command, in order. A dynamic command's
// name is the empty string.
func (a *Analysis) Names() []string {
	out := make([]string, len(a.Commands))
	for i := range a.Commands {
		out[i] = a.Commands[i].Name
	}
	return out
}

// Writes reports whether any command redirects output into a file.
func (a *Analysis) Writes() bool {
	for i := range a.Commands {
		if a.Commands[i].Writes {
			return true
		}
	}
	return false
}

func (c *Command) label() string {
	switch {
	case c.Dynamic:
		return c.Path
	case c.Name == "":
		return "(redirection)"
	}
	return c.Name
}

// String renders the command for people: its name and arguments, quoted
// where needed.
func (c *Command) String() string {
	var b strings.Builder
	b.WriteString(quoteWord(c.label()))
	for _, a := range c.Args {
		b.WriteByte(' ')
		b.WriteString(quoteWord(a))
	}
	for _, r := range c.Redirects {
		b.WriteByte(' ')
		b.WriteString(r.FD + r.Op + quoteWord(r.Target))
	}
	return b.String()
}

func quoteWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r < utf8.RuneSelf && (r == '-' || r == '_' || r == '.' || r == '/' || r == '=' || r == ',' || r == ':' || r == '+' || r == '@' || r == '%' || r == '~' ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'))
	}) < 0 {
		return s
	}
	if q, err := syntax.Quote(s, syntax.LangBash); err == nil {
		return q
	}
	return fmt.Sprintf("%q", s)
}

// Parser analyses command strings. The zero value analyses bash with the
// default limits; a Parser is safe for concurrent use.
type Parser struct {
	// Dialect is the language of the top-level string; zero means Bash.
	// Nested strings are read in the dialect of the shell that runs them
	// (sh -c: POSIX, zsh -c: Zsh, ...).
	Dialect Dialect
	// MaxDepth bounds nested command strings; zero means DefaultMaxDepth.
	MaxDepth int
}

// Parse analyses cmd as bash with the default limits; see [Parser.Parse].
func Parse(cmd string) (*Analysis, error) {
	var p Parser
	return p.Parse(cmd)
}

// ParseError reports a command string, or a string nested in it, that does
// not parse.
type ParseError struct {
	// Context says where the string came from: "" for the top-level
	// string, "bash -c" for a nested one.
	Context string
	Err     error
}

func (e *ParseError) Error() string {
	if e.Context != "" {
		return "shell: " + e.Context + ": " + e.Err.Error()
	}
	return "shell: " + e.Err.Error()
}

func (e *ParseError) Unwrap() error { return e.Err }

// Parse analyses cmd. The Analysis is never nil. When the string, or a
// command string nested in it, does not parse, the error is a *ParseError
// and the Analysis lists that as a reason for review, so that a caller who
// looks only at the Analysis still fails closed.
func (p *Parser) Parse(cmd string) (*Analysis, error) {
	a := &Analysis{Source: cmd}
	variant, err := p.Dialect.variant()
	if err != nil {
		a.Review = append(a.Review, err.Error())
		return a, err
	}
	w := &walker{a: a, maxDepth: p.MaxDepth}
	if w.maxDepth <= 0 {
		w.maxDepth = DefaultMaxDepth
	}
	w.source(cmd, variant, nil, "")
	if w.err != nil {
		a.Err = w.err
		return a, w.err
	}
	return a, nil
}

// checkText flags characters that make a string read differently by people
// and by the shell.
func checkText(s string) string {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' || c == 0x7f {
				if c == 0 {
					return "contains a NUL byte (the shell stops reading there)"
				}
				return fmt.Sprintf("contains the control character %U", rune(c))
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if msg := checkRune(s, i, r); msg != "" {
			return msg
		}
		i += size
	}
	return ""
}

// checkRune checks one non-ASCII character of s, at i.
func checkRune(s string, i int, r rune) string {
	switch {
	case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
		return "contains bytes that are not valid UTF-8"
	case r >= 0x80 && r < 0xa0:
		return fmt.Sprintf("contains the control character %U", r)
	case isInvisible(r):
		return fmt.Sprintf("contains the invisible or direction-changing character %U", r)
	}
	return ""
}

func isInvisible(r rune) bool {
	switch {
	case r == 0x00ad, r == 0x034f, r == 0x061c, r == 0x115f, r == 0x1160, r == 0x17b4, r == 0x17b5, r == 0x180e,
		0x200b <= r && r <= 0x200f, 0x202a <= r && r <= 0x202e, 0x2060 <= r && r <= 0x206f,
		r == 0x3164, r == 0xfeff, r == 0xffa0, 0xfff0 <= r && r <= 0xfffb, 0xe0000 <= r && r <= 0xe007f:
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// parsers pools syntax parsers, which are costly to create, per dialect.
var parsers sync.Map // syntax.LangVariant -> *sync.Pool

func getParser(v syntax.LangVariant) *syntax.Parser {
	pool, _ := parsers.LoadOrStore(v, &sync.Pool{New: func() any {
		// Comments are kept for checkComments.
		return syntax.NewParser(syntax.Variant(v), syntax.KeepComments(true))
	}})
	return pool.(*sync.Pool).Get().(*syntax.Parser)
}

func putParser(v syntax.LangVariant, p *syntax.Parser) {
	pool, _ := parsers.Load(v)
	pool.(*sync.Pool).Put(p)
}
