package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// completionScript writes `tollgate completion SHELL` to a file.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	code, out, errOut := runCLI(t, "", "completion", shell)
	if code != 0 || errOut != "" || out == "" {
		t.Fatalf("tollgate completion %s: exit %d\n%s", shell, code, errOut)
	}
	path := filepath.Join(t.TempDir(), "tollgate."+shell)
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

type compCase struct {
	words []string // the command line; the last word is the one being completed
	want  []string // among the completions
	none  bool     // no completions of ours (the shell completes files)
}

func TestCompletionBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script := completionScript(t, "bash")
	if out, err := exec.Command(bash, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	cases := []compCase{
		{words: []string{"tollgate", "ser"}, want: []string{"serve"}},
		{words: []string{"tollgate", "serve", "--st"}, want: []string{"--store"}},
		{words: []string{"tollgate", "serve", "--store", "sqlite", ":", "x.db", "--ad"}, want: []string{"--addr"}},
		{words: []string{"tollgate", "serve", "--store", ""}, none: true},
		{words: []string{"tollgate", "policy", "te"}, want: []string{"test"}},
		{words: []string{"tollgate", "policy", "test", "-"}, want: []string{"-v", "--help"}},
		{words: []string{"tollgate", "policy", "explain", "p.yaml", "--to"}, want: []string{"--tool"}},
		{words: []string{"tollgate", "help", "pol"}, want: []string{"policy"}},
		{words: []string{"tollgate", "help", "policy", "ex"}, want: []string{"explain"}},
		{words: []string{"tollgate", "--ver"}, want: []string{"--version"}},
		{words: []string{"tollgate", "completion", ""}, want: []string{"bash", "zsh", "fish"}},
	}
	// Everything the registry has, whoever registered it: each command,
	// subcommand and flag is completed where it belongs.
	for _, n := range completionTree(context.Background()) {
		at := append([]string{"tollgate"}, strings.Fields(n.path)...)
		if len(n.words) > 0 {
			cases = append(cases, compCase{words: append(slices.Clone(at), ""), want: n.wordNames()})
		}
		cases = append(cases, compCase{words: append(slices.Clone(at), "-"), want: n.flagNames()})
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "source %s\n", shQuote(script))
	for i, c := range cases {
		fmt.Fprintf(&sb, "COMP_WORDS=(%s); COMP_CWORD=%d; COMPREPLY=(); _tollgate; echo \"<<%d>> ${COMPREPLY[*]}\"\n",
			joinQuoted(c.words, shQuote), len(c.words)-1, i)
	}
	checkCompletions(t, "bash", cases, exec.Command(bash, "--norc", "--noprofile", "-c", sb.String()))
}

// checkCompletions runs cmd, which prints "<<i>> completions..." for
// each case i, and checks each case's completions.
func checkCompletions(t *testing.T, shell string, cases []compCase, cmd *exec.Cmd) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", shell, err, out)
	}
	got := map[int][]string{}
	for line := range strings.Lines(string(out)) {
		var i int
		if _, err := fmt.Sscanf(line, "<<%d>>", &i); err == nil {
			_, rest, _ := strings.Cut(line, ">>")
			got[i] = strings.Fields(rest)
		}
	}
	for i, c := range cases {
		if c.none && len(got[i]) > 0 {
			t.Errorf("%s: %q completes %q, want nothing of ours (files)", shell, strings.Join(c.words, " "), got[i])
		}
		for _, w := range c.want {
			if !slices.Contains(got[i], w) {
				t.Errorf("%s: %q completes %q, want %s among them", shell, strings.Join(c.words, " "), got[i], w)
			}
		}
	}
}

// zsh: the script parses, and its function offers the right candidates
// (the completion system's _describe, _files and compdef stubbed).
func TestCompletionZsh(t *testing.T) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("no zsh (optional)")
	}
	script := completionScript(t, "zsh")
	if out, err := exec.Command(zsh, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	cases := []compCase{
		{words: []string{"tollgate", "ser"}, want: []string{"serve"}},
		{words: []string{"tollgate", "serve", "--st"}, want: []string{"--store"}},
		{words: []string{"tollgate", "serve", "--store", "x.db", "--ad"}, want: []string{"--addr"}},
		{words: []string{"tollgate", "serve", "--store", ""}, want: []string{"FILES"}},
		{words: []string{"tollgate", "help", "policy", "e"}, want: []string{"explain"}},
		{words: []string{"tollgate", "policy", "test", "-"}, want: []string{"-v"}},
	}
	var sb strings.Builder
	sb.WriteString("compdef() { :; }\n_describe() { local x; for x in \"${(@P)${@[-1]}}\"; do print -rn -- \"${x%%:*} \"; done; }\n_files() { print -n FILES; }\n")
	fmt.Fprintf(&sb, "source %s\n", shQuote(script))
	for i, c := range cases {
		fmt.Fprintf(&sb, "words=(%s); CURRENT=%d; print -n '<<%d>> '; _tollgate; print\n", joinQuoted(c.words, shQuote), len(c.words), i)
	}
	checkCompletions(t, "zsh", cases, exec.Command(zsh, "-f", "-c", sb.String()))
}

func TestCompletionFish(t *testing.T) {
	fish, err := exec.LookPath("fish")
	if err != nil {
		t.Skip("no fish (optional)")
	}
	script := completionScript(t, "fish")
	if out, err := exec.Command(fish, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("fish -n: %v\n%s", err, out)
	}
	cases := []compCase{
		{words: []string{"tollgate", "ser"}, want: []string{"serve"}},
		{words: []string{"tollgate", "serve", "--st"}, want: []string{"--store"}},
		{words: []string{"tollgate", "serve", "--store", "x.db", "--ad"}, want: []string{"--addr"}},
		{words: []string{"tollgate", "help", "policy", "e"}, want: []string{"explain"}},
		{words: []string{"tollgate", "policy", "test", "-"}, want: []string{"-v"}},
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "source %s\n", fishQuote(script))
	for i, c := range cases {
		fmt.Fprintf(&sb, "echo '<<%d>>' (complete -C %s | string replace -r '\\t.*' '')\n", i, fishQuote(strings.Join(c.words, " ")))
	}
	cmd := exec.Command(fish, "--no-config", "-c", sb.String())
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir(), "XDG_DATA_HOME="+t.TempDir())
	checkCompletions(t, "fish", cases, cmd)
}
