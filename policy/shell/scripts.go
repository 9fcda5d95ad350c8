package shell

import "strings"

// This file models sed, awk and jq: their options, and the scripts and
// filters they run.

// sedScript is what the analysis learns from a sed script.
type sedScript struct {
	risk   string   // why it needs review, or ""
	writes bool     // the risk is a file write
	reads  []string // files it reads (r, R)
}

// sedRisk reads a sed script and says why it needs review: a command or
// flag that runs a program (e) or writes a file (w, W), or anything it does
// not recognise. It also lists the files the script reads (r, R).
func sedRisk(s string) (out sedScript) {
	unreadable := func() sedScript {
		out.risk, out.writes = "has a sed script the analysis cannot read", false
		return out
	}
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case isSedSpace(c) || c == ';' || c == '{' || c == '}':
			i++
			continue
		case c == '#':
			i = skipLine(s, i)
			continue
		}
		var ok bool
		if i, ok = sedAddress(s, i); !ok {
			return unreadable()
		}
		if i < len(s) && s[i] == ',' {
			if i, ok = sedAddress(s, i+1); !ok {
				return unreadable()
			}
		}
		i = skipBlanks(s, i)
		for i < len(s) && s[i] == '!' {
			i = skipBlanks(s, i+1)
		}
		if i >= len(s) {
			break
		}
		cmd := s[i]
		i++
		switch cmd {
		case '{', '}', '=', 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
		case 'q', 'Q', 'l', 'L':
			i = skipBlanks(s, i)
			for i < len(s) && '0' <= s[i] && s[i] <= '9' {
				i++
			}
		case ':', 'b', 't', 'T', 'v':
			// GNU sed ends a label at whitespace or ';' and reads what
			// follows as commands (":a e id" runs id); older versions
			// read to the end of the line. Taking the shorter label reads
			// more as commands, which can only ask more.
			i = skipBlanks(s, i)
			for i < len(s) && !isSedSpace(s[i]) && s[i] != ';' && s[i] != '}' {
				i++
			}
		case 'a', 'i', 'c':
			// Text to the end of the line; a backslash continues it.
			for i < len(s) && s[i] != '\n' {
				if s[i] == '\\' {
					i++
				}
				i++
			}
		case 'r', 'R':
			j := skipLine(s, i)
			out.reads = append(out.reads, strings.TrimLeft(s[i:j], " \t"))
			i = j
		case 'w', 'W':
			out.risk, out.writes = "has a sed command that writes to a file ("+string(cmd)+")", true
			return out
		case 'e':
			out.risk = "has a sed command that runs a shell command (e)"
			return out
		case 's', 'y':
			if i >= len(s) || s[i] == '\\' || s[i] == '\n' {
				return unreadable()
			}
			delim := s[i]
			if i, ok = sedDelimited(s, i+1, delim, cmd == 's'); !ok {
				return unreadable()
			}
			if i, ok = sedDelimited(s, i+1, delim, false); !ok {
				return unreadable()
			}
			i++
			if cmd == 'y' {
				break
			}
		flags:
			for i < len(s) {
				switch f := s[i]; {
				case f == 'g' || f == 'p' || f == 'i' || f == 'I' || f == 'm' || f == 'M' || '0' <= f && f <= '9':
					i++
				case f == 'e':
					out.risk = "has a sed substitution that runs its result as a command (s///e)"
					return out
				case f == 'w':
					out.risk, out.writes = "has a sed substitution that writes to a file (s///w)", true
					return out
				case f == ';' || f == '}' || f == '#' || isSedSpace(f):
					break flags
				default:
					return unreadable()
				}
			}
		default:
			return unreadable()
		}
	}
	return out
}

// isSedSpace reports the characters GNU sed counts as white space.
func isSedSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// sedAddress skips an address: a line number, $, first~step, /regex/ or
// \cregexc, with its I and M flags, or +N and ~N after a comma.
func sedAddress(s string, i int) (int, bool) {
	i = skipBlanks(s, i)
	if i >= len(s) {
		return i, true
	}
	switch c := s[i]; {
	case c == '/' || c == '\\':
		if c == '\\' {
			i++
			if i >= len(s) || s[i] == '\n' {
				return i, false
			}
		}
		var ok bool
		if i, ok = sedDelimited(s, i+1, s[i], true); !ok {
			return i, false
		}
		i++
		for i < len(s) && (s[i] == 'I' || s[i] == 'M') {
			i++
		}
	case c == '$':
		i++
	case '0' <= c && c <= '9' || c == '+' || c == '~':
		i++
		for i < len(s) && ('0' <= s[i] && s[i] <= '9' || s[i] == '~') {
			i++
		}
	}
	return i, true
}

// sedDelimited returns the index of the unescaped delim at or after i.
// In a regular expression (regex), as in GNU sed, a delimiter inside a
// bracket expression does not end it (s/[/]x/.../ has the regex [/]x):
// the bracket ends at the first ] that is not its first character
// (after an optional ^), and [:class:], [.coll.] and [=equiv=] inside it
// end at :], .] and =]. A backslash before the delimiter escapes it
// there too; before anything else it stands for itself. A newline in a
// bracket, or a bracket as the delimiter, is taken as unreadable.
func sedDelimited(s string, i int, delim byte, regex bool) (int, bool) {
	if regex && (delim == '[' || delim == ']') {
		return i, false
	}
	for ; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case delim:
			return i, true
		case '\n':
			return i, false
		case '[':
			if !regex {
				continue
			}
			j, ok := sedBracket(s, i+1, delim)
			if !ok {
				return j, false
			}
			i = j
		}
	}
	return i, false
}

// sedBracket returns the index of the ] that ends a bracket expression
// whose content starts at i.
func sedBracket(s string, i int, delim byte) (int, bool) {
	if i < len(s) && s[i] == '^' {
		i++
	}
	if i < len(s) && s[i] == ']' {
		i++
	}
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == ']':
			return i, true
		case c == '\n':
			return i, false
		case c == '\\' && i+1 < len(s) && s[i+1] == delim:
			i++
		case c == '[' && i+1 < len(s) && (s[i+1] == ':' || s[i+1] == '.' || s[i+1] == '='):
			end := strings.Index(s[i+2:], string(s[i+1])+"]")
			if end < 0 || strings.IndexByte(s[i+2:i+2+end], '\n') >= 0 {
				return len(s), false
			}
			i += 2 + end + 1
		}
	}
	return i, false
}

func skipBlanks(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

func skipLine(s string, i int) int {
	if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
		return i + j
	}
	return len(s)
}

// awkProgram is what the analysis learns from an awk program.
type awkProgram struct {
	risk    string // why it needs review, or ""
	environ bool   // it reads the environment (ENVIRON)
}

// awkRisk reads an awk program and says why it needs review: it calls
// system(), pipes to or from a command, redirects print output to a file,
// reads a file named in the program (getline <), changes the files awk
// reads (ARGV), names gawk's network files (/inet), or loads code. It also
// notes a program that reads the environment.
//
// A print, printf or getline statement is followed to its end, where its
// redirection would be: a ';', '{', '}' or newline outside strings,
// regular expression literals and comments, and a newline only where a
// statement can end (not after ',', '&&', '||', '\\', an operator or an
// open parenthesis, which continue it). Strings, regular expressions and
// comments are tracked only for that: everything else is looked for
// inside them too, so that tracking thrown off (a '/' taken for the start
// of a regular expression) can only make the analysis ask more.
func awkRisk(p string) (out awkProgram) {
	if strings.Contains(p, "/inet") {
		out.risk = "names gawk's network files (/inet...), which open network connections"
		return out
	}
	inPrint, inGetline := false, false
	inStr, inRegex, inBracket, inComment, esc := false, false, false, false, false
	// last is the last character outside strings, regular expressions
	// and comments that is not white space ('"' and '/' for the end of a
	// string or regular expression), and word the last name.
	last, word := byte(0), ""
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case esc:
			esc = false
		case inComment:
			inComment = c != '\n'
		case inStr:
			switch c {
			case '\\':
				esc = true
			case '"':
				inStr, last = false, '"'
			}
		case inRegex:
			switch {
			case c == '\\':
				esc = true
			case inBracket:
				inBracket = c != ']'
			case c == '[':
				inBracket = true
			case c == '/':
				inRegex, last = false, '/'
			}
		case c == '"':
			inStr = true
		case c == '#':
			inComment = true
		case c == '/' && !awkOperand(last, word):
			inRegex = true
		}
		code := !inStr && !inRegex && !inComment && !esc
		switch {
		case c == '|':
			if i+1 < len(p) && p[i+1] == '|' {
				i++
				if code {
					last = '|'
				}
				continue
			}
			out.risk = "has an awk pipe to or from a command (|)"
			return out
		case c == '@':
			out.risk = "has an awk indirect call or directive (@), which can load code or call system()"
			return out
		case c == '>' && inPrint:
			out.risk = "has awk output redirected to a file (>)"
			return out
		case c == '<' && inGetline:
			out.risk = "has an awk getline from a file named in the program (<), which can be any file or a network connection"
			return out
		case c == '\n' && code:
			if awkEnds(last) {
				inPrint, inGetline = false, false
			}
		case (c == ';' || c == '{' || c == '}') && code:
			inPrint, inGetline = false, false
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			j := i
			for j < len(p) && (p[j] == '_' || 'a' <= p[j] && p[j] <= 'z' || 'A' <= p[j] && p[j] <= 'Z' || '0' <= p[j] && p[j] <= '9') {
				j++
			}
			switch p[i:j] {
			case "system":
				out.risk = "has an awk call of system(), which runs a command"
				return out
			case "print", "printf":
				inPrint = true
			case "getline":
				inGetline = true
			case "ARGV":
				out.risk = "changes or reads ARGV, the list of files awk reads, which can name any file or a network connection"
				return out
			case "SYMTAB":
				out.risk = "uses gawk's SYMTAB, which reaches any variable indirectly"
				return out
			case "ENVIRON":
				out.environ = true
			}
			if code {
				last, word = p[j-1], p[i:j]
			}
			i = j - 1
			continue
		}
		if code && !isSedSpace(c) && c != '"' && c != '/' {
			last, word = c, ""
		}
	}
	return out
}

// awkOperand reports whether a '/' after last (and the name word, when
// last ends one) divides: it follows an operand. Otherwise it starts a
// regular expression literal.
func awkOperand(last byte, word string) bool {
	switch {
	case word != "":
		switch word {
		case "print", "printf", "return", "in", "case", "do", "else", "getline":
			return false
		}
		return true
	case '0' <= last && last <= '9', last == ')', last == ']', last == '$', last == '.':
		return true
	}
	return false
}

// awkEnds reports whether an awk statement can end at a newline after
// last; after ',', '&&', '||', a backslash, an operator or an open
// parenthesis it goes on.
func awkEnds(last byte) bool {
	switch {
	case last == 0, last == '_', 'a' <= last && last <= 'z', 'A' <= last && last <= 'Z', '0' <= last && last <= '9':
		return true
	}
	return strings.IndexByte("\")];{}/", last) >= 0
}

// jqFilter is what the analysis learns from a jq filter.
type jqFilter struct {
	environ bool // it reads the environment (env, $ENV)
	modules bool // it loads modules or data files (import, include)
}

// jqRisk reads a jq filter for the builtins that reach past its input:
// env and $ENV, and the directives that load files. Names are looked for
// inside strings and comments too ("\(env.X)" interpolates); only a field
// (.env, right after the dot) and the variable $env are not the builtin:
// jq allows white space and comments between $ and a name, so "$ ENV"
// and "$#\nENV" are $ENV.
func jqRisk(f string) (out jqFilter) {
	for i := 0; i < len(f); i++ {
		c := f[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			continue
		}
		j := i
		for j < len(f) && (f[j] == '_' || 'a' <= f[j] && f[j] <= 'z' || 'A' <= f[j] && f[j] <= 'Z' || '0' <= f[j] && f[j] <= '9') {
			j++
		}
		prev := byte(0)
		if i > 0 {
			prev = f[i-1]
		}
		switch name := f[i:j]; {
		case (name == "ENV" || name == "env") && prev != '.' && !(name == "env" && prev == '$'),
			(name == "ENV" || name == "env") && i > 1 && f[i-2] == '.':
			out.environ = true
		case name == "import" || name == "include" || name == "modulemeta":
			out.modules = true
		}
		i = j - 1
	}
	return out
}

func checkSed(c *check) {
	spec := optSpec{shortVal: "efl", shortOptVal: "i", longVal: []string{"--expression", "--file", "--line-length"}}
	opts, operands, _ := spec.parse(c.args)
	sedModel.unknown(c, opts)
	var scripts []string
	sandbox, given := false, false
	for _, o := range opts {
		switch {
		case o.is('i', "--in-place"):
			c.writes("edits files in place (" + o.name + ")")
		case o.is('e', "--expression"):
			scripts = append(scripts, o.val)
			given = true
		case o.is('f', "--file"):
			given = true
			c.review("reads its script from the file " + o.val + ", which the analysis cannot read")
			c.file(o.value(), false)
		case o.is(0, "--sandbox"):
			sandbox = true
		}
	}
	if !given && len(operands) > 0 {
		c.scriptWord(operands[0])
		scripts = append(scripts, operands[0].val)
		operands = operands[1:]
	}
	for _, op := range operands {
		c.file(op, false)
	}
	for _, s := range scripts {
		r := sedRisk(s)
		for _, f := range r.reads {
			c.file(word{val: f, static: true}, false)
		}
		if sandbox || r.risk == "" {
			continue // sed --sandbox refuses e, r and w
		}
		if r.writes {
			c.cmd.Writes = true
		}
		c.review(r.risk)
	}
}

// What an awk option does, for the options of gawk (long, or after -W)
// and mawk (after -W).
const (
	awkFlag    = iota // changes nothing that matters here
	awkValue          // takes a value that is neither a file nor code
	awkSandbox        // gawk's sandbox
	awkWrite          // writes a file, named by an optional value
	awkDebug          // reads debugger commands
	awkFile           // takes a file of program text, or a library
	awkSource         // takes program text
)

var awkLongs = map[string]int{}

func init() {
	for kind, names := range map[int][]string{
		awkValue: {"assign", "field-separator", "sprintf", "random"},
		awkFlag: {"lint", "characters-as-bytes", "traditional", "copyright", "gen-pot", "help", "trace", "bignum",
			"use-lc-numeric", "non-decimal-data", "optimize", "no-optimize", "posix", "re-interval", "lint-old", "version",
			"csv", "usage", "interactive", "posix_space"},
		awkSandbox: {"sandbox"},
		awkWrite:   {"dump-variables", "profile", "pretty-print"},
		awkDebug:   {"debug"},
		awkFile:    {"file", "exec", "include", "load"},
		awkSource:  {"source"},
	} {
		for _, n := range names {
			awkLongs[n] = kind
		}
	}
}

// awkLong resolves a long option name, which gawk and mawk accept
// abbreviated: an exact name, or the riskiest of the names it may
// abbreviate. ok is false for a name the analysis does not know.
func awkLong(name string) (kind int, full string, ok bool) {
	if k, exact := awkLongs[name]; exact {
		return k, name, true
	}
	kind = -1
	for n, k := range awkLongs {
		if name != "" && strings.HasPrefix(n, name) && (k > kind || k == kind && n < full) {
			kind, full = k, n
		}
	}
	if kind == awkSandbox {
		kind = awkFlag // an abbreviation may not be what the program reads
	}
	return kind, full, kind >= 0
}

func checkAwk(c *check) {
	args := c.args
	var progs []string
	var operands []word
	given, sandbox := false, false
	// long handles one long option (--name[=value], -W name[=value]);
	// next returns its value when it is not attached.
	long := func(spelled, name string, val word, has bool, next func() (word, bool)) {
		kind, full, ok := awkLong(name)
		if !ok {
			c.review("has an awk option the analysis does not know (" + spelled + ")")
			return
		}
		if !has && kind >= awkFile || !has && kind == awkValue {
			val, has = next()
		}
		switch kind {
		case awkSandbox:
			sandbox = sandbox || c.cmd.Name == "gawk" && full == "sandbox" && name == "sandbox"
		case awkWrite:
			c.writes("writes a file (" + spelled + ")")
		case awkDebug:
			c.review("starts the debugger, which reads commands (" + spelled + ")")
		case awkFile:
			given = true
			c.review("reads program text or a library from a file the analysis cannot read (" + spelled + ")")
			if has {
				c.file(val, false)
			}
		case awkSource:
			given = true
			if !val.static {
				c.review("has an awk program only known at run time (" + spelled + ")")
			}
			progs = append(progs, val.val)
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() (word, bool) {
			if i+1 < len(args) {
				i++
				return args[i], true
			}
			return word{}, false
		}
		v := a.val
		switch {
		case !a.static || len(v) < 2 || v[0] != '-':
			operands = append(operands, a) // a computed one is reviewed by optionSafety
			continue
		case v == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
			continue
		case strings.HasPrefix(v, "--"):
			name, val, has := strings.Cut(v[2:], "=")
			long(v, name, word{val: val, static: true}, has, next)
			continue
		}
		for j := 1; j < len(v); j++ {
			ch := v[j]
			var val word
			has := false
			if strings.IndexByte("fFveEilW", ch) >= 0 || strings.IndexByte("dDLop", ch) >= 0 && j+1 < len(v) {
				if j+1 < len(v) {
					val, has = word{val: v[j+1:], static: true, glob: a.glob}, true
				} else if strings.IndexByte("fFveEilW", ch) >= 0 {
					val, has = next()
				}
				j = len(v)
			}
			switch ch {
			case 'W':
				name, wval, weq := strings.Cut(val.val, "=")
				if !val.static {
					c.review("has an awk -W option only known at run time")
					continue
				}
				long("-W "+val.val, name, word{val: wval, static: true}, weq, next)
			case 'f', 'E', 'i':
				given = true
				c.review("reads its program from a file the analysis cannot read (-" + string(ch) + ")")
				if has {
					c.file(val, false)
				}
			case 'l':
				c.review("loads a compiled extension (-l)")
			case 'e':
				given = true
				if !val.static {
					c.review("has an awk program only known at run time (-e)")
				}
				progs = append(progs, val.val)
			case 'd', 'o', 'p':
				c.writes("writes a file (-" + string(ch) + ")")
			case 'D':
				c.review("starts the debugger, which reads commands (-D)")
			case 'S':
				sandbox = sandbox || c.cmd.Name == "gawk"
			}
		}
	}
	if !given && len(operands) > 0 {
		c.scriptWord(operands[0])
		progs = append(progs, operands[0].val)
		operands = operands[1:]
	}
	for _, op := range operands {
		if op.static {
			if name, _, ok := strings.Cut(op.val, "="); ok && validName(name) {
				continue // an assignment, not a file
			}
		}
		c.file(op, false)
	}
	for _, p := range progs {
		r := awkRisk(p)
		if r.environ {
			c.secret("the environment (awk ENVIRON)")
		}
		// gawk --sandbox refuses system(), pipes, redirections, and new
		// files in ARGV. Other awks ignore or refuse the option, so only
		// gawk by that name is trusted with it.
		if r.risk != "" && !sandbox {
			c.review(r.risk)
		}
	}
}

// jq's options: flags, and the long options that take one or two
// values. jq matches long options exactly and accepts short flags
// bundled (-nr); -L may have its directory attached.
var (
	jqShortFlags = "cnesrjaSCMRhVb"
	jqLongFlags  = map[string]bool{
		"--tab": true, "--unbuffered": true, "--stream": true, "--stream-errors": true, "--seq": true,
		"--exit-status": true, "--ascii-output": true, "--join-output": true, "--raw-output": true,
		"--raw-output0": true, "--compact-output": true, "--null-input": true, "--raw-input": true,
		"--slurp": true, "--sort-keys": true, "--color-output": true, "--monochrome-output": true,
		"--binary": true, "--help": true, "--version": true, "--build-configuration": true,
		"--debug-dump-disasm": true, "--debug-trace": true, "--debug-trace=all": true,
	}
	// jqLongValues: how many words follow, and which of them (1-based)
	// names a file.
	jqLongValues = map[string][2]int{
		"--arg": {2, 0}, "--argjson": {2, 0}, "--slurpfile": {2, 2}, "--rawfile": {2, 2}, "--argfile": {2, 2},
		"--indent": {1, 0}, "--library-path": {1, 1},
	}
)

// checkJqFiles reads jq's arguments: the filter, the files it reads, and
// the options whose values are files (--slurpfile, --rawfile, --argfile,
// -L). An option it does not know is asked: it may take values, or read
// a program.
func checkJqFiles(c *check) {
	args := c.args
	fromFile, positional := false, false
	var operands []word
	operand := func(a word) {
		if positional && len(operands) > 0 {
			return // a string for $ARGS, not a file (the filter comes first)
		}
		operands = append(operands, a)
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.static || a.val == "-" || !strings.HasPrefix(a.val, "-") {
			operand(a)
			continue
		}
		if n, ok := jqLongValues[a.val]; ok {
			if f := n[1]; f > 0 && i+f < len(args) {
				c.file(args[i+f], false)
			}
			i += n[0]
			continue
		}
		switch {
		case a.val == "--":
			for _, op := range args[i+1:] {
				operand(op)
			}
			i = len(args)
		case a.val == "--from-file":
			fromFile = true
		case a.val == "--args" || a.val == "--jsonargs":
			positional = true
		case a.val == "--run-tests":
			c.review("runs the jq programs in its test file or standard input, which the analysis cannot read (--run-tests)")
		case jqLongFlags[a.val]:
		case strings.HasPrefix(a.val, "--"):
			c.review("has a jq option the analysis does not know (" + a.val + ")")
		default:
			for j := 1; j < len(a.val); j++ {
				switch ch := a.val[j]; {
				case ch == 'f':
					fromFile = true
				case ch == 'L':
					if j+1 < len(a.val) {
						c.file(word{val: a.val[j+1:], static: true, glob: a.glob}, false)
					} else if i+1 < len(args) {
						c.file(args[i+1], false)
						i++
					}
					j = len(a.val)
				case strings.IndexByte(jqShortFlags, ch) < 0:
					c.review("has a jq option the analysis does not know (-" + string(ch) + ")")
				}
			}
		}
	}
	if len(operands) == 0 {
		return
	}
	filter := operands[0]
	if !fromFile {
		c.scriptWord(filter)
	}
	switch {
	case fromFile:
		c.file(filter, false)
		c.secret("a jq filter read from " + filter.val + ", which may read the environment")
	case !filter.static:
		c.secret("a jq filter only known at run time, which may read the environment")
	default:
		f := jqRisk(filter.val)
		if f.environ {
			c.secret("the environment (jq env, $ENV)")
		}
		if f.modules {
			c.unknown("loads jq modules or data files from its search path (import, include)")
		}
	}
	for _, op := range operands[1:] {
		c.file(op, false)
	}
}

// scriptWord reviews a script, program or filter given as an operand
// that the shell or find replaces by file names at run time: a pattern,
// or find -exec's {}. The file's name would be the program.
func (c *check) scriptWord(w word) {
	fromFind := len(c.cmd.Via) > 0 && strings.HasPrefix(c.cmd.Via[len(c.cmd.Via)-1], "find -")
	if w.glob || w.multi || fromFind && strings.Contains(w.val, "{}") {
		c.review("takes its program from a word that becomes a file name at run time (" + w.val + ")")
	}
}
