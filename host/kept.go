package host

import "github.com/tollgate-ai/tollgate/agent"

// maxKeptAgents bounds the parked runs whose agents a host keeps.
const maxKeptAgents = 256

// keptAgents are the agents of the last runs that parked here, by thread
// id, so that the resume an answer starts goes on the agent the run
// parked on: the agent keeps what the run knew (its messages, its call's
// validated arguments) and uses it only if the thread is still at the
// version its park wrote; else the resume reads and decodes the thread as
// on any other host. Nothing else of a parked run is held: past
// maxKeptAgents the oldest is let go. Guarded by Host.mu.
type keptAgents struct {
	by   map[string]keptAgent
	next uint64
}

type keptAgent struct {
	a   *agent.Agent
	seq uint64 // when it was kept: the lowest goes first
}

// put keeps a, the agent of the thread's run that has just parked.
func (k *keptAgents) put(threadID string, a *agent.Agent) {
	if k.by == nil {
		k.by = map[string]keptAgent{}
	}
	k.next++
	k.by[threadID] = keptAgent{a: a, seq: k.next}
	if len(k.by) <= maxKeptAgents {
		return
	}
	oldest, seq := "", k.next
	for id, e := range k.by {
		if e.seq < seq {
			oldest, seq = id, e.seq
		}
	}
	delete(k.by, oldest)
}

// take returns the agent kept for the thread, or nil, and forgets it.
func (k *keptAgents) take(threadID string) *agent.Agent {
	e, ok := k.by[threadID]
	if !ok {
		return nil
	}
	delete(k.by, threadID)
	return e.a
}
