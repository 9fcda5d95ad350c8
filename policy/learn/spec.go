package learn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"unicode"

	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/policy/shell"
)

// Spec is what a learned rule allows: calls of one tool whose arguments
// fit it. A shell tool's command string fits a [Shape], word for word;
// every other argument fits its [Field]. An argument the spec does not
// name must be absent.
type Spec struct {
	Tool  string  `json:"tool"`
	Shell *Shape  `json:"shell,omitempty"`
	Args  []Field `json:"args,omitempty"`
}

// Shape is a command string as a learned rule allows it: the same simple
// commands, joined by the same operators (";", "&&", "||", "|"), each
// with the same name, environment assignments and redirections, and
// arguments that fit their slots one for one. Nothing else: no more
// commands, no expansion, substitution, pattern or wrapper, nothing the
// shell analysis asks about, nothing that may read secrets.
type Shape struct {
	// Arg is the tool's argument that holds the command string.
	Arg string `json:"arg"`
	// From is the command string the shape was learned from, as the
	// reviewer saw it.
	From     string         `json:"from"`
	Ops      []string       `json:"ops,omitempty"`
	Commands []CommandShape `json:"commands"`
}

// CommandShape is one command of a [Shape].
type CommandShape struct {
	Name      string                `json:"name"`
	Env       []string              `json:"env,omitempty"`
	Args      []Slot                `json:"args,omitempty"`
	Redirects []shell.PlainRedirect `json:"redirects,omitempty"`
}

// Role is what an argument of a command is, which says how far a
// reviewer may widen its slot ([Slot.Choices]).
type Role string

const (
	// RoleSubcommand: the first operand of a command that has
	// subcommands (git diff, npm test, go build): always exact.
	RoleSubcommand Role = "subcommand"
	// RoleOption: an option (-l, --stat, --): always exact.
	RoleOption Role = "option"
	// RoleValue: the value of --name=value that is not a file: any
	// (the default) or exact.
	RoleValue Role = "value"
	// RoleFile: a file the command names (an operand, or the value of
	// --name=FILE): inside the working directory, or exact. A command the
	// analysis does not know may take the value of any --name=value for
	// a file.
	RoleFile Role = "file"
	// RoleOperand: an operand of a command the analysis does not know,
	// which may be a file or the name of anything else (a package, a
	// script, a host, a remote command: npm install lodash, ssh host
	// ls): exact, or, when written as a path in the working directory
	// (./vendor/a.tgz), inside, taking only words written so.
	RoleOperand Role = "operand"
	// RoleWord: any other operand (a pattern, a count, a name): exact
	// (the default) or any.
	RoleWord Role = "word"
)

// Match is how an argument fits its slot or field.
type Match string

const (
	// Exact: the word, or the value, the rule was learned from.
	Exact Match = "exact"
	// Any: any word that is not an option (does not start with "-"); for
	// --name=value, any value; for a field, any value or none.
	Any Match = "any"
	// Inside: a path inside the working directory: relative, not
	// climbing out with "..", not the directory itself, not starting
	// with "-", "~" or "+", without ':', '=', the shell's special
	// characters, spaces or control characters (a remote, a URL, a
	// refspec, an assignment, a command line); for a field,
	// a path in the field's Dir whose name is not a secret's (.env, a
	// key, .git/...).
	Inside Match = "inside"
	// Range: a number between a field's Min and Max, both included.
	Range Match = "range"
)

// Slot is one argument of a [CommandShape].
type Slot struct {
	Role Role `json:"role"`
	// Prefix is the option of --name=value ("--name="); the slot matches
	// Word after it.
	Prefix string `json:"prefix,omitempty"`
	// Word is the argument the rule was learned from (after Prefix).
	Word  string `json:"word"`
	Match Match  `json:"match"`
}

// Choices are the matches the slot may have: what a reviewer may widen it
// to, narrowest first.
func (s Slot) Choices() []Match {
	switch s.Role {
	case RoleValue:
		return []Match{Exact, Any}
	case RoleFile, RoleOperand:
		if s.insideFits(s.Word) {
			return []Match{Exact, Inside}
		}
	case RoleWord:
		return []Match{Exact, Any}
	}
	return []Match{Exact}
}

// fits reports whether word fits the slot.
func (s Slot) fits(word string) bool {
	rest, ok := strings.CutPrefix(word, s.Prefix)
	if !ok {
		return false
	}
	switch s.Match {
	case Exact:
		return rest == s.Word
	case Any:
		return s.Prefix != "" || rest != "" && rest[0] != '-'
	case Inside:
		return s.insideFits(rest)
	}
	return false
}

// insideFits reports whether a word is a path inside the working
// directory as the slot takes it: for an operand of a command the
// analysis does not know, written ./so.
func (s Slot) insideFits(w string) bool {
	return insidePath(w) && (s.Role != RoleOperand || strings.HasPrefix(w, "./"))
}

// insidePath reports whether p names a file inside the working directory
// whatever it holds: relative, not climbing out, not the directory
// itself (which holds its secrets), not an option, not a home directory.
// Nor a word a program may read as something else than a file: a
// remote, a URL or a refspec (host:path, https://..., main:x, :main,
// +main: git push, scp, rsync), an assignment (dd's of=/dev/sda), words
// with the shell's special characters, spaces or control characters (a
// command line, for ssh host).
func insidePath(p string) bool {
	if p == "" || p[0] == '/' || p[0] == '-' || p[0] == '~' || p[0] == '+' || strings.ContainsFunc(p, notInPath) {
		return false
	}
	c := path.Clean(p)
	return c != "." && c != ".." && !strings.HasPrefix(c, "../")
}

// notInPath are the characters of a word that is not only a file's name
// (insidePath): ':' and '=', the shell's special characters (a program
// that hands its operand to a shell, as ssh does, runs them), spaces,
// control and format characters.
func notInPath(r rune) bool {
	return strings.ContainsRune(notInPathChars, r) || unicode.In(r, unicode.C, unicode.Z)
}

// notInPathChars are the characters notInPath refuses besides spaces,
// control and format characters.
const notInPathChars = ":=;&|<>()$`\\\"'*?[]{}!#"

// Field is one argument of a call, other than a shell's command string.
type Field struct {
	Name  string `json:"name"`
	Match Match  `json:"match"`
	// Value is the argument's value the rule was learned from (JSON).
	Value json.RawMessage `json:"value,omitempty"`
	// Min and Max bound a Range.
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
	// Dir is the directory of Inside: an absolute path.
	Dir string `json:"dir,omitempty"`
}

// fits reports whether a value (as a JSON object decodes it; absent:
// !present) fits the field, for a call that works in dir.
func (f Field) fits(v any, present bool, dir string) bool {
	if f.Match == Any {
		return true
	}
	if !present {
		return false
	}
	switch f.Match {
	case Exact:
		return sameJSON(v, f.Value)
	case Range:
		n, ok := number(v)
		return ok && f.Min != nil && f.Max != nil && *f.Min <= n && n <= *f.Max
	case Inside:
		s, ok := v.(string)
		return ok && pathIn(s, dir, f.Dir) && !shell.SecretPath(s) && !shell.InGitDir(s)
	}
	return false
}

// pathIn reports whether the path p (relative to base when relative) lies
// in dir or below it, by name.
func pathIn(p, base, dir string) bool {
	if p == "" || dir == "" || !path.IsAbs(dir) || strings.HasPrefix(p, "~") || strings.ContainsRune(p, 0) {
		return false
	}
	if !path.IsAbs(p) {
		if !path.IsAbs(base) {
			return false
		}
		p = path.Join(base, p)
	}
	p, dir = path.Clean(p), path.Clean(dir)
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, !math.IsNaN(n)
	case json.Number:
		f, err := n.Float64()
		return f, err == nil && !math.IsNaN(f)
	}
	return 0, false
}

// sameJSON compares a decoded value with JSON: as JSON decodes both.
func sameJSON(v any, raw json.RawMessage) bool {
	var w any
	if json.Unmarshal(raw, &w) != nil {
		return false
	}
	a, err := canonical(v)
	if err != nil {
		return false
	}
	b, _ := canonical(w)
	return bytes.Equal(a, b)
}

// canonical is v as JSON with its numbers as float64 and keys sorted (what
// encoding/json writes of a decoded value).
func canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var w any
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

// ParseSpec reads a spec as a store keeps it.
func ParseSpec(raw []byte) (*Spec, error) {
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("learn: a learned rule's spec: %w", err)
	}
	if s.Tool == "" {
		return nil, errors.New("learn: a learned rule's spec names no tool")
	}
	if s.Shell != nil && (s.Shell.Arg == "" || len(s.Shell.Commands) == 0 || len(s.Shell.Ops) != len(s.Shell.Commands)-1) {
		return nil, errors.New("learn: a learned rule's shell shape is incomplete")
	}
	return &s, nil
}

// Allows reports whether the spec allows call. It says nothing of the
// rule's scope, expiry or revocation, nor of the policy: a learned rule
// answers only for calls the policy asks about ([policy.Learned]).
func (s *Spec) Allows(call policy.Call) bool {
	return s.allows(call, &plainCache{})
}

// plainCache holds a command string's reading, for one call asked of
// several rules.
type plainCache struct {
	src   string
	done  bool
	plain *shell.Plain
	err   error
}

func (c *plainCache) read(src string) (*shell.Plain, error) {
	if !c.done || c.src != src {
		c.src, c.done = src, true
		c.plain, c.err = readPlain(src)
	}
	return c.plain, c.err
}

func (s *Spec) allows(call policy.Call, cache *plainCache) bool {
	if call.Tool != s.Tool {
		return false
	}
	if sh := s.Shell; sh != nil {
		src, ok := call.Args[sh.Arg].(string)
		if !ok {
			return false
		}
		p, err := cache.read(src)
		if err != nil || !sh.fits(p) {
			return false
		}
	}
	for k, v := range call.Args {
		if s.Shell != nil && k == s.Shell.Arg {
			continue
		}
		i := slices.IndexFunc(s.Args, func(f Field) bool { return f.Name == k })
		if i < 0 || !s.Args[i].fits(v, true, call.Dir) {
			return false
		}
	}
	for _, f := range s.Args {
		if _, present := call.Args[f.Name]; !present && !f.fits(nil, false, call.Dir) {
			return false
		}
	}
	return true
}

// fits reports whether a plain string fits the shape.
func (sh *Shape) fits(p *shell.Plain) bool {
	if len(p.Commands) != len(sh.Commands) || !slices.Equal(p.Ops, sh.Ops) {
		return false
	}
	for i, c := range sh.Commands {
		pc := p.Commands[i]
		if pc.Words[0] != c.Name || !slices.Equal(pc.Env, c.Env) || !slices.Equal(pc.Redirects, c.Redirects) ||
			len(pc.Words)-1 != len(c.Args) {
			return false
		}
		for j, slot := range c.Args {
			if !slot.fits(pc.Words[j+1]) {
				return false
			}
		}
	}
	return true
}

// readPlain reads a command string a learned rule may allow: plain
// ([shell.ReadPlain]), and nothing in it the analysis asks about or that
// may read secrets. The error says why not, in a reviewer's words.
func readPlain(src string) (*shell.Plain, error) {
	_, p, err := readCommands(src)
	return p, err
}

// readCommands is readPlain with the analysis of the string.
func readCommands(src string) (*shell.Analysis, *shell.Plain, error) {
	a, err := shell.Parse(src)
	if err != nil {
		return nil, nil, fmt.Errorf("the command string does not parse: %w", err)
	}
	if r := a.Reasons(); len(r) > 0 {
		return nil, nil, fmt.Errorf("the shell analysis cannot vouch for it: %s", r[0])
	}
	for i := range a.Commands {
		c := &a.Commands[i]
		switch {
		case c.Dynamic:
			return nil, nil, fmt.Errorf("the command %s is only known at run time", c.Path)
		case c.DynamicArgs:
			return nil, nil, fmt.Errorf("an argument of %s is only known at run time", c.Name)
		case len(c.Via) > 0:
			return nil, nil, fmt.Errorf("it runs %s through %s", c.Name, strings.Join(c.Via, ", "))
		case len(c.Secrets) > 0:
			return nil, nil, fmt.Errorf("it may read secrets (%s)", c.Secrets[0])
		case len(c.Unknown) > 0:
			return nil, nil, fmt.Errorf("it names files only known when it runs (%s)", c.Unknown[0])
		case c.Name == "":
			return nil, nil, errors.New("it has a statement that runs no command")
		}
	}
	p, err := shell.ReadPlain(src)
	if err != nil {
		return nil, nil, fmt.Errorf("it is not a plain list of commands: %s", strings.TrimPrefix(strings.TrimPrefix(err.Error(), shell.ErrNotPlain.Error()), ": "))
	}
	if len(p.Commands) != len(a.Commands) {
		return nil, nil, errors.New("it runs more commands than it shows")
	}
	return a, p, nil
}
