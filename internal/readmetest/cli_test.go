//go:build unix

package readmetest

// The CLI as its help describes it.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

type cli struct {
	t     *testing.T
	path  string
	helps map[string]string
}

// help is the output of tollgate ARGS... --help (tollgate --help with no
// args); it must exit 0.
func (c *cli) help(args ...string) string {
	key := strings.Join(args, " ")
	if h, ok := c.helps[key]; ok {
		return h
	}
	cmd := exec.Command(c.path, append(slices.Clone(args), "--help")...)
	out, err := cmd.CombinedOutput()
	h := string(out)
	if err != nil {
		h = ""
	}
	c.helps[key] = h
	return h
}

// listed are the first words of the lines under heading (such as
// "commands:") in a help text, up to the next blank line.
func listed(help, heading string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(help, "\n") {
		switch {
		case strings.TrimSpace(l) == heading:
			in = true
		case in && strings.TrimSpace(l) == "":
			return out
		case in && strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "    "):
			if f := strings.Fields(l); len(f) > 0 {
				out = append(out, f[0])
			}
		}
	}
	return out
}

func (c *cli) commands() []string { return listed(c.help(), "commands:") }

// verbs are a command's subcommands: under "subcommands:", or named in its
// usage lines (tollgate questions list ...).
func (c *cli) verbs(name string) []string {
	h := c.help(name)
	out := listed(h, "subcommands:")
	usage, _, _ := strings.Cut(h, "\n\n")
	re := regexp.MustCompile(`tollgate ` + regexp.QuoteMeta(name) + ` ([a-z][a-z-]*)\b`)
	for _, m := range re.FindAllStringSubmatch(usage, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

func hasFlag(help, flag string) bool {
	return regexp.MustCompile(`(?m)(^|[\s\[])--?` + regexp.QuoteMeta(flag) + `([\s=\]]|$)`).MatchString(help)
}

// checkTollgate checks the arguments of one tollgate command line.
func checkTollgate(c *cli, args []string) error {
	if len(args) == 0 {
		return errors.New("tollgate with no command")
	}
	name, rest := args[0], args[1:]
	help := c.help()
	if !strings.HasPrefix(name, "-") {
		if !slices.Contains(c.commands(), name) {
			return fmt.Errorf("tollgate %s: no such command (tollgate --help lists %s)", name, strings.Join(c.commands(), ", "))
		}
		help = c.help(name)
		if verbs := c.verbs(name); len(verbs) > 0 {
			if len(rest) == 0 || !slices.Contains(verbs, rest[0]) {
				return fmt.Errorf("tollgate %s: want one of its subcommands %s", name, strings.Join(verbs, ", "))
			}
			help = c.help(name, rest[0])
			rest = rest[1:]
		}
		if help == "" {
			return fmt.Errorf("tollgate %s --help fails", strings.Join(args[:len(args)-len(rest)], " "))
		}
	} else {
		rest = args
	}
	for _, w := range rest {
		if !strings.HasPrefix(w, "-") || w == "-" || w == "--" {
			continue
		}
		flag, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if !hasFlag(help, flag) {
			return fmt.Errorf("%s: not a flag its help lists", w)
		}
	}
	return nil
}

var ciTestRE = regexp.MustCompile(`(?m)^\s*go test( -\S+)* \./\.\.\.\s*$`)

// checkCommand checks a command without running it: its go commands and
// tollgate command lines.
func checkCommand(cmd command, c *cli, root, module string) error {
	if cmd.ctrlC {
		return nil
	}
	for _, words := range simpleCommands(cmd.text) {
		switch words[0] {
		case "tollgate":
			if err := checkTollgate(c, words[1:]); err != nil {
				return err
			}
		case "go":
			if err := checkGo(cmd, words, c, root, module); err != nil {
				return err
			}
		}
	}
	if cmd.until && !isServe(cmd.text) {
		return errors.New("# until Ctrl-C: the test knows how to check only tollgate serve")
	}
	for _, n := range cmd.needs {
		if n != "network" && n != "postgres" && !regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`).MatchString(n) {
			return fmt.Errorf("# needs: %s: want network, postgres or an environment variable", n)
		}
	}
	return nil
}

func checkGo(cmd command, words []string, c *cli, root, module string) error {
	switch {
	case len(words) >= 3 && words[1] == "run" && words[2] == "./cmd/tollgate":
		return checkTollgate(c, words[3:])
	case len(words) == 3 && words[1] == "test" && words[2] == "./...":
		ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
		if err != nil {
			return fmt.Errorf("go test ./... is the README's test command, but: %v", err)
		}
		if !ciTestRE.Match(ci) {
			return errors.New(".ci/run no longer runs go test ./..., the README's test command")
		}
		return nil
	case len(words) == 3 && words[1] == "install" && strings.HasSuffix(words[2], "@latest"):
		pkg := strings.TrimSuffix(words[2], "@latest")
		if pkg != module+"/cmd/tollgate" {
			return fmt.Errorf("go install %s: this module's command is %s/cmd/tollgate", pkg, module)
		}
		if !slices.Contains(cmd.needs, "network") {
			return errors.New("go install ...@latest downloads: mark it # needs: network")
		}
		return nil
	}
	return fmt.Errorf("%s: the README test does not know how to check this go command", strings.Join(words, " "))
}

func isServe(text string) bool {
	for _, w := range simpleCommands(text) {
		if len(w) >= 2 && w[0] == "tollgate" && w[1] == "serve" ||
			len(w) >= 4 && w[0] == "go" && w[1] == "run" && w[3] == "serve" {
			return true
		}
	}
	return false
}
