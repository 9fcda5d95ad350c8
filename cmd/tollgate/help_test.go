package main

import (
	"context"
	"flag"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// helpPlace is a command, or a command and a subcommand, with a help.
type helpPlace struct {
	c    *command
	args []string // "serve", "policy test"
}

func (p helpPlace) String() string { return strings.Join(p.args, " ") }

// parent reports whether the place is a command that has subcommands:
// its help lists them, and the subcommands have the flags.
func (p helpPlace) parent() bool { return len(p.args) == 1 && len(p.c.subcommands) > 0 }

// helpPlaces are every registered command and subcommand, whoever
// registered them.
func helpPlaces() []helpPlace {
	var out []helpPlace
	for _, name := range sortedCommandNames() {
		c := commands[name]
		out = append(out, helpPlace{c, []string{name}})
		for _, s := range c.subcommands {
			out = append(out, helpPlace{c, []string{name, s.name}})
		}
	}
	return out
}

// Every way of asking for help exits 0 and prints the same help on stdout.
func TestHelpOfEveryCommand(t *testing.T) {
	for _, p := range helpPlaces() {
		t.Run(p.String(), func(t *testing.T) {
			code, want, errOut := runCLI(t, "", append(slices.Clone(p.args), "--help")...)
			if code != 0 || want == "" || errOut != "" {
				t.Fatalf("tollgate %s --help: exit %d, stdout %d bytes, stderr:\n%s", p, code, len(want), errOut)
			}
			for _, args := range [][]string{
				append(slices.Clone(p.args), "-h"),
				append([]string{"help"}, p.args...),
			} {
				code, out, errOut := runCLI(t, "", args...)
				if code != 0 || out != want || errOut != "" {
					t.Errorf("tollgate %s: exit %d, stderr %q, and a help other than --help's:\n%s", strings.Join(args, " "), code, errOut, out)
				}
			}
			if !strings.Contains(want, "usage: tollgate "+p.String()) && !strings.Contains(want, "tollgate "+p.String()+" ") {
				t.Errorf("the help does not show how to call tollgate %s:\n%s", p, want)
			}

			// A wrong flag: exit 2, the error and where the help is on
			// stderr (not the whole help, which buried the error).
			code, out, errOut := runCLI(t, "", append(slices.Clone(p.args), "--no-such-flag")...)
			if code != 2 || out != "" || !strings.Contains(errOut, "--no-such-flag") {
				t.Errorf("tollgate %s --no-such-flag: exit %d, want 2; stdout %q; stderr:\n%s", p, code, out, errOut)
			}
			if !p.parent() && (!strings.Contains(errOut, "see 'tollgate "+p.String()+" --help'") || strings.Contains(errOut, want)) {
				t.Errorf("tollgate %s --no-such-flag: want the error and see '... --help' on stderr, not the help:\n%s", p, errOut)
			}

			if p.parent() {
				for _, s := range p.c.subcommands {
					listed := regexp.MustCompile(`(?m)^\s+(tollgate ` + regexp.QuoteMeta(p.String()) + ` )?` + regexp.QuoteMeta(s.name) + `\b`)
					if !listed.MatchString(want) {
						t.Errorf("the help of %s does not list its subcommand %s:\n%s", p, s.name, want)
					}
				}
				return
			}
			fs := commandFlags(context.Background(), p.c, p.args[1:]...)
			if fs == nil {
				t.Fatalf("tollgate %s --help did not print its help with parseFlags (cmd/tollgate/flags.go), so its flags are unknown to the help and the completions; "+
					"a command with subcommands lists them in register(name, summary, run, subcommand{...})", p)
			}
			checkFlagsShown(t, p.String(), fs, want)
		})
	}
}

// checkFlagsShown: each flag is in the flags section, with an example in
// the examples: block or in its usage ("e.g. --name value").
func checkFlagsShown(t *testing.T, place string, fs *flagSet, help string) {
	t.Helper()
	flagsAt := strings.Index(help, "\nflags:\n")
	examples := examplesBlock(help)
	fs.VisitAll(func(f *flag.Flag) {
		name := dashed(f.Name)
		if flagsAt < 0 || !regexp.MustCompile(`(?m)^  `+regexp.QuoteMeta(name)+`( |$)`).MatchString(help[flagsAt:]) {
			t.Errorf("tollgate %s --help: %s is not in its flags section:\n%s", place, name, help)
		}
		used := regexp.MustCompile(`(^|[\s'"(])--?` + regexp.QuoteMeta(f.Name) + `([\s='"]|$)`)
		if !used.MatchString(examples) && !strings.Contains(f.Usage, "e.g. "+name) {
			t.Errorf("tollgate %s --help: no example of %s, neither under examples: nor as e.g. %s in its usage", place, name, name)
		}
		if f.Name == "store" && !strings.Contains(f.Usage, "[TOLLGATE_STORE]") {
			t.Errorf("tollgate %s: --store does not say it defaults to TOLLGATE_STORE: %q", place, f.Usage)
		}
	})
}

// examplesBlock is the indented text after a line "examples:".
func examplesBlock(help string) string {
	var b strings.Builder
	in := false
	for line := range strings.Lines(help) {
		switch {
		case strings.TrimSpace(line) == "examples:":
			in = true
		case in && strings.TrimSpace(line) != "" && !strings.HasPrefix(line, " "):
			in = false
		case in:
			b.WriteString(line)
		}
	}
	return b.String()
}

func TestHelpOfTollgate(t *testing.T) {
	var want string
	for _, args := range [][]string{{}, {"--help"}, {"-h"}, {"help"}} {
		code, out, errOut := runCLI(t, "", args...)
		if code != 0 || errOut != "" {
			t.Fatalf("tollgate %v: exit %d, stderr %q", args, code, errOut)
		}
		if want == "" {
			want = out
		} else if out != want {
			t.Errorf("tollgate %v prints another help:\n%s", args, out)
		}
	}
	for _, name := range sortedCommandNames() {
		if !regexp.MustCompile(`(?m)^  ` + name + ` `).MatchString(want) {
			t.Errorf("the help does not list %s:\n%s", name, want)
		}
	}
	if !strings.Contains(want, "--version") || !strings.Contains(want, "  version ") {
		t.Errorf("the help does not list version and --version:\n%s", want)
	}

	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errOut := runCLI(t, "", args...)
		if code != 0 || !strings.HasPrefix(out, "tollgate "+version) || errOut != "" {
			t.Errorf("tollgate %v: exit %d, %q %q", args, code, out, errOut)
		}
	}
}

func TestHelpMistakes(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sever"}, `unknown command "sever" (did you mean serve?)`},
		{[]string{"--stor"}, "unknown flag --stor"},
		{[]string{"help", "nosuch"}, `unknown command "nosuch"`},
		{[]string{"help", "serve", "extra"}, "serve has no subcommands"},
		{[]string{"help", "policy", "tset"}, `policy has no subcommand "tset"`},
		{[]string{"policy", "tset"}, `unknown subcommand "tset" (did you mean test?)`},
		{[]string{"serve", "--stor", "x"}, "tollgate serve: unknown flag --stor (did you mean --store?)"},
		{[]string{"serve", "--cmd-timeout", "5"}, "--cmd-timeout \"5\": want a duration such as 90s"},
		{[]string{"serve", "--addr"}, "--addr needs a value"},
		{[]string{"token", "new", "--name", "x"}, "--name and --role are required"},
		{[]string{"policy", "explain", "p.yaml"}, "--tool is required"},
	} {
		code, out, errOut := runCLI(t, "", c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("tollgate %s: exit %d, want 2; stdout %q; stderr lacks %q:\n%s", strings.Join(c.args, " "), code, out, c.want, errOut)
		}
	}
}

// TOLLGATE_STORE is the default of --store, shown without its password.
func TestStoreFromTheEnvironment(t *testing.T) {
	t.Setenv("TOLLGATE_STORE", "postgres://tollgate:s3cret@db.internal/tollgate")
	code, out, _ := runCLI(t, "", "serve", "--help")
	if code != 0 || !strings.Contains(out, `(default "postgres://tollgate:xxxxx@db.internal/tollgate")`) || strings.Contains(out, "s3cret") {
		t.Errorf("serve --help with TOLLGATE_STORE set: exit %d:\n%s", code, out)
	}
	fs := newFlagSet("x", "", nil)
	if got := *storeFlag(fs, defaultStore()); got != "postgres://tollgate:s3cret@db.internal/tollgate" {
		t.Errorf("storeFlag default = %q, want $TOLLGATE_STORE", got)
	}
	t.Setenv("TOLLGATE_STORE", "")
	if err := newFlagSet("x", "", nil).Parse(nil); err != nil {
		t.Fatal(err)
	}
}

// Flags may follow the arguments where a command allows it, and "--" ends
// them.
func TestInterspersedFlags(t *testing.T) {
	fs := newFlagSet("x", "", nil)
	fs.interspersed = true
	v := fs.Bool("v", false, "")
	tool := fs.String("tool", "", "")
	if code, done := parseFlags(fs, []string{"a.yaml", "--tool", "bash", "b.yaml", "-v", "--", "-c.yaml", "--tool"}, nil); done {
		t.Fatalf("parseFlags: %d", code)
	}
	if !*v || *tool != "bash" || !slices.Equal(fs.Args(), []string{"a.yaml", "b.yaml", "-c.yaml", "--tool"}) || fs.NArg() != 4 || fs.Arg(2) != "-c.yaml" {
		t.Errorf("v %v, tool %q, args %q", *v, *tool, fs.Args())
	}
}

// The examples of the source flags name the store a command reads when
// neither --store nor TOLLGATE_STORE is given: serve's, as the --store
// flag's own default says (they said sqlite:tollgate.db, a file in the
// current directory that no command opens by itself).
func TestSourceExamplesNameTheDefaultStore(t *testing.T) {
	t.Setenv("TOLLGATE_STORE", "")
	t.Setenv("XDG_STATE_HOME", "")
	const claim = "read the store (default $TOLLGATE_STORE, else "
	seen := 0
	for _, p := range helpPlaces() {
		_, help, _ := runCLI(t, "", append(slices.Clone(p.args), "--help")...)
		i := strings.Index(help, claim)
		if i < 0 {
			continue
		}
		seen++
		line, _, _ := strings.Cut(help[i+len(claim):], "\n")
		if !strings.Contains(line, defaultStore()+")") {
			t.Errorf("tollgate %s --help: the store by default is %s, the examples say: %s", p, defaultStore(), line)
		}
	}
	if seen == 0 {
		t.Fatal("no help shows the source flags' examples")
	}
}
