package shell

import "strings"

// This file models awk: its options, and the programs it runs.

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
	aw := &awkArgs{c: c}
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
			aw.operands = append(aw.operands, a) // a computed one is reviewed by optionSafety
			continue
		case v == "--":
			aw.operands = append(aw.operands, args[i+1:]...)
			i = len(args)
			continue
		case strings.HasPrefix(v, "--"):
			name, val, has := strings.Cut(v[2:], "=")
			aw.long(v, name, word{val: val, static: true}, has, next)
			continue
		}
		aw.shorts(a, next)
	}
	progs, operands := aw.progs, aw.operands
	if !aw.given && len(operands) > 0 {
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
		if r.risk != "" && !aw.sandbox {
			c.review(r.risk)
		}
	}
}

// awkArgs is what checkAwk learns from awk's options: the programs they
// give, the operands, whether an option gives the program (else it is the
// first operand), and whether gawk runs sandboxed.
type awkArgs struct {
	c        *check
	progs    []string
	operands []word
	given    bool
	sandbox  bool
}

// long handles one long option (--name[=value], -W name[=value]); next
// returns its value when it is not attached.
func (aw *awkArgs) long(spelled, name string, val word, has bool, next func() (word, bool)) {
	c := aw.c
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
		aw.sandbox = aw.sandbox || c.cmd.Name == "gawk" && full == "sandbox" && name == "sandbox"
	case awkWrite:
		c.writes("writes a file (" + spelled + ")")
	case awkDebug:
		c.review("starts the debugger, which reads commands (" + spelled + ")")
	case awkFile:
		aw.given = true
		c.review("reads program text or a library from a file the analysis cannot read (" + spelled + ")")
		if has {
			c.file(val, false)
		}
	case awkSource:
		aw.given = true
		if !val.static {
			c.review("has an awk program only known at run time (" + spelled + ")")
		}
		aw.progs = append(aw.progs, val.val)
	}
}

// shorts handles a cluster of short options (-f prog, -vname=x, -W ...);
// next returns an option's value when it is not attached.
func (aw *awkArgs) shorts(a word, next func() (word, bool)) {
	c, v := aw.c, a.val
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
			aw.long("-W "+val.val, name, word{val: wval, static: true}, weq, next)
		case 'f', 'E', 'i':
			aw.given = true
			c.review("reads its program from a file the analysis cannot read (-" + string(ch) + ")")
			if has {
				c.file(val, false)
			}
		case 'l':
			c.review("loads a compiled extension (-l)")
		case 'e':
			aw.given = true
			if !val.static {
				c.review("has an awk program only known at run time (-e)")
			}
			aw.progs = append(aw.progs, val.val)
		case 'd', 'o', 'p':
			c.writes("writes a file (-" + string(ch) + ")")
		case 'D':
			c.review("starts the debugger, which reads commands (-D)")
		case 'S':
			aw.sandbox = aw.sandbox || c.cmd.Name == "gawk"
		}
	}
}
