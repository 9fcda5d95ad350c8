package shell

import (
	"fmt"
	"path"
	"slices"
	"strconv"
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

// assigns checks variable assignments. prefix is set when they apply to
// one command (NAME=x cmd) rather than to the shell; forRead when that
// command is read, for which IFS is harmless.
func (w *walker) assigns(list []*syntax.Assign, prefix, forRead bool) (env, review []string) {
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
		if msg := assignRisk(name, prefix); msg != "" && !(forRead && name == "IFS") {
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
				// declare, local, export or readonly of PATH without a
				// value can still change it (local makes it empty, -x
				// exports, -i changes how values are read).
				if msg := assignRisk(v.val, false); msg != "" {
					cmd.Review = append(cmd.Review, c.Variant.Value+" "+v.val+" changes a variable that can change what later commands run")
				}
			}
		case as.Name != nil:
			env, _ := w.assigns([]*syntax.Assign{as}, false, false)
			cmd.Args = append(cmd.Args, env...)
		}
	}
	cmd.Secrets = w.takeSecrets()
	redirectFiles(&cmd)
	w.emit(cmd)
}

// takeSecrets returns the variables expanded so far that may hold
// secrets, and starts collecting afresh.
func (w *walker) takeSecrets() []string {
	s := secretVars(w.vars)
	w.vars = w.vars[:0]
	return s
}

// secretVars returns, as $NAME, the variables of names that may hold
// secrets.
func secretVars(names []string) []string {
	var out []string
	for _, n := range names {
		if isSecretVar(n) && !slices.Contains(out, "$"+n) {
			out = append(out, "$"+n)
		}
	}
	return out
}

// harmlessVars are variables in capitals that hold no secrets.
var harmlessVars = map[string]bool{
	"HOME": true, "PWD": true, "OLDPWD": true, "USER": true, "LOGNAME": true, "SHELL": true, "PATH": true,
	"LANG": true, "LANGUAGE": true, "TERM": true, "TZ": true, "HOSTNAME": true, "HOSTTYPE": true, "OSTYPE": true,
	"MACHTYPE": true, "UID": true, "EUID": true, "PPID": true, "GROUPS": true, "RANDOM": true, "SRANDOM": true,
	"SECONDS": true, "LINENO": true, "BASHPID": true, "BASH": true, "BASH_VERSION": true, "BASH_VERSINFO": true,
	"BASH_SOURCE": true, "BASH_LINENO": true, "BASH_SUBSHELL": true, "FUNCNAME": true, "SHLVL": true,
	"TMPDIR": true, "EDITOR": true, "VISUAL": true, "COLUMNS": true, "LINES": true, "IFS": true, "OPTIND": true,
	"OPTARG": true, "REPLY": true, "PIPESTATUS": true, "EPOCHSECONDS": true, "EPOCHREALTIME": true,
	"MAPFILE": true, "DISPLAY": true, "COLORTERM": true, "TERM_PROGRAM": true, "NO_COLOR": true,
	"GOPATH": true, "GOROOT": true, "GOOS": true, "GOARCH": true, "GOBIN": true, "VIRTUAL_ENV": true,
	"CI": true, "HISTFILE": true, "HISTSIZE": true, "PS1": true, "PS2": true, "PS4": true, "_": true,
}

// secretWords are parts of variable names that suggest a secret.
var secretWords = []string{"key", "token", "secret", "passw", "passphrase", "pwd", "cred", "auth", "private",
	"session", "cookie", "signature", "dsn", "apikey"}

// isSecretVar reports whether a variable may hold a secret: its name has
// a word such as KEY, TOKEN or PASSWORD in it, or it is written in
// capitals, as environment variables are, and is not known to be
// harmless. Special and positional parameters are not.
func isSecretVar(name string) bool {
	if !validName(name) || harmlessVars[name] || strings.HasPrefix(name, "LC_") || strings.HasPrefix(name, "XDG_") {
		return false
	}
	lower := strings.ToLower(name)
	if strings.HasSuffix(lower, "_proxy") && lower != "no_proxy" {
		return true // http_proxy=http://user:password@host
	}
	for _, s := range secretWords {
		if strings.Contains(lower, s) {
			return true
		}
	}
	return !strings.ContainsFunc(name, func(r rune) bool { return 'a' <= r && r <= 'z' })
}

// lastOfPipe and firstOfPipe return the statement at either end of a
// pipeline.
func lastOfPipe(s *syntax.Stmt) *syntax.Stmt {
	for {
		b, ok := s.Cmd.(*syntax.BinaryCmd)
		if !ok || b.Op != syntax.Pipe {
			return s
		}
		s = b.Y
	}
}

func firstOfPipe(s *syntax.Stmt) *syntax.Stmt {
	for {
		b, ok := s.Cmd.(*syntax.BinaryCmd)
		if !ok || b.Op != syntax.Pipe {
			return s
		}
		s = b.X
	}
}

// printsPathsInside reports whether a statement prints only paths of
// files inside the working directory, none chosen by a pattern that may
// match a secret file's name: xargs reading its output, or a command
// given its output ($(...)), receives paths inside it. (Their names are
// trusted, like symbolic links: without -print0 or -z and xargs -0, a name
// with a blank or newline splits into words.) The statement is a find
// (findPrintsInside) or a git ls-files (gitListsInside), with no
// assignment and no redirection but of errors to /dev/null.
func (w *walker) printsPathsInside(s *syntax.Stmt) bool {
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Assigns) > 0 || len(call.Args) == 0 || s.Negated || s.Background || s.Coprocess {
		return false
	}
	for _, r := range s.Redirs {
		// Only errors may go elsewhere, and not into the pipe.
		if r.N == nil || r.N.Value != "2" || r.Op != syntax.RdrOut || r.Word == nil || r.Word.Lit() != "/dev/null" {
			return false
		}
	}
	var args []word
	for _, x := range call.Args {
		u := w.unquote(x)
		if !u.static || hasBrace(x) {
			return false
		}
		args = append(args, u)
	}
	switch normalizeName(args[0].val) {
	case "find":
		return findPrintsInside(args[1:])
	case "git":
		return gitListsInside(args[1:])
	}
	return false
}

// findPrintsInside reports whether find with these arguments prints only
// the paths it finds (-print or -print0, nothing else on its standard
// output), from starting points inside the working directory.
func findPrintsInside(args []word) bool {
	expr := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case !expr && (a.val == "-H" || a.val == "-L" || a.val == "-P" || strings.HasPrefix(a.val, "-O")):
		case !expr && !strings.HasPrefix(a.val, "-") && a.val != "(" && a.val != "!" && a.val != ")":
			if outsideWord(a) != "" {
				return false
			}
		default:
			expr = true
			switch a.val {
			case "-exec", "-execdir", "-ok", "-okdir", "-printf", "-fprintf", "-fprint", "-fprint0", "-ls", "-fls",
				"-files0-from", "-delete", "-f", "-D", "-help", "--help", "-version", "--version":
				return false // prints other things, or takes paths from elsewhere
			}
		}
	}
	// Paths a pattern chooses that may be secret files are not trusted
	// as xargs's input: what xargs runs would read them.
	return len(findSecretPatterns(args)) == 0
}

// gitLsFilesOptions are the git ls-files options after which it prints
// only paths, relative to the working directory. Not -i (--ignored): it
// chooses the files git is told to ignore, where secrets are kept (.env).
var gitLsFilesOptions = map[string]bool{
	"-c": true, "--cached": true, "-d": true, "--deleted": true, "-m": true, "--modified": true, "-o": true,
	"--others": true, "-k": true, "--killed": true, "--exclude-standard": true,
	"-z": true, "--directory": true, "--no-empty-directory": true, "--error-unmatch": true, "--deduplicate": true,
	"--recurse-submodules": true, "--sparse": true, "--full-name": true, "--": true,
}

// gitListsInside reports whether git with these arguments is a git
// ls-files that prints only paths of files inside the working directory:
// none of git's options before it but those that change nothing of that,
// only the options that print paths alone (not -s, -t, --format, ...),
// and pathspecs that stay inside, none a pattern that may match a secret
// file's name (git ls-files '*.pem').
func gitListsInside(args []word) bool {
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i].val, "-"); i++ {
		switch args[i].val {
		case "-P", "--no-pager", "--no-optional-locks", "--no-replace-objects", "--no-lazy-fetch", "--no-advice",
			"--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs":
		default:
			return false
		}
	}
	if i >= len(args) || args[i].val != "ls-files" {
		return false
	}
	for _, a := range args[i+1:] {
		switch {
		case gitLsFilesOptions[a.val]:
		case strings.HasPrefix(a.val, "--exclude=") || strings.HasPrefix(a.val, "-x") && len(a.val) > 2:
			// A pattern of names left out: fewer paths.
		case strings.HasPrefix(a.val, "-"):
			return false
		case strings.HasPrefix(a.val, ":") || outsidePath(a.val, true) != "" || secretPath(a.val, true):
			return false // pathspec magic (:/ is the top), outside, or secret
		}
	}
	return true
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
			w.hdocWordEnd(r)
			// An unquoted here-document expands $(...) in its body.
			if r.Hdoc != nil {
				w.scan(r.Hdoc)
			}
		case syntax.WordHdoc:
			if r.Word != nil {
				w.scan(r.Word)
				rd.Target = w.unquote(r.Word).val
			}
		default:
			if r.Word != nil {
				w.scan(r.Word)
				t := w.unquote(r.Word)
				// Bash expands braces in a redirection's word too:
				// < {/dev/tcp/host/80,} opens a connection. A process
				// substitution (< <(cmd)) is a pipe.
				rd.Target, rd.Dynamic, rd.pipe = t.val, !t.static && !t.procSubst || t.glob || hasBrace(r.Word), t.procSubst
				switch {
				case strings.HasPrefix(rd.Target, "/dev/tcp/") || strings.HasPrefix(rd.Target, "/dev/udp/"):
					w.review(r.Pos(), "opens a network connection ("+rd.Target+")")
				case rd.Dynamic && mayBeNetwork(literalPrefix(r.Word)):
					w.review(r.Pos(), "redirects to or from a file named at run time, which can be a network connection (/dev/tcp/...): "+rd.Target)
				}
			}
		}
		rd.Writes = redirectWrites(rd)
		out = append(out, rd)
	}
	return out
}

// hasBrace reports an unquoted { in a word, where brace expansion may
// start.
func hasBrace(x *syntax.Word) bool {
	for _, p := range x.Parts {
		if lit, ok := p.(*syntax.Lit); ok && strings.Contains(lit.Value, "{") {
			return true
		}
	}
	return false
}

// literalPrefix returns the text of a word up to its first expansion:
// a parameter, a substitution, a pattern character, a brace, or a
// leading tilde.
func literalPrefix(x *syntax.Word) string {
	var b strings.Builder
	for i, p := range x.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			v := p.Value
			if i == 0 && strings.HasPrefix(v, "~") {
				return ""
			}
			for j := 0; j < len(v); j++ {
				c := v[j]
				switch {
				case c == '\\' && j+1 < len(v):
					j++
					b.WriteByte(v[j])
				case c == '*' || c == '?' || c == '[' || c == '{':
					return b.String()
				default:
					b.WriteByte(c)
				}
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				return b.String()
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return b.String()
				}
				unescapeDouble(&b, lit.Value)
			}
		default:
			return b.String()
		}
	}
	return b.String()
}

// mayBeNetwork reports whether a file name that starts with prefix and
// goes on with something computed may be one of bash's network names.
func mayBeNetwork(prefix string) bool {
	for _, n := range []string{"/dev/tcp/", "/dev/udp/"} {
		if strings.HasPrefix(n, prefix) || strings.HasPrefix(prefix, n) {
			return true
		}
	}
	return false
}

// redirectWrites reports whether r writes to a file when no descriptor
// is open on one; stmt sets Writes again once it knows which are.
func redirectWrites(r Redirect) bool {
	var none fdFiles
	return none.apply(r)
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
		n := len(out)
		out = w.expandBraces(x, out)
		w.nwords += len(out) - n
		for _, y := range out[n:] {
			w.nbytes += len(y.val)
		}
		if w.nwords > maxWords || w.nbytes > maxBytes {
			w.stop(fmt.Sprintf("has more than %d words or %d bytes after brace expansion; the rest were not analysed", maxWords, maxBytes))
			break
		}
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
		switch p := x.Parts[0].(type) {
		case *syntax.Lit:
			if !strings.ContainsAny(p.Value, `\*?[`) {
				return word{val: p.Value, static: true}
			}
		case *syntax.ProcSubst:
			return word{val: w.text(x), procSubst: true}
		}
	}
	if len(w.pathVars) > 0 {
		if u, ok := w.pathWord(x); ok {
			return u
		}
	}
	if u, ok := w.listedPaths(x); ok {
		return u
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

// pathWord reads a word made of the loop variables in pathVars ($f,
// "${f}") and plain text: its value is only known at run time, but it
// names a file inside the working directory when it does for any value of
// theirs: with "." in their place it does not climb out, and with * in
// their place it may not be a secret.
func (w *walker) pathWord(x *syntax.Word) (word, bool) {
	var dot, star strings.Builder
	vars, lits := 0, 0
	var add func(parts []syntax.WordPart) bool
	add = func(parts []syntax.WordPart) bool {
		for _, p := range parts {
			switch p := p.(type) {
			case *syntax.Lit:
				if strings.ContainsAny(p.Value, "\\*?[{~") {
					return false
				}
				lits++
				dot.WriteString(p.Value)
				star.WriteString(p.Value)
			case *syntax.SglQuoted:
				if p.Dollar || strings.ContainsAny(p.Value, "*?[") {
					return false
				}
				lits++
				dot.WriteString(p.Value)
				star.WriteString(p.Value)
			case *syntax.DblQuoted:
				if !add(p.Parts) {
					return false
				}
			case *syntax.ParamExp:
				if p.Param == nil || !w.pathVars[p.Param.Value] || p.Excl || p.Length || p.Width || p.Index != nil ||
					p.Slice != nil || p.Repl != nil || p.Exp != nil || p.Names != 0 || p.Flags != nil || p.NestedParam != nil {
					return false
				}
				vars++
				dot.WriteString(".")
				star.WriteString("*")
			default:
				return false
			}
		}
		return true
	}
	if !add(x.Parts) || vars == 0 {
		return word{}, false
	}
	inside := vars == 1 && lits == 0 || outsidePath(dot.String(), false) == "" && !secretPath(star.String(), true)
	return word{val: w.text(x), inside: inside}, true
}

// listedPaths reads a word that is one command substitution of a command
// that prints only paths inside the working directory, none chosen by a
// secret pattern ($(git ls-files '*.go'), "$(find . -name '*.md')"): its
// value is only known at run time, but it names files inside it.
// Unquoted, it stands for several words.
func (w *walker) listedPaths(x *syntax.Word) (word, bool) {
	parts, quoted := x.Parts, false
	if len(parts) == 1 {
		if dq, ok := parts[0].(*syntax.DblQuoted); ok {
			parts, quoted = dq.Parts, true
		}
	}
	if len(parts) != 1 {
		return word{}, false
	}
	cs, ok := parts[0].(*syntax.CmdSubst)
	if !ok || len(cs.Stmts) != 1 || !w.printsPathsInside(cs.Stmts[0]) {
		return word{}, false
	}
	return word{val: w.text(x), inside: true, multi: !quoted}, true
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
			if n.Backquotes {
				w.backquotes(n)
			}
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

// backquotes checks that bash ends a backquoted substitution where the
// parser does. Bash ends it at the first backquote not escaped by a
// backslash, inside what looks like quotes, a comment or a quoted
// here-document too; the parser honours those, so it may read on, and
// take a command that runs outside the substitution for text inside it.
func (w *walker) backquotes(n *syntax.CmdSubst) {
	l, r := int(n.Left.Offset()), int(n.Right.Offset())
	if !n.Left.IsValid() || !n.Right.IsValid() || r > len(w.src) || l >= r || w.src[l] != '`' {
		return
	}
	if k := strings.LastIndexFunc(w.src[:l], func(r rune) bool { return r != '\\' }); (l-k-1)%2 == 1 {
		return // an escaped one inside another (\`...\`) is read with it
	}
	i := l + 1
	for i < r && w.src[i] != '`' {
		if w.src[i] == '\\' {
			i++
		}
		i++
	}
	if i != r {
		w.review(n.Pos(), "has a backquoted substitution that bash ends earlier, at the first unescaped backquote, than it appears to end")
	}
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
	if p.Param != nil && len(w.vars) < maxVars {
		w.vars = append(w.vars, p.Param.Value)
	}
	if p.Exp != nil && (p.Exp.Op == syntax.AssignUnset || p.Exp.Op == syntax.AssignUnsetOrNull) && p.Param != nil {
		if msg := assignRisk(p.Param.Value, false); msg != "" {
			w.review(p.Pos(), msg)
		}
	}
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
