package shell

import "strings"

// This file models sed: its options, and the scripts it runs.

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
