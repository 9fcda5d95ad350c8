// Package hooks makes tollgate the approval service of the coding agents
// people already run — Claude Code and Codex — through their PreToolUse
// hooks: every tool call the agent is about to make is decided by a
// tollgate policy, asked of a person when the policy says so (on the
// reviewer page, a phone, the command line, the API), and the answer
// goes back to the agent's hook: allow, deny with a reason the agent's
// model reads, or allow an edited call.
//
// Quick start (what tollgate serve does):
//
//	svc, err := hooks.New(hooks.Config{Store: store, Policy: p.HITL(), Explain: p.Evaluate, MaxTimeout: p.MaxTimeout})
//	h, err := host.New(host.Config{Store: store, Agent: tmpl, Kinds: []host.Kind{svc.Kind()}})
//	err = h.Start(ctx)
//	err = svc.Start(h)
//	resp := svc.Handle(ctx, hooks.ClaudeCode, payload, &hooks.CallOptions{Wait: 10 * time.Minute})
//	// resp.Body is what the agent's hook prints (or its http hook returns)
//
// The server (package server) takes the hooks at POST /v1/hooks/{agent},
// from a command hook (package client: tollgate-hook claude-code, or
// tollgate hook claude-code) or Claude Code's http hooks.
//
// # How a call becomes a question
//
// There is no second approval path: a session of an agent is a thread
// (claude-code:SESSION, codex:SESSION), and each call is one run on it
// driven by the host like tollgate's own runs, whose model relays the
// call: its prompt holds the call (the agent, the session, the directory,
// the tool and its input); the relay makes the call with the agent's
// tool_use_id as the call's id; the approval middleware runs the policy
// on it; an ask writes a durable question bound to the call's digest,
// with its deadline, and the run parks; an answer from anywhere is the
// compare-and-set of every answer, checked (an edit against the tool's
// schema and the policy) where it is taken, and resumes the run. The
// call's "tool" only tells the hook what was decided: the agent runs the
// call. The audit log has what it has for any run: the question, who
// answered, the rule, the digest, the latency, the result — and what the
// agent reported back, from its PostToolUse hook ([OutputEvent]).
//
// A call the policy allows at once needs no run of the host: the service
// asks the policy itself and writes what that run would have written (its
// prompt, the relay's call, the call's record and result, the run's end,
// and their audit entries) in one commit, a compare-and-set on the
// thread's version as this process last wrote it; the agent is told
// allow once it is durable. No thread is read for it, so an allowed call
// costs the same however long its session. A version another process
// (a replica) has moved on makes the commit write nothing, and the call
// is a run of the host, which reads the thread.
//
// The agents' built-in tools have real schemas and meaning for policies:
// Bash is a shell tool (shell: {Bash: command}) read by the policy's
// shell analysis; Read, Write, Edit, MultiEdit and NotebookEdit carry
// file paths, which policy conditions compare with the directory the
// agent works in (dir, path_inside, path_secret, path_in_git); WebFetch
// carries a URL; mcp__SERVER__TOOL is an MCP server's tool, matched as
// MCP rules match (with annotations mcp_server and mcp_tool); any other
// tool is a call with an object input, which a policy's default decides.
//
// # What the service promises
//
//   - Never a silent allow: a payload it cannot read, a call it could not
//     record, a run that failed, a server shutting down, a caller whose
//     time ran out: each is a deny that says why ([Refusal] for what the
//     server refuses before the service sees it).
//   - One answer a call: a hook sent again with the same tool_use_id
//     (retried, or by a command hook after the server restarted) finds
//     the call — in memory, or in the session's threads — and is
//     answered as it was; no second question is asked.
//   - A question lasts no longer than the hook waits (CallOptions.Wait):
//     a call still waiting then is withdrawn (its question aborted, so a
//     later answer is refused) and denied, before the agent stops the
//     hook and decides by its own rules. An agent's http hook that goes
//     away has its call withdrawn at once; tollgate's command hook,
//     which sends the call again, keeps its question.
//   - Calls the agent makes at once are decided independently: a call
//     made while every thread of its session waits for a person goes on
//     a further thread of the session (claude-code:SESSION~2), so no call
//     waits behind another's question. So does a call once the session's
//     thread holds Config.ThreadBytes: a call the host runs (one asked or
//     blocked) reads its whole thread.
//
// Codex (0.169) takes allow only with updatedInput (it is always sent),
// runs a call whose hook says ask (never sent: a deny instead), and runs
// a call whose hook fails or times out; Claude Code (2.1.328) lets its
// own permission rules decide when a hook fails, times out, or an http
// hook's server cannot be reached or answers with an error status. The
// server therefore answers every hook request with a decision in the
// agent's words, and tollgate's command hook denies when it cannot reach
// the server.
package hooks
