package shell

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// This file reads redirections: the file or descriptor each one names,
// and whether it writes.

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
