package cluster_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/cluster"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/policy/learn"
)

// learnPolicy asks about every command but blocks "echo blocked".
const learnPolicy = `version: 1
default: ask
rules:
  - {name: no-blocked, tool: bash, command: echo, when: 'command.args.exists(a, a == "blocked")', action: block}
`

// learnReplica is a replica whose calls pass learnPolicy with the rules
// learned in the database, read through its own store; it returns the
// learn service that answers through it.
func (w *world) learnReplica(t *testing.T) (*replica, *learn.Service) {
	t.Helper()
	ctx := context.Background()
	store, err := postgres.Open(ctx, w.dsn, &postgres.Options{Schema: w.schema})
	if err != nil {
		t.Fatal(err)
	}
	src, err := learn.NewSource(store)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse("p.yaml", []byte(learnPolicy), &policy.Options{Learned: src, Dir: "/srv/ws"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.New(ctx, cluster.Config{Store: store, LeaseTTL: 2 * time.Second, ReconcileEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(host.Config{Store: store, Coordinator: c, Agent: agent.Config{
		Provider:   countingModel{w},
		Tools:      []*agent.Tool{w.tool()},
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(store, "", nil), p.HITL())},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r := &replica{store: store, c: c, h: h}
	t.Cleanup(func() { r.stop(t) })
	svc := &learn.Service{Store: store, Policy: func(string) *policy.Policy { return p },
		Answer: func(ctx context.Context, thread, id string, answer json.RawMessage, by string) (*checkpoint.Question, error) {
			return h.AnswerWith(ctx, thread, id, answer, host.AnswerOptions{By: by, RequireDigest: true})
		}}
	return r, svc
}

// learnFrom learns, as alice on svc's replica, the rule of a pending
// question with its first argument widened to any word, in scope.
func learnFrom(t *testing.T, svc *learn.Service, q *checkpoint.Question, kind checkpoint.RuleScope) *checkpoint.LearnedRule {
	t.Helper()
	prop, _, err := svc.Propose(context.Background(), q.ThreadID, q.ID)
	if err != nil {
		t.Fatal(err)
	}
	prop.Spec.Shell.Commands[0].Args[0].Match = learn.Any
	scope := prop.Scopes[0]
	for _, s := range prop.Scopes {
		if s.Kind == kind {
			scope = s
		}
	}
	out, err := svc.Learn(context.Background(), learn.Request{ThreadID: q.ThreadID, QuestionID: q.ID, Digest: q.Digest,
		Spec: prop.Spec, Scope: scope, By: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	return out.Rule
}

func (w *world) runs(cmd string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ran[cmd]
}

// A rule learned on one replica holds on another at once (each reads the
// rules from the database when its policy asks): a call like it runs
// there unasked, the audit log naming the rule and its author; it never
// allows what the policy blocks; in its thread's scope it holds for that
// thread only; revoked on one replica, the other asks again.
func TestLearnedRuleAcrossReplicas(t *testing.T) {
	w := newWorld(t)
	a, svcA := w.learnReplica(t)
	b, svcB := w.learnReplica(t)
	ctx := context.Background()
	prompt := func(r *replica, thread, cmd string) {
		t.Helper()
		if _, _, err := r.h.Prompt(ctx, thread, thread+"\n$ "+cmd, nil); err != nil {
			t.Fatal(err)
		}
	}

	prompt(a, "t1", "echo one")
	rule := learnFrom(t, svcA, pending(t, a.store, "t1", 1)[0], checkpoint.ScopeEveryone)
	idle(t, a.store, "t1")

	prompt(b, "t2", "echo two")
	idle(t, b.store, "t2")
	if n := w.runs("echo two"); n != 1 {
		t.Fatalf("a call like the learned one ran %d times on the other replica, want 1 (unasked)", n)
	}
	if qs, _, _ := b.store.ListQuestions(ctx, checkpoint.QuestionFilter{ThreadID: "t2"}); len(qs) != 0 {
		t.Fatalf("the other replica asked about it: %v", qs[0].ID)
	}
	evs, err := b.store.ListEvents(ctx, "t2", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	named := false
	for _, e := range evs {
		named = named || e.Type == "tool_result" && strings.Contains(string(e.Data), `"learned_rule":"`+rule.ID+`"`) && strings.Contains(string(e.Data), `"learned_by":"alice"`)
	}
	if !named {
		t.Error("the audit log does not name the learned rule and its author")
	}

	// Never what the policy blocks.
	prompt(b, "t3", "echo blocked")
	idle(t, b.store, "t3")
	if n := w.runs("echo blocked"); n != 0 {
		t.Fatalf("a call the policy blocks ran (%d) under a learned rule", n)
	}

	// Revoked on b: a asks again.
	if _, err := svcB.Change(ctx, rule.ID, checkpoint.RuleChange{By: "bob", Reason: "too broad"}); err != nil {
		t.Fatal(err)
	}
	prompt(a, "t4", "echo four")
	q4 := pending(t, a.store, "t4", 1)[0]

	// A rule for thread t4 only, learned on a: t4's next call runs on b,
	// t5's is asked.
	learnFrom(t, svcA, q4, checkpoint.ScopeThread)
	idle(t, a.store, "t4")
	prompt(b, "t4", "echo again")
	idle(t, b.store, "t4")
	if n := w.runs("echo again"); n != 1 {
		t.Fatalf("the thread's rule did not allow its next call on the other replica (%d runs)", n)
	}
	prompt(b, "t5", "echo again")
	pending(t, b.store, "t5", 1)
}
