package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		want []string // each must appear in the error
	}{
		{"malformed yaml", "rules:\n  - name: a\n    tool: [bash\n", []string{"p.yaml:3:"}},
		{"tab indentation", "rules:\n\t- name: a\n", []string{"p.yaml:2:"}},
		{"empty file", "", []string{"p.yaml:1: the file is empty"}},
		{"not a mapping", "- a\n- b\n", []string{"p.yaml:1:1: the top level must be a mapping"}},
		{"unknown top key", "version: 1\nrulez: []\n", []string{`p.yaml:2:1: unknown key "rulez"`, "the policy has no rules"}},
		{"bad version", "version: 2\nrules: []\n", []string{"p.yaml:1:10: unsupported version 2"}},
		{"bad default", "default: maybe\nrules: []\n", []string{`p.yaml:1:10: unknown default action "maybe"`}},
		{"bad file timeout", "timeout: soon\nrules: []\n", []string{`p.yaml:1:10: bad timeout "soon"`}},
		{"unknown action", `
rules:
  - name: r1
    tool: bash
    action: alow
`, []string{`p.yaml:5:13: rule "r1": unknown action "alow" (want allow, ask or block)`}},
		{"missing action", "rules:\n  - name: r1\n    tool: x\n", []string{`p.yaml:2:5: rule "r1": the rule has no action`}},
		{"missing name", "rules:\n  - tool: x\n    action: allow\n", []string{`p.yaml:2:5: rule 1: the rule has no name`}},
		{"missing tool", "rules:\n  - name: r1\n    action: allow\n", []string{`rule "r1": the rule has no tool`}},
		{"duplicate name", "rules:\n  - {name: r1, tool: x, action: allow}\n  - {name: r1, tool: y, action: block}\n", []string{`p.yaml:3:12: rule "r1": another rule has the same name`}},
		{"reserved name", "rules:\n  - {name: (default), tool: x, action: allow}\n", []string{`rule "(default)": rule names may not start with '('`}},
		{"unknown rule field", "rules:\n  - name: r1\n    tool: x\n    wen: args.a > 1\n    action: ask\n", []string{`p.yaml:4:5: rule "r1": unknown field "wen"`}},
		{"bad tool glob", "rules:\n  - name: r1\n    tool: 'mcp_[z-a]'\n    action: allow\n", []string{`p.yaml:3:11: rule "r1": bad tool pattern "mcp_[z-a]": bad class: invalid character class range`}},
		{"bad tool glob in list", "rules:\n  - name: r1\n    tool: [ok, 'x[]a]']\n    action: allow\n", []string{`rule "r1": bad tool pattern "x[]a]"`}},
		{"bad command glob", "rules:\n  - name: r1\n    tool: bash\n    command: ['mkfs[z-a]x', '[]']\n    action: block\n", []string{`p.yaml:4:14: rule "r1": bad command pattern`}},
		{"unquoted boolean command", "rules:\n  - name: r1\n    tool: bash\n    command: [ls, true]\n    action: allow\n", []string{`item 2 is true, not a string (quote it: "true")`}},
		{"command on a non-shell tool", "rules:\n  - name: r1\n    tool: python\n    command: ls\n    action: allow\n", []string{`p.yaml:4:14: rule "r1": command applies to shell tools, and tool python names none (shell tools: bash)`}},
		{"cel syntax error", "rules:\n  - name: r1\n    tool: x\n    when: args.a >\n    action: ask\n", []string{`p.yaml:4:11: rule "r1": condition: ERROR: when:1:9: Syntax error`}},
		{"cel undeclared", "rules:\n  - name: r1\n    tool: x\n    when: argz.a > 1\n    action: ask\n", []string{`p.yaml:4:11: rule "r1": condition: ERROR: when:1:1: undeclared reference to 'argz'`}},
		{"cel command outside a command rule", "rules:\n  - name: r1\n    tool: bash\n    when: command.name == 'ls'\n    action: allow\n", []string{`rule "r1": condition: ERROR: when:1:1: undeclared reference to 'command'`}},
		{"cel no such field", "rules:\n  - name: r1\n    tool: bash\n    command: '*'\n    when: command.nmae == 'ls'\n    action: allow\n", []string{`p.yaml:5:11: rule "r1": condition:`, "undefined field 'nmae'"}},
		{"cel not bool", "rules:\n  - name: r1\n    tool: x\n    when: tool + 'x'\n    action: ask\n", []string{`rule "r1": condition: the condition is of type string, not bool`}},
		{"cel wrong helper args", "rules:\n  - name: r1\n    tool: bash\n    when: commands_all_in(args.cmd, 'ls')\n    action: allow\n", []string{`rule "r1": condition:`, "found no matching overload for 'commands_all_in'"}},
		{"timeout on allow", "rules:\n  - name: r1\n    tool: x\n    action: allow\n    timeout: 5m\n", []string{`p.yaml:5:14: rule "r1": timeout is only for ask rules`}},
		{"bad rule timeout", "rules:\n  - name: r1\n    tool: x\n    action: ask\n    timeout: -5\n", []string{`p.yaml:5:14: rule "r1": the timeout must be positive`}},
		{"allow_writes on block", "rules:\n  - name: r1\n    tool: bash\n    command: ls\n    action: block\n    allow_writes: true\n", []string{`rule "r1": allow_writes is for allow rules with command`}},
		{"bad shell map", "shell: {'b*': cmd}\nrules: []\n", []string{"p.yaml:1:8: shell maps tool names"}},
		{"bad test", "rules:\n  - {name: r1, tool: x, action: allow}\ntests:\n  - {tool: x, want: yes}\n", []string{`p.yaml:4:6: test 1: want must be allow, ask or block, not "yes"`}},
		{"test cmd on non-shell tool", "rules:\n  - {name: r1, tool: x, action: allow}\ntests:\n  - {tool: x, cmd: ls, want: allow}\n", []string{`test 1: cmd is for shell tools, and "x" is not one`}},
		{"several errors at once", `
rules:
  - name: a
    tool: x
    action: alow
  - name: b
    tool: y
    when: args.n >
    action: ask
`, []string{`p.yaml:5:13: rule "a": unknown action`, `p.yaml:8:11: rule "b": condition:`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("p.yaml", []byte(tt.src), nil)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("error %T is not a *policy.Error", err)
			}
		})
	}
}

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	p, err := Parse("p.yaml", []byte("rules:\n  - {name: r, tool: x, action: ask}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Default() != Ask || p.timeout != DefaultTimeout {
		t.Errorf("default %s, timeout %s", p.Default(), p.timeout)
	}
	if arg, ok := p.ShellArg("bash"); !ok || arg != "cmd" {
		t.Errorf("bash is a shell tool with argument cmd by default; got %q %v", arg, ok)
	}
	p, err = Parse("p.yaml", []byte("default: block\ntimeout: 90\nshell: {sh: script}\nrules:\n  - {name: r, tool: x, action: ask, timeout: 1h30m}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Default() != Block || p.timeout != 90*time.Second || p.rules[0].timeout != 90*time.Minute {
		t.Errorf("default %s, timeout %s, rule timeout %s", p.Default(), p.timeout, p.rules[0].timeout)
	}
	if _, ok := p.ShellArg("bash"); ok {
		t.Error("shell: replaces the default shell tools")
	}
	if got := strings.Join(p.Rules(), ","); got != "r" {
		t.Errorf("Rules() = %s", got)
	}
}

func TestLoadFile(t *testing.T) {
	t.Parallel()
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v", err)
	}
}
