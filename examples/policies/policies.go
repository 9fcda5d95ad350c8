// Package policies ships the example policy files, so that a binary can
// use one without the source tree: `tollgate serve` runs with [Sandbox]
// when no --policy is given.
package policies

import _ "embed"

// Sandbox is sandbox.yaml: read-only shell commands inside the working
// directory run, destructive ones are blocked, the rest is asked.
//
//go:embed sandbox.yaml
var Sandbox []byte

// SandboxName is the name errors and explanations give the built-in copy.
const SandboxName = "sandbox.yaml (built in)"

// CodingAgent is coding-agent.yaml: the policy for coding agents' hooks
// (Claude Code, Codex): reads and edits inside the project run, the shell
// through the analysis, secrets, .git and the network asked or blocked.
//
//go:embed coding-agent.yaml
var CodingAgent []byte

// CodingAgentName is the name errors and explanations give the built-in
// copy.
const CodingAgentName = "coding-agent.yaml (built in)"
