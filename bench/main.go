//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

func main() {
	bash.MaybeRunHelper() // bench sandbox: Check starts this binary as the helper once
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

const usage = `usage: go run ./bench COMMAND [flags]

Commands:
  cycle   the approval cycle through the public API, beside the raw
          commit rate of the same database (go run ./bench cycle -h)
  cluster replicas on one PostgreSQL: answer on one to tool on another,
          memory with many parked runs, cycles/s of several against one
          (go run ./bench cluster -h)
  gateway the latency the MCP gateway adds to an allowed call, and its
          calls/s at 1 and 10 concurrent, beside direct calls to the
          same server (go run ./bench gateway -h)
  hooks   the latency a coding agent's hook adds to an allowed call,
          command hook and HTTP endpoint, beside each one's raw limit
          (go run ./bench hooks -h)
  sandbox the bash tool's start of a command under each sandbox profile
          and helper binary, beside bash -c true (go run ./bench sandbox -h)
  notify  a question's notification: commit to webhook received, beside
          a direct POST (go run ./bench notify -h)

The service benchmark is a command of its own: go run ./bench/service -h
`

// run is the command line, for main and for the tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "cycle":
		return cycleCommand(ctx, args[1:], stdout, stderr)
	case "cluster":
		return clusterCommand(ctx, args[1:], stdout, stderr)
	case "gateway":
		return gatewayCommand(ctx, args[1:], stdout, stderr)
	case "hooks":
		return hooksCommand(ctx, args[1:], stdout, stderr)
	case "notify":
		return notifyCommand(ctx, args[1:], stdout, stderr)
	case "sandbox":
		return sandboxCommand(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
