package learn

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/policy/shell"
)

// String says what the spec allows in one line: the command with each
// widened argument as <any> or <inside> (git diff <inside> -- <inside>),
// then the other arguments: "path inside /srv/app, content any".
func (s *Spec) String() string {
	var parts []string
	if sh := s.Shell; sh != nil {
		var b strings.Builder
		for i, c := range sh.Commands {
			if i > 0 {
				b.WriteString(" " + sh.Ops[i-1] + " ")
			}
			for _, e := range c.Env {
				b.WriteString(quote(e) + " ")
			}
			b.WriteString(quote(c.Name))
			for _, a := range c.Args {
				if a.Match == Exact {
					b.WriteString(" " + quote(a.Prefix+a.Word))
				} else {
					b.WriteString(" " + a.Prefix + "<" + string(a.Match) + ">")
				}
			}
			for _, r := range c.Redirects {
				b.WriteString(" " + r.FD + r.Op)
				if r.Body != "" {
					b.WriteString(r.Word + "…")
				} else {
					b.WriteString(quote(r.Word))
				}
			}
		}
		parts = append(parts, b.String())
	}
	for _, f := range s.Args {
		switch f.Match {
		case Exact:
			parts = append(parts, f.Name+" = "+string(f.Value))
		case Any:
			parts = append(parts, f.Name+" any")
		case Range:
			parts = append(parts, fmt.Sprintf("%s from %v to %v", f.Name, num(f.Min), num(f.Max)))
		case Inside:
			parts = append(parts, f.Name+" inside "+f.Dir)
		}
	}
	return strings.Join(parts, ", ")
}

func num(p *float64) any {
	if p == nil {
		return "?"
	}
	return *p
}

// quote is a word as the shell would read it back.
func quote(w string) string {
	if w == "" {
		return "''"
	}
	if q, err := syntax.Quote(w, syntax.LangBash); err == nil {
		return q
	}
	return strconv.Quote(w)
}

// render writes a shape with words in place of its slots: what a call it
// allows looks like.
func (sh *Shape) render(words [][]string) string {
	var b strings.Builder
	var heredocs []shell.PlainRedirect
	for i, c := range sh.Commands {
		if i > 0 {
			b.WriteString(" " + sh.Ops[i-1] + " ")
		}
		for _, e := range c.Env {
			name, val, _ := strings.Cut(e, "=")
			b.WriteString(name + "=" + quote(val) + " ")
		}
		b.WriteString(quote(c.Name))
		for _, w := range words[i] {
			b.WriteString(" " + quote(w))
		}
		for _, r := range c.Redirects {
			b.WriteString(" " + r.FD + r.Op)
			if r.Op == "<<" || r.Op == "<<-" {
				b.WriteString(r.Word)
				heredocs = append(heredocs, r)
				continue
			}
			b.WriteString(quote(r.Word))
		}
	}
	for _, r := range heredocs {
		b.WriteString("\n" + r.Body)
	}
	return b.String()
}

// RuleYAML writes a learned rule as a rule of a policy file (its
// comments say where it comes from and what the policy file cannot say:
// its expiry, a second reviewer). The rule it writes allows no more than
// the learned rule: the same commands with the same words, files inside
// the working directory, the same scope (thread, dir). A shape whose
// words a condition cannot tell apart from patterns (a quoted *), or with
// a here-document, is written as the exact command string.
func RuleYAML(r *checkpoint.LearnedRule, s *Spec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  # learned by %s on %s from question %s of thread %s (digest %s)\n",
		oneLine(r.CreatedBy), r.CreatedAt.UTC().Format(time.RFC3339), oneLine(r.QuestionID), oneLine(r.ThreadID), oneLine(r.Digest))
	fmt.Fprintf(&b, "  # scope: %s", oneLine(ScopeOf(r).String()))
	if !r.ExpiresAt.IsZero() {
		fmt.Fprintf(&b, "; expires %s (this rule does not)", r.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if r.ApprovedBy != "" {
		fmt.Fprintf(&b, "; approved by %s", oneLine(r.ApprovedBy))
	}
	if r.RevokedBy != "" {
		fmt.Fprintf(&b, "; REVOKED by %s on %s", oneLine(r.RevokedBy), r.RevokedAt.UTC().Format(time.RFC3339))
	}
	b.WriteString("\n")
	for _, rule := range policyRules(s, ScopeOf(r)) {
		fmt.Fprintf(&b, "  - name: %s\n", yamlString("learned-"+r.ID+rule.suffix))
		fmt.Fprintf(&b, "    description: %s\n", yamlString("learned: "+s.String()))
		fmt.Fprintf(&b, "    tool: %s\n", yamlString(s.Tool))
		if rule.command != "" {
			fmt.Fprintf(&b, "    command: %s\n", yamlString(rule.command))
		}
		b.WriteString("    when: |-\n")
		for i, c := range rule.conds {
			b.WriteString("      " + strings.ReplaceAll(c, "\n", "\n      "))
			if i < len(rule.conds)-1 {
				b.WriteString(" &&")
			}
			b.WriteString("\n")
		}
		b.WriteString("    action: allow\n")
		if rule.writes {
			b.WriteString("    allow_writes: true\n")
		}
	}
	return b.String()
}

// Export writes learned rules as a policy file's rules: section, each
// rule with its comments (see [RuleYAML]).
func Export(rules []*checkpoint.LearnedRule) ([]byte, error) {
	var b strings.Builder
	b.WriteString("# Rules learned from reviewers' answers (tollgate rules export).\n")
	b.WriteString("# Each allows no more than its learned rule; paste them into a policy's rules.\n")
	b.WriteString("rules:\n")
	if len(rules) == 0 {
		b.WriteString("  []\n")
	}
	for _, r := range rules {
		s, err := ParseSpec(r.Spec)
		if err != nil {
			return nil, fmt.Errorf("learned rule %s: %w", r.ID, err)
		}
		b.WriteString(RuleYAML(r, s))
	}
	return []byte(b.String()), nil
}

func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}

// yamlString is s as a YAML scalar: double-quoted as JSON writes it
// (which YAML reads the same).
func yamlString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// celString is s as a CEL string literal.
func celString(s string) string { return strconv.Quote(s) }

type exportRule struct {
	suffix  string
	command string // "" for a rule on the whole call
	conds   []string
	writes  bool
}

// policyRules are the policy rules that allow what s allows in scope.
func policyRules(s *Spec, scope Scope) []exportRule {
	call := []string{callFields(s)}
	switch scope.Kind {
	case checkpoint.ScopeThread:
		t := scope.Key + "~"
		call = append(call, fmt.Sprintf("(thread == %s || thread.startsWith(%s) && thread.substring(%d).matches(%s))",
			celString(scope.Key), celString(t), utf8.RuneCountInString(t), celString("^[0-9]+$")))
	case checkpoint.ScopeDir:
		d := path.Clean(scope.Key)
		sub := strings.TrimSuffix(d, "/") + "/"
		call = append(call, fmt.Sprintf("(dir == %s || dir.startsWith(%s))", celString(d), celString(sub)))
	}
	sh := s.Shell
	if sh == nil {
		return []exportRule{{conds: call}}
	}
	if exactOnly(sh) {
		// A pattern character in a word, or a here-document: the
		// analysis's words cannot tell it; the exact string can.
		src := sh.From
		if src == "" {
			src = sh.render(wordsOf(sh))
		}
		return []exportRule{{conds: append([]string{fmt.Sprintf("args[%s] == %s", celString(sh.Arg), celString(src))}, call...)}}
	}
	var names []string
	for _, c := range sh.Commands {
		names = append(names, celString(shellName(c.Name)))
	}
	call = append(call, fmt.Sprintf("commands(args[%s]) == [%s]", celString(sh.Arg), strings.Join(names, ", ")))
	var out []exportRule
	byName := map[string]int{}
	for _, c := range sh.Commands {
		n := shellName(c.Name)
		i, seen := byName[n]
		if !seen {
			i = len(out)
			byName[n] = i
			suffix := ""
			if len(sh.Commands) > 1 {
				suffix = "-" + strconv.Itoa(i+1)
			}
			out = append(out, exportRule{suffix: suffix, command: n, conds: call})
		}
		cond := commandCond(c)
		r := &out[i]
		if seen {
			last := len(r.conds) - 1
			r.conds[last] = "(" + strings.TrimSuffix(strings.TrimPrefix(r.conds[last], "("), ")") + " ||\n " + cond + ")"
		} else {
			r.conds = append(append([]string(nil), r.conds...), "("+cond+")")
		}
		for _, rd := range c.Redirects {
			if rd.Op != "<" && rd.Op != "<<<" && !(rd.Op == ">&" && isFD(rd.Word)) && rd.Word != "/dev/null" {
				r.writes = true
			}
		}
	}
	return out
}

// shellName is a command's name as the analysis gives it (a path in a
// system directory is its base name).
func shellName(w string) string {
	if a, err := shell.Parse(w); err == nil && len(a.Commands) == 1 && a.Commands[0].Name != "" {
		return a.Commands[0].Name
	}
	return w
}

func isFD(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil || s == "-"
}

// exactOnly reports whether a shape has a word with a pattern character,
// or a here-document: the policy's conditions read words after quote
// removal, where '*' and * look alike, and do not see a here-document's
// body.
func exactOnly(sh *Shape) bool {
	for _, c := range sh.Commands {
		if strings.ContainsAny(c.Name, "*?[") || strings.ContainsAny(strings.Join(c.Env, ""), "*?[") {
			return true
		}
		for _, a := range c.Args {
			if strings.ContainsAny(a.Prefix+a.Word, "*?[") {
				return true
			}
		}
		for _, r := range c.Redirects {
			if r.Op == "<<" || r.Op == "<<-" || strings.ContainsAny(r.Word, "*?[") {
				return true
			}
		}
	}
	return false
}

// wordsOf are the words a shape was learned from.
func wordsOf(sh *Shape) [][]string {
	out := make([][]string, len(sh.Commands))
	for i, c := range sh.Commands {
		for _, a := range c.Args {
			out[i] = append(out[i], a.Prefix+a.Word)
		}
	}
	return out
}

// commandCond is the condition on one command of a shape.
func commandCond(c CommandShape) string {
	conds := []string{
		"command.path == " + celString(c.Name),
		"command.via.size() == 0", "!command.dynamic_args",
		"command.secrets.size() == 0", "command.unknown.size() == 0",
		"command.env == " + celList(c.Env),
		fmt.Sprintf("command.args.size() == %d", len(c.Args)),
		fmt.Sprintf("command.redirects.size() == %d", len(c.Redirects)),
	}
	for i, a := range c.Args {
		arg := fmt.Sprintf("command.args[%d]", i)
		switch a.Match {
		case Exact:
			conds = append(conds, arg+" == "+celString(a.Prefix+a.Word))
			continue
		case Any:
			if a.Prefix != "" {
				conds = append(conds, arg+".startsWith("+celString(a.Prefix)+")")
				continue
			}
			conds = append(conds, fmt.Sprintf("cel.bind(w, %s, w != \"\" && !w.startsWith(\"-\") && !w.matches(\"[*?\\\\[]\"))", arg))
		case Inside:
			w := arg
			pre, operand := "", ""
			if a.Role == RoleOperand {
				operand = ` && w.startsWith("./")`
			}
			if a.Prefix != "" {
				pre = arg + ".startsWith(" + celString(a.Prefix) + ") && "
				w = fmt.Sprintf("%s.substring(%d)", arg, utf8.RuneCountInString(a.Prefix))
			}
			conds = append(conds, pre+fmt.Sprintf(`cel.bind(w, %s, w != "" && !w.matches("^[-/~+]") && !w.matches(%s) && `+
				`!w.matches("^\\.(/+\\.)*/*$") && !(w == ".." || w.startsWith("../") || w.endsWith("/..") || w.contains("/../"))%s)`, w, celString(notInPathClass), operand))
		}
	}
	for i, r := range c.Redirects {
		rd := fmt.Sprintf("command.redirects[%d]", i)
		conds = append(conds, fmt.Sprintf("%s.op == %s && %s.fd == %s && %s.target == %s", rd, celString(r.Op), rd, celString(r.FD), rd, celString(r.Word)))
	}
	return strings.Join(conds[:8], " && ") + " &&\n " + strings.Join(conds[8:], " &&\n ")
}

// notInPathClass is the regular expression of a character notInPath
// refuses.
var notInPathClass = func() string {
	var b strings.Builder
	b.WriteString("[")
	for _, r := range notInPathChars {
		b.WriteString("\\" + string(r))
	}
	b.WriteString(`\pC\pZ]`)
	return b.String()
}()

func celList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = celString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// callFields is the condition on a call's arguments other than the
// command string: no other argument, and each as its field says.
func callFields(s *Spec) string {
	var names []string
	if s.Shell != nil {
		names = append(names, celString(s.Shell.Arg))
	}
	for _, f := range s.Args {
		names = append(names, celString(f.Name))
	}
	sort.Strings(names)
	conds := []string{"args.all(k, k in [" + strings.Join(names, ", ") + "])"}
	for _, f := range s.Args {
		arg := "args[" + celString(f.Name) + "]"
		has := celString(f.Name) + " in args"
		switch f.Match {
		case Exact:
			conds = append(conds, has+" && "+arg+" == "+string(compactJSON(f.Value)))
		case Range:
			conds = append(conds, fmt.Sprintf("%s && %s >= %v && %s <= %v", has, arg, celNumber(*f.Min), arg, celNumber(*f.Max)))
		case Inside:
			d := path.Clean(f.Dir)
			conds = append(conds, fmt.Sprintf(`%s && cel.bind(p, %s, (p == %s || p.startsWith(%s) && !p.contains("/../") && !p.endsWith("/..")) && `+
				`!path_secret(p) && !path_in_git(p))`,
				has, arg, celString(d), celString(strings.TrimSuffix(d, "/")+"/")))
		}
	}
	return strings.Join(conds, " && ")
}

func compactJSON(raw json.RawMessage) []byte {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	b, _ := json.Marshal(v)
	return b
}

func celNumber(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}
