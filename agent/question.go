package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// QuestionRequest describes a question for a person.
type QuestionRequest struct {
	// ID must be deterministic (derived from the call id) and unique in
	// the thread: re-asking with the same id finds the stored question.
	ID string
	// Kind tells the payload apart ("approve", "ask", "confirm",
	// "tool_interrupt", ...).
	Kind string
	// Payload is what the person is shown; it is stored as JSON.
	Payload any
	// Timeout is the time to answer; the deadline is absolute (now +
	// Timeout when the question is first written) and survives restarts.
	// Zero: no deadline.
	Timeout time.Duration
	// Digest binds answers to what the person saw (see [CallDigest]).
	Digest string
	// CallID is the tool call the question is about; Ask fills it in.
	CallID string
	// Tool is the tool called; Ask fills it in. Reviewers' queues filter
	// on it.
	Tool string
	// Check, when set, vets an answer before it is accepted, by a
	// channel that is an [AnswerChecker]: an error refuses the answer and
	// the question stays open. It runs in this process only, while the
	// run waits.
	Check func(ctx context.Context, answer json.RawMessage) error
}

// Channel delivers questions' resolutions to a waiting run. The default
// waits on the checkpointer's notifications, which is right for every
// store; hitl's channels implement it too.
type Channel interface {
	// Wait blocks until the question is no longer pending and returns it,
	// or returns ctx's error.
	Wait(ctx context.Context, threadID, questionID string) (*checkpoint.Question, error)
}

// parkedError is how a parked question travels up from Ask to the run: it
// is ErrParked, and ErrQuestion so that middleware and the turn treat it as
// "no decision yet", never as an answer.
type parkedError struct {
	questions []string
	// recorded: the run_parked audit entry was committed with the
	// question.
	recorded bool
}

func (e *parkedError) Error() string {
	return fmt.Sprintf("%v (questions %s)", ErrParked, strings.Join(e.questions, ", "))
}

func (e *parkedError) Is(target error) bool { return target == ErrParked || target == ErrQuestion }

type noParkKey struct{}

// Parker is a [Channel] that knows, before a question is written, that its
// Wait would park the run (return ErrParked) for a question nobody has
// answered yet; package host's channel does. The agent then records the
// run's parking in the question's own write and parks without calling
// Wait, and the answer, whenever it comes, resumes the run.
type Parker interface {
	// Parks reports whether Wait would park for a question asked in ctx
	// (it is called only where [MayPark] is true).
	Parks(ctx context.Context) bool
}

// MayPark reports whether a [Channel]'s Wait may return ErrParked for the
// question being waited on in ctx. It may not when the question was asked
// from inside a tool that is not idempotent: the tool could not be run
// again to pick up the answer, so the wait must happen in process.
func MayPark(ctx context.Context) bool {
	no, _ := ctx.Value(noParkKey{}).(bool)
	return !no
}

// An AnswerChecker is a [Channel] through which answers are also given
// (hitl's channels are). A run that asks a question with a Check
// ([QuestionRequest]) hands the check to its channel for as long as it
// waits on the question in this process, and the channel vets an answer
// with it before recording it: an edit a policy refuses is refused to
// whoever answers, and the question stays open. A channel that is not an
// AnswerChecker gets no checks; the run then checks the answer when it
// reads it.
type AnswerChecker interface {
	// HoldCheck makes check vet the answers given through the channel to
	// the thread's question until release is called.
	HoldCheck(threadID, questionID string, check func(ctx context.Context, answer json.RawMessage) error) (release func())
}

// ErrQuestion wraps failures of the question primitive itself.
var ErrQuestion = errors.New("agent: question")

// ask asks req. legacyDigest, when set, is another digest a question
// stored under req.ID may carry and still be about the same call (the
// digest an earlier version gave it).
func (a *Agent) ask(ctx context.Context, rs *runState, req QuestionRequest, legacyDigest string) (*checkpoint.Question, error) {
	runID := rs.th.RunID
	if req.ID == "" {
		return nil, fmt.Errorf("%w: empty question id", ErrQuestion)
	}
	now := a.clock.Now()
	q := &checkpoint.Question{ // its Payload is encoded only if it is written
		ThreadID: a.threadID, ID: req.ID, RunID: runID, CallID: req.CallID, Tool: req.Tool,
		Kind: req.Kind, Digest: req.Digest, CreatedAt: now,
	}
	if req.Timeout > 0 {
		q.Deadline = now.Add(req.Timeout)
	}
	if ac, ok := a.channel.(AnswerChecker); ok && req.Check != nil {
		defer ac.HoldCheck(a.threadID, req.ID, req.Check)()
	}
	if c := ToolCallFrom(ctx); c != nil && (c.Tool == nil || !c.Tool.Idempotent()) {
		// Asked from inside a tool that cannot be run again: parking would
		// leave its outcome unknown, so this question is waited for here.
		ctx = context.WithValue(ctx, noParkKey{}, true)
	}
	p, isParker := a.channel.(Parker)
	parkNow := isParker && rs.soloCall() && MayPark(ctx) && p.Parks(ctx)
	var stored *checkpoint.Question
	var created bool
	var err error
	if read := rs.takeRead(q.ID); read != nil {
		// A middleware read it just before asking (hitl does, to let an
		// answer already given decide): no need to read it again.
		stored = read
	} else if !rs.turnFresh() {
		// A resumed turn: the question is likely there (a read costs less
		// than a write that finds it).
		stored, err = a.store.GetQuestion(ctx, q.ThreadID, q.ID)
		if errors.Is(err, checkpoint.ErrNotFound) {
			stored, err = nil, nil
		}
	}
	if err == nil && stored == nil {
		stored, created, err = a.writeQuestion(ctx, rs, q, req.Payload, parkNow)
	}
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrQuestion, req.ID, err)
	}
	sameDigest := stored.Digest == q.Digest || legacyDigest != "" && stored.Digest == legacyDigest
	if !created && (stored.CallID != q.CallID || stored.Kind != q.Kind || !sameDigest) {
		// Never let an answer given about one call decide another.
		return nil, fmt.Errorf("%w %q: the id already holds a question about another call (call %q, kind %q)",
			ErrQuestion, req.ID, stored.CallID, stored.Kind)
	}
	if stored.Status != checkpoint.QuestionPending {
		// Resolved while no run waited (the run was parked, or stopped):
		// the answer is news to this run's subscribers.
		a.emit(&HitlResolvedEvent{meta: a.meta(runID), Question: stored})
		return stored, nil
	}
	a.emit(&HitlRequestEvent{meta: a.meta(runID), Question: stored, Existing: !created})
	if parkNow && created {
		return nil, &parkedError{questions: []string{stored.ID}, recorded: true}
	}
	resolved, err := a.waitQuestion(ctx, stored)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, ErrParked) {
			return nil, &parkedError{questions: []string{stored.ID}}
		}
		// The run stops and can be resumed: a question whose state we
		// cannot read must never turn into an answer.
		return nil, fmt.Errorf("%w %q: waiting for the answer: %w", ErrQuestion, req.ID, err)
	}
	// Its question_resolved entry was committed with the resolution, by
	// whoever resolved it.
	a.emit(&HitlResolvedEvent{meta: a.meta(runID), Question: resolved})
	return resolved, nil
}

// writeQuestion writes q, with its payload, before anyone is told: a crash
// after this finds the question on resume; a crash before it asks again
// with the same id. The audit entry is in the same write, so it exists
// exactly when the question does; so is the run's parking (parkNow) when
// this question is all the turn waits for and the channel parks (the run
// then parks whatever happens next: the answer resumes it).
func (a *Agent) writeQuestion(ctx context.Context, rs *runState, q *checkpoint.Question, payload any, parkNow bool) (*checkpoint.Question, bool, error) {
	raw, err := jsontext.Marshal(payload)
	if err != nil {
		return nil, false, fmt.Errorf("cannot encode payload: %v", err)
	}
	q.Payload = raw
	runID := rs.th.RunID
	asked := map[string]any{
		"question_id": q.ID, "kind": q.Kind, "call_id": q.CallID,
		"digest": q.Digest, "deadline": deadlineString(q.Deadline),
	}
	if p := a.policyDigest(); p != "" {
		asked["policy_digest"] = p
	}
	b := &checkpoint.Batch{Question: q, Events: []*checkpoint.Event{a.event(runID, "question_asked", asked)}}
	if parkNow {
		b.Events = append(b.Events, a.event(runID, "run_parked", map[string]any{"questions": []string{q.ID}}))
	}
	c, err := rs.commit(ctx, b, nil, false)
	if err != nil {
		return nil, false, err
	}
	return c.Question, c.Created, nil
}

func deadlineString(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// waitQuestion waits for q's resolution on the channel while a timer on the
// agent's clock fires its deadline; the timeout is the same compare-and-set
// as an answer, so exactly one of them wins.
func (a *Agent) waitQuestion(ctx context.Context, q *checkpoint.Question) (*checkpoint.Question, error) {
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		q   *checkpoint.Question
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := a.channel.Wait(waitCtx, q.ThreadID, q.ID)
		done <- result{r, err}
	}()
	var deadline <-chan time.Time
	if !q.Deadline.IsZero() {
		c, stop := a.clock.After(q.Deadline.Sub(a.clock.Now()))
		defer stop()
		deadline = c
	}
	for {
		select {
		case r := <-done:
			if r.err != nil && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return r.q, r.err
		case <-deadline:
			deadline = nil
			r, _, err := TimeOut(ctx, a.store, q, a.clock.Now())
			if err != nil {
				return nil, fmt.Errorf("%w %q: %w", ErrQuestion, q.ID, err)
			}
			return r, nil
		}
	}
}

// TimeOut records that q's deadline has passed, by the same
// compare-and-set as an answer, at now or the deadline if now is earlier.
// won reports whether this call recorded it; if an answer or an abort won
// first, the question as the winner left it is returned instead. Whoever
// fires deadlines (a waiting run, a host) uses it, so exactly one
// resolution wins.
func TimeOut(ctx context.Context, store checkpoint.Store, q *checkpoint.Question, now time.Time) (resolved *checkpoint.Question, won bool, err error) {
	at := now
	if at.Before(q.Deadline) {
		at = q.Deadline
	}
	res := checkpoint.Resolution{Status: checkpoint.QuestionTimedOut, By: "timeout", At: at}
	c, err := store.Commit(ctx, &checkpoint.Batch{
		Resolve: &checkpoint.Resolve{ThreadID: q.ThreadID, ID: q.ID, Resolution: res},
		Events:  []*checkpoint.Event{checkpoint.ResolutionEvent(q, res)},
	})
	var r *checkpoint.Question
	switch {
	case err == nil:
		return c.Resolved, true, nil
	case errors.Is(err, checkpoint.ErrConflict):
		// Someone answered (or aborted) first: theirs wins.
		r, err = store.GetQuestion(ctx, q.ThreadID, q.ID)
		if err == nil && r.Status == checkpoint.QuestionPending {
			// A conflict with nothing to show for it: never hand a
			// pending question on as resolved.
			return nil, false, fmt.Errorf("recording timeout: the store refused it, yet question %q is still pending", q.ID)
		}
		return r, false, err
	default:
		return nil, false, fmt.Errorf("recording timeout: %w", err)
	}
}

// EscapeID makes s safe inside a question id: ASCII letters, digits, '_'
// and '-' stay; every other byte of its UTF-8 encoding becomes '.' and two
// lowercase hex digits. The encoding is one-to-one and ASCII-only:
// EscapeID("fc:1") == "fc.3a1".
func EscapeID(s string) string {
	const hexDigits = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('.')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xf])
	}
	return b.String()
}

// CallDigest is the digest that binds an approval to what the reviewer
// saw: one call — this thread's call with this id — of this tool with
// these arguments. It is "sha256:" and the hex SHA-256 of a fixed tag,
// then the thread id, the call id and the tool name each as its length in
// decimal, a colon and its bytes, then the arguments' canonical JSON (keys
// sorted, no spaces). Two argument objects that differ only in key order
// or spacing have the same digest; the same command in two threads, or
// twice in one, does not. hitl and interrupt bind their questions to it.
func CallDigest(threadID, callID, tool string, args json.RawMessage) string {
	return callDigestCanonical(threadID, callID, tool, canonicalArgs(args))
}

// callDigestTag starts what CallDigest hashes, so that no call's digest is
// ever an ArgsDigest.
const callDigestTag = "tollgate call digest v2\x00"

// callDigestCanonical is CallDigest of arguments already canonical. What
// it hashes is put together on the stack when it is small (a call of the
// MCP gateway, most calls of a run): one allocation, the digest's string.
func callDigestCanonical(threadID, callID, tool string, canonical json.RawMessage) string {
	var small [512]byte
	b := append(small[:0], callDigestTag...)
	for _, f := range [...]string{threadID, callID, tool} {
		b = append(append(strconv.AppendInt(b, int64(len(f)), 10), ':'), f...)
	}
	var sum [sha256.Size]byte
	if len(b)+len(canonical) <= len(small) {
		sum = sha256.Sum256(append(b, canonical...))
	} else {
		h := sha256.New()
		h.Write(b)
		h.Write(canonical)
		h.Sum(sum[:0])
	}
	return digestText(sum)
}

// digestText is "sha256:" and the hex of sum.
func digestText(sum [sha256.Size]byte) string {
	var out [len("sha256:") + 2*sha256.Size]byte
	copy(out[:], "sha256:")
	hex.Encode(out[len("sha256:"):], sum[:])
	return string(out[:])
}

// ArgsDigest is "sha256:" and the hex SHA-256 of the tool name, a NUL
// byte, and the arguments' canonical JSON: the same for the same tool and
// arguments in any call of any thread. Questions asked before digests
// bound the call ([CallDigest]) carry it, and are still answered against
// it.
func ArgsDigest(tool string, args json.RawMessage) string {
	return digestCanonical(tool, canonicalArgs(args))
}

// digestCanonical is ArgsDigest of arguments already in canonical form
// (canonicalArgs of canonical arguments is the same bytes).
func digestCanonical(tool string, canonical json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(canonical)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// CanonicalArgs re-encodes a JSON arguments object with sorted keys and no
// spaces (numbers kept exactly as written); input that is not an object is
// returned unchanged, and so is input already in canonical form (the
// result may be args itself: do not change it in place).
func CanonicalArgs(args json.RawMessage) json.RawMessage { return canonicalArgs(args) }
