package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/display"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/policy/learn"
)

// The terminal's [l]earn: approve, and allow calls like this.

// terminalLearning is the learn service of tollgate run: the host's
// store, the policy in force, answers through the host as the prompt's.
func terminalLearning(h *host.Host, current func() *policy.Policy) *learn.Service {
	return &learn.Service{Store: h.Store(), Policy: func(string) *policy.Policy { return current() },
		Answer: func(ctx context.Context, thread, id string, answer json.RawMessage, by string) (*checkpoint.Question, error) {
			return h.AnswerWith(ctx, thread, id, answer, host.AnswerOptions{By: by, RequireDigest: true})
		}}
}

// learnPreview shows the rule "approve, and allow calls like this" would
// learn (spec nil: the proposal's), with its blast radius, and asks where
// it applies; a call no rule can be learned from says why and goes back
// to the first prompt.
func (t *terminal) learnPreview(ctx context.Context, spec *learn.Spec) {
	a := t.cur
	p, _, err := t.learning.Preview(ctx, learn.PreviewRequest{ThreadID: t.thread, QuestionID: a.q.ID, Spec: spec, By: t.by})
	if err != nil {
		t.println("   cannot learn: " + strings.TrimPrefix(strings.TrimPrefix(err.Error(), "learn: "), "no rule can be learned from this call: "))
		t.backToChoice()
		return
	}
	a.preview = p
	var b strings.Builder
	showPreview(&b, p)
	t.clearPrompt()
	t.cur = nil // the lines, without the prompt between them
	for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		t.println("   " + l)
	}
	t.cur = a
	a.stage, a.label = learning, "save for this [t]hread, the [p]roject, [e]veryone; N=any|inside|exact changes argument N; [c]ancel:"
	t.redraw()
}

// learnStep takes what was typed at the learning prompt.
func (t *terminal) learnStep(ctx context.Context, line string) {
	a := t.cur
	kinds := map[string]checkpoint.RuleScope{"t": checkpoint.ScopeThread, "thread": checkpoint.ScopeThread,
		"p": checkpoint.ScopeDir, "project": checkpoint.ScopeDir, "e": checkpoint.ScopeEveryone, "everyone": checkpoint.ScopeEveryone}
	switch l := strings.ToLower(line); {
	case l == "c" || l == "cancel" || l == "":
		a.preview = nil
		t.backToChoice()
		return
	case strings.Contains(l, "="):
		spec := a.preview.Spec
		if sh := spec.Shell; sh != nil {
			c := *sh
			c.Commands = append([]learn.CommandShape(nil), sh.Commands...)
			for i := range c.Commands {
				c.Commands[i].Args = append([]learn.Slot(nil), c.Commands[i].Args...)
			}
			spec.Shell = &c
		}
		spec.Args = append([]learn.Field(nil), spec.Args...)
		o := learnOptions{match: []string{line}}
		if err := o.applyMatches(&spec); err != nil {
			t.println("   " + err.Error())
			t.redraw()
			return
		}
		t.learnPreview(ctx, &spec)
		return
	case kinds[l] != "":
		for _, sc := range a.preview.Scopes {
			if sc.Kind != kinds[l] {
				continue
			}
			out, err := t.learning.Learn(ctx, learn.Request{ThreadID: t.thread, QuestionID: a.q.ID, Digest: a.req.Digest,
				Spec: a.preview.Spec, Scope: sc, By: t.by})
			if err != nil {
				t.println("   refused: " + strings.TrimPrefix(err.Error(), "learn: "))
				t.backToChoice()
				return
			}
			t.mine[a.q.ID] = true
			t.cur = nil
			status := "it allows calls like this from now on"
			if out.Waiting {
				status = "it allows nothing until another reviewer approves it: tollgate rules approve " + out.Rule.ID
			}
			t.println(fmt.Sprintf("   approved; rule %s learned for %s: %s", out.Rule.ID, display.Line(sc.String()), status))
			return
		}
		t.println("   a rule learned from this call cannot apply to " + l)
	}
	t.redraw()
}
