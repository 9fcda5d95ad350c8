// Package policy classifies an agent's tool calls as allow, ask or block
// from a declarative policy file, with conditions in CEL and shell-aware
// rules for tools that run command strings.
//
// A policy file (YAML; its JSON Schema is [Schema]) has rules. Each rule
// names tools (a name, a pattern, or "*"), may have a CEL condition
// ("when") and says allow, ask or block. For a shell tool (by default the
// bash tool, whose cmd argument is the command string), a rule with
// "command" applies to each command the string would run, as package
// [github.com/tollgate-ai/tollgate/policy/shell] finds them through ;, &&,
// pipes, $(...), bash -c, sudo, xargs, find -exec and the rest:
//
//	version: 1
//	default: ask                 # calls and commands no rule covers
//	rules:
//	  - name: read-only
//	    tool: bash
//	    command: [ls, cat, head, grep, find, wc]
//	    action: allow
//	  - name: destructive
//	    tool: bash
//	    command: [dd, "mkfs*", shred]
//	    action: block
//	    reason: destroys data
//	  - name: big-payment
//	    tool: pay
//	    when: args.amount > 1000
//	    action: ask
//	    timeout: 10m
//	    impact: money leaves the account
//
// [Policy.Evaluate] decides a [Call]:
//
//   - The most restrictive matching rule wins: block over ask over allow.
//   - A call no rule matches gets the default action (ask unless the file
//     says otherwise), and so does each command of a shell call that no
//     rule covers: a shell call is allowed only when every command in it
//     is allowed, so "ls; rm -rf ~" is not allowed by a rule that allows ls.
//   - A shell command string the analysis cannot vouch for (it does not
//     parse, uses eval or a computed command name, or an option such as
//     find -delete or git -c) is asked, whatever the allow rules say.
//   - An allow rule with command does not cover a command that redirects
//     output into a file unless it sets allow_writes.
//   - A condition that fails at run time asks (fail closed); conditions are
//     compiled and type-checked when the file loads, and their cost is
//     limited ([DefaultCostLimit]).
//
// Conditions see tool, args, thread and annotations (what the tool says of
// itself: an MCP server's tool has mcp_server, mcp_tool and the hints
// read_only, destructive, idempotent and open_world, defaulted as the MCP
// specification says, and stated, the hints the server gave; a hint is
// the server's word, so write rules that
// allow on it only for servers you trust); rules with command also see
// command (name, args, redirects, writes, via, review, files, outside,
// secrets, ...). Helpers take a command string: commands(s),
// commands_all_in(s, names), commands_any_in(s, names), writes_files(s),
// shell_review(s).
//
// Rules learned from reviewers' answers ("approve, and allow calls like
// this", package [github.com/tollgate-ai/tollgate/policy/learn]) are
// given in [Options].Learned: [Policy.Evaluate] asks them about a call
// its own rules ask about when [Decision].Learnable — never about one
// they block, never about what a rule marks learnable: false (by default
// what reads secrets, names files only known at run time, or destroys
// data); a file's learn: section may require a second reviewer or turn
// learning off. [Policy.EvaluateRules] decides by the file's rules alone.
//
// The [Decision] names the deciding rule and every rule that matched, and
// says it in words ([Decision.Why]: "rule NAME: REASON", "no rule matched
// rm -rf build: the policy's default is ask"). An ask's [Decision.Details],
// stored with the question for its reviewer, also say what a shell call
// will do ([Decision.Effects]: each file it deletes or writes, the hosts
// it reaches, code it downloads and runs, ...; and their [Decision.Risk])
// and where it runs ([Decision.Runs], from the tool's annotations). Use
// a policy with package hitl through [Policy.HITL], reload it while in use
// with [Reloadable], and test it with cases written in the file (tests:)
// or beside it (NAME_test.yaml) through [Policy.RunTests] or
// "tollgate policy test".
//
// # Names
//
// [Decision] is the engine's verdict; when the text says "the policy
// decided", it means this one. hitl.ApprovalDecision, interrupt.ToolDecision
// and agent.Decision are the approval function's, the reviewer's and the
// run loop's (docs/ARCHITECTURE.md, "Names").
package policy
