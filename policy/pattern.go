package policy

import (
	"fmt"
	"regexp"
	"strings"
)

// pattern matches tool and command names: a name, or a glob where *
// matches any characters (including /), ? one character, and [...] a
// class ([!...] or [^...] negated); a backslash escapes. A "[" with no
// closing "]" is an ordinary character, so "[" names the test command.
type pattern struct {
	raw  string
	kind patternKind
	a, b string         // exact name; prefix and suffix
	re   *regexp.Regexp // kind == patGlob
}

type patternKind uint8

const (
	patExact  patternKind = iota
	patAny                // *
	patPrefix             // a*
	patSuffix             // *b
	patAffix              // a*b
	patGlob
)

func isGlob(s string) bool {
	if strings.ContainsAny(s, "*?\\") {
		return true
	}
	i := strings.IndexByte(s, '[')
	return i >= 0 && strings.IndexByte(s[i+1:], ']') >= 0
}

func compilePattern(s string) (pattern, error) {
	p := pattern{raw: s}
	switch {
	case !isGlob(s):
		p.kind, p.a = patExact, s
		return p, nil
	case s == "*":
		p.kind = patAny
		return p, nil
	}
	if i := strings.IndexByte(s, '*'); i >= 0 && !strings.ContainsAny(s, "?[\\") && strings.Count(s, "*") == 1 {
		p.a, p.b = s[:i], s[i+1:]
		switch {
		case p.b == "":
			p.kind = patPrefix
		case p.a == "":
			p.kind = patSuffix
		default:
			p.kind = patAffix
		}
		return p, nil
	}
	var re strings.Builder
	re.WriteString(`^(?s:`)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '*':
			re.WriteString(".*")
		case '?':
			re.WriteString(".")
		case '\\':
			if i+1 == len(s) {
				return p, fmt.Errorf("the pattern ends with a backslash")
			}
			i++
			re.WriteString(regexp.QuoteMeta(s[i : i+1]))
		case '[':
			j := strings.IndexByte(s[i+1:], ']')
			if j < 0 {
				re.WriteString(`\[`)
				break
			}
			class := s[i+1 : i+1+j]
			if j == 0 {
				return p, fmt.Errorf("empty class []")
			}
			re.WriteByte('[')
			if class[0] == '!' || class[0] == '^' {
				re.WriteByte('^')
				class = class[1:]
			}
			if class == "" {
				return p, fmt.Errorf("empty class")
			}
			for k := 0; k < len(class); k++ {
				if cc := class[k]; cc == '\\' || cc == '[' || cc == ']' {
					re.WriteByte('\\')
				}
				re.WriteByte(class[k])
			}
			re.WriteByte(']')
			i += j + 1
		default:
			re.WriteString(regexp.QuoteMeta(s[i : i+1]))
		}
	}
	re.WriteString(`)$`)
	rx, err := regexp.Compile(re.String())
	if err != nil {
		return p, fmt.Errorf("bad class: %v", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	p.kind, p.re = patGlob, rx
	return p, nil
}

func (p *pattern) match(name string) bool {
	switch p.kind {
	case patExact:
		return name == p.a
	case patAny:
		return true
	case patPrefix:
		return strings.HasPrefix(name, p.a)
	case patSuffix:
		return strings.HasSuffix(name, p.b)
	case patAffix:
		return len(name) >= len(p.a)+len(p.b) && strings.HasPrefix(name, p.a) && strings.HasSuffix(name, p.b)
	}
	return p.re.MatchString(name)
}

func matchAny(ps []pattern, name string) bool {
	for i := range ps {
		if ps[i].match(name) {
			return true
		}
	}
	return false
}

// matchName matches name against a pattern written in a condition's list;
// a bad pattern matches only itself.
func matchName(pat, name string) bool {
	if !isGlob(pat) {
		return pat == name
	}
	p, err := compilePattern(pat)
	if err != nil {
		return pat == name
	}
	return p.match(name)
}
