package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// benchPolicy builds a 100-rule policy: a read-only allow list and 34
// other per-command rules for bash (some with conditions), 5 rules on the
// whole bash call, 55 rules with conditions for other tools and 5 tool
// patterns.
func benchPolicy(tb testing.TB, opts *Options) *Policy {
	var b strings.Builder
	b.WriteString("version: 1\nrules:\n")
	b.WriteString("  - name: read-only\n    tool: bash\n    command: [ls, cat, head, tail, grep, find, wc, pwd, echo, printf, stat, file, du, df, tree, which, sort, uniq, cut, tr, diff, jq, sed, awk, less, xargs, cd, test]\n    action: allow\n")
	b.WriteString("  - name: secrets\n    tool: bash\n    command: [cat, head, tail, less, grep]\n    when: command.args.exists(a, a.endsWith('.env') || a.contains('.ssh/'))\n    action: ask\n")
	dangerous := []string{"rm", "dd", "mkfs", "shred", "curl", "wget", "ssh", "scp", "rsync", "nc", "chmod", "chown", "kill", "pkill", "reboot", "shutdown", "mount", "umount", "iptables", "crontab", "systemctl", "apt", "pip", "npm", "docker", "kubectl", "terraform", "aws", "gcloud", "mv", "cp", "tee", "helm"}
	for i, name := range dangerous {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, "  - name: block-%s\n    tool: bash\n    command: %s\n    action: block\n", name, name)
		case 1:
			fmt.Fprintf(&b, "  - name: ask-%s\n    tool: bash\n    command: %s\n    when: command.args.size() > 1\n    action: ask\n", name, name)
		default:
			fmt.Fprintf(&b, "  - name: ask-%s\n    tool: bash\n    command: %s\n    action: ask\n", name, name)
		}
	}
	for i := range 5 {
		fmt.Fprintf(&b, "  - name: bash-call-%d\n    tool: bash\n    when: thread == 'thread-%d' && args.cmd.size() > 1000\n    action: ask\n", i, i)
	}
	for i := range 55 {
		fmt.Fprintf(&b, "  - name: tool-%d\n    tool: tool_%d\n    when: args.amount > %d\n    action: ask\n", i, i, i*10)
	}
	for i := range 5 {
		fmt.Fprintf(&b, "  - name: mcp-%d\n    tool: 'mcp_server%d_*'\n    action: ask\n", i, i)
	}
	p, err := Parse("bench.yaml", []byte(b.String()), opts)
	if err != nil {
		tb.Fatal(err)
	}
	if n := len(p.Rules()); n != 100 {
		tb.Fatalf("%d rules", n)
	}
	return p
}

// fiveCommands is a shell command of five commands, every one allowed.
const fiveCommands = "ls -la src | grep -v _test.go && cat README.md; wc -l main.go; head -n 20 go.mod"

// loop runs f b.N times and reports, beside the wall time, the CPU time
// per operation.
func loop(b *testing.B, f func()) {
	b.ReportAllocs()
	start := processCPU()
	for b.Loop() {
		f()
	}
	if cpu := processCPU() - start; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func BenchmarkEvaluate(b *testing.B) {
	ctx := context.Background()
	b.Run("100rules/shell5", func(b *testing.B) {
		p := benchPolicy(b, nil)
		call := bash(fiveCommands)
		if d := p.Evaluate(ctx, call); d.Action != Allow {
			b.Fatalf("%s by %s: %s", d.Action, d.Rule, d.Reason)
		}
		loop(b, func() { p.Evaluate(ctx, call) })
	})
	b.Run("100rules/shell5-uncached", func(b *testing.B) {
		p := benchPolicy(b, &Options{CacheSize: -1})
		call := bash(fiveCommands)
		loop(b, func() { p.Evaluate(ctx, call) })
	})
	b.Run("sandbox/shell5", func(b *testing.B) {
		p := loadSandbox(b)
		call := bash(fiveCommands)
		if d := p.Evaluate(ctx, call); d.Action != Allow {
			b.Fatalf("%s by %s: %s", d.Action, d.Rule, d.Reason)
		}
		loop(b, func() { p.Evaluate(ctx, call) })
	})
	// A hostile string: a chain of 10 000 wrappers (60 KB), which the
	// analysis cuts short and asks about. It is not cached, so every call
	// analyses it afresh.
	b.Run("sandbox/wrapper-chain", func(b *testing.B) {
		p := loadSandbox(b)
		call := bash(strings.Repeat("xargs ", 10000) + "ls")
		if d := p.Evaluate(ctx, call); d.Action != Ask {
			b.Fatalf("%s by %s", d.Action, d.Rule)
		}
		loop(b, func() { p.Evaluate(ctx, call) })
	})
	b.Run("100rules/unknown-tool", func(b *testing.B) {
		p := benchPolicy(b, nil)
		call := Call{Tool: "send_email", Args: map[string]any{"to": "a@example.com"}}
		if d := p.Evaluate(ctx, call); d.Action != Ask || d.Rule != RuleDefault {
			b.Fatalf("%s by %s", d.Action, d.Rule)
		}
		loop(b, func() { p.Evaluate(ctx, call) })
	})
	b.Run("100rules/cel-condition", func(b *testing.B) {
		p := benchPolicy(b, nil)
		call := Call{Tool: "tool_7", Args: map[string]any{"amount": 500.0}}
		loop(b, func() { p.Evaluate(ctx, call) })
	})
}
