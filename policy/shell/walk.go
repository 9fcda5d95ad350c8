package shell

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// walker collects the commands of one analysis. It reads the syntax tree of
// the top-level string and of every string nested in it.
type walker struct {
	a        *Analysis
	maxDepth int
	err      error // the first parse error

	depth   int
	src     string             // the string being read, for source text
	variant syntax.LangVariant // its dialect
	via     []string           // launchers around it ("bash -c", ...)
	ctx     string             // prefix for reasons found in a nested string
	full    bool               // maxCommands reached
}

// word is one shell word after quote removal.
type word struct {
	val    string // the value, or the source text when !static
	static bool   // known without running anything
	glob   bool   // has an unquoted pattern character, so the shell may replace it by file names
	brace  bool   // produced by brace expansion
}

func (w *walker) review(pos syntax.Pos, msg string) {
	r := w.ctx + msg
	if pos.IsValid() && w.depth == 0 {
		r = pos.String() + ": " + r
	}
	if !slices.Contains(w.a.Review, r) {
		w.a.Review = append(w.a.Review, r)
	}
}

// source parses src and collects its commands.
func (w *walker) source(src string, v syntax.LangVariant, via []string, ctx string) {
	saveSrc, saveVariant, saveVia, saveCtx := w.src, w.variant, w.via, w.ctx
	defer func() { w.src, w.variant, w.via, w.ctx = saveSrc, saveVariant, saveVia, saveCtx }()
	w.ctx = ctx
	if len(src) > MaxInput {
		w.review(syntax.Pos{}, fmt.Sprintf("is longer than %d bytes and was not analysed", MaxInput))
		return
	}
	if msg := checkText(src); msg != "" {
		w.review(syntax.Pos{}, msg)
	}
	p := getParser(v)
	f, err := p.Parse(strings.NewReader(src), "")
	putParser(v, p)
	if err != nil {
		w.review(syntax.Pos{}, "does not parse: "+err.Error())
		if w.err == nil {
			w.err = &ParseError{Context: strings.TrimSuffix(ctx, ": "), Err: err}
		}
		return
	}
	w.src, w.variant, w.via = src, v, via
	w.stmts(f.Stmts, nil)
}

// nested analyses a command string that a command runs (bash -c STRING).
func (w *walker) nested(src string, v syntax.LangVariant, via []string, what string) {
	if w.depth >= w.maxDepth {
		w.review(syntax.Pos{}, fmt.Sprintf("nests command strings more than %d deep", w.maxDepth))
		return
	}
	w.depth++
	w.source(src, v, via, w.ctx+"in the "+what+" string: ")
	w.depth--
}

func (w *walker) emit(c Command) {
	if w.full {
		return
	}
	if len(w.a.Commands) >= maxCommands {
		w.full = true
		w.review(syntax.Pos{}, fmt.Sprintf("has more than %d commands; the rest were not analysed", maxCommands))
		return
	}
	w.a.Commands = append(w.a.Commands, c)
}

func (w *walker) stmts(list []*syntax.Stmt, inherited []Redirect) {
	for _, s := range list {
		w.stmt(s, inherited)
	}
}

func (w *walker) stmt(s *syntax.Stmt, inherited []Redirect) {
	if w.full {
		return
	}
	redirs := inherited
	var own []Redirect
	if len(s.Redirs) > 0 {
		own = w.redirects(s.Redirs)
		redirs = append(slices.Clip(inherited), own...)
	}
	// A statement that runs no named command still opens its
	// redirections: "> ~/.bashrc" empties the file, and $(< file) reads
	// one. Around a compound command only writes are worth a command of
	// their own; its commands get the redirections too.
	call, simple := s.Cmd.(*syntax.CallExpr)
	switch {
	case s.Cmd == nil || simple && len(call.Args) == 0:
		if len(own) > 0 {
			w.emit(Command{Redirects: own, Writes: anyWrites(own)})
		}
	case !simple && anyWrites(own):
		w.emit(Command{Redirects: own, Writes: true})
	}
	switch c := s.Cmd.(type) {
	case nil:
	case *syntax.CallExpr:
		w.call(c, redirs, s)
	case *syntax.BinaryCmd:
		w.stmt(c.X, redirs)
		w.stmt(c.Y, redirs)
	case *syntax.Block:
		w.stmts(c.Stmts, redirs)
	case *syntax.Subshell:
		w.stmts(c.Stmts, redirs)
	case *syntax.IfClause:
		for ic := c; ic != nil; ic = ic.Else {
			w.stmts(ic.Cond, redirs)
			w.stmts(ic.Then, redirs)
		}
	case *syntax.WhileClause:
		w.stmts(c.Cond, redirs)
		w.stmts(c.Do, redirs)
	case *syntax.ForClause:
		switch l := c.Loop.(type) {
		case *syntax.WordIter:
			if msg := assignRisk(l.Name.Value, false); msg != "" {
				w.review(l.Name.Pos(), msg)
			}
			for _, it := range l.Items {
				w.scan(it)
			}
		case *syntax.CStyleLoop:
			w.arith(l.Init)
			w.arith(l.Cond)
			w.arith(l.Post)
		}
		w.stmts(c.Do, redirs)
	case *syntax.CaseClause:
		w.scan(c.Word)
		for _, it := range c.Items {
			for _, p := range it.Patterns {
				w.scan(p)
			}
			w.stmts(it.Stmts, redirs)
		}
	case *syntax.FuncDecl:
		w.review(c.Pos(), "defines a shell function, which can stand in for any command name")
		w.stmt(c.Body, redirs)
	case *syntax.ArithmCmd:
		w.arith(c.X)
	case *syntax.TestClause:
		w.test(c.X)
	case *syntax.DeclClause:
		w.decl(c, redirs)
	case *syntax.LetClause:
		cmd := Command{Name: "let", Path: "let", Redirects: redirs, Writes: anyWrites(redirs), Via: w.via}
		for _, x := range c.Exprs {
			cmd.Args = append(cmd.Args, w.text(x))
			w.arith(x)
		}
		w.emit(cmd)
	case *syntax.TimeClause:
		if c.Stmt != nil {
			w.stmt(c.Stmt, redirs)
		}
	case *syntax.CoprocClause:
		if c.Name != nil {
			w.scan(c.Name)
		}
		w.stmt(c.Stmt, redirs)
	case *syntax.TestDecl:
		if c.Description != nil {
			w.scan(c.Description)
		}
		w.stmt(c.Body, redirs)
	default:
		w.review(s.Pos(), fmt.Sprintf("uses a construct the analysis does not know (%T)", c))
	}
}

func anyWrites(rs []Redirect) bool {
	return slices.ContainsFunc(rs, func(r Redirect) bool { return r.Writes })
}

// call handles a simple command: assignments, words, and what it runs.
func (w *walker) call(c *syntax.CallExpr, redirs []Redirect, s *syntax.Stmt) {
	env, envReview := w.assigns(c.Assigns, len(c.Args) > 0)
	if len(c.Args) == 0 {
		return
	}
	words := w.words(c.Args)
	w.command(words, env, envReview, redirs, w.via, false, stdinOf(s))
}

// stdinOf returns the redirection that feeds the statement's standard input.
func stdinOf(s *syntax.Stmt) *syntax.Redirect {
	var in *syntax.Redirect
	for _, r := range s.Redirs {
		if r.N != nil && r.N.Value != "0" {
			continue
		}
		switch r.Op {
		case syntax.RdrIn, syntax.RdrInOut, syntax.DplIn, syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
			in = r
		}
	}
	return in
}

// command records the simple command made of words, then analyses what it
// launches.
func (w *walker) command(words []word, env, envReview []string, redirs []Redirect, via []string, extra bool, stdin *syntax.Redirect) {
	if len(words) == 0 || w.full {
		return
	}
	name := words[0]
	cmd := Command{
		Path:        name.val,
		Redirects:   redirs,
		Env:         env,
		Via:         via,
		DynamicArgs: extra,
		Writes:      anyWrites(redirs),
		Review:      envReview,
	}
	switch {
	case !name.static || name.glob:
		cmd.Dynamic = true
		cmd.Review = append(cmd.Review, "the command name is only known at run time")
	default:
		cmd.Name = normalizeName(name.val)
		if name.brace {
			cmd.Review = append(cmd.Review, "the command name comes from a brace expansion")
		}
		if msg := nameRisk(name.val); msg != "" {
			cmd.Review = append(cmd.Review, msg)
		}
	}
	args := words[1:]
	cmd.Args = make([]string, len(args))
	for i, a := range args {
		cmd.Args[i] = a.val
		if !a.static {
			cmd.DynamicArgs = true
		}
	}
	var launches []launch
	if info, ok := known[cmd.Name]; ok && !cmd.Dynamic {
		ck := check{w: w, cmd: &cmd, args: args, extra: extra, stdin: stdin}
		if info.options {
			ck.optionSafety()
		}
		info.check(&ck)
		launches = ck.launches
	}
	w.emit(cmd)
	for _, l := range launches {
		inner := append(slices.Clip(via), l.via)
		if l.hasSrc {
			w.nested(l.src, l.variant, inner, l.via)
			continue
		}
		w.command(l.words, append(slices.Clip(env), l.env...), l.envReview, redirs, inner, l.extra, nil)
	}
}

// systemDirs are where the commands a policy names live; a path there is
// reduced to the command's name.
var systemDirs = []string{"/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/", "/usr/local/sbin/"}

func normalizeName(p string) string {
	if !strings.HasPrefix(p, "/") {
		return p
	}
	clean := path.Clean(p)
	for _, d := range systemDirs {
		if rest, ok := strings.CutPrefix(clean, d); ok && rest != "" && !strings.Contains(rest, "/") {
			return rest
		}
	}
	return p
}

func nameRisk(name string) string {
	if name == "" {
		return "the command name is empty"
	}
	for _, r := range name {
		if r >= 0x80 {
			return "the command name has characters outside ASCII, which can imitate another name"
		}
		if r < 0x20 || r == 0x7f {
			return "the command name has control characters"
		}
	}
	return ""
}

// assigns checks variable assignments. prefix is set when they apply to
// one command (NAME=x cmd) rather than to the shell.
func (w *walker) assigns(list []*syntax.Assign, prefix bool) (env, review []string) {
	for _, as := range list {
		if as.Index != nil {
			w.arith(as.Index)
		}
		if as.Array != nil {
			w.scan(as.Array)
		}
		val := ""
		if as.Value != nil {
			w.scan(as.Value)
			val = w.unquote(as.Value).val
		}
		if as.Name == nil {
			continue
		}
		name := as.Name.Value
		if msg := assignRisk(name, prefix); msg != "" {
			if prefix {
				review = append(review, msg)
			} else {
				w.review(as.Pos(), msg)
			}
		}
		env = append(env, name+"="+val)
	}
	return env, review
}

// safeVars are configuration variables that change only how output looks.
var safeVars = map[string]bool{
	"LANG": true, "LANGUAGE": true, "TZ": true, "TERM": true, "NO_COLOR": true,
	"FORCE_COLOR": true, "CLICOLOR": true, "CLICOLOR_FORCE": true, "COLORTERM": true,
	"COLUMNS": true, "LINES": true, "PAGER_DISABLE": true,
}

// assignRisk says why setting name needs review, or "". Variables named in
// upper case are where programs read their configuration from (PATH, IFS,
// LD_PRELOAD, GIT_PAGER, LESSOPEN, BASH_ENV, PS4, ...); rather than chase
// every one that can run a program, only a few known to be harmless pass.
func assignRisk(name string, prefix bool) string {
	if safeVars[name] || strings.HasPrefix(name, "LC_") {
		return ""
	}
	if strings.ContainsFunc(name, func(r rune) bool { return 'a' <= r && r <= 'z' }) {
		return ""
	}
	if prefix {
		return "sets " + name + " for the command; programs read such variables to decide what to run"
	}
	return "sets " + name + ", which can change what later commands run"
}

// decl handles declare, export, local, readonly, typeset and nameref.
func (w *walker) decl(c *syntax.DeclClause, redirs []Redirect) {
	cmd := Command{Name: c.Variant.Value, Path: c.Variant.Value, Redirects: redirs, Writes: anyWrites(redirs), Via: w.via}
	for _, as := range c.Args {
		switch {
		case as.Naked && as.Name == nil && as.Value != nil:
			w.scan(as.Value)
			v := w.unquote(as.Value)
			cmd.Args = append(cmd.Args, v.val)
			switch {
			case !v.static:
				cmd.DynamicArgs = true
				cmd.Review = append(cmd.Review, "declares a variable whose name or options are only known at run time")
			case strings.HasPrefix(v.val, "-") || strings.HasPrefix(v.val, "+"):
				if strings.ContainsAny(v.val[1:], "n") {
					cmd.Review = append(cmd.Review, "declares a name reference, an indirection that can run commands")
				}
			case strings.Contains(v.val, "["):
				cmd.Review = append(cmd.Review, "declares an array element; bash evaluates its subscript, which can run commands")
			default:
				if msg := assignRisk(v.val, false); msg != "" && c.Variant.Value == "export" {
					cmd.Review = append(cmd.Review, "exports "+v.val+" to the commands that follow")
				}
			}
		case as.Name != nil:
			env, _ := w.assigns([]*syntax.Assign{as}, false)
			cmd.Args = append(cmd.Args, env...)
		}
	}
	w.emit(cmd)
}

func (w *walker) redirects(rs []*syntax.Redirect) []Redirect {
	out := make([]Redirect, 0, len(rs))
	for _, r := range rs {
		rd := Redirect{Op: r.Op.String()}
		if r.N != nil {
			rd.FD = r.N.Value
		}
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			// An unquoted here-document expands $(...) in its body.
			if r.Hdoc != nil {
				w.scan(r.Hdoc)
			}
		default:
			if r.Word != nil {
				w.scan(r.Word)
				t := w.unquote(r.Word)
				rd.Target, rd.Dynamic = t.val, !t.static || t.glob
				if strings.HasPrefix(rd.Target, "/dev/tcp/") || strings.HasPrefix(rd.Target, "/dev/udp/") {
					w.review(r.Pos(), "opens a network connection ("+rd.Target+")")
				}
			}
		}
		rd.Writes = redirectWrites(rd)
		out = append(out, rd)
	}
	return out
}

// harmlessTargets may be written without touching a file.
var harmlessTargets = map[string]bool{
	"/dev/null": true, "/dev/stdout": true, "/dev/stderr": true, "/dev/tty": true,
}

func redirectWrites(r Redirect) bool {
	switch r.Op {
	case ">", ">>", ">|", "&>", "&>>", "<>", ">>|", "&>|", "&>>|":
		return r.Dynamic || !harmlessTarget(r.Target)
	case ">&":
		// >&2 and >&- duplicate or close a descriptor; >&file is &>file.
		if r.Dynamic {
			return true
		}
		t := strings.TrimSuffix(r.Target, "-")
		return !(t == "" || isDigits(t))
	}
	return false
}

func harmlessTarget(t string) bool {
	if harmlessTargets[t] {
		return true
	}
	if fd, ok := strings.CutPrefix(t, "/dev/fd/"); ok {
		return isDigits(fd)
	}
	return false
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// words scans words for what they run and performs quote removal and
// brace expansion.
func (w *walker) words(ws []*syntax.Word) []word {
	out := make([]word, 0, len(ws))
	for _, x := range ws {
		w.scan(x)
		out = w.expandBraces(x, out)
	}
	return out
}

func (w *walker) expandBraces(x *syntax.Word, out []word) []word {
	if !slices.ContainsFunc(x.Parts, func(p syntax.WordPart) bool {
		lit, ok := p.(*syntax.Lit)
		return ok && strings.Contains(lit.Value, "{")
	}) {
		return append(out, w.unquote(x))
	}
	// SplitBraces changes the word it is given.
	cp := &syntax.Word{Parts: slices.Clone(x.Parts)}
	if !syntax.SplitBraces(cp) {
		return append(out, w.unquote(x))
	}
	start := len(out)
	n := 0
	for f, err := range expand.BracesSeq(nil, cp) {
		n++
		if err != nil || n > maxFields {
			w.review(x.Pos(), "has a brace expansion too large to analyse")
			out = append(out[:start], word{val: w.text(x), brace: true})
			return out
		}
		u := w.unquote(f)
		u.brace = true
		if !u.static {
			u.val = w.text(x)
		}
		out = append(out, u)
	}
	return out
}

// unquote removes quotes and escapes from a word whose value is known
// without running anything; otherwise it returns the word's source text.
func (w *walker) unquote(x *syntax.Word) word {
	if len(x.Parts) == 1 {
		// The common case, a plain word, needs no copy.
		if lit, ok := x.Parts[0].(*syntax.Lit); ok && !strings.ContainsAny(lit.Value, `\*?[`) {
			return word{val: lit.Value, static: true}
		}
	}
	var b strings.Builder
	res := word{static: true}
	for _, p := range x.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			v := p.Value
			for j := 0; j < len(v); j++ {
				c := v[j]
				if c == '\\' && j+1 < len(v) {
					j++
					if v[j] != '\n' {
						b.WriteByte(v[j])
					}
					continue
				}
				if c == '*' || c == '?' || c == '[' && strings.IndexByte(v[j+1:], ']') >= 0 {
					res.glob = true
				}
				b.WriteByte(c)
			}
		case *syntax.SglQuoted:
			if !p.Dollar {
				b.WriteString(p.Value)
				break
			}
			s, err := expand.Literal(nil, &syntax.Word{Parts: []syntax.WordPart{p}})
			if err != nil {
				res.static = false
			}
			b.WriteString(s)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					res.static = false
					continue
				}
				unescapeDouble(&b, lit.Value)
			}
		case *syntax.ExtGlob:
			res.static, res.glob = false, true
		default:
			res.static = false
		}
	}
	if res.static {
		res.val = b.String()
	} else {
		res.val = w.text(x)
	}
	return res
}

// unescapeDouble removes the backslashes that escape within double quotes.
func unescapeDouble(b *strings.Builder, v string) {
	for j := 0; j < len(v); j++ {
		c := v[j]
		if c == '\\' && j+1 < len(v) {
			switch v[j+1] {
			case '$', '`', '"', '\\':
				j++
				b.WriteByte(v[j])
				continue
			case '\n':
				j++
				continue
			}
		}
		b.WriteByte(c)
	}
}

// text returns the source text of a node.
func (w *walker) text(n syntax.Node) string {
	start, end := n.Pos(), n.End()
	if start.IsValid() && end.IsValid() {
		s, e := int(start.Offset()), int(end.Offset())
		if 0 <= s && s <= e && e <= len(w.src) {
			return w.src[s:e]
		}
	}
	var b strings.Builder
	if err := syntax.NewPrinter().Print(&b, n); err != nil {
		return "?"
	}
	return b.String()
}

// scan finds what a word (or any node) runs when the shell expands it:
// command and process substitutions, and expansions that evaluate code.
func (w *walker) scan(n syntax.Node) {
	syntax.Walk(n, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CmdSubst:
			w.stmts(n.Stmts, nil)
			return false
		case *syntax.ProcSubst:
			w.stmts(n.Stmts, nil)
			return false
		case *syntax.ArithmExp:
			w.arithRisk(n.X)
		case *syntax.ParamExp:
			w.param(n)
		}
		return true
	})
}

// arith checks an arithmetic expression and scans it.
func (w *walker) arith(x syntax.ArithmExpr) {
	if x == nil {
		return
	}
	w.arithRisk(x)
	w.scan(x)
}

// arithRisk flags arithmetic on anything but literal numbers: bash
// evaluates a variable's value as an expression, and an array subscript in
// it ('a[$(cmd)]') runs commands.
func (w *walker) arithRisk(x syntax.ArithmExpr) {
	if x == nil {
		return
	}
	risky := false
	syntax.Walk(x, func(n syntax.Node) bool {
		if wd, ok := n.(*syntax.Word); ok {
			if !isNumber(wd.Lit()) {
				risky = true
			}
			return false
		}
		return !risky
	})
	if risky {
		w.review(x.Pos(), "does arithmetic on a variable or computed value; bash evaluates array subscripts in it, which can run commands")
	}
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '#' || c == '_' || c == '@') {
			return false
		}
	}
	// Digits first: 10, 0x1f, 2#101, 64#_@ ...; a leading letter is a name.
	return '0' <= s[0] && s[0] <= '9'
}

func (w *walker) param(p *syntax.ParamExp) {
	switch {
	case p.Excl && p.Names == 0 && !allIndex(p.Index):
		w.review(p.Pos(), "expands a variable indirectly (${!name}), which can run commands hidden in its value")
	case p.Exp != nil && p.Exp.Op == syntax.OtherParamOps:
		w.review(p.Pos(), "transforms a value with ${name@...}, which can expand it as a prompt")
	case p.Flags != nil || p.NestedParam != nil:
		w.review(p.Pos(), "uses zsh expansion flags, which can evaluate a value as code")
	}
	if p.Index != nil && !allIndex(p.Index) {
		w.arithRisk(p.Index)
	}
	if p.Slice != nil {
		w.arithRisk(p.Slice.Offset)
		w.arithRisk(p.Slice.Length)
	}
}

// allIndex reports an index of @ or *, which lists rather than evaluates.
func allIndex(x syntax.ArithmExpr) bool {
	wd, ok := x.(*syntax.Word)
	if !ok {
		return false
	}
	l := wd.Lit()
	return l == "@" || l == "*"
}

var arithTests = map[syntax.BinTestOperator]bool{
	syntax.TsEql: true, syntax.TsNeq: true, syntax.TsLeq: true,
	syntax.TsGeq: true, syntax.TsLss: true, syntax.TsGtr: true,
}

// test checks a [[ ... ]] expression: its -eq family evaluates operands as
// arithmetic, and -v evaluates an array subscript.
func (w *walker) test(x syntax.TestExpr) {
	syntax.Walk(x, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.BinaryTest:
			if arithTests[n.Op] && (!testNumber(n.X) || !testNumber(n.Y)) {
				w.review(n.Pos(), "compares values arithmetically; bash evaluates array subscripts in them, which can run commands")
			}
		case *syntax.UnaryTest:
			if n.Op == syntax.TsVarSet || n.Op == syntax.TsRefVar {
				if wd, ok := n.X.(*syntax.Word); !ok || strings.ContainsAny(wd.Lit(), "[") || wd.Lit() == "" {
					w.review(n.Pos(), "tests a variable whose subscript bash evaluates, which can run commands")
				}
			}
		case *syntax.Word:
			w.scan(n)
			return false
		}
		return true
	})
}

func testNumber(x syntax.TestExpr) bool {
	wd, ok := x.(*syntax.Word)
	if !ok {
		return false
	}
	l := strings.TrimPrefix(wd.Lit(), "-")
	return isDigits(l)
}
