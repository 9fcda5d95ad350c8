// Package learn makes rules from reviewers' answers: "approve, and allow
// calls like this". A reviewer who approves git diff HEAD~3 -- src/ for
// the tenth time can say so once, and be sure it does not also allow
// git diff --output=/etc/x.
//
// A learned rule is narrow by construction. For a shell tool it is the
// parsed command, never a string prefix ([Propose], [Shape]): the same
// simple commands joined by the same operators, each with its name,
// subcommand and options as they were, option values any, files inside
// the working directory, other operands exact, the same environment
// assignments and redirections, and nothing more — no extra command, no
// expansion, substitution, pattern or wrapper, nothing the shell analysis
// asks about, nothing that may read secrets. For another tool it is
// equality on every argument. A reviewer widens or narrows it slot by
// slot and field by field within [Slot.Choices] and
// [Proposal.FieldChoices] (a file: exact or inside — a file's name below
// the working directory, never a remote, a URL, a refspec, an assignment
// or a command line, and for a command the analysis does not know only
// a word written ./so; a number: a range; a path: inside a directory
// above it, never any value), sees it as a policy file's rule
// ([RuleYAML]), and before it is saved sees its blast radius ([Measure]):
// how many of the tool's latest questions it would have matched, which
// of those people denied (each a flag: the rule would have allowed it)
// or edited, and a few calls it would allow that nobody has seen.
//
// Rules live in the store (checkpoint.RuleStore: memory, SQLite and
// PostgreSQL), scoped to a thread, a project directory or everyone; they
// may expire; they are revoked, never deleted. Each is bound as an answer
// is: who learned it and when, the question it came from and the digest
// of the call the reviewer approved ([Service.Learn] approves the question
// and saves the rule). A policy given a [Source] ([policy.Options].Learned)
// asks its learned rules about a call only when its own rules ask and let
// them ([policy.Decision].Learnable): a learned rule never changes a
// block, never allows what a rule marks learnable: false (by default,
// what reads secrets or destroys data), and with learn: second_reviewer
// takes effect only once a second reviewer approved it. The call's result
// in the audit log names the rule and its author.
//
//	p, _ := policy.Load("policy.yaml", &policy.Options{Learned: &learn.Source{Store: store}})
//	svc := &learn.Service{Store: store, Policy: func(string) *policy.Policy { return p }, Answer: answer}
//	prop, q, _ := svc.Propose(ctx, thread, question)       // the narrowest rule
//	radius, _ := learn.Measure(ctx, store, &prop.Spec, prop.Scopes[0], learn.RadiusOptions{})
//	out, _ := svc.Learn(ctx, learn.Request{ThreadID: thread, QuestionID: question, Digest: q.Digest,
//		Spec: prop.Spec, Scope: prop.Scopes[0], By: "alice"})
package learn
