package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/interrupt"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// A tool_interrupt question is put at the prompt as the approval it is —
// the tool and its arguments, approve, deny or edit — as questions show
// prints it, not as the payload's JSON to answer in JSON; the deny typed
// there is the answer tool_interrupt takes, reason and all.
func TestTerminalAsksToolInterruptAsAnApproval(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	type args struct {
		Cmd string `json:"cmd"`
	}
	tool := agent.NewTool("bash", "Run.", func(ctx context.Context, a args) (string, error) { return "ran", nil }, nil)
	mw, err := interrupt.New(interrupt.Rule{Tool: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "bash", args{Cmd: "rm -r /tmp/x"})}}, scripted.Turn{Text: "done"})
	h, err := host.New(host.Config{Store: store, Agent: agent.Config{Provider: model, Tools: []*agent.Tool{tool}, Middleware: []agent.Middleware{mw}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(ctx)
	if _, _, err := h.Prompt(ctx, "t1", "go", nil); err != nil {
		t.Fatal(err)
	}
	var qs []*checkpoint.Question
	for deadline := time.Now().Add(30 * time.Second); len(qs) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no question asked")
		}
		qs, _, err = store.ListQuestions(ctx, checkpoint.QuestionFilter{ThreadID: "t1", Status: checkpoint.QuestionPending})
		if err != nil {
			t.Fatal(err)
		}
	}
	if qs[0].Kind != interrupt.KindToolInterrupt {
		t.Fatalf("asked a %s question", qs[0].Kind)
	}

	var out bytes.Buffer
	term := newTerminal(h, "t1", "memory", "kim", strings.NewReader(""), &out, &out)
	term.pending, term.settled = qs, true
	term.next(ctx)
	if term.cur == nil {
		t.Fatalf("the question is not at the prompt:\n%s", out.String())
	}
	shown := out.String()
	for _, want := range []string{"approval needed: bash", "cmd: rm -r /tmp/x", "[a]pprove, [d]eny, [e]dit?"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, shown)
		}
	}
	if strings.Contains(shown, `"tool_name"`) || strings.Contains(shown, "answer (JSON)") {
		t.Errorf("the prompt shows the payload as JSON:\n%s", shown)
	}
	term.submit(ctx, "d")
	term.submit(ctx, "not in /tmp")
	q, err := store.GetQuestion(ctx, "t1", qs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	o := interrupt.Interpret(q.Answer, nil)
	if q.Status != checkpoint.QuestionAnswered || o.Action != interrupt.ActionDeny || o.Message != "not in /tmp" || q.AnsweredBy != "kim" {
		t.Fatalf("question %s answered %s by %q: want a deny with the reason, by kim\n%s", q.Status, q.Answer, q.AnsweredBy, out.String())
	}
}
