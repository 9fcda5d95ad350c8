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
			for range 2 {
				if i, ok = sedDelimited(s, i+1, delim); !ok {
					return unreadable()
				}
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
		if i, ok = sedDelimited(s, i+1, s[i]); !ok {
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
func sedDelimited(s string, i int, delim byte) (int, bool) {
	for ; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case delim:
			return i, true
		case '\n':
			if delim != '\n' {
				return i, false
			}
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
// String literals are tracked only to keep a ';', '{' or '}' inside one
// from ending a print statement early: everything else is looked for
// inside strings too, so that a regular expression containing a quote,
// which throws the tracking off, can only make the analysis ask more.
func awkRisk(p string) (out awkProgram) {
	if strings.Contains(p, "/inet") {
		out.risk = "names gawk's network files (/inet...), which open network connections"
		return out
	}
	inPrint, inGetline := false, false
	inStr, esc := false, false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case inStr && esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		}
		switch {
		case c == '|':
			if i+1 < len(p) && p[i+1] == '|' {
				i++
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
		case (c == ';' || c == '\n' || c == '{' || c == '}') && !inStr:
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
			i = j - 1
		}
	}
	return out
}

// jqFilter is what the analysis learns from a jq filter.
type jqFilter struct {
	environ bool // it reads the environment (env, $ENV)
	modules bool // it loads modules or data files (import, include)
}

// jqRisk reads a jq filter for the builtins that reach past its input:
// env and $ENV, and the directives that load files. Names are looked for
// inside strings too ("\(env.X)" interpolates); a field .env is not the
// builtin.
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
		case name == "ENV" && prev == '$', name == "env" && prev != '.' && prev != '$':
			out.environ = true
		case name == "import" || name == "include" || name == "modulemeta":
			out.modules = true
		}
		i = j - 1
	}
	return out
}
