package checkpointtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// rules returns s as a RuleStore, failing the test when it is not one:
// every store keeps learned rules.
func rules(t *testing.T, s checkpoint.Store) checkpoint.RuleStore {
	t.Helper()
	rs, ok := s.(checkpoint.RuleStore)
	if !ok {
		t.Fatalf("%T does not implement checkpoint.RuleStore", s)
	}
	return rs
}

func newRule(thread string) *checkpoint.LearnedRule {
	return &checkpoint.LearnedRule{
		ID: id("lr"), Tool: "bash",
		Spec:  json.RawMessage(`{"tool": "bash",  "shell":{"arg":"cmd","commands":[{"name":"git","args":[{"role":"subcommand","word":"diff","match":"exact"}]}]}}`),
		Scope: checkpoint.ScopeThread, ScopeKey: thread,
		ThreadID: thread, QuestionID: "hitl_call_1", Digest: "sha256:abc",
		CreatedBy: "alice",
	}
}

func mustCreateRule(t *testing.T, s checkpoint.RuleStore, r *checkpoint.LearnedRule) *checkpoint.LearnedRule {
	t.Helper()
	if err := s.CreateRule(ctx(t), r); err != nil {
		t.Fatalf("CreateRule(%q): %v", r.ID, err)
	}
	return r
}

func ruleIDs(rs []*checkpoint.LearnedRule) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// ruleEvents returns the types and data of the rule events of a thread.
func ruleEvents(t *testing.T, s checkpoint.Store, thread string) (types []string, data []map[string]any) {
	t.Helper()
	evs, err := s.ListEvents(ctx(t), thread, 0, 100)
	if err != nil {
		t.Fatalf("ListEvents: %v", err)
	}
	for _, e := range evs {
		var d map[string]any
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("event %s: %v", e.Type, err)
		}
		types, data = append(types, e.Type), append(data, d)
	}
	return types, data
}

func testRules(t *testing.T, setup setupFunc) {
	t.Run("CreateGet", func(t *testing.T) { testRulesCreateGet(t, setup) })

	t.Run("CreateRefused", func(t *testing.T) { testRulesCreateRefused(t, setup) })

	t.Run("List", func(t *testing.T) { testRulesList(t, setup) })

	t.Run("Change", func(t *testing.T) { testRulesChange(t, setup) })

	t.Run("Live", func(t *testing.T) { testRulesLive(t) })

	t.Run("RevokeRace", func(t *testing.T) { testRulesRevokeRace(t, setup) })
}

func testRulesCreateGet(t *testing.T, setup setupFunc) {
	s := setup(t)
	rs := rules(t, s)
	thread := id("thread")
	r := newRule(thread)
	r.ExpiresAt = t0.Add(24 * time.Hour)
	mustCreateRule(t, rs, r)
	if !recent(r.CreatedAt) {
		t.Errorf("CreatedAt = %v, want the store's now", r.CreatedAt)
	}
	got, err := rs.GetRule(ctx(t), r.ID)
	if err != nil {
		t.Fatalf("GetRule: %v", err)
	}
	checkJSON(t, "Spec", got.Spec, r.Spec)
	checkTime(t, "CreatedAt", got.CreatedAt, r.CreatedAt)
	checkTime(t, "ExpiresAt", got.ExpiresAt, r.ExpiresAt)
	if got.Tool != "bash" || got.Scope != checkpoint.ScopeThread || got.ScopeKey != thread || got.ThreadID != thread ||
		got.QuestionID != "hitl_call_1" || got.Digest != "sha256:abc" || got.CreatedBy != "alice" {
		t.Errorf("GetRule = %+v, want %+v", got, r)
	}
	if !got.ApprovedAt.IsZero() || got.ApprovedBy != "" || !got.RevokedAt.IsZero() || got.RevokedBy != "" || got.RevokeReason != "" {
		t.Errorf("a new rule is approved or revoked: %+v", got)
	}
	if _, err := rs.GetRule(ctx(t), "lr_none"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("GetRule(unknown) = %v, want ErrNotFound", err)
	}
	if err := rs.CreateRule(ctx(t), newRuleWithID(thread, r.ID)); !errors.Is(err, checkpoint.ErrConflict) {
		t.Errorf("CreateRule(same id) = %v, want ErrConflict", err)
	}
	at := t0.Add(-time.Hour)
	kept := newRule(thread)
	kept.CreatedAt = at
	mustCreateRule(t, rs, kept)
	if got, _ := rs.GetRule(ctx(t), kept.ID); got == nil || !sameTime(got.CreatedAt, at) {
		t.Errorf("a given CreatedAt is not kept: %+v", got)
	}
}

func testRulesCreateRefused(t *testing.T, setup setupFunc) {
	s := setup(t)
	rs := rules(t, s)
	thread := id("thread")
	for name, change := range map[string]func(r *checkpoint.LearnedRule){
		"no id":          func(r *checkpoint.LearnedRule) { r.ID = "" },
		"no author":      func(r *checkpoint.LearnedRule) { r.CreatedBy = "" },
		"no question":    func(r *checkpoint.LearnedRule) { r.QuestionID = "" },
		"no digest":      func(r *checkpoint.LearnedRule) { r.Digest = "" },
		"unknown scope":  func(r *checkpoint.LearnedRule) { r.Scope = "world" },
		"thread, no key": func(r *checkpoint.LearnedRule) { r.ScopeKey = "" },
		"everyone, key":  func(r *checkpoint.LearnedRule) { r.Scope = checkpoint.ScopeEveryone },
		"not JSON":       func(r *checkpoint.LearnedRule) { r.Spec = json.RawMessage(`{`) },
		"revoked":        func(r *checkpoint.LearnedRule) { r.RevokedBy, r.RevokedAt = "bob", t0 },
		"approved":       func(r *checkpoint.LearnedRule) { r.ApprovedBy, r.ApprovedAt = "bob", t0 },
	} {
		r := newRule(thread)
		change(r)
		if err := rs.CreateRule(ctx(t), r); err == nil {
			t.Errorf("%s: CreateRule accepted %+v", name, r)
		}
	}
	if got, err := rs.ListRules(ctx(t), checkpoint.RuleFilter{}); err != nil || len(got) != 0 {
		t.Errorf("refused rules were stored: %v, %v", ruleIDs(got), err)
	}
}

func testRulesList(t *testing.T, setup setupFunc) {
	s := setup(t)
	rs := rules(t, s)
	th1, th2 := id("thread"), id("thread")
	a := mustCreateRule(t, rs, newRule(th1))
	b := newRule(th2)
	b.Scope, b.ScopeKey = checkpoint.ScopeDir, "/home/me/project"
	mustCreateRule(t, rs, b)
	c := newRule(th1)
	c.Tool, c.Scope, c.ScopeKey = "mcp__fs__write_file", checkpoint.ScopeEveryone, ""
	mustCreateRule(t, rs, c)
	d := mustCreateRule(t, rs, newRule(th2))
	if _, err := rs.ChangeRule(ctx(t), d.ID, checkpoint.RuleChange{By: "bob", Reason: "too broad"}); err != nil {
		t.Fatalf("ChangeRule(revoke): %v", err)
	}
	for _, tc := range []struct {
		name string
		f    checkpoint.RuleFilter
		want []string
	}{
		{"all", checkpoint.RuleFilter{}, []string{a.ID, b.ID, c.ID, d.ID}},
		{"tool", checkpoint.RuleFilter{Tool: "bash"}, []string{a.ID, b.ID, d.ID}},
		{"unrevoked", checkpoint.RuleFilter{Unrevoked: true}, []string{a.ID, b.ID, c.ID}},
		{"thread", checkpoint.RuleFilter{ThreadID: th2}, []string{b.ID, d.ID}},
		{"scopes", checkpoint.RuleFilter{Scopes: []checkpoint.ScopeRef{
			{Scope: checkpoint.ScopeThread, Key: th1}, {Scope: checkpoint.ScopeDir, Key: "/home/me/project"}, {Scope: checkpoint.ScopeDir, Key: "/home/me"},
		}}, []string{a.ID, b.ID}},
		{"everyone", checkpoint.RuleFilter{Scopes: []checkpoint.ScopeRef{{Scope: checkpoint.ScopeEveryone}}}, []string{c.ID}},
		{"no scope", checkpoint.RuleFilter{Scopes: []checkpoint.ScopeRef{}}, nil},
		{"all of them", checkpoint.RuleFilter{Tool: "bash", Unrevoked: true, ThreadID: th2,
			Scopes: []checkpoint.ScopeRef{{Scope: checkpoint.ScopeDir, Key: "/home/me/project"}, {Scope: checkpoint.ScopeThread, Key: th2}}}, []string{b.ID}},
	} {
		got, err := rs.ListRules(ctx(t), tc.f)
		if err != nil {
			t.Fatalf("%s: ListRules: %v", tc.name, err)
		}
		if fmt.Sprint(ruleIDs(got)) != fmt.Sprint(tc.want) {
			t.Errorf("%s: ListRules = %v, want %v (oldest first)", tc.name, ruleIDs(got), tc.want)
		}
	}
}

func testRulesChange(t *testing.T, setup setupFunc) {
	s := setup(t)
	rs := rules(t, s)
	thread := id("thread")
	r := mustCreateRule(t, rs, newRule(thread))
	if _, err := rs.ChangeRule(ctx(t), "lr_none", checkpoint.RuleChange{By: "bob"}); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("ChangeRule(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := rs.ChangeRule(ctx(t), r.ID, checkpoint.RuleChange{Approve: true, By: "alice"}); !errors.Is(err, checkpoint.ErrSelfApproval) {
		t.Errorf("the author's approval = %v, want ErrSelfApproval", err)
	}
	if _, err := rs.ChangeRule(ctx(t), r.ID, checkpoint.RuleChange{Approve: true}); err == nil {
		t.Error("an approval by nobody was taken")
	}
	at := t0.Add(time.Minute)
	got, err := rs.ChangeRule(ctx(t), r.ID, checkpoint.RuleChange{Approve: true, By: "bob", At: at})
	if err != nil {
		t.Fatalf("ChangeRule(approve): %v", err)
	}
	if got.ApprovedBy != "bob" || !sameTime(got.ApprovedAt, at) {
		t.Errorf("approved: %+v", got)
	}
	again, err := rs.ChangeRule(ctx(t), r.ID, checkpoint.RuleChange{Approve: true, By: "carol"})
	if !errors.Is(err, checkpoint.ErrConflict) || again == nil || again.ApprovedBy != "bob" {
		t.Errorf("a second approval = %+v, %v; want ErrConflict and the rule approved by bob", again, err)
	}
	got, err = rs.ChangeRule(ctx(t), r.ID, checkpoint.RuleChange{By: "carol", Reason: "too broad"})
	if err != nil {
		t.Fatalf("ChangeRule(revoke): %v", err)
	}
	if got.RevokedBy != "carol" || got.RevokeReason != "too broad" || !recent(got.RevokedAt) || got.Live(time.Now()) {
		t.Errorf("revoked: %+v", got)
	}
	if stored, _ := rs.GetRule(ctx(t), r.ID); stored == nil || stored.RevokedBy != "carol" || stored.ApprovedBy != "bob" {
		t.Errorf("GetRule after the changes = %+v", stored)
	}
	for _, c := range []checkpoint.RuleChange{{By: "dave"}, {Approve: true, By: "dave"}} {
		if got, err := rs.ChangeRule(ctx(t), r.ID, c); !errors.Is(err, checkpoint.ErrConflict) || got == nil || got.RevokedBy != "carol" {
			t.Errorf("%+v after the revocation = %+v, %v; want ErrConflict and the stored rule", c, got, err)
		}
	}
	types, data := ruleEvents(t, s, thread)
	want := []string{checkpoint.EventRuleLearned, checkpoint.EventRuleApproved, checkpoint.EventRuleRevoked}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Fatalf("the thread's events are %v, want %v: each write commits with its audit event, a refused one with none", types, want)
	}
	for i, by := range []string{"alice", "bob", "carol"} {
		if data[i]["rule_id"] != r.ID || data[i]["by"] != by || data[i]["digest"] != "sha256:abc" || data[i]["question_id"] != "hitl_call_1" {
			t.Errorf("event %s: %v", types[i], data[i])
		}
	}
	if data[2]["reason"] != "too broad" {
		t.Errorf("the revocation's event has no reason: %v", data[2])
	}
}

func testRulesLive(t *testing.T) {
	r := &checkpoint.LearnedRule{ExpiresAt: t0}
	if !r.Live(t0.Add(-time.Nanosecond)) || r.Live(t0) {
		t.Error("a rule lives until, not at, its expiry")
	}
	r.ExpiresAt, r.RevokedAt = time.Time{}, t0
	if r.Live(t0.Add(-time.Hour)) {
		t.Error("a revoked rule is live")
	}
}

func testRulesRevokeRace(t *testing.T, setup setupFunc) {
	s := setup(t)
	rs := rules(t, s)
	r := mustCreateRule(t, rs, newRule(id("thread")))
	errs := race(func(i int) error {
		_, err := rs.ChangeRule(ctx(t), r.ID, checkpoint.RuleChange{By: fmt.Sprint("reviewer-", i)})
		return err
	})
	w := oneWinner(t, "16 revocations", errs)
	if got, _ := rs.GetRule(ctx(t), r.ID); got == nil || got.RevokedBy != fmt.Sprint("reviewer-", w) {
		t.Errorf("revoked by %+v, but reviewer-%d won", got, w)
	}
}

func newRuleWithID(thread, rid string) *checkpoint.LearnedRule {
	r := newRule(thread)
	r.ID = rid
	return r
}

// testSharedRules: a rule one handle writes, the other reads and changes.
func testSharedRules(t *testing.T, setup func(t *testing.T) (checkpoint.Store, checkpoint.Store)) {
	t.Run("RulesAcross", func(t *testing.T) {
		a, b := setup(t)
		ra, rb := rules(t, a), rules(t, b)
		r := mustCreateRule(t, ra, newRule(id("thread")))
		got, err := rb.ListRules(ctx(t), checkpoint.RuleFilter{Unrevoked: true, Tool: "bash"})
		if err != nil || len(got) != 1 || got[0].ID != r.ID {
			t.Fatalf("b.ListRules = %v, %v; want a's rule", ruleIDs(got), err)
		}
		errs := race(func(i int) error {
			s := ra
			if i%2 == 1 {
				s = rb
			}
			_, err := s.ChangeRule(ctx(t), r.ID, checkpoint.RuleChange{By: fmt.Sprint("reviewer-", i)})
			return err
		})
		oneWinner(t, "16 revocations through two handles", errs)
		if got, err := ra.ListRules(ctx(t), checkpoint.RuleFilter{Unrevoked: true}); err != nil || len(got) != 0 {
			t.Errorf("a.ListRules(unrevoked) after the revocation = %v, %v", ruleIDs(got), err)
		}
	})
}
