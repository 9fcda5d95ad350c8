package learn

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/policy/shell"
)

// ErrNotLearnable is wrapped by the errors that say no rule can be
// learned from a call: its command string is not plain, the policy
// blocks it or does not ask about it, a rule that asks is learnable:
// false, it reads secrets or destroys data.
var ErrNotLearnable = errors.New("learn: no rule can be learned from this call")

// Proposal is the narrowest rule that covers a call, for a reviewer to
// widen or narrow slot by slot and field by field, and save.
type Proposal struct {
	// Call is the call it was made from.
	Call policy.Call `json:"-"`
	// Spec is the rule: the command's name, subcommand and options as
	// they are, option values any, files inside the working directory,
	// other operands exact; every other argument equal.
	Spec Spec `json:"spec"`
	// Scopes are the scopes the rule may have, narrowest first: the
	// call's thread, its project directory (when the call says where it
	// works), everyone.
	Scopes []Scope `json:"scopes"`
}

// Scope is where a learned rule applies.
type Scope struct {
	Kind checkpoint.RuleScope `json:"kind"`
	Key  string               `json:"key,omitempty"`
}

// String says the scope in a reviewer's words: "thread t1", "project
// /home/me/app", "everyone".
func (s Scope) String() string {
	switch s.Kind {
	case checkpoint.ScopeThread:
		return "thread " + s.Key
	case checkpoint.ScopeDir:
		return "project " + s.Key
	}
	return string(s.Kind)
}

// ScopeOf is the scope of a stored rule.
func ScopeOf(r *checkpoint.LearnedRule) Scope { return Scope{Kind: r.Scope, Key: r.ScopeKey} }

// Propose makes the narrowest rule that covers call. shellArg is the
// argument holding the command string when the policy reads the tool as
// a shell ("" otherwise). It fails (wrapping [ErrNotLearnable]) when the
// command string is not one a learned rule may allow.
func Propose(call policy.Call, shellArg string) (*Proposal, error) {
	p := &Proposal{Call: call, Spec: Spec{Tool: call.Tool}}
	if shellArg != "" {
		src, ok := call.Args[shellArg].(string)
		if !ok {
			return nil, fmt.Errorf("%w: argument %s is not a command string", ErrNotLearnable, shellArg)
		}
		sh, err := shapeOf(src)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotLearnable, err)
		}
		sh.Arg, sh.From = shellArg, src
		p.Spec.Shell = sh
	}
	keys := make([]string, 0, len(call.Args))
	for k := range call.Args {
		if k != shellArg || shellArg == "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		raw, err := json.Marshal(call.Args[k])
		if err != nil {
			return nil, fmt.Errorf("%w: argument %s: %w", ErrNotLearnable, k, err)
		}
		f := Field{Name: k, Match: Exact, Value: raw}
		if k == "description" && shellArg != "" {
			// What a coding agent writes about its shell call (Claude
			// Code's Bash): never run, new words every call.
			f.Match = Any
		}
		p.Spec.Args = append(p.Spec.Args, f)
	}
	p.Scopes = []Scope{{Kind: checkpoint.ScopeThread, Key: call.ThreadID}}
	if path.IsAbs(call.Dir) {
		p.Scopes = append(p.Scopes, Scope{Kind: checkpoint.ScopeDir, Key: path.Clean(call.Dir)})
	}
	p.Scopes = append(p.Scopes, Scope{Kind: checkpoint.ScopeEveryone})
	if !p.Spec.Allows(call) {
		// Cannot happen: the narrowest rule covers its call.
		return nil, fmt.Errorf("%w: the proposed rule does not cover the call", ErrNotLearnable)
	}
	return p, nil
}

// shapeOf makes the narrowest shape of a command string.
func shapeOf(src string) (*Shape, error) {
	a, p, err := readCommands(src)
	if err != nil {
		return nil, err
	}
	sh := &Shape{Ops: p.Ops}
	for i, pc := range p.Commands {
		files := a.Commands[i].Files
		name := pc.Words[0]
		sh.Commands = append(sh.Commands, CommandShape{Name: name, Env: pc.Env, Redirects: pc.Redirects,
			Args: slotsOf(name, pc.Words[1:], files)})
	}
	return sh, nil
}

// slotsOf makes the slots of a command's arguments. Options stay as they
// are; an option's value is any, unless it is a file; files are inside
// the working directory when they are; the first operand of a command
// with subcommands stays; other operands stay exact. Of a command the
// analysis does not know, every other operand may be a file or a name
// (RoleOperand): exact, to be widened to inside when written ./so.
func slotsOf(name string, args, files []string) []Slot {
	known := shell.KnowsFiles(name)
	isFile := func(w string) bool { return !known || slices.Contains(files, w) }
	file := func(prefix, w string) Slot {
		s := Slot{Role: RoleFile, Prefix: prefix, Word: w, Match: Exact}
		if insidePath(w) {
			s.Match = Inside
		}
		return s
	}
	var out []Slot
	dashdash, operands := false, 0
	for _, w := range args {
		switch {
		case !dashdash && w == "--":
			dashdash = true
			out = append(out, Slot{Role: RoleOption, Word: w, Match: Exact})
		case !dashdash && len(w) > 1 && w[0] == '-':
			if name, val, ok := strings.Cut(w, "="); ok && strings.HasPrefix(w, "--") {
				if isFile(val) {
					out = append(out, file(name+"=", val))
				} else {
					out = append(out, Slot{Role: RoleValue, Prefix: name + "=", Word: val, Match: Any})
				}
				continue
			}
			out = append(out, Slot{Role: RoleOption, Word: w, Match: Exact})
		default:
			operands++
			switch {
			case operands == 1 && (!known || name == "git"):
				out = append(out, Slot{Role: RoleSubcommand, Word: w, Match: Exact})
			case !known:
				out = append(out, Slot{Role: RoleOperand, Word: w, Match: Exact})
			case isFile(w):
				out = append(out, file("", w))
			default:
				out = append(out, Slot{Role: RoleWord, Word: w, Match: Exact})
			}
		}
	}
	return out
}

// Check says whether s is the proposal's spec with only what a reviewer
// may change changed: each slot's match among its choices, each field's
// match among its choices with bounds that keep the call's value, and
// nothing else. Such a spec still covers the call.
func (p *Proposal) Check(s Spec) error {
	want := p.Spec
	if s.Tool != want.Tool {
		return fmt.Errorf("learn: the rule is for tool %s, the call for %s", s.Tool, want.Tool)
	}
	if (s.Shell == nil) != (want.Shell == nil) {
		return errors.New("learn: the rule's command shape is not the call's")
	}
	if sh := s.Shell; sh != nil {
		w := want.Shell
		if sh.Arg != w.Arg || sh.From != w.From || !slices.Equal(sh.Ops, w.Ops) || len(sh.Commands) != len(w.Commands) {
			return errors.New("learn: the rule's commands are not the call's: only how each argument matches may change")
		}
		for i, c := range sh.Commands {
			wc := w.Commands[i]
			if c.Name != wc.Name || !slices.Equal(c.Env, wc.Env) || !slices.Equal(c.Redirects, wc.Redirects) || len(c.Args) != len(wc.Args) {
				return fmt.Errorf("learn: command %d of the rule is not the call's %s: only how each argument matches may change", i+1, wc.Name)
			}
			for j, slot := range c.Args {
				ws := wc.Args[j]
				if slot.Role != ws.Role || slot.Prefix != ws.Prefix || slot.Word != ws.Word {
					return fmt.Errorf("learn: argument %d of %s is not the call's %q", j+1, wc.Name, ws.Prefix+ws.Word)
				}
				if !slices.Contains(ws.Choices(), slot.Match) {
					return fmt.Errorf("learn: argument %d of %s (%s %q) may match %s, not %s", j+1, wc.Name, ws.Role, ws.Prefix+ws.Word, joinMatches(ws.Choices()), slot.Match)
				}
			}
		}
	}
	if len(s.Args) != len(want.Args) {
		return errors.New("learn: the rule's arguments are not the call's")
	}
	for i, f := range s.Args {
		w := want.Args[i]
		if f.Name != w.Name {
			return fmt.Errorf("learn: argument %s is not the call's %s", f.Name, w.Name)
		}
		if err := p.checkField(f, w); err != nil {
			return err
		}
	}
	if !s.Allows(p.Call) {
		return errors.New("learn: the rule does not cover the call it is learned from")
	}
	return nil
}

// FieldChoices are the matches an argument may have, and for Inside the
// directories it may be inside: the value's own, up the tree.
func (p *Proposal) FieldChoices(name string) (matches []Match, dirs []string) {
	v, ok := p.Call.Args[name]
	if !ok {
		return nil, nil
	}
	matches = []Match{Exact, Any}
	if _, ok := number(v); ok {
		matches = append(matches, Range)
	}
	named := pathName(name)
	if s, ok := v.(string); ok {
		dirs = dirsOf(s, p.Call.Dir, named)
		if len(dirs) > 0 || named || mayBePath(s) {
			// A path: the named one, or one inside a directory above it,
			// never any (a file a tool reads or writes may be a secret).
			matches = []Match{Exact}
			if len(dirs) > 0 {
				matches = append(matches, Inside)
			}
			if name == "description" && p.Spec.Shell != nil {
				matches = slices.Insert(matches, 1, Any)
			}
		}
	} else if named || holdsPath(v, p.Call.Dir) {
		// Paths in a list or an object: as they are.
		matches = []Match{Exact}
	}
	return matches, dirs
}

// pathWords are the words of an argument's name that say it holds paths.
var pathWords = map[string]bool{"path": true, "paths": true, "file": true, "files": true, "filename": true, "filenames": true,
	"filepath": true, "dir": true, "dirs": true, "directory": true, "directories": true, "folder": true, "folders": true,
	"source": true, "sources": true, "destination": true, "src": true, "dst": true, "dest": true, "target": true, "cwd": true,
	"root": true}

// pathName reports whether an argument's name says it holds a path: one
// of its words (file_path, targetDir, paths) is a path's.
func pathName(name string) bool {
	var word []rune
	found := false
	flush := func() {
		found = found || pathWords[strings.ToLower(string(word))]
		word = word[:0]
	}
	for i, r := range name {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
			continue
		case unicode.IsUpper(r) && i > 0 && len(word) > 0 && !unicode.IsUpper(word[len(word)-1]):
			flush()
		}
		word = append(word, r)
	}
	flush()
	return found
}

// mayBePath reports whether a string names a file without being a path
// dirsOf reads: in a home directory (~/x), or a file: URL.
func mayBePath(s string) bool {
	return strings.HasPrefix(s, "~") || strings.HasPrefix(strings.ToLower(s), "file:")
}

// holdsPath reports whether a list or an object holds a path, or a value
// under a name that says it is one.
func holdsPath(v any, base string) bool {
	switch v := v.(type) {
	case string:
		return len(dirsOf(v, base, false)) > 0 || mayBePath(v)
	case []any:
		return slices.ContainsFunc(v, func(e any) bool { return holdsPath(e, base) })
	case map[string]any:
		for k, e := range v {
			if pathName(k) || holdsPath(e, base) {
				return true
			}
		}
	}
	return false
}

// dirsOf are the directories a path may be said to be inside, deepest
// first, for a call that works in base: its own, up to the root's
// children. Not a path: none. A relative string without a directory or a
// dot is a path only when the argument's name says so (named).
func dirsOf(s, base string, named bool) []string {
	if s == "" || strings.ContainsAny(s, "\x00\n") || mayBePath(s) || strings.Contains(s, "://") {
		return nil
	}
	p := s
	if !path.IsAbs(p) {
		if !path.IsAbs(base) || !named && !strings.Contains(s, "/") && !strings.Contains(s, ".") {
			return nil
		}
		p = path.Join(base, p)
	}
	var out []string
	for d := path.Dir(path.Clean(p)); d != "/" && d != "."; d = path.Dir(d) {
		out = append(out, d)
	}
	return out
}

func (p *Proposal) checkField(f, w Field) error {
	matches, dirs := p.FieldChoices(w.Name)
	if !slices.Contains(matches, f.Match) {
		return fmt.Errorf("learn: argument %s may match %s, not %s", w.Name, joinMatches(matches), f.Match)
	}
	if f.Match != Exact && len(f.Value) > 0 && !jsonEqual(f.Value, w.Value) || f.Match == Exact && !jsonEqual(f.Value, w.Value) {
		return fmt.Errorf("learn: argument %s's value is not the call's", w.Name)
	}
	if f.Match != Range && (f.Min != nil || f.Max != nil) || f.Match != Inside && f.Dir != "" {
		return fmt.Errorf("learn: argument %s has bounds its match (%s) does not take", w.Name, f.Match)
	}
	switch f.Match {
	case Range:
		v, _ := number(p.Call.Args[w.Name])
		if f.Min == nil || f.Max == nil || math.IsInf(*f.Min, 0) || math.IsInf(*f.Max, 0) || *f.Min > v || v > *f.Max {
			return fmt.Errorf("learn: argument %s's range must hold its value %v", w.Name, v)
		}
	case Inside:
		if !slices.Contains(dirs, f.Dir) {
			return fmt.Errorf("learn: argument %s may be inside %s, not %q", w.Name, strings.Join(dirs, ", "), f.Dir)
		}
	}
	return nil
}

func jsonEqual(a, b json.RawMessage) bool {
	var v any
	return json.Unmarshal(a, &v) == nil && sameJSON(v, b)
}

func joinMatches(ms []Match) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = string(m)
	}
	return strings.Join(s, " or ")
}

// CheckScope says whether s is one of the scopes the proposal offers.
func (p *Proposal) CheckScope(s Scope) error {
	if slices.Contains(p.Scopes, s) {
		return nil
	}
	var names []string
	for _, o := range p.Scopes {
		names = append(names, o.String())
	}
	return fmt.Errorf("learn: a rule learned from this call applies to %s, not %s", strings.Join(names, ", or "), s)
}
