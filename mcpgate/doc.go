// Package mcpgate gates the tools of MCP (Model Context Protocol) servers
// with tollgate's policies and approvals, in two ways.
//
// As tools of an agent: [Connect] (or [ConnectAll]) reaches a server — a
// stdio command or a streamable HTTP URL, from a [ServerConfig] written by
// hand, read from a --mcp flag ([ParseFlag]) or from the {"mcpServers":
// ...} file of desktop assistants ([LoadConfig]) — and
// [Upstream.AgentTools] gives its tools as [agent.Tool]s named
// mcp__<server>__<tool>. Their JSON Schemas validate the arguments; their
// [Annotations] (mcp_server, mcp_tool, read_only, destructive, idempotent,
// open_world, and stated: the hints the server gave rather than the
// specification's defaults) are shown to policy conditions and reviewers
// and never allow a call by themselves; every call passes the agent's middleware
// like any other tool's.
//
// As a gateway for any MCP client: [NewGateway] builds an MCP server that
// fronts upstreams. Each tools/call a client makes is a thread of its
// own. A call the policy allows as it stands is made by the gateway at
// once, in two writes: the thread, its claim and its audit entry before
// the call reaches the server (a store that cannot take it refuses the
// call), its result after the client has it. Any other call becomes one
// run of an agent on its thread, driven by a [host.Host]: the run's
// "model" relays the client's call, the policy decides it, an asked call
// is a durable question answered on the tollgate page, the command line,
// the API or by the client's own user ([policy] rules with elicit), and
// the tool's result goes back to the client. So a forwarded call gets
// exactly what a native call gets — the question bound to the arguments'
// digest, checked edits, deadlines, the audit log — and the run loop is
// the agent's; an allowed call's thread reads as a run's, message for
// message and entry for entry. The gateway serves clients over stdio ([Gateway.ServeStdio]) or
// streamable HTTP with a bearer token ([Gateway.HTTPHandler]); give
// [Gateway.Host] to package server for the page and the API.
//
// What the package promises, and how:
//
//   - A call no client waits for is never made. A check before the
//     approval (no question for it) and after it (no tool run for it)
//     refuses it: a client that cancelled or disconnected, a gateway that
//     restarted. [Gateway.Shutdown] answers waiting clients with a
//     retryable error (_meta "tollgate/retryable": the call was not made)
//     and aborts their questions; past its grace, an allowed call not
//     yet made is not made (its thread says so), and one running upstream
//     is cancelled (its outcome recorded as unknown); [Gateway.Start]
//     aborts what a previous process left, so a late answer is refused,
//     never applied.
//   - A waiting client is kept alive with progress notifications, and is
//     answered however its run ends (a result, an abort, an error). Once
//     the call runs, the server's own progress notifications are passed
//     on with their totals ([WithProgress]), shifted past the gateway's
//     so that the client sees its progress increase.
//   - A server that crashes is restarted with backoff (at most
//     Options.MaxRestarts failures in a row); one that does not answer in
//     its timeout and then fails a ping is killed and restarted. The call
//     in flight gets an error that says its outcome is unknown
//     ([ErrOutcomeUnknown]), and is never made again: no MCP tool is
//     idempotent to tollgate, whatever its hints say.
//   - A tool whose schema is malformed, or whose name no model API takes,
//     is left out and reported ([Upstream.Problems]); the server's other
//     tools stay.
//   - A stdio server gets only a few variables of tollgate's environment
//     (PATH, HOME, LANG, ...) and its own env, not tollgate's keys.
package mcpgate
