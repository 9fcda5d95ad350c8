package policy

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Action is what a rule, and a decision, says to do with a tool call.
type Action string

// The actions, from least to most restrictive.
const (
	Allow Action = "allow"
	Ask   Action = "ask"
	Block Action = "block"
)

// rank orders actions by how restrictive they are; an unknown action ranks
// below all.
func (a Action) rank() int {
	switch a {
	case Allow:
		return 1
	case Ask:
		return 2
	case Block:
		return 3
	}
	return 0
}

// Names that stand for the engine itself in [Decision.Rule] and
// [Match.Rule]; rule names in a file may not start with "(".
const (
	// RuleDefault is the policy's default action, for a call or a shell
	// command no rule covers.
	RuleDefault = "(default)"
	// RuleShellReview is a shell command string the analysis cannot vouch
	// for: it does not parse, runs code it cannot see, or uses an option
	// that runs programs. Such a call is never allowed.
	RuleShellReview = "(shell review)"
	// RuleError is a condition that failed at run time, or arguments the
	// engine cannot read: the call is asked (fail closed).
	RuleError = "(error)"
	// RuleLearned is a rule learned from a reviewer's answer (see
	// [Learned]): the file's rules asked, and the learned rule named by
	// [Decision.Learned] allowed the call.
	RuleLearned = "(learned)"
)

// The sandbox profiles a rule's allow can require (see the bash tool).
const (
	SandboxReadOnly       = "read-only"
	SandboxWorkspaceWrite = "workspace-write"
)

// DefaultTimeout is how long an ask waits when neither the rule nor the
// file sets a timeout (the seed's AskUser(timeout_seconds=180)).
const DefaultTimeout = 180 * time.Second

// Call is a tool call as the engine sees it.
type Call struct {
	Tool string
	// Args are the call's arguments as a JSON object decodes: strings,
	// float64 numbers, bools, nil, []any and map[string]any.
	Args     map[string]any
	ThreadID string
	// Annotations are what the tool says of itself (agent.Tool's
	// Annotations: for an MCP server's tool, mcp_server, mcp_tool and its
	// hints read_only, destructive, idempotent, open_world). Conditions
	// read them as annotations; no rule matches because of them alone,
	// and an ask shows them to the reviewer. Nil: none.
	Annotations map[string]any
	// Dir is the directory the call works in, when the caller knows it:
	// a coding agent's project, as its hook reports it (package hooks).
	// Conditions read it as dir, and give it to path_inside. Empty:
	// unknown, and no path is inside it.
	Dir string
}

// Policy is a loaded, compiled policy file. It is safe for concurrent use.
type Policy struct {
	file    string
	digest  string // see Digest
	def     Action
	timeout time.Duration
	shell   map[string]string // tool -> argument holding a command string
	rules   []*rule
	tests   []TestCase
	cache   *analysisCache
	learn   learnSettings
	learned Learned // nil: no learned rules
	dir     string  // the Dir of calls that do not say theirs

	byTool  map[string]*toolRules // tools named exactly by a rule, and shell tools
	globbed []*rule               // rules on the whole call whose tool is a pattern
	// other maps tools named by no rule to the pattern rules that apply to
	// them; copied on write, so that reading it takes no lock.
	other   atomic.Pointer[map[string]*toolRules]
	otherMu sync.Mutex
}

// maxOtherTools bounds the tools, named by no rule, whose matching rules
// are remembered.
const maxOtherTools = 1024

var noRules = &toolRules{}

// rule is a compiled rule.
type rule struct {
	name        string
	index       int // position in the file
	tools       []pattern
	commands    []pattern // nil: a rule on the whole call
	cond        *condition
	action      Action
	reason      string
	timeout     time.Duration
	impact      string
	details     map[string]any
	allowWrites bool
	sandbox     string // the profile an allow requires, if any
	unenforced  string // why the kernel cannot enforce sandbox, if it cannot
	// learnable is what the rule says of learned rules (ask rules): nil
	// when it says nothing, and then it is learnable unless what it
	// matched reads secrets or destroys data.
	learnable *bool
}

// toolRules are the rules that can apply to one tool name, in file order.
type toolRules struct {
	call     []*rule            // rules on the whole call
	byName   map[string][]*rule // per-command rules naming a command exactly
	globCmd  []*rule            // per-command rules with a command pattern
	shellArg string             // the argument holding a command string, if a shell tool
	isShell  bool
}

// File is the file the policy was loaded from.
func (p *Policy) File() string { return p.file }

// MaxTimeout is the longest an ask of this policy waits for a person:
// the default timeout or a rule's, whichever is longest. Whoever waits
// for an answer on the asker's behalf (a coding agent's hook) must wait
// at least this long.
func (p *Policy) MaxTimeout() time.Duration {
	d := p.timeout
	for _, r := range p.rules {
		if r.action == Ask {
			d = max(d, r.timeout)
		}
	}
	return d
}

// Default is the action for calls and shell commands no rule covers.
func (p *Policy) Default() Action { return p.def }

// Rules returns the names of the rules, in file order.
func (p *Policy) Rules() []string {
	out := make([]string, len(p.rules))
	for i, r := range p.rules {
		out[i] = r.name
	}
	return out
}

// Tests returns the test cases written in the policy file.
func (p *Policy) Tests() []TestCase { return slices.Clone(p.tests) }

// ShellArg returns the argument of tool that holds a shell command string,
// if the policy treats tool as a shell.
func (p *Policy) ShellArg(tool string) (string, bool) {
	if arg, ok := p.shell[tool]; ok {
		return arg, true
	}
	return "", false
}

// index builds the per-tool rule lists.
func (p *Policy) index() {
	p.byTool = map[string]*toolRules{}
	names := map[string]bool{}
	for i, r := range p.rules {
		r.index = i
		for _, t := range r.tools {
			if t.kind == patExact {
				names[t.a] = true
			}
		}
		if r.commands == nil && slices.ContainsFunc(r.tools, func(t pattern) bool { return t.kind != patExact }) {
			p.globbed = append(p.globbed, r)
		}
	}
	for t := range p.shell {
		names[t] = true
	}
	for t := range names {
		tr := &toolRules{byName: map[string][]*rule{}}
		tr.shellArg, tr.isShell = p.shell[t]
		for _, r := range p.rules {
			if !r.appliesTo(t) {
				continue
			}
			if r.commands == nil {
				tr.call = append(tr.call, r)
				continue
			}
			if slices.ContainsFunc(r.commands, func(c pattern) bool { return c.kind != patExact }) {
				tr.globCmd = append(tr.globCmd, r)
				continue
			}
			for _, c := range r.commands {
				if l := tr.byName[c.a]; len(l) == 0 || l[len(l)-1] != r {
					tr.byName[c.a] = append(l, r)
				}
			}
		}
		p.byTool[t] = tr
	}
}

// rulesFor returns the rules that can apply to tool.
func (p *Policy) rulesFor(tool string) *toolRules {
	if tr, ok := p.byTool[tool]; ok {
		return tr
	}
	if len(p.globbed) == 0 {
		return noRules
	}
	if m := p.other.Load(); m != nil {
		if tr, ok := (*m)[tool]; ok {
			return tr
		}
	}
	tr := &toolRules{}
	for _, r := range p.globbed {
		if r.appliesTo(tool) {
			tr.call = append(tr.call, r)
		}
	}
	p.otherMu.Lock()
	defer p.otherMu.Unlock()
	old := p.other.Load()
	if old == nil || len(*old) < maxOtherTools {
		m := make(map[string]*toolRules, 1+lenOf(old))
		if old != nil {
			maps.Copy(m, *old)
		}
		m[tool] = tr
		p.other.Store(&m)
	}
	return tr
}

func lenOf(m *map[string]*toolRules) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

func (r *rule) appliesTo(tool string) bool { return matchAny(r.tools, tool) }
