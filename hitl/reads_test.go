package hitl_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/storetest"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// silentReads counts GetQuestion and tells each read's status. It sends
// no notifications: a waiting run is woken by the channel's answer in
// this process or by its poll.
type silentReads struct {
	checkpoint.Store
	reads chan checkpoint.QuestionStatus
}

func (s *silentReads) GetQuestion(ctx context.Context, thread, id string) (*checkpoint.Question, error) {
	q, err := s.Store.GetQuestion(ctx, thread, id)
	if err == nil {
		s.reads <- q.Status
	} else {
		s.reads <- "error: " + checkpoint.QuestionStatus(err.Error())
	}
	return q, err
}

func (s *silentReads) Subscribe(ctx context.Context) (<-chan checkpoint.Notification, error) {
	return make(chan checkpoint.Notification), nil
}

// A run waiting on a checkpointed channel reads its question once: not
// before asking (its turn is not stored yet), once when it starts to wait,
// and not after an answer given through the channel in this process, which
// hands it the resolved question.
func TestWaitingRunReadsTheQuestionOnce(t *testing.T) {
	t.Parallel()
	store := &silentReads{Store: storetest.New(t), reads: make(chan checkpoint.QuestionStatus, 64)}
	f := newFixture(t, store, oneCall("touch x")...)
	// No poll during the test: only the answer can wake the run.
	f.channel = hitl.NewCheckpointedChannel(store, "session-1", &hitl.ChannelOptions{Clock: f.clock, PollInterval: time.Hour})
	a, err := agent.New(agent.Config{
		Provider: scripted.New(oneCall("touch x")...), Tools: []*agent.Tool{agent.NewTool("bash", "Run a command.", func(ctx context.Context, a cmdArgs) (string, error) {
			f.mu.Lock()
			f.ran = append(f.ran, a.Cmd)
			f.mu.Unlock()
			return "ran", nil
		}, nil)},
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(f.channel, sandboxPolicy(f))},
		Channel:    f.channel, Checkpointer: store, ThreadID: "session-1", Clock: f.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.agent = a
	done, reqs := f.start(t, 1)
	if st := <-store.reads; st != checkpoint.QuestionPending {
		t.Fatalf("the run's first read of its question: %s, want the wait's (pending)", st)
	}
	if err := f.channel.Answer(context.Background(), reqs[0].QuestionID, hitl.ApproveAnswer{Decision: hitl.DecisionApprove, Digest: reqs[0].Digest}); err != nil {
		t.Fatal(err)
	}
	if st := <-store.reads; st != checkpoint.QuestionPending { // the answer's check
		t.Fatalf("the answer's read: %s", st)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // a guard, not a timing: nothing else wakes the run
		t.Fatal("the answer did not wake the waiting run")
	}
	if len(f.ran) != 1 {
		t.Fatalf("ran %v", f.ran)
	}
	close(store.reads)
	for st := range store.reads {
		t.Errorf("the run read its question again after the answer (%s)", st)
	}
}
