// Package web is the reviewer page of tollgate serve: the place where a
// person approves, denies (with a reason the model reads) or edits the
// tool calls an agent proposes, answers its questions, and follows its
// conversations.
//
// [Handler] serves the page at "/" and its assets under "/assets/"; the
// page itself speaks only to the JSON API and server-sent events under
// /v1 of the same origin (server/API.md). Everything is embedded in the
// binary: one html/template, the page's script and style sheet, the
// script and style of "approve, and allow calls like this" (learn.js, a
// module of its own), the view of a coding agent's Edit and MultiEdit
// calls as diffs (edits.js, another), one icon. There is no build step and nothing is
// loaded from another origin.
//
// What the page promises a reviewer:
//
//   - Arguments are shown whole and as text, never as HTML or markdown.
//     Direction-changing (bidi) and invisible characters, and control
//     characters other than newline and tab, are shown as marked badges
//     such as ⟨U+202E⟩, and the question carries a warning. Long values
//     are folded behind a "show all N characters" toggle, never cut.
//   - An approval carries the digest of the call that was shown, so it
//     cannot approve a call that changed meanwhile. An edit is checked as
//     JSON while it is typed (with the line and column of a mistake),
//     shown as a diff against the original before it is sent, and the
//     server's objections are listed next to the editor.
//   - The queue is live (one EventSource on /v1/stream): a question
//     answered elsewhere leaves it at once; the countdown of each
//     question follows its deadline, and at zero the answer buttons are
//     disabled.
//   - Nothing typed is lost to an error: a conflict, a timeout, a network
//     failure or an expired session is explained in the reviewer's terms
//     and what was typed stays on the page.
//   - Each question says why it was asked and what the call will do, in
//     the policy's words (its details: the rule that asked, each effect
//     with its object and risk, the risk, where it runs; an MCP tool's
//     server, title, description and hints, marked as the server's word).
//   - Similar questions are answered together: picked in the queue (a
//     checkbox, Space, Shift+click, or "all N like this in this thread"),
//     approved or denied in one action, each by its own compare-and-set
//     with its own digest; one answered elsewhere meanwhile is refused
//     alone and listed with why. A question with hidden characters, or
//     one its queue line shows only in part (the line marks what it
//     leaves out: "… +1 line", "… +2 args"), is never approved in bulk.
//   - The history lists threads (waiting, running, failed, finished,
//     timed out; search by id, tool or text) and answered questions (who,
//     when, the decision, how long it took), paged from the store; a
//     thread's page has its audit log; the address (#h=STATE&s=TEXT&t=ID,
//     #q=THREAD/ID) survives a reload.
//   - A call's result shows as soon as it has one, with its own start
//     time and duration, while the rest of its turn waits.
//   - Controls a role cannot use are not shown: a reviewer starts no
//     thread, a client answers no question.
//   - In the conversation each tool result says what happened to the
//     call in the words of the command line (internal/display.Outcome,
//     which the server sends with the thread):
//     "blocked by the policy (rule NAME: reason)", never "denied", apart
//     from "denied by NAME (reason)", "timed out", "aborted (reason)",
//     "edited by NAME; ran: ..." and "approved by NAME". A bash result
//     reads as its exit code, then stdout and stderr, not as JSON.
//   - "Approve + allow like this…" on an approval opens the narrowest
//     rule that covers the call (package policy/learn): each argument's
//     match to widen or narrow, where the rule applies and for how long,
//     its blast radius (past calls it would have allowed, those people
//     denied flagged), the rule as policy YAML; saving approves the call
//     with its digest and learns the rule. "Rules" lists the learned rules
//     to approve as a second reviewer or revoke.
//   - The page works with the keyboard (j/k, a, d, e, Space, Esc, ?), on
//     a phone (one column, large targets, no horizontal scrolling whatever
//     the model's name) and in light or dark mode.
//
// Security: every response carries a strict Content-Security-Policy
// ([ContentSecurityPolicy]: scripts and styles only from the page's own
// files, no inline code, no framing), X-Content-Type-Options: nosniff and
// Referrer-Policy: same-origin. The page never stores a bearer token: it
// signs in with POST /v1/session, then relies on the HttpOnly session
// cookie and sends the CSRF token it was given as X-CSRF-Token.
package web
