package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tollgate-ai/tollgate/policy"
)

func init() {
	register("policy", "test a policy file, or explain its decision on a call", nil,
		subcommand{name: "test", summary: "run the tests of policy files", run: policyTest},
		subcommand{name: "explain", summary: "print the decision a policy reaches on a call, and the rules that matched", run: policyExplain},
		subcommand{name: "schema", summary: "print the JSON Schema of policy and test files, for editors", run: policySchema})
}

const policyTestHelp = `usage: tollgate policy test [-v] FILE...

Runs the tests of each policy file: those under tests: in it and those in
the test file beside it (NAME_test.yaml); FILE may also be a test file
naming its policy with policy:. Exit status 1 when a test fails, 2 when a
file does not load.

examples:
  tollgate policy test policy.yaml
  tollgate policy test -v policy.yaml policy_test.yaml
  tollgate policy test examples/policies/*.yaml
`

func policyTest(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("policy test", policyTestHelp, stderr)
	fs.interspersed = true
	verbose := fs.Bool("v", false, "print every test, not only failures")
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	files := fs.Args()
	if len(files) == 0 {
		return fs.usageError("no policy files: give at least one FILE")
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

const policyExplainHelp = `usage: tollgate policy explain FILE --tool NAME [--args JSON] [--thread ID] [--dir DIR] [--json]

Prints the decision FILE reaches on a call (allow, ask or block), the
commands a shell call would run, and every rule that matched. The policy
is loaded as tollgate serve loads it: a rule requiring a sandbox profile
this kernel cannot enforce asks.

examples:
  tollgate policy explain policy.yaml --tool bash --args '{"cmd": "ls; rm -rf ~"}'
  tollgate policy explain policy.yaml --tool bash --args '{"cmd": "git push"}' --thread team-a-42
  tollgate policy explain policy.yaml --tool http_get --args '{"url": "https://example.com"}' --json
  tollgate policy explain examples/policies/coding-agent.yaml --tool Write --args '{"file_path": "/home/me/p/a.go", "content": ""}' --dir /home/me/p
`

func policyExplain(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("policy explain", policyExplainHelp, stderr)
	fs.interspersed = true
	tool := fs.String("tool", "", "the `name` of the tool called")
	argsJSON := fs.String("args", "{}", "the call's arguments, a JSON `object`")
	thread := fs.String("thread", "", "the thread `id`, for rules that match threads")
	dir := fs.String("dir", "", "the `directory` the call works in (a coding agent's project), for rules that read dir")
	asJSON := fs.Bool("json", false, "print the explanation as JSON")
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	files := fs.Args()
	switch {
	case len(files) == 0:
		return fs.usageError("no policy file: give one FILE")
	case len(files) > 1:
		return fs.usageError("one policy file at a time, not %d (%s)", len(files), strings.Join(files, " "))
	case *tool == "":
		return fs.usageError("--tool is required: the tool called, such as --tool bash")
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
	e := p.Explain(ctx, policy.Call{Tool: *tool, Args: callArgs, ThreadID: *thread, Dir: *dir})
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
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

const policySchemaHelp = `usage: tollgate policy schema

Prints the JSON Schema of policy and test files, for editors that check
and complete YAML (a yaml-language-server comment, or the editor's schema
settings).

examples:
  tollgate policy schema > policy.schema.json
  tollgate policy schema | jq '.properties | keys'
`

func policySchema(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("policy schema", policySchemaHelp, stderr)
	if code, done := parseFlagsOnly(fs, args, stdout); done {
		return code
	}
	if _, err := stdout.Write(policy.Schema()); err != nil {
		fmt.Fprintln(stderr, "tollgate policy schema:", err)
		return 1
	}
	return 0
}
