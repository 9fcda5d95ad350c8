package shell

import "strings"

// sedRisk reads a sed script and says why it needs review: a command or
// flag that runs a program (e) or writes a file (w, W), or anything it does
// not recognise. writes is set for the file writes.
func sedRisk(s string) (msg string, writes bool) {
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '{' || c == '}':
			i++
			continue
		case c == '#':
			i = skipLine(s, i)
			continue
		}
		var ok bool
		if i, ok = sedAddress(s, i); !ok {
			return "has a sed script the analysis cannot read", false
		}
		if i < len(s) && s[i] == ',' {
			if i, ok = sedAddress(s, i+1); !ok {
				return "has a sed script the analysis cannot read", false
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
			for i < len(s) && s[i] != ';' && s[i] != '\n' && s[i] != '}' {
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
			i = skipLine(s, i)
		case 'w', 'W':
			return "has a sed command that writes to a file (" + string(cmd) + ")", true
		case 'e':
			return "has a sed command that runs a shell command (e)", false
		case 's', 'y':
			if i >= len(s) || s[i] == '\\' || s[i] == '\n' {
				return "has a sed script the analysis cannot read", false
			}
			delim := s[i]
			for range 2 {
				if i, ok = sedDelimited(s, i+1, delim); !ok {
					return "has a sed script the analysis cannot read", false
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
					return "has a sed substitution that runs its result as a command (s///e)", false
				case f == 'w':
					return "has a sed substitution that writes to a file (s///w)", true
				case f == ';' || f == '\n' || f == '}' || f == ' ' || f == '\t' || f == '#':
					break flags
				default:
					return "has a sed script the analysis cannot read", false
				}
			}
		default:
			return "has a sed script the analysis cannot read", false
		}
	}
	return "", false
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

// awkRisk says why an awk program needs review: it calls system(), pipes
// to or from a command, redirects print output to a file, or loads code.
// String literals are not skipped, on purpose: a regular expression
// containing a quote would otherwise hide what follows it.
func awkRisk(p string) string {
	inPrint := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '|':
			if i+1 < len(p) && p[i+1] == '|' {
				i++
				continue
			}
			return "has an awk pipe to or from a command (|)"
		case c == '@':
			return "has an awk indirect call or directive (@), which can load code or call system()"
		case c == '>' && inPrint:
			return "has awk output redirected to a file (>)"
		case c == ';' || c == '\n' || c == '{' || c == '}':
			inPrint = false
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			j := i
			for j < len(p) && (p[j] == '_' || 'a' <= p[j] && p[j] <= 'z' || 'A' <= p[j] && p[j] <= 'Z' || '0' <= p[j] && p[j] <= '9') {
				j++
			}
			switch p[i:j] {
			case "system":
				return "has an awk call of system(), which runs a command"
			case "print", "printf":
				inPrint = true
			}
			i = j - 1
		}
	}
	return ""
}
