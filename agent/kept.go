package agent

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// keptRun is what a run that parked knew, kept on its Agent for the
// resume that may follow in this process (package host resumes a parked
// run on the agent it parked on): the messages as the run held them and
// its calls' validated arguments. A resume uses it only when the thread
// it reads is still at the version the park wrote, in the same run: the
// thread is append-only and every write moves its version, so the stored
// messages are then those the run held. Anything else (an abort, another
// driver, a newer write) and the resume decodes the thread as before.
//
// With it a resumed run goes on as a run that waited in process does:
// from the messages and validated arguments it had (the policy and every
// before-tool hook still run again, and the answer is still checked
// against the call's digest).
type keptRun struct {
	version int64
	runID   string
	// updatedAt is the store's time of the run's last thread write: with
	// the version and run id, what tells the thread the park wrote from
	// another that reached the same version and run id after the store
	// lost its last commits (a failover to a standby behind it, a backup
	// restored) and the run was driven again under the same idempotency
	// key. A write whose answer was lost has a guessed time: its resume
	// decodes the thread.
	updatedAt time.Time
	msgs      []Message
	calls     map[string]*validCall
}

// validCall is a call's arguments as decide validated them: kept for a
// decision of the same call made again (its resume) while the call's
// tool and arguments are the same. typed is handed out again only when
// nothing in it can be changed in place (Tool.argsByValue): a hook may
// change the value it is given, so a decision made again otherwise gets
// the arguments decoded afresh (validation, the costly part, is not
// repeated).
type validCall struct {
	tool      *Tool
	args      json.RawMessage // the call's Arguments, as the model gave them
	typed     any             // handed out again only when the tool's arguments are by value
	canonical json.RawMessage
	digest    string // CallDigest of the call with canonical
}

// maxKeptBytes bounds the messages a parked run keeps (keptSize): a
// longer thread is decoded again by its resume rather than held in
// memory while no one answers.
const maxKeptBytes = 64 << 10

// keepParked keeps what the run that has just parked knew, when all it
// holds is committed (no message of it is pending) and it is small
// enough. Called under the run slot.
func (a *Agent) keepParked(rs *runState) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	a.kept = nil
	if rs.last == nil || len(rs.pending) > 0 || validSize(rs.valid)+keptSize(rs.last) > maxKeptBytes {
		return
	}
	a.kept = &keptRun{version: rs.th.Version, runID: rs.th.RunID, updatedAt: rs.th.UpdatedAt, msgs: rs.last, calls: rs.valid}
}

// keptSize is about the bytes msgs hold: their texts, calls and results
// (details as encoded), and a little for the rest of each. It stops
// counting past maxKeptBytes: a park of a long thread does not encode
// every result's details only to keep nothing.
func keptSize(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		if n > maxKeptBytes {
			return n
		}
		n += 128 + len(m.Text) + len(m.ProviderData)
		for _, c := range m.ToolCalls {
			n += len(c.ID) + len(c.Name) + len(c.Arguments)
		}
		if m.Result != nil {
			n += len(m.Result.Content)
			if len(m.Result.Details) > 0 {
				raw, err := jsontext.Marshal(m.Result.Details)
				if err != nil {
					return maxKeptBytes + 1 // not kept
				}
				n += len(raw)
			}
		}
	}
	return n
}

// validSize is about the bytes the validated calls hold: each call's
// arguments as given and canonical, and the decoded value, about as
// large again.
func validSize(calls map[string]*validCall) int {
	n := 0
	for _, v := range calls {
		n += 64 + 2*len(v.args) + len(v.canonical) + len(v.digest)
	}
	return n
}

// resumeFrom is what a resume of th starts from: the messages kept when
// the run parked and its calls' validated arguments, if th is as the park
// left it, else th's messages decoded. Called under the run slot; what
// was kept is used once.
func (a *Agent) resumeFrom(th *checkpoint.Thread) ([]Message, map[string]*validCall, error) {
	k := a.kept
	a.kept = nil
	if k != nil && k.version == th.Version && k.runID == th.RunID && sameTime(k.updatedAt, th.UpdatedAt) && len(k.msgs) > 0 {
		return k.msgs[:len(k.msgs):len(k.msgs)], k.calls, nil
	}
	msgs, err := decodeMessages(th.Messages)
	return msgs, nil, err
}

// sameTime reports whether a and b are the same time as a store keeps it:
// PostgreSQL keeps microseconds of the nanoseconds it was given.
func sameTime(a, b time.Time) bool {
	d := a.Sub(b)
	return d > -time.Microsecond && d < time.Microsecond
}

// validated returns call's arguments as they were validated earlier in
// this run or before it parked, if its tool and arguments are the same.
func (rs *runState) validated(call ToolCall, tool *Tool) *validCall {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	v := rs.valid[call.ID]
	if v == nil || v.tool != tool || !bytes.Equal(v.args, call.Arguments) {
		return nil
	}
	return v
}

// noteValidated keeps call's validated arguments (see validated).
func (rs *runState) noteValidated(call ToolCall, v *validCall) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.valid == nil {
		rs.valid = map[string]*validCall{}
	}
	rs.valid[call.ID] = v
}
