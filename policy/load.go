package policy

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Options configure loading. A nil *Options uses the defaults.
type Options struct {
	// CostLimit bounds the work of one condition at run time, in CEL cost
	// units. Zero means DefaultCostLimit.
	CostLimit uint64
	// CacheSize is how many shell analyses the policy keeps. Zero means
	// 1024; a negative value keeps none.
	CacheSize int
	// Sandbox says whether the kernel can enforce a sandbox profile
	// (read-only, workspace-write) that a rule's allow requires: an error
	// says why not, and that rule's allow becomes ask (fail closed). Nil
	// assumes every profile is enforced (policy tests; the bash tool still
	// refuses to run a command under a profile it cannot enforce). The
	// command line passes bash.Check().Enforceable.
	Sandbox func(profile string) error
	// Learned are the rules reviewers learned from their answers
	// (package policy/learn): [Policy.Evaluate] asks them about a call
	// the file's rules ask about and let them answer for. Nil: none.
	Learned Learned
	// Dir is the directory a call works in when it does not say
	// ([Call].Dir empty): the bash tool's working directory, for serve
	// and run. A rule learned for a project applies to the calls that
	// work in it. Empty: unknown.
	Dir string
}

// Error is a problem in a policy or test file, with where it is.
type Error struct {
	File   string
	Line   int // 1-based; 0 when unknown
	Column int
	Rule   string // the rule or test it is in, if any
	Msg    string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	b.WriteString(": ")
	if e.Rule != "" {
		fmt.Fprintf(&b, "%s: ", e.Rule)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Load reads and compiles the policy file at path. The error lists every
// problem found, each an *Error naming the file, line and rule.
func Load(path string, opts *Options) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, opts)
}

// Parse compiles a policy from data; name is used in error messages.
func Parse(name string, data []byte, opts *Options) (*Policy, error) {
	if opts == nil {
		opts = &Options{}
	}
	l := &loader{file: name, sandbox: opts.Sandbox}
	p := l.policy(data, opts)
	if len(l.errs) > 0 {
		return nil, errors.Join(l.errs...)
	}
	return p, nil
}

// loader collects the errors of one file.
type loader struct {
	file    string
	errs    []error
	sandbox func(profile string) error
}

func (l *loader) errorAt(n ast.Node, rule, format string, a ...any) {
	e := &Error{File: l.file, Rule: rule, Msg: fmt.Sprintf(format, a...)}
	if n != nil {
		if tk := n.GetToken(); tk != nil && tk.Position != nil {
			e.Line, e.Column = tk.Position.Line, tk.Position.Column
		}
	}
	l.errs = append(l.errs, e)
}

// yamlError turns an error of the YAML library into an *Error.
func (l *loader) yamlError(err error, rule string) {
	e := &Error{File: l.file, Rule: rule, Msg: err.Error()}
	var ye yaml.Error
	if errors.As(err, &ye) {
		e.Msg = ye.GetMessage()
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			e.Line, e.Column = tk.Position.Line, tk.Position.Column
		}
	}
	l.errs = append(l.errs, e)
}

// root parses data and returns its top-level mapping.
func (l *loader) root(data []byte) *ast.MappingNode {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		l.yamlError(err, "")
		return nil
	}
	if len(f.Docs) == 0 || f.Docs[0].Body == nil {
		l.errs = append(l.errs, &Error{File: l.file, Line: 1, Msg: "the file is empty"})
		return nil
	}
	if len(f.Docs) > 1 {
		l.errorAt(f.Docs[1], "", "the file has more than one YAML document")
		return nil
	}
	m, ok := f.Docs[0].Body.(*ast.MappingNode)
	if !ok {
		l.errorAt(f.Docs[0].Body, "", "the top level must be a mapping (version, default, timeout, shell, rules, tests)")
		return nil
	}
	return m
}

// start returns the node where a mapping begins, for messages about all
// of it: its first key (a mapping's own token is its first ':').
func start(m *ast.MappingNode) ast.Node {
	if len(m.Values) > 0 {
		return m.Values[0].Key
	}
	return m
}

func keyOf(mv *ast.MappingValueNode) string {
	if s, ok := mv.Key.(*ast.StringNode); ok {
		return s.Value
	}
	return mv.Key.GetToken().Value
}

// field returns the value node of key in m, or nil.
func field(m *ast.MappingNode, key string) ast.Node {
	for _, mv := range m.Values {
		if keyOf(mv) == key {
			return mv.Value
		}
	}
	return nil
}

func (l *loader) decode(n ast.Node, v any, rule string) bool {
	if err := yaml.NodeToValue(n, v, yaml.DisallowUnknownField()); err != nil {
		l.yamlError(err, rule)
		return false
	}
	return true
}

var topKeys = []string{"version", "default", "timeout", "shell", "learn", "rules", "tests"}

func (l *loader) policy(data []byte, opts *Options) *Policy {
	m := l.root(data)
	if m == nil {
		return nil
	}
	cacheSize := opts.CacheSize
	if cacheSize == 0 {
		cacheSize = 1024
	}
	costLimit := opts.CostLimit
	if costLimit == 0 {
		costLimit = DefaultCostLimit
	}
	p := &Policy{
		file:    l.file,
		digest:  Digest(data),
		def:     Ask,
		timeout: DefaultTimeout,
		shell:   map[string]string{"bash": "cmd"},
		cache:   newAnalysisCache(cacheSize),
		learned: opts.Learned,
		dir:     opts.Dir,
	}
	var rulesNode, testsNode ast.Node
	for _, mv := range m.Values {
		switch key := keyOf(mv); key {
		case "version":
			var v int
			if l.decode(mv.Value, &v, "") && v != 1 {
				l.errorAt(mv.Value, "", "unsupported version %d (this engine reads version 1)", v)
			}
		case "default":
			var s string
			if l.decode(mv.Value, &s, "") {
				if a := Action(s); a.rank() == 0 {
					l.errorAt(mv.Value, "", "unknown default action %q (want allow, ask or block)", s)
				} else {
					p.def = a
				}
			}
		case "timeout":
			if d, ok := l.duration(mv.Value, ""); ok {
				p.timeout = d
			}
		case "shell":
			var sh map[string]string
			if l.decode(mv.Value, &sh, "") {
				for tool, arg := range sh {
					if tool == "" || isGlob(tool) || arg == "" {
						l.errorAt(mv.Value, "", "shell maps tool names (not patterns) to the argument holding the command string; got %q: %q", tool, arg)
					}
				}
				p.shell = sh
			}
		case "learn":
			var doc learnDoc
			if l.decode(mv.Value, &doc, "learn") {
				p.learn = learnSettings{off: doc.Enabled != nil && !*doc.Enabled, secondReviewer: doc.SecondReviewer}
			}
		case "rules":
			rulesNode = mv.Value
		case "tests":
			testsNode = mv.Value
		default:
			l.errorAt(mv.Key, "", "unknown key %q (want one of %s)", key, strings.Join(topKeys, ", "))
		}
	}
	callEnv, cmdEnv, err := celEnvs(p.cache)
	if err != nil {
		l.errs = append(l.errs, fmt.Errorf("policy: building the CEL environment: %w", err))
		return nil
	}
	names := map[string]bool{}
	for i, n := range l.items(rulesNode, "rules") {
		r := l.rule(n, i, p, names)
		if r == nil {
			continue
		}
		if src := r.whenSrc; src != "" {
			env := callEnv
			if r.commands != nil {
				env = cmdEnv
			}
			prg, err := compileCond(env, src, costLimit)
			if err != nil {
				l.errorAt(r.whenNode, r.label(), "condition: %s", indentMore(err.Error()))
			}
			r.cond = prg
		}
		p.rules = append(p.rules, &r.rule)
	}
	if rulesNode == nil {
		l.errorAt(m, "", "the policy has no rules")
	}
	p.tests = l.tests(testsNode, p)
	p.index()
	p.cache.rules = len(p.rules)
	return p
}

func indentMore(s string) string { return strings.ReplaceAll(s, "\n", "\n    ") }

// items returns the elements of a sequence node.
func (l *loader) items(n ast.Node, what string) []ast.Node {
	if n == nil {
		return nil
	}
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		if _, null := n.(*ast.NullNode); null {
			return nil
		}
		l.errorAt(n, "", "%s must be a list", what)
		return nil
	}
	return seq.Values
}

func (l *loader) duration(n ast.Node, rule string) (time.Duration, bool) {
	var v any
	if !l.decode(n, &v, rule) {
		return 0, false
	}
	var d time.Duration
	switch v := v.(type) {
	case string:
		if secs, err := strconv.ParseUint(v, 10, 32); err == nil {
			d = time.Duration(secs) * time.Second
			break
		}
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			l.errorAt(n, rule, "bad timeout %q: want a duration such as 90s or 3m, or a number of seconds", v)
			return 0, false
		}
	case uint64:
		d = time.Duration(min(v, math.MaxInt32)) * time.Second
	case int64:
		d = time.Duration(max(min(v, math.MaxInt32), -1)) * time.Second
	case float64:
		d = time.Duration(v * float64(time.Second))
	default:
		l.errorAt(n, rule, "bad timeout: want a duration such as 90s or 3m, or a number of seconds")
		return 0, false
	}
	if d <= 0 {
		l.errorAt(n, rule, "the timeout must be positive")
		return 0, false
	}
	return d, true
}

// ruleDoc is a rule as written.
type ruleDoc struct {
	Name        string         `yaml:"name"`
	Description string         `yaml:"description"`
	Tool        any            `yaml:"tool"`
	Command     any            `yaml:"command"`
	When        string         `yaml:"when"`
	Action      string         `yaml:"action"`
	Reason      string         `yaml:"reason"`
	Timeout     any            `yaml:"timeout"`
	Impact      string         `yaml:"impact"`
	Details     map[string]any `yaml:"details"`
	AllowWrites bool           `yaml:"allow_writes"`
	Sandbox     string         `yaml:"sandbox"`
	// Learnable: whether a rule learned from a reviewer's answer may
	// allow what this ask rule asks about.
	Learnable *bool `yaml:"learnable"`
	// Elicit: through the MCP gateway, ask the client's own user too.
	Elicit bool `yaml:"elicit"`
	// Notify names the groups told of the question (package notify);
	// Escalate the groups told too when it still waits after a while.
	Notify   []string     `yaml:"notify"`
	Escalate *escalateDoc `yaml:"escalate"`
}

type escalateDoc struct {
	After any      `yaml:"after"`
	To    []string `yaml:"to"`
}

// loadedRule is a rule with what error messages need.
type loadedRule struct {
	rule
	whenSrc  string
	whenNode ast.Node
}

func (r *loadedRule) label() string { return fmt.Sprintf("rule %q", r.name) }

func (l *loader) rule(n ast.Node, i int, p *Policy, names map[string]bool) *loadedRule {
	m, ok := n.(*ast.MappingNode)
	label := fmt.Sprintf("rule %d", i+1)
	if !ok {
		l.errorAt(n, label, "a rule must be a mapping")
		return nil
	}
	if nn, ok := field(m, "name").(*ast.StringNode); ok && nn.Value != "" {
		label = fmt.Sprintf("rule %q", nn.Value)
	}
	var doc ruleDoc
	if !l.decode(m, &doc, label) {
		return nil
	}
	nerr := len(l.errs)
	r := &loadedRule{rule: rule{name: doc.Name, reason: doc.Reason, impact: doc.Impact, details: doc.Details, allowWrites: doc.AllowWrites}}
	switch {
	case doc.Name == "":
		l.errorAt(start(m), label, "the rule has no name")
	case strings.HasPrefix(doc.Name, "("):
		l.errorAt(field(m, "name"), label, "rule names may not start with '(' (reserved for the engine)")
	case names[doc.Name]:
		l.errorAt(field(m, "name"), label, "another rule has the same name")
	}
	names[doc.Name] = true

	r.action = Action(doc.Action)
	switch {
	case doc.Action == "":
		l.errorAt(start(m), label, "the rule has no action (want allow, ask or block)")
	case r.action.rank() == 0:
		l.errorAt(field(m, "action"), label, "unknown action %q (want allow, ask or block)", doc.Action)
	}

	r.tools = l.names(field(m, "tool"), doc.Tool, label, "tool")
	if doc.Tool == nil {
		l.errorAt(start(m), label, `the rule has no tool (a name, a pattern such as "mcp_*", or "*" for every tool)`)
	}
	if doc.Command != nil {
		r.commands = l.names(field(m, "command"), doc.Command, label, "command")
		if r.commands == nil {
			r.commands = []pattern{}
		}
		shellTool := false
		for t := range p.shell {
			if r.appliesTo(t) {
				shellTool = true
			}
		}
		if !shellTool && len(r.tools) > 0 {
			l.errorAt(field(m, "command"), label, "command applies to shell tools, and tool %s names none (shell tools: %s)", strings.Join(raws(r.tools), ", "), strings.Join(sortedKeys(p.shell), ", "))
		}
	}
	if doc.Sandbox != "" {
		switch {
		case r.action != Allow:
			l.errorAt(field(m, "sandbox"), label, "sandbox is for allow rules")
		case doc.Sandbox != SandboxReadOnly && doc.Sandbox != SandboxWorkspaceWrite:
			l.errorAt(field(m, "sandbox"), label, "unknown sandbox profile %q (want %s or %s)", doc.Sandbox, SandboxReadOnly, SandboxWorkspaceWrite)
		default:
			r.sandbox = doc.Sandbox
			if l.sandbox != nil {
				if err := l.sandbox(doc.Sandbox); err != nil {
					r.unenforced = err.Error()
				}
			}
		}
	}
	if doc.AllowWrites && (r.action != Allow || doc.Command == nil) {
		l.errorAt(field(m, "allow_writes"), label, "allow_writes is for allow rules with command")
	}
	r.learnable = doc.Learnable
	if r.action != Ask {
		for _, k := range []string{"timeout", "impact", "details", "elicit", "learnable", "notify", "escalate"} {
			if n := field(m, k); n != nil {
				l.errorAt(n, label, "%s is only for ask rules", k)
			}
		}
	}
	if doc.Elicit {
		// The gateway reads it from the question's details: a call that
		// asks goes to the MCP client's own user as well as to the page.
		r.details = maps.Clone(r.details)
		if r.details == nil {
			r.details = map[string]any{}
		}
		r.details["elicit"] = true
	}
	if doc.Timeout != nil {
		if d, ok := l.duration(field(m, "timeout"), label); ok {
			r.timeout = d
		}
	}
	if route := l.route(m, &doc, label, cmp.Or(r.timeout, p.timeout)); route != nil {
		// Package notify reads it from the question's details: whom to
		// tell, and whom to tell too as the deadline nears.
		r.details = maps.Clone(r.details)
		if r.details == nil {
			r.details = map[string]any{}
		}
		r.details["notify"] = route
	}
	if doc.When != "" {
		r.whenSrc, r.whenNode = doc.When, field(m, "when")
	}
	if r.reason == "" {
		r.reason = defaultReason(r.action, r.name)
	}
	if len(l.errs) > nerr {
		return nil
	}
	return r
}

// route is an ask rule's notify: and escalate: as the question's
// "notify" detail, or nil when it has neither.
func (l *loader) route(m *ast.MappingNode, doc *ruleDoc, label string, timeout time.Duration) map[string]any {
	if doc.Notify == nil && doc.Escalate == nil {
		return nil
	}
	route := map[string]any{}
	groups := func(node ast.Node, key string, names []string) []any {
		if len(names) == 0 {
			l.errorAt(node, label, "%s names no group (groups are defined in serve's --notify-config file)", key)
		}
		out := make([]any, 0, len(names))
		for _, g := range names {
			if g == "" {
				l.errorAt(node, label, "%s has an empty group name", key)
			}
			out = append(out, g)
		}
		return out
	}
	if doc.Notify != nil {
		route["to"] = groups(field(m, "notify"), "notify", doc.Notify)
	}
	if e := doc.Escalate; e != nil {
		en, _ := field(m, "escalate").(*ast.MappingNode)
		var afterNode, toNode ast.Node = field(m, "escalate"), field(m, "escalate")
		if en != nil {
			afterNode, toNode = cmp.Or(field(en, "after"), afterNode), cmp.Or(field(en, "to"), toNode)
		}
		if e.After == nil {
			l.errorAt(afterNode, label, "escalate needs after: how long the question waits before the groups in to: are told (such as 2m)")
			return nil
		}
		after, ok := l.duration(afterNode, label)
		if !ok {
			return nil
		}
		if after >= timeout {
			l.errorAt(afterNode, label, "escalate after %s comes at or after the question's timeout (%s): it would never be sent", after, timeout)
		}
		route["escalate"] = map[string]any{"after": after.String(), "to": groups(toNode, "escalate.to", e.To)}
	}
	return route
}

// NotifyGroups are the groups the policy's rules name in notify: and
// escalate:, sorted (the notifications file must define each).
func (p *Policy) NotifyGroups() []string {
	var out []string
	for _, r := range p.rules {
		route, _ := r.details["notify"].(map[string]any)
		if route == nil {
			continue
		}
		to, _ := route["to"].([]any)
		if e, ok := route["escalate"].(map[string]any); ok {
			more, _ := e["to"].([]any)
			to = append(slices.Clone(to), more...)
		}
		for _, g := range to {
			if s, ok := g.(string); ok && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out
}

// names reads a name or a list of names (tool, command), checking patterns.
func (l *loader) names(n ast.Node, v any, label, what string) []pattern {
	var out []string
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		out = []string{v}
	case []any:
		for i, x := range v {
			s, ok := x.(string)
			if !ok {
				l.errorAt(n, label, "%s must be a name or a list of names; item %d is %v, not a string (quote it: \"%v\")", what, i+1, x, x)
				return nil
			}
			out = append(out, s)
		}
	default:
		l.errorAt(n, label, "%s must be a name or a list of names", what)
		return nil
	}
	pats := make([]pattern, 0, len(out))
	for _, s := range out {
		if s == "" {
			l.errorAt(n, label, "%s has an empty name", what)
			continue
		}
		p, err := compilePattern(s)
		if err != nil {
			l.errorAt(n, label, "bad %s pattern %q: %v", what, s, err)
			continue
		}
		pats = append(pats, p)
	}
	return pats
}

func raws(ps []pattern) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.raw
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// posOf returns the line of a node.
func posOf(n ast.Node) int {
	if n == nil {
		return 0
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 0
}

// defaultReason is the reason of a rule that gives none: the model reads
// a block's, the reviewer an ask's.
func defaultReason(a Action, rule string) string {
	switch a {
	case Block:
		return "blocked by rule " + rule
	case Ask:
		return "rule " + rule + " asks for a person"
	}
	return ""
}
