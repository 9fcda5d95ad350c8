// Command tollgate runs agents whose tool calls pass a policy and, when the
// policy says so, a person.
//
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
	"syscall"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

const version = "0.1.0-dev"

// command is one subcommand: it parses its own flags from args.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int) {
	commands[name] = command{summary: summary, run: run}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: tollgate <command> [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	for _, name := range sortedCommandNames() {
		fmt.Fprintf(w, "  %-10s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "\nRun 'tollgate <command> -h' for a command's flags.")
}

func main() {
	// Before anything else: the bash tool's sandbox helper is this binary.
	bash.MaybeRunHelper()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(runMain(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func runMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	if args[0] == "version" || args[0] == "--version" {
		fmt.Fprintln(stdout, "tollgate", version)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "tollgate: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return c.run(ctx, args[1:], stdin, stdout, stderr)
}
