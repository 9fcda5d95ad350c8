package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/policy/learn"
	"github.com/tollgate-ai/tollgate/server"
)

const learnPolicy = `version: 1
default: ask
rules:
  - name: read
    tool: bash
    command: [ls]
    action: allow
`

// learning is a fixture whose runs' calls pass a policy file with the
// store's learned rules, and whose server learns rules from answers.
func learning(t *testing.T, extra string) *fixture {
	t.Helper()
	store := memory.New()
	src, err := learn.NewSource(store)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse("p.yaml", []byte(learnPolicy+extra), &policy.Options{Learned: src, Dir: "/srv/ws"})
	if err != nil {
		t.Fatal(err)
	}
	f := setup(t, &options{store: store, policy: p.HITL(), cfg: func(c *server.Config) {
		c.Learning = func(string) *policy.Policy { return p }
	}})
	src.Clock = f.clock // expiry on the server's clock
	return f
}

func (f *fixture) auditHas(thread, typ, text string) bool {
	evs, err := f.store.ListEvents(context.Background(), thread, 0, 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == typ && strings.Contains(string(e.Data), text) {
			return true
		}
	}
	return false
}

// TestLearnRule: a reviewer sees the proposal and its blast radius,
// approves and learns the rule; a call like it in another thread runs
// without a question, the audit log naming the rule and its author; the
// rule is listed, shown, exported and revoked, and then the call asks
// again.
func TestLearnRule(t *testing.T) {
	f := learning(t, "")
	q := f.ask("t1", "git diff HEAD~3 -- src/")
	path := "/v1/questions/t1/" + q.ID

	f.do("POST", path+"/proposal", clientSecret, nil).want(t, http.StatusForbidden, "forbidden")
	f.do("POST", path+"/proposal", bobSecret, nil).want(t, http.StatusForbidden, "forbidden")
	res := f.do("POST", path+"/proposal", aliceSecret, nil).want(t, http.StatusOK, "")
	var prop struct {
		Spec    learn.Spec      `json:"spec"`
		Choices [][][]string    `json:"choices"`
		Scopes  []learn.Scope   `json:"scopes"`
		Summary string          `json:"summary"`
		YAML    string          `json:"yaml"`
		Radius  learn.Radius    `json:"radius"`
		Q       json.RawMessage `json:"question"`
	}
	if err := json.Unmarshal(res.body, &prop); err != nil {
		t.Fatal(err)
	}
	if prop.Summary != "git diff <inside> -- <inside>" || len(prop.Scopes) != 3 || prop.Scopes[1].Key != "/srv/ws" ||
		prop.Radius.Matched != 1 || prop.Radius.Scanned != 1 || len(prop.Choices) != 1 || len(prop.Choices[0]) != 4 ||
		!strings.Contains(prop.YAML, "command: \"git\"") {
		t.Fatalf("proposal:\n%s", res.body)
	}

	// Widened past its choices: refused, the question still open.
	wide := prop.Spec
	sh := *wide.Shell
	sh.Commands = []learn.CommandShape{sh.Commands[0]}
	sh.Commands[0].Args = append([]learn.Slot(nil), sh.Commands[0].Args...)
	sh.Commands[0].Args[0].Match = learn.Any
	wide.Shell = &sh
	f.do("POST", path+"/proposal", aliceSecret, map[string]any{"spec": wide}).want(t, http.StatusUnprocessableEntity, "invalid_rule")
	everyone := prop.Scopes[2]
	f.do("POST", path+"/learn", aliceSecret, map[string]any{"spec": prop.Spec, "scope": everyone}).want(t, http.StatusUnprocessableEntity, "digest_required")
	f.do("POST", path+"/learn", aliceSecret, map[string]any{"digest": "v2:sha256:00", "spec": prop.Spec, "scope": everyone}).want(t, http.StatusConflict, "digest_mismatch")
	f.do("POST", path+"/learn", aliceSecret, map[string]any{"digest": q.Digest, "expires": "soon"}).want(t, http.StatusBadRequest, "bad_request")

	res = f.do("POST", path+"/learn", aliceSecret, map[string]any{"digest": q.Digest, "spec": prop.Spec, "scope": everyone, "expires": "30d"}).want(t, http.StatusOK, "")
	var learned struct {
		Question map[string]any `json:"question"`
		Rule     map[string]any `json:"rule"`
	}
	if err := json.Unmarshal(res.body, &learned); err != nil {
		t.Fatal(err)
	}
	id, _ := learned.Rule["id"].(string)
	if learned.Question["status"] != "answered" || learned.Question["answered_by"] != "alice" || learned.Rule["status"] != "active" ||
		learned.Rule["created_by"] != "alice" || learned.Rule["digest"] != q.Digest || learned.Rule["expires_at"] == nil {
		t.Fatalf("learned:\n%s", res.body)
	}
	if f.settle("t1"); !f.auditHas("t1", checkpoint.EventRuleLearned, `"rule_id":"`+id+`"`) {
		t.Error("the rule's learning is not in the audit log")
	}

	// A call like it, in another thread: no question; the audit log
	// names the rule and who taught it.
	if qs := f.prompt("t2", "$ git diff main -- lib/"); len(qs) != 0 {
		t.Fatalf("a call the learned rule allows was asked: %v", qs[0].ID)
	}
	if !f.auditHas("t2", "tool_result", `"learned_rule":"`+id+`"`) || !f.auditHas("t2", "tool_result", `"learned_by":"alice"`) {
		t.Error("the call's result does not name the learned rule and its author")
	}
	// Not one unlike it.
	if qs := f.prompt("t3", "$ git diff main -- lib/ --output=/tmp/x"); len(qs) != 1 {
		t.Fatalf("a call unlike the rule was not asked")
	}

	res = f.do("GET", "/v1/rules", aliceSecret, nil).want(t, http.StatusOK, "")
	if !strings.Contains(string(res.body), `"id":"`+id+`"`) {
		t.Fatalf("rules:\n%s", res.body)
	}
	f.do("GET", "/v1/rules", bobSecret, nil).want(t, http.StatusOK, "")
	f.do("GET", "/v1/rules/"+id, bobSecret, nil).want(t, http.StatusNotFound, "not_found")
	res = f.do("GET", "/v1/rules/export", aliceSecret, nil).want(t, http.StatusOK, "")
	if !strings.HasPrefix(res.header.Get("Content-Type"), "application/yaml") || !strings.Contains(string(res.body), "learned-"+id) {
		t.Fatalf("export %s:\n%s", res.header.Get("Content-Type"), res.body)
	}
	if _, err := policy.Parse("x.yaml", append([]byte("version: 1\n"), res.body...), nil); err != nil {
		t.Errorf("the export does not load as a policy: %v", err)
	}

	f.do("POST", "/v1/rules/"+id+"/revoke", bobSecret, map[string]string{"reason": "x"}).want(t, http.StatusNotFound, "not_found")
	res = f.do("POST", "/v1/rules/"+id+"/revoke", adminSecret, map[string]string{"reason": "too broad"}).want(t, http.StatusOK, "")
	if m := res.json(t); m["status"] != "revoked" || m["revoked_by"] != "root" || m["revoke_reason"] != "too broad" {
		t.Fatalf("revoked:\n%s", res.body)
	}
	f.do("POST", "/v1/rules/"+id+"/revoke", aliceSecret, nil).want(t, http.StatusConflict, "conflict")
	if qs := f.prompt("t4", "$ git diff main -- lib/"); len(qs) != 1 {
		t.Fatal("a revoked rule still allows")
	}
	if !f.auditHas("t1", checkpoint.EventRuleRevoked, `"by":"root"`) {
		t.Error("the revocation is not in the audit log")
	}
	if res := f.do("GET", "/v1/rules?status=all", aliceSecret, nil).want(t, http.StatusOK, ""); !strings.Contains(string(res.body), `"status":"revoked"`) {
		t.Errorf("status=all:\n%s", res.body)
	}
	f.do("GET", "/v1/rules?status=gone", aliceSecret, nil).want(t, http.StatusBadRequest, "bad_request")
}

// TestLearnLimits: what cannot be learned says why; a reviewer limited to
// some threads learns for one of them only; a policy that wants a second
// reviewer holds a rule until another reviewer approves it.
func TestLearnLimits(t *testing.T) {
	f := learning(t, "learn:\n  second_reviewer: true\n")
	q := f.ask("t1", "rm -r build")
	f.do("POST", "/v1/questions/t1/"+q.ID+"/proposal", aliceSecret, nil).want(t, http.StatusUnprocessableEntity, "not_learnable")
	f.do("POST", "/v1/questions/t1/nope/proposal", aliceSecret, nil).want(t, http.StatusNotFound, "not_found")

	q = f.ask("team-b-1", "npm test")
	path := "/v1/questions/team-b-1/" + q.ID
	res := f.do("POST", path+"/proposal", bobSecret, nil).want(t, http.StatusOK, "")
	var prop struct {
		Spec   learn.Spec    `json:"spec"`
		Scopes []learn.Scope `json:"scopes"`
	}
	_ = json.Unmarshal(res.body, &prop)
	if len(prop.Scopes) != 1 || prop.Scopes[0].Key != "team-b-1" {
		t.Errorf("a limited reviewer is offered %v", prop.Scopes)
	}
	f.do("POST", path+"/learn", bobSecret, map[string]any{"digest": q.Digest, "scope": learn.Scope{Kind: checkpoint.ScopeEveryone}}).
		want(t, http.StatusUnprocessableEntity, "invalid_rule")
	res = f.do("POST", path+"/learn", bobSecret, map[string]any{"digest": q.Digest}).want(t, http.StatusOK, "")
	var learned struct {
		Rule map[string]any `json:"rule"`
	}
	_ = json.Unmarshal(res.body, &learned)
	id, _ := learned.Rule["id"].(string)
	if learned.Rule["status"] != "waiting" {
		t.Fatalf("under second_reviewer: %s", res.body)
	}
	f.settle("team-b-1")
	if qs := f.prompt("team-b-1", "$ npm test"); len(qs) != 1 {
		t.Fatal("a rule waiting for a second reviewer allows")
	}
	f.do("POST", "/v1/rules/"+id+"/approve", bobSecret, nil).want(t, http.StatusForbidden, "forbidden")
	res = f.do("POST", "/v1/rules/"+id+"/approve", aliceSecret, nil).want(t, http.StatusOK, "")
	if m := res.json(t); m["status"] != "active" || m["approved_by"] != "alice" {
		t.Fatalf("approved: %s", res.body)
	}
	f.do("POST", "/v1/rules/"+id+"/approve", adminSecret, nil).want(t, http.StatusConflict, "conflict")
	if qs := f.prompt("team-b-2", "$ npm test"); len(qs) != 1 {
		t.Fatal("a rule scoped to team-b-1 allows in team-b-2")
	}
	if qs := f.prompt("team-b-1~2", "$ npm test"); len(qs) != 0 {
		t.Fatal("an approved rule does not allow in its thread's continuation")
	}

	plain := setup(t, nil)
	plain.do("GET", "/v1/rules", aliceSecret, nil).want(t, http.StatusNotFound, "learning_off")
}
