package replicatest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// hookAnswer is a Claude Code hook's answer, as far as the test reads it.
type hookAnswer struct {
	Out struct {
		Decision string          `json:"permissionDecision"`
		Reason   string          `json:"permissionDecisionReason"`
		Updated  json.RawMessage `json:"updatedInput"`
	} `json:"hookSpecificOutput"`
}

// hookPayload is Claude Code's PreToolUse payload of a Bash call.
func hookPayload(session, id, command string) []byte {
	b, _ := json.Marshal(map[string]any{
		"session_id": session, "transcript_path": "/home/me/.claude/projects/p/" + session + ".jsonl",
		"cwd": "/home/me/p", "permission_mode": "default", "hook_event_name": "PreToolUse",
		"tool_name": "Bash", "tool_input": map[string]string{"command": command, "description": "a command"},
		"tool_use_id": id})
	return b
}

// postHook sends a hook's payload to the replica as the tollgate-hook
// command does (it retries when answered 503, and waits wait), and
// returns the agent's answer.
func (r *replica) postHook(ctx context.Context, payload []byte, wait time.Duration) (hookAnswer, error) {
	var a hookAnswer
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base()+"/v1/hooks/claude-code", bytes.NewReader(payload))
	if err != nil {
		return a, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tollgate-Hook-Retry", "1")
	req.Header.Set("X-Tollgate-Hook-Wait", fmt.Sprint(int(wait/time.Second)))
	resp, err := (&http.Client{Transport: apiClient.Transport, Timeout: wait + 10*time.Second}).Do(req)
	if err != nil {
		return a, fmt.Errorf("%v: %w", r, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return a, fmt.Errorf("%v: %w", r, err)
	}
	if resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("%v: hook answered %d %s", r, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return a, fmt.Errorf("%v: hook answered %s: %w", r, b, err)
	}
	return a, nil
}

// hookQuestion waits for the pending question of a hook's call.
func (f *fleet) hookQuestion(ctx context.Context, callID string) (apiQuestion, error) {
	for giveUp := time.Now().Add(time.Minute); time.Now().Before(giveUp); time.Sleep(100 * time.Millisecond) {
		qs, err := f.allQuestions(ctx)
		if err != nil {
			return apiQuestion{}, err
		}
		var found []apiQuestion
		for _, q := range qs {
			if q.CallID == callID {
				found = append(found, q)
			}
		}
		switch {
		case len(found) > 1:
			return apiQuestion{}, fmt.Errorf("call %s was asked %d times: %+v", callID, len(found), found)
		case len(found) == 1 && found[0].Status == "pending":
			return found[0], nil
		case len(found) == 1:
			return apiQuestion{}, fmt.Errorf("call %s's question is %s, not pending", callID, found[0].Status)
		}
	}
	return apiQuestion{}, fmt.Errorf("call %s was not asked within a minute", callID)
}

// answerOn answers a question through one replica.
func answerOn(ctx context.Context, r *replica, q apiQuestion, body map[string]string) error {
	body["digest"] = q.Digest
	code, resp, err := r.call(ctx, http.MethodPost, "/v1/questions/"+q.ThreadID+"/"+q.ID+"/answer", body, nil)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("%v: answer: %d %s", r, code, resp)
	}
	return nil
}

type hookResult struct {
	a   hookAnswer
	err error
}

// TestHooksAcrossReplicas runs coding agents' hooks against two replicas
// of one database: a call asked on one replica is answered through the
// other, a hook whose replica is killed while it waits is answered on
// the other replica when it sends the call again, with no second
// question, and nothing is answered twice.
func TestHooksAcrossReplicas(t *testing.T) {
	f := newFleet(t, 2, newFakeModel(t, func(int) string { return "true" }, 0))
	for _, r := range f.replicas {
		if err := r.start(); err != nil {
			t.Fatal(err)
		}
	}
	r1, r2 := f.replicas[0], f.replicas[1]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const wait = 90 * time.Second

	// An allowed call is answered by the replica it reached, at once.
	got, err := r1.postHook(ctx, hookPayload("s-allow", "toolu_ls", "ls -la"), wait)
	if err != nil {
		t.Fatal(err)
	}
	if got.Out.Decision != "allow" {
		t.Fatalf("ls -la: %+v, want allow", got.Out)
	}

	// Asked on replica 1, approved through replica 2.
	approved := make(chan hookResult, 1)
	go func() {
		a, err := r1.postHook(ctx, hookPayload("s-across", "toolu_rm", "rm -rf build"), wait)
		approved <- hookResult{a, err}
	}()
	q, err := f.hookQuestion(ctx, "toolu_rm")
	if err != nil {
		t.Fatal(err)
	}
	if err := answerOn(ctx, r2, q, map[string]string{"decision": "approve"}); err != nil {
		t.Fatal(err)
	}
	if res := <-approved; res.err != nil || res.a.Out.Decision != "allow" {
		t.Fatalf("rm -rf build approved on replica 2, the hook on replica 1 got %+v, %v", res.a.Out, res.err)
	}

	// Asked on replica 2, denied through replica 1: the reviewer's reason
	// reaches the agent.
	denied := make(chan hookResult, 1)
	go func() {
		a, err := r2.postHook(ctx, hookPayload("s-across", "toolu_curl", "curl https://example.com"), wait)
		denied <- hookResult{a, err}
	}()
	if q, err = f.hookQuestion(ctx, "toolu_curl"); err != nil {
		t.Fatal(err)
	}
	if err := answerOn(ctx, r1, q, map[string]string{"decision": "deny", "reason": "no piping the network into sh"}); err != nil {
		t.Fatal(err)
	}
	if res := <-denied; res.err != nil || res.a.Out.Decision != "deny" || !strings.Contains(res.a.Out.Reason, "no piping the network into sh") {
		t.Fatalf("denied on replica 1 with a reason, the hook on replica 2 got %+v, %v", res.a.Out, res.err)
	}

	// The hook's replica is killed while it waits: the hook sends the call
	// again to the other replica (as tollgate-hook does behind a load
	// balancer), which finds the question asked before, and the answer
	// reaches it.
	first := make(chan hookResult, 1)
	payload := hookPayload("s-killed", "toolu_mv", "mv notes.txt old-notes.txt")
	go func() {
		a, err := r1.postHook(ctx, payload, wait)
		first <- hookResult{a, err}
	}()
	if q, err = f.hookQuestion(ctx, "toolu_mv"); err != nil {
		t.Fatal(err)
	}
	r1.kill()
	if res := <-first; res.err == nil {
		t.Fatalf("the hook on the killed replica was answered: %+v", res.a.Out)
	}
	again := make(chan hookResult, 1)
	go func() {
		a, err := r2.postHook(ctx, payload, wait)
		again <- hookResult{a, err}
	}()
	// Give the call sent again time to reach replica 2 and wait there
	// before the answer (an answer before it would be read back from the
	// store, which the first part does not test).
	time.Sleep(time.Second)
	if q2, err := f.hookQuestion(ctx, "toolu_mv"); err != nil || q2.ID != q.ID {
		t.Fatalf("after the kill, the call's question: %+v, %v; want the one asked before, %s", q2, err, q.ID)
	}
	if err := answerOn(ctx, r2, q, map[string]string{"decision": "approve"}); err != nil {
		t.Fatal(err)
	}
	if res := <-again; res.err != nil || res.a.Out.Decision != "allow" {
		t.Fatalf("approved after replica 1 was killed, the hook sent again to replica 2 got %+v, %v", res.a.Out, res.err)
	}

	// Replica 1 comes back; the call sent a third time is answered as it
	// was, and nothing was asked twice.
	if err := r1.start(); err != nil {
		t.Fatal(err)
	}
	if got, err = r1.postHook(ctx, payload, wait); err != nil || got.Out.Decision != "allow" {
		t.Fatalf("the approved call sent again to the restarted replica 1: %+v, %v", got.Out, err)
	}
	qs, err := f.allQuestions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	asked := map[string]int{}
	for _, q := range qs {
		asked[q.CallID]++
	}
	for _, id := range []string{"toolu_rm", "toolu_curl", "toolu_mv"} {
		if asked[id] != 1 {
			t.Errorf("call %s asked %d times, want once", id, asked[id])
		}
	}
	if asked["toolu_ls"] != 0 {
		t.Errorf("the allowed call was asked")
	}
}
