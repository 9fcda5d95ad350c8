package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/internal/storetest"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// decodedArgs count how often the tool's arguments are decoded to its
// type: once a validation.
type decodedArgs struct {
	Text string `json:"text"`
}

var argDecodes atomic.Int32

func (d *decodedArgs) UnmarshalJSON(b []byte) error {
	argDecodes.Add(1)
	var v struct {
		Text string `json:"text"`
	}
	err := json.Unmarshal(b, &v)
	d.Text = v.Text
	return err
}

// A run resumed on the agent it parked on goes on from what it held, as
// a run that waited in process does: the call's arguments are not
// validated a second time (only decoded afresh). A new agent (another process) validates them
// again from the stored thread, and so does a resume of a thread longer
// than what a parked run keeps.
func TestResumeOnTheAgentThatParkedValidatesOnce(t *testing.T) {
	t.Parallel() // argDecodes counts the decodes of decodedArgs, this test's alone
	store := storetest.New(t)
	ch := &parkingChannel{store: store}
	var ran atomic.Int32
	tool := countingTool("note", &ran, func(a decodedArgs) string { return "noted: " + a.Text })
	cfg := func(thread string, model agent.Provider) agent.Config {
		return agent.Config{Provider: model, Checkpointer: store, Channel: ch, ThreadID: thread,
			Tools: []*agent.Tool{tool}, Middleware: []agent.Middleware{askMW(0)}}
	}
	for _, c := range []struct {
		thread      string
		newAgent    bool
		prompt      string
		validations int64
	}{
		{"same", false, "go", 1},
		{"other", true, "go", 2},
		// A thread over what a parked run keeps is decoded again.
		{"long", false, strings.Repeat("go ", 30000), 2},
	} {
		argDecodes.Store(0)
		before := agent.Validations(tool)
		model := scripted.New(scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "note", decodedArgs{"x"})}}, scripted.Turn{Text: "done"})
		a := newAgent(t, cfg(c.thread, model))
		if _, err := a.Prompt(context.Background(), c.prompt); !errors.Is(err, agent.ErrParked) {
			t.Fatalf("%s: Prompt = %v, want ErrParked", c.thread, err)
		}
		answer(t, store, c.thread, "approve_c1", "true")
		if c.newAgent {
			a = newAgent(t, cfg(c.thread, model))
		}
		msg, err := a.Resume(context.Background())
		if err != nil || msg.Text != "done" {
			t.Fatalf("%s: Resume = %v, %v", c.thread, msg, err)
		}
		if n := agent.Validations(tool) - before; n != c.validations {
			t.Errorf("%s: the arguments were validated %d times, want %d", c.thread, n, c.validations)
		}
		// Not decoded again for a decision made again: nothing in a
		// decodedArgs can be changed in place (arguments that can are
		// decoded afresh: TestKeptResumeHandsHooksAFreshArgsValue).
		if n := argDecodes.Load(); n != int32(c.validations) {
			t.Errorf("%s: the arguments were decoded %d times, want %d", c.thread, n, c.validations)
		}
	}
	if ran.Load() != 3 {
		t.Fatalf("the tool ran %d times in three runs", ran.Load())
	}
}

// What a parked run kept is used only while the thread is as its park
// left it: once another driver has taken the run on (answered, ran the
// call, parked on the next turn's question), the agent that parked first
// resumes from the stored thread. From what it kept it would decide the
// first turn's call again and write over a thread that moved.
func TestResumeAfterTheThreadMovedOnReadsIt(t *testing.T) {
	t.Parallel()
	store := storetest.New(t)
	ch := &parkingChannel{store: store}
	var ran atomic.Int32
	tool := countingTool("echo", &ran, func(a echoArgs) string { return "echo: " + a.Text })
	model := scripted.New(
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c1", "echo", echoArgs{"one"})}},
		scripted.Turn{ToolCalls: []agent.ToolCall{scripted.Call("c2", "echo", echoArgs{"two"})}},
		scripted.Turn{Text: "done"},
	)
	cfg := agent.Config{Provider: model, Checkpointer: store, Channel: ch,
		Tools: []*agent.Tool{tool}, Middleware: []agent.Middleware{askMW(0)}}
	first := newAgent(t, cfg)
	if _, err := first.Prompt(context.Background(), "go"); !errors.Is(err, agent.ErrParked) {
		t.Fatalf("Prompt = %v, want ErrParked", err)
	}
	answer(t, store, "t1", "approve_c1", "true")
	other := newAgent(t, cfg)
	if _, err := other.Resume(context.Background()); !errors.Is(err, agent.ErrParked) {
		t.Fatalf("the other agent's Resume = %v, want ErrParked (on c2)", err)
	}
	answer(t, store, "t1", "approve_c2", "true")
	msg, err := first.Resume(context.Background())
	if err != nil || msg.Text != "done" {
		t.Fatalf("the first agent's Resume = %v, %v, want done", msg, err)
	}
	if ran.Load() != 2 {
		t.Fatalf("the tool ran %d times, want 2 (c1, c2)", ran.Load())
	}
	res := toolResults(t, first)
	if len(res) != 2 || res[0].Content != "echo: one" || res[1].Content != "echo: two" {
		t.Fatalf("results %+v", res)
	}
}

// countingTool is a tool of that name that counts its runs in ran and
// returns say of its arguments.
func countingTool[In any](name string, ran *atomic.Int32, say func(In) string) *agent.Tool {
	return agent.NewTool(name, "Counts its runs.", func(ctx context.Context, a In) (string, error) {
		ran.Add(1)
		return say(a), nil
	}, nil)
}
