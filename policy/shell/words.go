package shell

import (
	"fmt"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// This file expands words the way the shell would before running a
// command: quote removal, brace expansion, parameter and arithmetic
// expansion, command substitution and [[ ]] tests, noting what each may
// run or read.

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
