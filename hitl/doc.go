// Package hitl puts a person in the loop of an agent's tool calls: a
// [Policy] classifies each call as approve, deny or ask; asking suspends the
// call durably (the question is written to the checkpointer before anyone
// is told); a host answers through a [Channel]; the run resumes — in the
// same process, after a crash, or on another machine.
//
// # Step 1: the policy
//
// It receives the call's validated, typed arguments:
//
//	policy := hitl.Typed(func(ctx context.Context, c *hitl.PolicyContext, args bash.Args) hitl.ApprovalDecision {
//		switch {
//		case args.Cmd == "ls":
//			return hitl.Approve()
//		case strings.Contains(args.Cmd, "rm -rf /"):
//			return hitl.Deny("destructive I/O")
//		}
//		return hitl.AskUser(hitl.AskOptions{Timeout: 180 * time.Second,
//			Details: map[string]any{"matched_rule": "confirm", "impact": "needs human review"}})
//	})
//
// (A prefix test such as strings.HasPrefix(cmd, "ls") lets "ls; rm -rf ~"
// through: use package policy's shell-aware rules for real deployments.)
//
// # Step 2: the wiring
//
//	channel := hitl.NewCheckpointedChannel(store, "session-1", nil)
//	a, err := agent.New(agent.Config{
//		Provider:     provider,
//		Tools:        []*agent.Tool{bash.New(nil)},
//		Middleware:   []agent.Middleware{hitl.NewApprovalPolicyMiddleware(channel, policy)},
//		Channel:      channel,
//		Checkpointer: store,
//		ThreadID:     "session-1",
//	})
//	go a.Prompt(ctx, "list files then delete temp logs")
//
// # Step 3: the host loop
//
//	for req, err := range channel.Subscribe(ctx) {
//		if err != nil {
//			continue
//		}
//		switch req.Payload.Kind {
//		case hitl.KindApprove:
//			err = channel.Answer(ctx, req.QuestionID, hitl.ApproveAnswer{Decision: "approve", Digest: req.Digest})
//		case hitl.KindAsk:
//			err = channel.Answer(ctx, req.QuestionID, "an answer")
//		case hitl.KindConfirm:
//			err = channel.Answer(ctx, req.QuestionID, true)
//		}
//	}
//
// The digest (of the call: thread, call id, tool, arguments — see
// [agent.CallDigest]) binds the answer to the request it answers. A
// program answering in its own process may leave it out, since it answers
// the request it holds; the HTTP API refuses an answer without it (an
// answer from outside must say which call it is about), and so can
// [AnswerOptions].RequireDigest.
//
// Decisions and what the model sees are listed on
// [ApprovalPolicyMiddleware]. Deadlines are absolute and survive restarts;
// [CheckpointedChannel.AnswerIn] lists the answers it refuses.
//
// # Names
//
// [ApprovalDecision] is what an approval function ([Policy], SPEC's
// policy argument) returns; it is not policy.Decision, the policy
// engine's verdict, which policy.Policy.HITL adapts into one. [Channel] is an
// agent.Channel that can also be subscribed to and answered.
// docs/ARCHITECTURE.md ("Names") lists the four decisions.
package hitl
