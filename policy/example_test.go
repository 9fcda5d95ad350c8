package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/policy"
)

const examplePolicy = `
version: 1
default: ask
rules:
  - name: read-only
    tool: bash
    command: [ls, cat, grep, wc, head]
    action: allow
  - name: destructive
    tool: bash
    command: [dd, "mkfs*", shred]
    action: block
    reason: destroys data
  - name: big-payment
    tool: pay
    when: args.amount > 1000
    action: ask
    timeout: 10m
    impact: money leaves the account
tests:
  - cmd: ls -la | grep go
    want: allow
  - cmd: ls; dd if=/dev/zero of=/dev/sda
    want: block
    rule: destructive
  - tool: pay
    args: {amount: 5000}
    want: ask
    rule: big-payment
`

func ExampleParse() {
	p, err := policy.Parse("example.yaml", []byte(examplePolicy), nil)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, cmd := range []string{"ls -la | wc -l", "ls; rm -rf ~", "cat x; shred -u x", "eval ls"} {
		d := p.Evaluate(ctx, policy.Call{Tool: "bash", Args: map[string]any{"cmd": cmd}})
		fmt.Printf("%-18s %-5s %s\n", cmd, d.Action, d.Rule)
	}
	d := p.Evaluate(ctx, policy.Call{Tool: "pay", Args: map[string]any{"amount": 5000.0}})
	fmt.Println(d.Action, d.Rule, d.Timeout, d.Details()["impact"])
	// Output:
	// ls -la | wc -l     allow read-only
	// ls; rm -rf ~       ask   (default)
	// cat x; shred -u x  block destructive
	// eval ls            ask   (shell review)
	// ask big-payment 10m0s money leaves the account
}

func ExamplePolicy_RunTests() {
	p, err := policy.Parse("example.yaml", []byte(examplePolicy), nil)
	if err != nil {
		panic(err)
	}
	report := p.RunTests(context.Background(), p.Tests())
	_ = report.Write(os.Stdout, false)
	// Output:
	// ok: 3 passed, 0 failed
}

func ExamplePolicy_Evaluate_matched() {
	p, _ := policy.Parse("example.yaml", []byte(examplePolicy), nil)
	d := p.Evaluate(context.Background(), policy.Call{Tool: "bash", Args: map[string]any{"cmd": "ls && bash -c 'dd if=x of=y'"}})
	fmt.Println(d.Action, "-", d.Reason)
	for _, m := range d.Matched {
		fmt.Printf("  %s %s: %s\n", m.Action, m.Rule, m.Command)
	}
	// Output:
	// block - destroys data (dd if=x of=y)
	//   allow read-only: ls
	//   ask (default): bash -c 'dd if=x of=y'
	//   block destructive: dd if=x of=y
}

func ExamplePolicy_HITL() {
	p, _ := policy.Parse("example.yaml", []byte(examplePolicy), nil)
	pol := p.HITL() // for hitl.NewApprovalPolicyMiddleware(channel, pol)
	for _, args := range []string{`{"cmd":"ls"}`, `{"cmd":"mkfs.ext4 /dev/sda"}`, `{"cmd":"rm x"}`} {
		d := pol(context.Background(), &hitl.PolicyContext{Tool: "bash", RawArgs: json.RawMessage(args)})
		fmt.Printf("%s %q\n", d.Action(), d.Reason())
	}
	// Output:
	// approve ""
	// deny "destroys data (mkfs.ext4 /dev/sda)"
	// ask ""
}

func ExampleReloadable() {
	dir, _ := os.MkdirTemp("", "policy")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "policy.yaml")
	_ = os.WriteFile(path, []byte("rules:\n  - {name: ls, tool: bash, command: ls, action: allow}\n"), 0o644)

	r, err := policy.NewReloadable(path, nil)
	if err != nil {
		panic(err)
	}
	ls := policy.Call{Tool: "bash", Args: map[string]any{"cmd": "ls"}}
	fmt.Println(r.Evaluate(context.Background(), ls).Action)

	// A broken edit keeps the policy in force and says why.
	_ = os.WriteFile(path, []byte("rules:\n  - {name: ls, tool: bash, command: ls, action: alow}\n"), 0o644)
	_, err = r.Reload()
	fmt.Println(filepath.Base(err.Error()))
	fmt.Println(r.Evaluate(context.Background(), ls).Action)
	// Output:
	// allow
	// policy.yaml:2:49: rule "ls": unknown action "alow" (want allow, ask or block)
	// allow
}
