// Package notify tells reviewers of questions wherever they are: signed
// webhooks, Slack messages with buttons, mail with one-time links, and an
// escalation as a deadline nears. It never answers anything by itself: a
// question that nobody answers times out and its call is blocked.
//
// # Events and deliveries
//
// The events are those of the store's log, each committed with what it
// records: a question asked (question.created), resolved
// (question.resolved: answered, timed out or aborted), a run that stopped
// on an error (run.failed); and one of a clock: a question that still
// waits as its deadline nears (question.deadline_near). Each event is
// turned into one [checkpoint.Delivery] per destination of the groups
// its rule names (a policy rule's notify: [team-infra], or the
// configuration's default), whose ID is its idempotency key.
//
// With the host ([Notifier.Run], SQLite or memory) the log is the first
// half of the outbox: the notifier reads the events after its cursor and
// writes their deliveries with the cursor in one transaction
// ([checkpoint.Outbox]), then sends them, retrying with backoff
// ([Backoff]) until each is delivered or, after MaxAttempts, dead (kept
// and listed: [Notifier.Deliveries]). A crash between an event's commit
// and its sending loses nothing: the event is after the cursor, or its
// delivery is pending. A delivery may be sent twice (a crash between the
// destination's answer and its record), never with another id: a
// webhook's receiver deduplicates by webhook-id, a mail reader by
// Message-ID. Package cluster does the same with River's jobs, inserted
// in the transaction of the question's commit.
//
// # Channels
//
//   - Webhooks, signed per the Standard Webhooks spec ([Sign], [Verify]):
//     webhook-id, webhook-timestamp and webhook-signature, "v1," and the
//     base64 HMAC-SHA256 of "id.timestamp.body" with the endpoint's
//     secret ("whsec_" and base64). Only http and https URLs, from the
//     operator's file, never from a call; redirects are not followed.
//   - Slack (slack-go): the call, what it will do, the rule, the deadline
//     in each reader's own time zone, and buttons. A press answers only
//     when Slack signed the request (v0, within five minutes), the button
//     carries an [Action] this server signed for that message's question
//     and digest, the question still waits (single use: the first answer
//     wins the compare-and-set), and the presser is one of the reviewers
//     the configuration names; otherwise the presser is told why, with a
//     link to the page. The message is updated when the question is
//     answered anywhere (who, what, when) or times out.
//   - Mail (SMTP, go-mail): a link to the question and, with answer_links,
//     one-time approve and deny links, each opening a confirmation page
//     whose button answers (mail scanners follow links: a GET never
//     answers).
//
// The gated agent cannot answer its own calls through any of them: the
// action secret, the Slack signing secret and the SMTP password are read
// from the environment or files ([Config]), never a command line, never
// logged, and tollgate serve refuses secret files inside the bash tool's
// directory as it refuses its store there.
package notify
