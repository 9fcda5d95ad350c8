package shell

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

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
	full    bool               // a limit was reached: nothing more is collected

	nwords int // words produced by expansion, against maxWords
	nbytes int // their bytes, and those of emitted arguments, against maxBytes

	// vars are the variables expanded since the statement or command
	// that collects them started (see stmt and command).
	vars []string
	// findFed is the statement, the first of a pipeline's right side,
	// whose standard input is the list of paths a find inside the
	// working directory prints.
	findFed *syntax.Stmt
	// pipeFed is the statement, the first of a pipeline's right side,
	// whose standard input is the output of the commands pipeFrom (their
	// indexes in the analysis): the left side's. Effects reads it (curl
	// URL | sh runs what was downloaded).
	pipeFed  *syntax.Stmt
	pipeFrom span
	// ck is reused for each command's check (command does not recurse
	// until it is done with it), and opts and operands are scratch space
	// for parsing options where the results are not kept.
	ck       *check
	opts     []opt
	operands []word

	// pathVars are the variables of the for loops being read whose values
	// are file names inside the working directory, none of them a secret
	// (for f in *.go), and which the loop's body does not set.
	pathVars map[string]bool

	// fds are the descriptors that may be open on a file when a command
	// of the string being read starts, before its own redirections: those
	// of the command that runs the string, and those the string's exec
	// commands leave open.
	fds fdFiles
}

// word is one shell word after quote removal.
type word struct {
	val       string // the value, or the source text when !static
	static    bool   // known without running anything
	glob      bool   // has an unquoted pattern character, so the shell may replace it by file names
	brace     bool   // produced by brace expansion
	procSubst bool   // a process substitution alone, <(...): a pipe's /dev/fd name
	inside    bool   // not static, but known to name a file inside the working directory (xargs -I with find's paths)
	multi     bool   // stands for several words at run time (find -exec's {} before +)
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
	saveSrc, saveVariant, saveVia, saveCtx, savePathVars, saveFDs := w.src, w.variant, w.via, w.ctx, w.pathVars, w.fds
	defer func() {
		w.src, w.variant, w.via, w.ctx, w.pathVars, w.fds = saveSrc, saveVariant, saveVia, saveCtx, savePathVars, saveFDs
	}()
	w.ctx = ctx
	w.pathVars = nil // another shell: the loop's variables are not known there
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
	if differentialChecks {
		w.checkComments(f)
	}
	w.fds = w.execFDs(f, w.fds)
	w.stmts(f.Stmts, nil)
}

// differentialChecks turns on the checks for where mvdan.cc/sh and bash
// read a string differently (checkComments, hdocWordEnd). Only
// FuzzBashAgrees turns them off, to show that it finds those classes.
var differentialChecks = true

// checkComments asks about a comment that ends in a backslash. The
// parser reads a backslash and newline in a comment as a line
// continuation and takes the next line for more words of the same
// command (echo hi #\ then touch x is "echo hi touch x"); bash ends the
// comment at the newline and runs the next line as a command.
func (w *walker) checkComments(f *syntax.File) {
	syntax.Walk(f, func(n syntax.Node) bool {
		c, ok := n.(*syntax.Comment)
		if !ok {
			return true
		}
		start := int(c.Hash.Offset())
		if start < 0 || start >= len(w.src) {
			return true
		}
		line := w.src[start:]
		if i := strings.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		if strings.HasSuffix(line, "\\") || strings.HasSuffix(c.Text, "\\") || strings.Contains(c.Text, "\n") {
			w.review(c.Pos(), "has a comment that ends in a backslash; bash ends the comment at the newline and runs the next line, which the parser reads as more of the comment's command")
		}
		return true
	})
}

// hdocWordEnd asks about a here-document's delimiter word followed by
// anything but a blank, a newline or an operator. The parser ends the word
// at a closing quote and reads a # after it as a comment (cat <<'E'#;x);
// for bash the word goes on (its delimiter is E#), and what follows is
// code: the ; ends the command and x runs.
func (w *walker) hdocWordEnd(r *syntax.Redirect) {
	if r.Word == nil || !differentialChecks {
		return
	}
	end := int(r.Word.End().Offset())
	if end < 0 || end >= len(w.src) {
		return
	}
	if strings.IndexByte(" \t\n;&|<>()", w.src[end]) < 0 {
		w.review(r.Pos(), "has a here-document delimiter followed by "+strconv.Quote(w.src[end:end+1])+"; bash reads that as part of the delimiter, and what follows as commands the parser takes for a comment")
	}
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
		w.stop(fmt.Sprintf("has more than %d commands; the rest were not analysed", maxCommands))
		return
	}
	n := 0
	for _, a := range c.Args {
		n += len(a) + 1
	}
	if w.nbytes += n + 16*len(c.Args); w.nbytes > maxBytes {
		w.stop(fmt.Sprintf("has more than %d bytes of arguments in its commands; the rest were not analysed", maxBytes))
		return
	}
	w.a.Commands = append(w.a.Commands, c)
}

// stop ends the collection: the analysis keeps what it has and asks.
func (w *walker) stop(msg string) {
	w.full = true
	w.review(syntax.Pos{}, msg)
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
	// Variables expanded in this statement belong to the command it runs
	// (command takes them); those left, expanded outside any command
	// (x=$TOKEN, for, case, [[ ]]), make a command without a name.
	saved := w.vars
	w.vars = nil
	defer func() {
		if secrets := secretVars(w.vars); len(secrets) > 0 {
			w.emit(Command{Redirects: inherited, Secrets: secrets})
		}
		w.vars = saved
	}()
	first := len(w.a.Commands) // the commands of its substitutions come next
	redirs := inherited
	var own []Redirect
	if len(s.Redirs) > 0 {
		own = w.redirects(s.Redirs)
		w.fixWrites(inherited, own)
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
			c := Command{Redirects: own, Writes: anyWrites(own), Secrets: w.takeSecrets()}
			redirectFiles(&c)
			w.emit(c)
		}
	case !simple && anyWrites(own):
		c := Command{Redirects: own, Writes: true}
		redirectFiles(&c)
		w.emit(c)
	}
	switch c := s.Cmd.(type) {
	case nil:
	case *syntax.CallExpr:
		w.call(c, redirs, s, first)
	case *syntax.BinaryCmd:
		w.binary(c, redirs)
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
		w.forClause(c, redirs)
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
		cmd.Secrets = w.takeSecrets()
		redirectFiles(&cmd)
		w.emit(cmd)
	case *syntax.TimeClause:
		if c.Stmt != nil {
			w.stmt(c.Stmt, redirs)
		}
	case *syntax.CoprocClause:
		if c.Name != nil {
			w.scan(c.Name)
			if msg := assignRisk(c.Name.Lit(), false); msg != "" {
				w.review(c.Pos(), msg)
			}
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

// binary reads a list (&&, ||) or a pipeline. For a pipeline it notes,
// while its right side is read, what feeds the right side's first
// statement: the left side's commands, and whether they print only paths
// inside the working directory.
func (w *walker) binary(c *syntax.BinaryCmd, redirs []Redirect) {
	start := len(w.a.Commands)
	w.stmt(c.X, redirs)
	if c.Op == syntax.Pipe || c.Op == syntax.PipeAll {
		if c.Op == syntax.Pipe && w.printsPathsInside(lastOfPipe(c.X)) {
			w.findFed = firstOfPipe(c.Y)
		}
		savedFed, savedFrom := w.pipeFed, w.pipeFrom
		w.pipeFed, w.pipeFrom = firstOfPipe(c.Y), span{start, len(w.a.Commands)}
		defer func() { w.pipeFed, w.pipeFrom = savedFed, savedFrom }()
	}
	w.stmt(c.Y, redirs)
}

// forClause reads a for loop. While its body is read, a loop variable
// whose values are paths inside the working directory is in pathVars.
func (w *walker) forClause(c *syntax.ForClause, redirs []Redirect) {
	pathVar := ""
	switch l := c.Loop.(type) {
	case *syntax.WordIter:
		if msg := assignRisk(l.Name.Value, false); msg != "" {
			w.review(l.Name.Pos(), msg)
		}
		for _, it := range l.Items {
			w.scan(it)
		}
		if w.itemsArePaths(l.Items) && !setsVar(c.Do, l.Name.Value) && !w.pathVars[l.Name.Value] {
			pathVar = l.Name.Value
		}
	case *syntax.CStyleLoop:
		w.arith(l.Init)
		w.arith(l.Cond)
		w.arith(l.Post)
	}
	if pathVar != "" {
		if w.pathVars == nil {
			w.pathVars = map[string]bool{}
		}
		w.pathVars[pathVar] = true
		defer delete(w.pathVars, pathVar)
	}
	w.stmts(c.Do, redirs)
}

func anyWrites(rs []Redirect) bool {
	return slices.ContainsFunc(rs, func(r Redirect) bool { return r.Writes })
}

// itemsArePaths reports whether a for loop's words are all known, name
// files inside the working directory, and none may be a secret file. The
// variable may be expanded unquoted ($f), which splits its value at white
// space and matches it as a pattern again: an item with white space is
// not taken for a path, and each is checked as a pattern ('.e?v' quoted
// is a name, but $f matches .env).
func (w *walker) itemsArePaths(items []*syntax.Word) bool {
	if len(items) == 0 {
		return false
	}
	var out []word
	for _, it := range items {
		out = w.expandBraces(it, out[:0])
		for _, u := range out {
			if !u.static || strings.ContainsAny(u.val, " \t\n") || outsidePath(u.val, true) != "" || secretPath(u.val, true) {
				return false
			}
		}
	}
	return true
}

// setsVar reports whether the statements may set the variable name: an
// assignment, ${name:=...}, or the name as a word, or the end of an
// option's word, of its own (read name, mapfile name, printf -vname,
// unset name, let name=1, for name in, ...).
func setsVar(list []*syntax.Stmt, name string) bool {
	found := false
	// The name as an identifier anywhere in a word (let "name=1"), or at
	// the end of an option's (printf -vname).
	names := func(v string) bool {
		if strings.HasPrefix(v, "-") && strings.HasSuffix(v, name) {
			return true
		}
		for i := 0; i < len(v); {
			j := i
			for j < len(v) && (v[j] == '_' || 'a' <= v[j] && v[j] <= 'z' || 'A' <= v[j] && v[j] <= 'Z' || '0' <= v[j] && v[j] <= '9') {
				j++
			}
			if v[i:j] == name {
				return true
			}
			i = j + 1
		}
		return false
	}
	var visit func(n syntax.Node) bool
	visit = func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Assign:
			found = found || n.Name != nil && n.Name.Value == name
		case *syntax.Lit:
			found = found || names(n.Value)
		case *syntax.SglQuoted:
			found = found || names(n.Value)
		case *syntax.ParamExp:
			// Its parameter's name is a read, not a word of its own; what
			// it holds may set (a subscript's arithmetic, ${name:=...}).
			found = found || n.Param != nil && n.Param.Value == name && n.Exp != nil &&
				(n.Exp.Op == syntax.AssignUnset || n.Exp.Op == syntax.AssignUnsetOrNull)
			if n.Index != nil {
				syntax.Walk(n.Index, visit)
			}
			if n.NestedParam != nil {
				syntax.Walk(n.NestedParam, visit)
			}
			if n.Slice != nil {
				for _, sub := range []syntax.ArithmExpr{n.Slice.Offset, n.Slice.Length} {
					if sub != nil {
						syntax.Walk(sub, visit)
					}
				}
			}
			if n.Repl != nil {
				for _, sub := range []*syntax.Word{n.Repl.Orig, n.Repl.With} {
					if sub != nil {
						syntax.Walk(sub, visit)
					}
				}
			}
			if n.Exp != nil && n.Exp.Word != nil {
				syntax.Walk(n.Exp.Word, visit)
			}
			return false
		}
		return !found
	}
	for _, s := range list {
		syntax.Walk(s, visit)
		if found {
			return true
		}
	}
	return false
}

// call handles a simple command: assignments, words, and what it runs.
// The commands from first on are those of the statement's substitutions.
func (w *walker) call(c *syntax.CallExpr, redirs []Redirect, s *syntax.Stmt, first int) {
	// IFS for read changes only how read splits the line.
	isRead := len(c.Args) > 0 && c.Args[0].Lit() == "read"
	env, envReview := w.assigns(c.Assigns, len(c.Args) > 0, isRead)
	if len(c.Args) == 0 {
		return
	}
	words := w.words(c.Args)
	mode := launchMode{fromFind: s == w.findFed, subst: span{first, len(w.a.Commands)}}
	if s == w.pipeFed {
		mode.stdin = w.pipeFrom
	}
	w.command(words, env, envReview, redirs, w.via, mode, stdinOf(s))
}

// launchMode says how a command receives arguments and input beyond its
// words.
type launchMode struct {
	extra       bool // xargs adds arguments at run time
	extraInside bool // ...which are paths inside the working directory
	fromFind    bool // its standard input is find's paths inside the working directory
	stdin       span // the commands whose output is its standard input (a pipe)
	subst       span // the commands of its substitutions ($(...), <(...))
}

// span is a range of commands of an analysis, by index: [from, to).
type span struct{ from, to int }

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
func (w *walker) command(words []word, env, envReview []string, redirs []Redirect, via []string, mode launchMode, stdin *syntax.Redirect) {
	if len(words) == 0 || w.full {
		return
	}
	name := words[0]
	cmd := Command{
		Path:        name.val,
		Redirects:   redirs,
		Env:         env,
		Via:         via,
		DynamicArgs: mode.extra,
		Writes:      anyWrites(redirs),
		Review:      envReview,
		Secrets:     w.takeSecrets(),
		stdin:       mode.stdin,
		subst:       mode.subst,
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
	if w.ck == nil {
		w.ck = new(check)
	}
	ck := w.ck
	*ck = check{w: w, cmd: &cmd, args: args, extra: mode.extra, extraInside: mode.extraInside, fromFind: mode.fromFind, stdin: stdin}
	if !cmd.Dynamic {
		if info, ok := known[cmd.Name]; ok {
			if info.options {
				ck.optionSafety()
			}
			info.check(ck)
		}
		ck.files()
	}
	launches := ck.launches
	*ck = check{}
	redirectFiles(&cmd)
	w.emit(cmd)
	if len(launches) > 0 && len(via) >= maxWrappers {
		w.stop(fmt.Sprintf("runs commands through more than %d wrappers; the rest were not analysed", maxWrappers))
		return
	}
	for _, l := range launches {
		inner := append(slices.Clip(via), l.via)
		if l.hasSrc {
			// The string's commands start with the descriptors the
			// command's redirections leave open.
			saved := w.fds
			w.fds = fdState(w.fds, redirs)
			w.nested(l.src, l.variant, inner, l.via)
			w.fds = saved
			continue
		}
		// What a wrapper runs reads the wrapper's input and arguments.
		w.command(l.words, append(slices.Clip(env), l.env...), l.envReview, redirs, inner,
			launchMode{extra: l.extra, extraInside: l.extraInside, stdin: mode.stdin, subst: mode.subst}, nil)
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
