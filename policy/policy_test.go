package policy

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func mustParse(t testing.TB, src string, opts *Options) *Policy {
	t.Helper()
	p, err := Parse("p.yaml", []byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func bash(cmd string) Call { return Call{Tool: "bash", Args: map[string]any{"cmd": cmd}} }

const rulesSrc = `
version: 1
timeout: 2m
rules:
  - name: pay-small
    tool: pay
    when: args.amount <= 100
    action: allow
  - name: pay-big
    tool: pay
    when: args.amount > 1000
    action: ask
    timeout: 10m
    impact: money leaves the account
    details: {team: finance}
  - name: pay-blocked-thread
    tool: pay
    when: thread == "untrusted"
    action: block
    reason: payments are off in this thread
  - name: mcp-read
    tool: "mcp_*_read"
    action: allow
  - name: mcp-all
    tool: "mcp_*"
    action: ask
  - name: everything-logged
    tool: ["*"]
    when: tool == "audit"
    action: allow
  - name: read-only
    tool: bash
    command: [ls, cat, grep, wc, echo]
    action: allow
  - name: write-in-build
    tool: bash
    command: [echo, cat]
    when: command.redirects.all(r, !r.writes || r.target.startsWith("build/"))
    action: allow
    allow_writes: true
  - name: no-rm
    tool: bash
    command: rm
    action: block
    reason: deleting is not allowed
  - name: curl-asks
    tool: bash
    command: curl
    action: ask
    impact: network access
`

func TestEvaluate(t *testing.T) {
	t.Parallel()
	p := mustParse(t, rulesSrc, nil)
	tests := []struct {
		name string
		call Call
		want Action
		rule string
	}{
		{"allowed by condition", Call{Tool: "pay", Args: map[string]any{"amount": 50.0}}, Allow, "pay-small"},
		{"ask by condition", Call{Tool: "pay", Args: map[string]any{"amount": 5000.0}}, Ask, "pay-big"},
		{"integer and float compare", Call{Tool: "pay", Args: map[string]any{"amount": 100}}, Allow, "pay-small"},
		{"no rule matches: default", Call{Tool: "pay", Args: map[string]any{"amount": 500.0}}, Ask, RuleDefault},
		{"block beats allow", Call{Tool: "pay", Args: map[string]any{"amount": 5.0}, ThreadID: "untrusted"}, Block, "pay-blocked-thread"},
		{"block beats ask", Call{Tool: "pay", Args: map[string]any{"amount": 5000.0}, ThreadID: "untrusted"}, Block, "pay-blocked-thread"},
		{"condition error asks", Call{Tool: "pay", Args: map[string]any{"currency": "EUR"}}, Ask, RuleError},
		{"condition type error asks", Call{Tool: "pay", Args: map[string]any{"amount": "lots"}}, Ask, RuleError},
		{"glob tool, ask beats allow", Call{Tool: "mcp_files_read"}, Ask, "mcp-all"},
		{"glob tool", Call{Tool: "mcp_files_write"}, Ask, "mcp-all"},
		{"star with condition", Call{Tool: "audit"}, Allow, "everything-logged"},
		{"unknown tool", Call{Tool: "nope"}, Ask, RuleDefault},
		{"every command allowed", bash("ls -la | grep x | wc -l"), Allow, "read-only"},
		{"one command not covered", bash("ls; curl x"), Ask, "curl-asks"},
		{"one command blocked", bash("ls; rm -rf ~"), Block, "no-rm"},
		{"one command unknown", bash("ls && python3 x.py"), Ask, RuleDefault},
		{"write not allowed by plain allow", bash("ls > out.txt"), Ask, RuleDefault},
		{"write allowed with allow_writes", bash("echo hi > build/out.txt"), Allow, "write-in-build"},
		{"write outside build", bash("echo hi > /tmp/out.txt"), Ask, RuleDefault},
		{"shell review asks", bash("eval ls"), Ask, RuleShellReview},
		{"shell review cannot beat block", bash("eval ls; rm x"), Block, "no-rm"},
		{"unparsable", bash("ls; ("), Ask, RuleShellReview},
		{"empty command", bash(""), Ask, RuleDefault},
		{"missing argument", Call{Tool: "bash", Args: map[string]any{}}, Ask, RuleError},
		{"argument not a string", Call{Tool: "bash", Args: map[string]any{"cmd": 3.0}}, Ask, RuleError},
	}
	for _, tt := range tests {
		d := p.Evaluate(context.Background(), tt.call)
		if d.Action != tt.want || d.Rule != tt.rule {
			t.Errorf("%s: got %s by %s (%s), want %s by %s; matched %+v", tt.name, d.Action, d.Rule, d.Reason, tt.want, tt.rule, d.Matched)
		}
	}
}

func TestDecisionDetails(t *testing.T) {
	t.Parallel()
	p := mustParse(t, rulesSrc, nil)
	d := p.Evaluate(context.Background(), Call{Tool: "pay", Args: map[string]any{"amount": 5000.0}})
	if d.Timeout != 10*time.Minute {
		t.Errorf("timeout %s, want the rule's 10m", d.Timeout)
	}
	details := d.Details()
	if details["matched_rule"] != "pay-big" || details["impact"] != "money leaves the account" || details["team"] != "finance" {
		t.Errorf("details %v", details)
	}
	details["team"] = "changed"
	if d.Details()["team"] != "finance" {
		t.Error("Details must be a fresh map on every call")
	}

	d = p.Evaluate(context.Background(), Call{Tool: "nope"})
	if details := d.Details(); d.Timeout != 2*time.Minute || details["matched_rule"] != RuleDefault || details["impact"] != DefaultImpact {
		t.Errorf("default ask: timeout %s, details %v", d.Timeout, details)
	}

	d = p.Evaluate(context.Background(), bash("find . -delete; ls"))
	if d.Action != Ask || d.Rule != RuleShellReview {
		t.Fatalf("got %s %s", d.Action, d.Rule)
	}
	if review, _ := d.Details()["review"].([]string); len(review) != 1 || !strings.Contains(review[0], "-delete") {
		t.Errorf("review details %v", d.Details())
	}

	d = p.Evaluate(context.Background(), bash("ls; rm -rf ~"))
	if d.Reason != "deleting is not allowed (rm -rf '~')" && d.Reason != "deleting is not allowed (rm -rf ~)" {
		t.Errorf("block reason %q", d.Reason)
	}
	if d.Timeout != 0 || d.Details() != nil {
		t.Errorf("a block has no timeout or details: %s %v", d.Timeout, d.Details())
	}
	var rules []string
	for _, m := range d.Matched {
		rules = append(rules, m.Rule+"@"+m.Command)
	}
	if want := []string{"read-only@ls", "no-rm@rm -rf ~"}; !slices.Equal(rules, want) {
		t.Errorf("matched %q, want %q", rules, want)
	}
}

func TestDefaultAction(t *testing.T) {
	t.Parallel()
	p := mustParse(t, "default: allow\nrules:\n  - {name: no-rm, tool: bash, command: rm, action: block}\n", nil)
	for cmd, want := range map[string]Action{"ls": Allow, "ls; rm x": Block, "eval ls": Ask, "ls; (": Ask} {
		if d := p.Evaluate(context.Background(), bash(cmd)); d.Action != want {
			t.Errorf("default allow, %q: got %s by %s, want %s", cmd, d.Action, d.Rule, want)
		}
	}
	p = mustParse(t, "default: block\nrules:\n  - {name: ls, tool: bash, command: ls, action: allow}\n", nil)
	for cmd, want := range map[string]Action{"ls": Allow, "ls; cat x": Block} {
		if d := p.Evaluate(context.Background(), bash(cmd)); d.Action != want {
			t.Errorf("default block, %q: got %s by %s, want %s", cmd, d.Action, d.Rule, want)
		}
	}
	if d := p.Evaluate(context.Background(), Call{Tool: "x"}); d.Action != Block || d.Timeout != 0 || d.Details() != nil {
		t.Errorf("default block: %+v", d)
	}
}

// TestWholeCallRules checks rules on the whole shell call and the helpers
// that read command strings.
func TestWholeCallRules(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `
rules:
  - name: make-test
    tool: bash
    when: args.cmd == "make test"
    action: allow
  - name: all-in
    tool: bash
    when: commands_all_in(args.cmd, ["git", "go*"])
    action: allow
  - name: any-in
    tool: bash
    when: commands_any_in(args.cmd, ["curl", "wget"])
    action: block
  - name: writes
    tool: bash
    when: writes_files(args.cmd)
    action: ask
    impact: writes files
  - name: many
    tool: bash
    when: commands(args.cmd).size() > 3
    action: ask
  - name: reviewed
    tool: bash
    when: shell_review(args.cmd).exists(r, r.contains("eval"))
    action: block
`, nil)
	tests := []struct {
		cmd  string
		want Action
		rule string
	}{
		{"make test", Allow, "make-test"},
		{"make test; rm x", Ask, RuleDefault},
		{"go test ./...", Allow, "all-in"},
		{"git status && gofmt -l .", Allow, "all-in"},
		{"git status; ls", Ask, RuleDefault},
		{"ls | curl -d @- x", Block, "any-in"},
		{"go build > log", Ask, "writes"},
		{"go vet; go vet; go vet; go vet", Ask, "many"},
		{"eval x", Block, "reviewed"},
		{"ls; (", Ask, RuleError},
	}
	for _, tt := range tests {
		d := p.Evaluate(context.Background(), bash(tt.cmd))
		if d.Action != tt.want || d.Rule != tt.rule {
			t.Errorf("%q: got %s by %s (%s), want %s by %s", tt.cmd, d.Action, d.Rule, d.Reason, tt.want, tt.rule)
		}
	}
	// A helper given a string that does not parse fails, so its rule asks.
	d := p.Evaluate(context.Background(), bash("ls; ("))
	if !slices.ContainsFunc(d.Matched, func(m Match) bool {
		return m.Rule == RuleError && strings.Contains(m.Reason, "all-in")
	}) {
		t.Errorf("matched %+v: want the failed condition of all-in", d.Matched)
	}
}

func TestCostLimit(t *testing.T) {
	t.Parallel()
	src := `
rules:
  - name: heavy
    tool: x
    when: args.items.all(a, args.items.all(b, a != b || a == b))
    action: allow
`
	items := make([]any, 300)
	for i := range items {
		items[i] = float64(i)
	}
	p := mustParse(t, src, &Options{CostLimit: 1000})
	d := p.Evaluate(context.Background(), Call{Tool: "x", Args: map[string]any{"items": items}})
	if d.Action != Ask || d.Rule != RuleError || !strings.Contains(d.Reason, "cost") {
		t.Errorf("over the cost limit: %s by %s: %s", d.Action, d.Rule, d.Reason)
	}
	p = mustParse(t, src, nil)
	if d := p.Evaluate(context.Background(), Call{Tool: "x", Args: map[string]any{"items": items[:10]}}); d.Action != Allow {
		t.Errorf("under the limit: %s by %s: %s", d.Action, d.Rule, d.Reason)
	}
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	p := mustParse(t, rulesSrc, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	items := make([]any, 1000)
	p2 := mustParse(t, "rules:\n  - {name: r, tool: x, when: 'args.items.all(a, a == null)', action: allow}\n", nil)
	if d := p2.Evaluate(ctx, Call{Tool: "x", Args: map[string]any{"items": items}}); d.Action == Allow {
		t.Errorf("a canceled evaluation must not allow: %+v", d)
	}
	_ = p
}

func TestConcurrentEvaluate(t *testing.T) {
	t.Parallel()
	p := mustParse(t, rulesSrc, &Options{CacheSize: 4})
	cmds := []string{"ls", "ls; rm x", "cat x | wc", "eval y", "echo > build/x", "curl x"}
	done := make(chan bool)
	for g := range 4 {
		go func() {
			for i := range 200 {
				c := cmds[(g+i)%len(cmds)]
				d := p.Evaluate(context.Background(), bash(c))
				if c == "ls" && d.Action != Allow || c == "ls; rm x" && d.Action != Block {
					t.Errorf("%q: %s", c, d.Action)
				}
			}
			done <- true
		}()
	}
	for range 4 {
		<-done
	}
}

// TestRepeatedCalls checks that a command string decided again (its
// analysis and the results of conditions on its commands are kept) gets
// the same decision, and that conditions reading the call are evaluated
// each time.
func TestRepeatedCalls(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `
rules:
  - name: ls
    tool: bash
    command: ls
    when: command.args.size() < 3
    action: allow
  - name: ls-in-thread
    tool: bash
    command: ls
    when: thread == "locked"
    action: block
`, nil)
	ctx := context.Background()
	for range 3 {
		for cmd, want := range map[string]Action{"ls -a": Allow, "ls a b c": Ask} {
			if d := p.Evaluate(ctx, bash(cmd)); d.Action != want {
				t.Errorf("%q: %s, want %s", cmd, d.Action, want)
			}
		}
		locked := bash("ls -a")
		locked.ThreadID = "locked"
		if d := p.Evaluate(ctx, locked); d.Action != Block {
			t.Errorf("thread condition on a cached command: %s", d.Action)
		}
	}
}

// TestHeavyAnalysesNotCached checks that hostile command strings are
// decided (asked) but that an analysis holding much is not kept, and that
// what the cache keeps stays within its budget.
func TestHeavyAnalysesNotCached(t *testing.T) {
	t.Parallel()
	p := loadSandbox(t)
	ctx := context.Background()
	kept := func(cmd string) (*analysis, bool) {
		p.cache.mu.Lock()
		defer p.cache.mu.Unlock()
		a, ok := p.cache.m[cmd]
		return a, ok
	}
	chain := strings.Repeat("xargs ", 10000) + "ls"
	for _, cmd := range []string{chain, "cat " + strings.Repeat("a ", 30000)} {
		if d := p.Evaluate(ctx, bash(cmd)); d.Action == Allow && !strings.HasPrefix(cmd, "cat a") {
			t.Errorf("%.40q...: allowed", cmd)
		}
		if a, ok := kept(cmd); ok && a.weight > maxCachedWeight {
			t.Errorf("%.40q...: an analysis of weight %d was kept", cmd, a.weight)
		}
	}
	if _, ok := kept(chain); ok {
		t.Error("the analysis of a chain of 10 000 wrappers was kept")
	}
	if d := p.Evaluate(ctx, bash("ls -la")); d.Action != Allow {
		t.Fatalf("ls -la: %s", d.Action)
	}
	if _, ok := kept("ls -la"); !ok {
		t.Error("a light analysis was not kept")
	}
	p.cache.mu.Lock()
	p.cache.budget = 64 << 10
	p.cache.mu.Unlock()
	for i := range 50 {
		p.Evaluate(ctx, bash(fmt.Sprintf("echo %d %s", i, strings.Repeat("b ", 200))))
		p.cache.mu.Lock()
		w, n := p.cache.weight, len(p.cache.m)
		p.cache.mu.Unlock()
		if w > 64<<10 || n == 0 {
			t.Fatalf("after %d strings the cache holds %d weighing %d, budget %d", i+1, n, w, 64<<10)
		}
	}
}

// Annotations are what a tool says of itself: conditions read them, they
// are an empty map for a tool with none, and no rule matches on them
// unless it says so.
func TestAnnotationsInConditions(t *testing.T) {
	p, err := Parse("annotations.yaml", []byte(`version: 1
default: ask
rules:
  - name: destructive-mcp
    tool: "mcp__*"
    when: annotations.destructive == true
    action: block
    reason: the server says this tool destroys
  - name: read-only-trusted
    tool: "mcp__docs__*"
    when: has(annotations.read_only) && annotations.read_only == true
    action: allow
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		call Call
		want Action
	}{
		{"destructive hint blocks", Call{Tool: "mcp__gh__delete_repo", Annotations: map[string]any{"destructive": true, "read_only": false}}, Block},
		{"read-only hint on a trusted server allows", Call{Tool: "mcp__docs__search", Annotations: map[string]any{"destructive": false, "read_only": true}}, Allow},
		{"read-only hint elsewhere is only a hint", Call{Tool: "mcp__gh__search", Annotations: map[string]any{"destructive": false, "read_only": true}}, Ask},
		{"no annotations: an empty map", Call{Tool: "mcp__docs__search"}, Ask},
	} {
		if d := p.Evaluate(context.Background(), c.call); d.Action != c.want {
			t.Errorf("%s: %s (rule %s), want %s", c.name, d.Action, d.Rule, c.want)
		}
	}
}

// Blocks is what the MCP gateway hides: only tools blocked whatever their
// arguments.
func TestBlocks(t *testing.T) {
	p, err := Parse("blocks.yaml", []byte(`version: 1
default: ask
rules:
  - name: no-deletes
    tool: "mcp__*__delete_*"
    action: block
  - name: big-payments
    tool: mcp__pay__send
    when: args.amount > 100
    action: block
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]bool{"mcp__gh__delete_repo": true, "mcp__pay__send": false, "mcp__gh__list": false, "bash": false} {
		if got := p.Blocks(tool); got != want {
			t.Errorf("Blocks(%s) = %v, want %v", tool, got, want)
		}
	}
	strict, err := Parse("strict.yaml", []byte(`version: 1
default: block
rules:
  - name: reads
    tool: "mcp__gh__get_*"
    action: allow
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strict.Blocks("mcp__gh__delete_repo") || strict.Blocks("mcp__gh__get_issue") {
		t.Error("with default block, a tool no rule names is blocked, and one a rule allows is not")
	}
}

// The MCP gateway's example policy passes its own tests.
func TestMCPGatewayExample(t *testing.T) {
	p, err := Load("../examples/policies/mcp-gateway.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := p.RunTests(context.Background(), p.Tests())
	if !rep.OK() || rep.Passed < 7 {
		t.Fatalf("%d passed, %d failed: %+v", rep.Passed, rep.Failed, rep.Results)
	}
	if !p.Blocks("mcp__github__delete_repository") || !p.Blocks("mcp__fs__read_media_file") || p.Blocks("mcp__fs__write_file") {
		t.Error("the gateway would hide the wrong tools")
	}
}

// TestShippedPoliciesSayWhy: every rule of the policies tollgate ships
// has a name and a reason, the words a reviewer reads for why a call was
// asked ("rule NAME: REASON").
func TestShippedPoliciesSayWhy(t *testing.T) {
	files, err := filepath.Glob("../examples/policies/*.yaml")
	if err != nil || len(files) < 2 {
		t.Fatalf("shipped policies: %v %v", files, err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.yaml") {
			continue
		}
		p, err := Load(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.rules {
			if r.name == "" || strings.HasPrefix(r.name, "rule ") || r.reason == "" {
				t.Errorf("%s: rule %q has no name or no reason", f, r.name)
			}
		}
	}
}

// The coding agents' example policy passes its own tests, and its shell
// tool is the agents' Bash.
func TestCodingAgentExample(t *testing.T) {
	p, err := Load("../examples/policies/coding-agent.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := p.RunTests(context.Background(), p.Tests())
	if !rep.OK() || rep.Passed < 30 {
		t.Fatalf("%d passed, %d failed: %+v", rep.Passed, rep.Failed, rep.Results)
	}
	if arg, ok := p.ShellArg("Bash"); !ok || arg != "command" {
		t.Errorf("Bash is not a shell tool of the policy (%q, %v)", arg, ok)
	}
}
