package hitl_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tollgate-ai/tollgate/hitl"
)

// A run's answer checks are held by the channel it waits on, not by a
// registry every channel of the process shares: another channel over the
// same store (as another process's would be) records an edit the run
// would refuse, and the run, reading it, refuses it itself.
func TestAnswerChecksAreTheWaitingChannels(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, oneCall("rm /tmp/logs")...)
	done, reqs := f.start(t, 1)
	id := reqs[0].QuestionID
	denied := hitl.ApproveAnswer{Decision: "edit", EditedArgs: map[string]any{"cmd": "rm -rf /"}}
	if err := f.channel.Answer(context.Background(), id, denied); !errors.Is(err, hitl.ErrInvalidAnswer) {
		t.Fatalf("the waiting run's channel took an edit the policy denies: %v", err)
	}
	other := hitl.NewCheckpointedChannel(f.store, f.agent.ThreadID(), &hitl.ChannelOptions{Clock: f.clock})
	if err := other.Answer(context.Background(), id, denied); err != nil {
		t.Fatalf("another channel on the store = %v, want the answer recorded (it holds no check of the run's)", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := f.ranCmds(); len(got) != 0 {
		t.Fatalf("ran %v: the run must refuse the edit its policy denies", got)
	}
}
