package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/tollgate-ai/tollgate/policy"
)

func init() {
	register("policy", "test a policy file, or explain its decision on a call", func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
		return runPolicy(ctx, args, stdout, stderr)
	})
}

const policyUsage = `usage:
  tollgate policy test [-v] FILE...
      Run the tests of each policy file: those under tests: in it and those
      in the test file beside it (NAME_test.yaml); FILE may also be a test
      file naming its policy with policy:. Exit status 1 when a test fails,
      2 when a file does not load.
  tollgate policy explain FILE --tool NAME [--args JSON] [--thread ID] [--json]
      Print the decision FILE reaches on a call, the commands a shell call
      would run, and every rule that matched.
  tollgate policy schema
      Print the JSON Schema of policy and test files, for editors.
`

// runPolicy implements "tollgate policy".
func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, policyUsage)
		return 0
	}
	switch args[0] {
	case "test":
		return policyTest(ctx, args[1:], stdout, stderr)
	case "explain":
		return policyExplain(ctx, args[1:], stdout, stderr)
	case "schema":
		_, _ = stdout.Write(policy.Schema())
		return 0
	}
	fmt.Fprintf(stderr, "tollgate policy: unknown subcommand %q\n\n%s", args[0], policyUsage)
	return 2
}

// parseInterspersed parses flags that may come after positional arguments
// (tollgate policy explain FILE --tool bash) and returns the positionals.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func policyTest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tollgate policy test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("v", false, "print every test, not only failures")
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	if len(files) == 0 {
		fmt.Fprint(stderr, "tollgate policy test: no files\n\n"+policyUsage)
		return 2
	}
	status := 0
	for _, file := range files {
		rep, err := policy.RunTestFile(ctx, file, nil)
		if err != nil {
			fmt.Fprintf(stderr, "%s\n", err)
			status = 2
			continue
		}
		if len(files) > 1 {
			fmt.Fprintf(stdout, "== %s\n", file)
		}
		if err := rep.Write(stdout, *verbose); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		if !rep.OK() && status == 0 {
			status = 1
		}
	}
	return status
}

func policyExplain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tollgate policy explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tool := fs.String("tool", "", "the tool called")
	argsJSON := fs.String("args", "{}", "the call's arguments, a JSON object")
	thread := fs.String("thread", "", "the thread id")
	asJSON := fs.Bool("json", false, "print the explanation as JSON")
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	if len(files) != 1 || *tool == "" {
		fmt.Fprint(stderr, "tollgate policy explain: want one FILE and --tool\n\n"+policyUsage)
		return 2
	}
	var callArgs map[string]any
	dec := json.NewDecoder(strings.NewReader(*argsJSON))
	if err := dec.Decode(&callArgs); err != nil || dec.More() {
		if err == nil {
			err = errors.New("trailing data")
		}
		fmt.Fprintf(stderr, "tollgate policy explain: --args must be a JSON object: %v\n", err)
		return 2
	}
	// As the tools would run here: a rule requiring a sandbox profile this
	// kernel cannot enforce asks.
	p, err := policy.Load(files[0], policyOptions())
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	e := p.Explain(ctx, policy.Call{Tool: *tool, Args: callArgs, ThreadID: *thread})
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(e); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		return 0
	}
	if err := e.Write(stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	return 0
}
