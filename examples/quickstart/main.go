// Command quickstart is the seed recipe in Go: every bash call of an agent
// passes a policy, which runs ls at once, blocks dd and asks a person about
// the rest; the question is stored before anyone is asked; a host loop
// answers approve, deny or edit, and the run goes on. It runs offline, in a
// temporary directory:
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/provider/scripted"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

// Step 1: the policy sees each call's validated, typed arguments. (A prefix
// test would let "ls; rm -rf ~" through: package policy parses the shell.)
var policy = hitl.Typed(func(ctx context.Context, c *hitl.PolicyContext, args bash.Args) hitl.ApprovalDecision {
	switch {
	case args.Cmd == "ls":
		return hitl.Approve()
	case strings.HasPrefix(args.Cmd, "dd "):
		return hitl.Deny("destructive I/O")
	}
	return hitl.AskUser(hitl.AskOptions{Timeout: 3 * time.Minute,
		Details: map[string]any{"matched_rule": "confirm", "impact": "needs human review"}})
})

// reviewer stands in for the person who answers (on a page, at a terminal):
// what they say to each command they are asked about.
var reviewer = map[string]hitl.ApproveAnswer{
	"rm logs/old.log": {Decision: hitl.DecisionApprove},
	"rm -r logs":      {Decision: hitl.DecisionEdit, EditedArgs: map[string]any{"cmd": "rm logs/new.log"}},
	"git push":        {Decision: hitl.DecisionDeny, Reason: "not before the review"},
}

func main() {
	bash.MaybeRunHelper() // first thing: the bash tool re-executes this binary to run commands
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "quickstart-")
	check(err)
	defer os.RemoveAll(dir)
	check(os.Mkdir(filepath.Join(dir, "logs"), 0o755))
	check(os.WriteFile(filepath.Join(dir, "logs", "old.log"), nil, 0o644))
	check(os.WriteFile(filepath.Join(dir, "logs", "new.log"), nil, 0o644))

	// Step 2: the wiring. The store keeps the thread and its questions.
	store, err := sqlite.Open(ctx, filepath.Join(dir, "tollgate.db"), nil) // or memory.New(), postgres.Open(ctx, dsn, nil)
	check(err)
	defer store.Close()
	channel := hitl.NewCheckpointedChannel(store, "session-1", nil)
	a, err := agent.New(agent.Config{
		Provider:     scripted.Demo{},         // offline; or anthropic.New(nil), openai.New(nil)
		Model:        agent.Model{ID: "demo"}, // with anthropic: {ID: "claude-sonnet-4-6"}
		SystemPrompt: "You are a careful assistant with a bash shell.",
		Tools:        []*agent.Tool{bash.New(&bash.Options{Dir: dir})},
		Middleware:   []agent.Middleware{hitl.NewApprovalPolicyMiddleware(channel, policy)},
		Channel:      channel,
		Checkpointer: store,
		ThreadID:     "session-1",
	})
	check(err)

	hostCtx, stopHost := context.WithCancel(ctx)
	go func() {
		defer stopHost()
		// The demo model makes each "$ " line a bash call; a real model
		// needs only the first line.
		reply, err := a.Prompt(ctx, "list files then delete temp logs\n"+
			"$ ls\n$ rm logs/old.log\n$ rm -r logs\n$ git push\n$ dd if=/dev/zero of=disk.img")
		check(err)
		fmt.Println(reply.Text)
	}()

	// Step 3: the host loop answers what the run asks, until the run ends.
	for req, err := range channel.Subscribe(hostCtx) {
		if err != nil {
			continue // the store's feed broke: Subscribe lists again
		}
		cmd := req.Payload.Args["cmd"].(string)
		fmt.Printf("asked: %s (%s, %ds to answer)\n", cmd, req.Payload.Details["impact"], req.TimeoutSeconds)
		answer := reviewer[cmd]
		answer.Digest = req.Digest // the answer applies only to the call shown
		check(channel.Answer(ctx, req.QuestionID, answer))
	}
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
