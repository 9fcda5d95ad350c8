// Command tollgate-hook is the command hook of coding agents (Claude
// Code, Codex) alone: what tollgate hook AGENT does, in a binary that
// imports only the standard library and package hooks/client, so that the
// process an agent starts for each of its tool calls starts fast.
//
//	go install ./cmd/tollgate ./cmd/tollgate-hook
//	tollgate hook install claude-code   # writes tollgate-hook into .claude/settings.json
//
// It reads the hook's input on stdin, sends it to a tollgate serve, and
// prints the answer; whatever goes wrong is a deny that says why (see
// tollgate hook claude-code --help).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tollgate-ai/tollgate/hooks/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "usage: tollgate-hook claude-code|codex [--server URL] [--token-file FILE] [--timeout D] [--on-error deny|ask]\n(see tollgate hook claude-code --help)")
		return 2
	}
	a, err := client.ParseAgent(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "tollgate-hook:", err)
		return 2
	}
	fs := flag.NewFlagSet("tollgate-hook "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f client.Flags
	f.Register(fs, 10*time.Minute)
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if err := f.Check(); err != nil {
		fmt.Fprintln(stderr, "tollgate-hook:", err)
		return 2
	}
	return client.Hook(ctx, a, f.OnError == "ask", func() (*client.Client, error) { return f.Client(a) }, stdin, stdout, stderr)
}
