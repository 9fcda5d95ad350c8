package shell

import "strings"

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
