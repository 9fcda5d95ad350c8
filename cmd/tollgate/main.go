// Command tollgate runs agents whose tool calls pass a policy and, when the
// policy says so, a person.
//
//	tollgate serve             the web service and the reviewer page
//	tollgate run "task"        run a task with approvals asked in the terminal
//	tollgate version           print the version
//
// Run "tollgate help" for the rest.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

const version = "0.1.0-dev"

// runFunc runs a command (or subcommand) on the arguments after its name
// and returns the exit status: 0, 1 when it failed, 2 for a usage error.
// It parses its flags first, with newFlagSet and parseFlags, so that
// --help prints its help and exits 0.
type runFunc = func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int

// command is one entry of the registry.
type command struct {
	name    string
	summary string
	// run runs the command. It is nil for a command whose subcommands
	// each run themselves: then "tollgate CMD" and "tollgate CMD --help"
	// print a help made from the subcommands.
	run         runFunc
	subcommands []subcommand
}

// subcommand is one of a command's subcommands, listed in its help and
// completed by the shell.
type subcommand struct {
	name    string
	summary string
	// run runs the subcommand on the arguments after its name. When nil,
	// the command's run gets them all, the subcommand's name first.
	run runFunc
}

var commands = map[string]*command{}

// register adds a command. A command with subcommands either has a nil run
// and subcommands that run themselves:
//
//	register("policy", "test a policy file, or explain its decision on a call", nil,
//		subcommand{name: "test", summary: "run the tests of policy files", run: policyTest},
//		subcommand{name: "explain", summary: "...", run: policyExplain})
//
// or a run that dispatches itself, and subcommands with no run that only
// say, for the help and the completions, which names it takes:
//
//	register("questions", "list or answer pending questions", questionsCmd,
//		subcommand{name: "list", summary: "list the questions waiting for an answer"},
//		subcommand{name: "answer", summary: "answer a question"})
func register(name, summary string, run runFunc, subcommands ...subcommand) {
	if _, dup := commands[name]; dup {
		panic("tollgate: command " + name + " registered twice")
	}
	if run == nil && len(subcommands) == 0 {
		panic("tollgate: command " + name + " has neither a run nor subcommands")
	}
	for _, s := range subcommands {
		if s.run == nil && run == nil {
			panic("tollgate: subcommand " + name + " " + s.name + " has no run, nor has its command")
		}
	}
	commands[name] = &command{name: name, summary: summary, run: run, subcommands: subcommands}
}

// sub returns the subcommand called name, or nil.
func (c *command) sub(name string) *subcommand {
	for i := range c.subcommands {
		if c.subcommands[i].name == name {
			return &c.subcommands[i]
		}
	}
	return nil
}

// dispatch runs the command on the arguments after its name.
func (c *command) dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if c.run != nil && (len(args) == 0 || c.sub(args[0]) == nil || c.sub(args[0]).run == nil) {
		return c.run(ctx, args, stdin, stdout, stderr)
	}
	if len(args) == 0 || isHelp(args[0]) {
		c.printHelp(stdout)
		return 0
	}
	s := c.sub(args[0])
	if s == nil {
		msg := fmt.Sprintf("unknown subcommand %q", args[0])
		if strings.HasPrefix(args[0], "-") {
			msg = fmt.Sprintf("%s comes after the subcommand", args[0])
		} else if near := closest(args[0], c.subcommandNames()); near != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", near)
		}
		fmt.Fprintf(stderr, "tollgate %s: %s\n\n", c.name, msg)
		c.printHelp(stderr)
		return 2
	}
	return s.run(ctx, args[1:], stdin, stdout, stderr)
}

func (c *command) subcommandNames() []string {
	names := make([]string, len(c.subcommands))
	for i, s := range c.subcommands {
		names[i] = s.name
	}
	return names
}

// printHelp is the help of a command whose subcommands run themselves.
func (c *command) printHelp(w io.Writer) {
	fmt.Fprintf(w, "usage: tollgate %s <subcommand> [flags] [args]\n\n", c.name)
	fmt.Fprintf(w, "%s.\n\nsubcommands:\n", upperFirst(c.summary))
	for _, s := range c.subcommands {
		fmt.Fprintf(w, "  %-10s %s\n", s.name, s.summary)
	}
	fmt.Fprintf(w, "\nRun 'tollgate %s <subcommand> --help' for its flags and examples.\n", c.name)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// usage is the help of tollgate itself.
func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: tollgate <command> [flags] [args]")
	fmt.Fprintln(w, "\nRuns agents whose every tool call passes a policy and, when the policy says")
	fmt.Fprintln(w, "so, a person: approve, deny or edit it, in the terminal or on a web page.")
	fmt.Fprintln(w, "\ncommands:")
	for _, name := range sortedCommandNames() {
		c := commands[name]
		line := c.summary
		if len(c.subcommands) > 0 {
			line += " (" + strings.Join(c.subcommandNames(), ", ") + ")"
		}
		fmt.Fprintf(w, "  %-11s %s\n", name, line)
	}
	fmt.Fprintln(w, "\nflags:")
	fmt.Fprintln(w, "  -h, --help   print this help")
	fmt.Fprintln(w, "  --version    print the version (as tollgate version does)")
	fmt.Fprintln(w, "\nexamples:")
	fmt.Fprintln(w, "  tollgate serve                 the service and the reviewer page on http://127.0.0.1:8080/")
	fmt.Fprintln(w, "  tollgate run '$ ls'            a task, each tool call approved in the terminal")
	fmt.Fprintln(w, "  tollgate help serve            a command's flags and examples (or tollgate serve --help)")
	fmt.Fprintln(w, "  tollgate --version")
	fmt.Fprintln(w, "  source <(tollgate completion bash)")
	fmt.Fprintln(w, "\nFlags marked [NAME] can also be set by the environment variable NAME;")
	fmt.Fprintln(w, "TOLLGATE_STORE names the store of every command.")
}

func init() {
	register("version", "print the version", versionCmd)
	register("help", "print the help of tollgate or of a command (tollgate help serve)", helpCmd)
}

const versionHelp = `usage: tollgate version

Prints the version of tollgate, and the commit and Go version it was
built from when known.

examples:
  tollgate version
  tollgate --version
`

func versionCmd(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", versionHelp, stderr)
	if code, done := parseFlagsOnly(fs, args, stdout); done {
		return code
	}
	line := "tollgate " + version
	var details []string
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			if modified == "true" {
				rev += " with local changes"
			}
			details = append(details, "commit "+rev)
		}
	}
	details = append(details, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH)
	fmt.Fprintf(stdout, "%s (%s)\n", line, strings.Join(details, ", "))
	return 0
}

const helpHelp = `usage: tollgate help [COMMAND [SUBCOMMAND]]

Prints the help of tollgate, or of a command: the same as
tollgate COMMAND --help.

examples:
  tollgate help
  tollgate help serve
  tollgate help policy test
`

func helpCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("help", helpHelp, stderr)
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() == 0 {
		usage(stdout)
		return 0
	}
	c, ok := commands[fs.Arg(0)]
	if !ok {
		return unknownCommand(fs.Arg(0), stderr)
	}
	rest := fs.Args()[1:]
	switch {
	case len(rest) > 1:
		return fs.usageError("want a command and at most one subcommand, not %q", strings.Join(fs.Args(), " "))
	case len(rest) == 1 && len(c.subcommands) == 0:
		return fs.usageError("%s has no subcommands", c.name)
	case len(rest) == 1 && c.sub(rest[0]) == nil:
		return fs.usageError("%s has no subcommand %q (it has %s)", c.name, rest[0], strings.Join(c.subcommandNames(), ", "))
	}
	return c.dispatch(ctx, append(rest, "--help"), stdin, stdout, stderr)
}

func unknownCommand(name string, stderr io.Writer) int {
	msg := fmt.Sprintf("unknown command %q", name)
	if near := closest(name, sortedCommandNames()); near != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", near)
	}
	fmt.Fprintf(stderr, "tollgate: %s\n\n", msg)
	usage(stderr)
	return 2
}

func main() {
	// Before anything else: the bash tool's sandbox helper is this binary.
	bash.MaybeRunHelper()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(runMain(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func runMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return 0
	}
	switch args[0] {
	case "-h", "--help", "-help":
		usage(stdout)
		return 0
	case "--version", "-version":
		return versionCmd(ctx, args[1:], stdin, stdout, stderr)
	}
	if strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "tollgate: unknown flag %s: the flags other than --help and --version come after the command\n\n", args[0])
		usage(stderr)
		return 2
	}
	c, ok := commands[args[0]]
	if !ok {
		return unknownCommand(args[0], stderr)
	}
	return c.dispatch(ctx, args[1:], stdin, stdout, stderr)
}
