package hitl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
	"github.com/tollgate-ai/tollgate/internal/resolution"
	"github.com/tollgate-ai/tollgate/interrupt"
)

// Channel carries questions between runs and the people who answer them.
// A run waits on it (it is an agent.Channel); a host iterates Subscribe and
// calls Answer.
type Channel interface {
	agent.Channel
	// Subscribe yields the pending requests — those already pending
	// first, then new ones as they are asked — until ctx ends. A request
	// is yielded once per subscription. Errors reading the store are
	// yielded too (with a nil request); iteration goes on after them.
	Subscribe(ctx context.Context) iter.Seq2[*Request, error]
	// Answer checks answer against the question and records it; the
	// waiting run resumes. See [CheckpointedChannel.Answer] for the
	// checks and their errors.
	Answer(ctx context.Context, questionID string, answer any) error
}

// CheckpointedChannel is a Channel over a checkpoint store: questions live
// in the store, so a pending question survives a crash and can be answered
// from another process. It is bound to one thread, or to all threads when
// the thread id is "".
type CheckpointedChannel struct {
	store    checkpoint.Store
	threadID string
	clock    clock.Clock
	poll     time.Duration
	// checks are the Check functions of the questions runs wait on
	// through this channel (agent.AnswerChecker).
	checks *answerChecks
}

var (
	_ Channel             = (*CheckpointedChannel)(nil)
	_ agent.AnswerChecker = (*CheckpointedChannel)(nil)
)

// ChannelOptions tune a channel. A nil *ChannelOptions means zero values.
type ChannelOptions struct {
	// Clock decides whether an answer is late. Zero: the system clock.
	Clock clock.Clock
	// PollInterval re-lists pending questions in case a notification was
	// missed. Zero: 2s.
	PollInterval time.Duration
}

// NewCheckpointedChannel returns a channel over store for one thread
// ("" for every thread).
func NewCheckpointedChannel(store checkpoint.Store, threadID string, opts *ChannelOptions) *CheckpointedChannel {
	c := &CheckpointedChannel{store: store, threadID: threadID, clock: clock.Real, poll: 2 * time.Second, checks: &answerChecks{}}
	if opts != nil {
		if opts.Clock != nil {
			c.clock = opts.Clock
		}
		if opts.PollInterval > 0 {
			c.poll = opts.PollInterval
		}
	}
	return c
}

// Store is the store the channel reads and writes.
func (c *CheckpointedChannel) Store() checkpoint.Store { return c.store }

// ThreadID is the channel's thread ("" for all).
func (c *CheckpointedChannel) ThreadID() string { return c.threadID }

// HoldCheck implements [agent.AnswerChecker]: the agent calls it for a
// question with a Check while its run waits on the question through this
// channel, and AnswerWith then refuses what the check refuses.
func (c *CheckpointedChannel) HoldCheck(threadID, questionID string, check func(context.Context, json.RawMessage) error) func() {
	return c.checks.hold(threadID, questionID, check)
}

// answerChecks holds the Check functions of the questions runs wait on,
// by thread and question.
type answerChecks struct {
	mu sync.Mutex
	m  map[[2]string]*answerCheck
}

type answerCheck struct {
	check func(context.Context, json.RawMessage) error
}

func (a *answerChecks) hold(threadID, questionID string, check func(context.Context, json.RawMessage) error) func() {
	k, c := [2]string{threadID, questionID}, &answerCheck{check}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[[2]string]*answerCheck{}
	}
	a.m[k] = c
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.m[k] == c { // a later wait on the same question holds its own
			delete(a.m, k)
		}
	}
}

// check vets answer with the check held for the question, if any: nil is
// "no objection".
func (a *answerChecks) check(ctx context.Context, threadID, questionID string, answer json.RawMessage) error {
	a.mu.Lock()
	c := a.m[[2]string{threadID, questionID}]
	a.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.check(ctx, answer)
}

// Wait implements agent.Channel.
func (c *CheckpointedChannel) Wait(ctx context.Context, threadID, questionID string) (*checkpoint.Question, error) {
	return (&agent.StoreChannel{Store: c.store, PollInterval: c.poll}).Wait(ctx, threadID, questionID)
}

// Pending lists the pending requests, oldest first. A question whose
// payload cannot be read is left out and reported in the error, with the
// readable ones still returned.
func (c *CheckpointedChannel) Pending(ctx context.Context) ([]*Request, error) {
	var out []*Request
	var bad []error
	for q, err := range checkpoint.Questions(ctx, c.store, checkpoint.QuestionFilter{ThreadID: c.threadID, Status: checkpoint.QuestionPending}) {
		if err != nil {
			return out, err
		}
		r, err := RequestOf(q)
		if err != nil {
			// One unreadable question must not hide the others.
			bad = append(bad, err)
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(bad...)
}

// Subscribe implements Channel. It subscribes to the store's notifications
// before listing, so nothing asked in between is missed, and re-lists on a
// resync notification and every poll interval.
func (c *CheckpointedChannel) Subscribe(ctx context.Context) iter.Seq2[*Request, error] {
	return func(yield func(*Request, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// A feed the store ends is subscribed again, and a resync re-lists.
		notes, err := checkpoint.Follow(ctx, c.store, nil)
		if err != nil {
			yield(nil, err)
			return
		}
		seen := map[string]bool{}
		key := func(thread, id string) string { return thread + "\x00" + id }
		relist := func() bool {
			reqs, err := c.Pending(ctx)
			if err != nil && ctx.Err() == nil {
				if !yield(nil, err) {
					return false
				}
			}
			for _, r := range reqs {
				if k := key(r.ThreadID, r.QuestionID); !seen[k] {
					seen[k] = true
					if !yield(r, nil) {
						return false
					}
				}
			}
			return true
		}
		if !relist() {
			return
		}
		ticker := time.NewTicker(c.poll)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				if !relist() {
					return
				}
			case n, ok := <-notes:
				if !ok {
					return // ctx ended
				}
				if c.threadID != "" && n.ThreadID != "" && n.ThreadID != c.threadID {
					continue
				}
				if n.Kind != checkpoint.QuestionCreated || n.QuestionID == "" {
					if n.Kind != checkpoint.QuestionResolved && !relist() {
						return
					}
					continue
				}
				if seen[key(n.ThreadID, n.QuestionID)] {
					continue
				}
				q, err := c.store.GetQuestion(ctx, n.ThreadID, n.QuestionID)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					if !yield(nil, err) {
						return
					}
					continue
				}
				if q.Status != checkpoint.QuestionPending {
					continue
				}
				r, err := RequestOf(q)
				seen[key(n.ThreadID, n.QuestionID)] = true
				if !yield(r, err) {
					return
				}
			}
		}
	}
}

// Answer answers a question of the channel's thread. See [AnswerIn].
func (c *CheckpointedChannel) Answer(ctx context.Context, questionID string, answer any) error {
	if c.threadID == "" {
		return errors.New("hitl: this channel serves every thread: use AnswerIn with the question's thread id")
	}
	return c.AnswerIn(ctx, c.threadID, questionID, answer)
}

type reviewerKey struct{}

// WithReviewer returns a context whose answers are recorded as given by
// name.
func WithReviewer(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, reviewerKey{}, name)
}

// AnswerIn checks answer and records it as the answer to the question,
// in canonical form (keys sorted, no spaces, numbers as written), so that
// every reader sees the same decision. It refuses, leaving the question as
// it was:
//   - a question of another thread than the channel's (unless it serves
//     every thread): ErrOtherThread;
//   - an answer with a key twice in one object, which readers may take
//     either way: ErrWrongKind;
//   - an unknown question: ErrUnknownQuestion;
//   - one already answered, timed out or aborted: ErrAlreadyAnswered,
//     ErrExpired or ErrAborted (when two answers race, the first wins and
//     the second gets ErrAlreadyAnswered);
//   - one whose deadline has passed: ErrExpired;
//   - an answer of the wrong shape for the kind: ErrWrongKind; so is an
//     approve or deny that carries edited_args (or a tool_interrupt
//     answer with arguments and an action other than "edit"), whose edit
//     would be dropped without a word;
//   - an approve answer whose Digest differs from the question's:
//     ErrDigestMismatch; with [AnswerOptions].RequireDigest, one that
//     carries no digest: ErrDigestRequired;
//   - an edit whose arguments fail the tool's schema (every problem
//     listed; errors.As gives the *agent.ValidationError) or that the
//     policy would deny: ErrInvalidAnswer. The question stays open.
//
// The schema travels with the question, so it is checked wherever the
// answer is given. The policy lives with the run: it vets an edit here only
// while the run waits in this process. An edit given elsewhere (another
// process, or while no process runs the thread) is accepted, and the run
// blocks it as "policy_deny" when it reads the answer, so it never runs.
func (c *CheckpointedChannel) AnswerIn(ctx context.Context, threadID, questionID string, answer any) error {
	_, err := c.AnswerWith(ctx, threadID, questionID, answer, nil)
	return err
}

// AnswerOptions tune [CheckpointedChannel.AnswerWith]. A nil
// *AnswerOptions means zero values.
type AnswerOptions struct {
	// By names who answers. Zero: the name given to [WithReviewer], if
	// any.
	By string
	// Check vets the answer after the channel's own checks and before it
	// is recorded: an error refuses it (wrapped in ErrInvalidAnswer, so
	// errors.As still finds a *agent.ValidationError in it) and the
	// question stays open. A host uses it to run the policy on an edit
	// when no run waits for the answer in this process.
	Check func(ctx context.Context, q *checkpoint.Question, answer json.RawMessage) error
	// RequireDigest refuses an answer to a question bound to a digest
	// (approve, tool_interrupt) that does not carry that digest:
	// ErrDigestRequired. Zero: an answer may leave the digest out, as a
	// program answering in its own process may (it answers the request
	// it was given); the HTTP API sets it, since a reviewer's answer
	// must say which call it is about.
	RequireDigest bool
}

// AnswerWith is [CheckpointedChannel.AnswerIn] with options; it returns
// the question as resolved by this answer.
func (c *CheckpointedChannel) AnswerWith(ctx context.Context, threadID, questionID string, answer any, opts *AnswerOptions) (*checkpoint.Question, error) {
	var o AnswerOptions
	if opts != nil {
		o = *opts
	}
	if c.threadID != "" && threadID != c.threadID {
		return nil, fmt.Errorf("%w: this channel serves thread %q, not %q", ErrOtherThread, c.threadID, threadID)
	}
	q, err := c.store.GetQuestion(ctx, threadID, questionID)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return nil, fmt.Errorf("%w: %q in thread %q", ErrUnknownQuestion, questionID, threadID)
	}
	if err != nil {
		return nil, fmt.Errorf("hitl: reading question %q: %w", questionID, err)
	}
	if err := statusError(q); err != nil {
		return nil, err
	}
	now := c.clock.Now()
	if !q.Deadline.IsZero() && !now.Before(q.Deadline) {
		return nil, fmt.Errorf("%w: question %q had to be answered by %s", ErrExpired, questionID, q.Deadline.UTC().Format(time.RFC3339))
	}
	raw, err := checkAnswer(q, answer)
	if err != nil {
		return nil, err
	}
	if o.RequireDigest && q.Digest != "" && answerDigest(raw) == "" {
		return nil, fmt.Errorf("%w: question %q", ErrDigestRequired, questionID)
	}
	if err := c.checks.check(ctx, threadID, questionID, raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidAnswer, err)
	}
	if o.Check != nil {
		if err := o.Check(ctx, q, raw); err != nil {
			if errors.Is(err, ErrInvalidAnswer) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %w", ErrInvalidAnswer, err)
		}
	}
	by := o.By
	if by == "" {
		by, _ = ctx.Value(reviewerKey{}).(string)
	}
	// The answer and its audit entry in one write: the entry exists
	// exactly when the answer does.
	res := checkpoint.Resolution{Status: checkpoint.QuestionAnswered, Answer: raw, By: by, At: now}
	committed, err := c.store.Commit(ctx, &checkpoint.Batch{
		Resolve: &checkpoint.Resolve{ThreadID: threadID, ID: questionID, Resolution: res},
		Events:  []*checkpoint.Event{checkpoint.ResolutionEvent(q, res)},
	})
	switch {
	case err == nil:
		resolution.Tell(c.store, committed.Resolved) // a run of this process waiting for it need not read it
		return committed.Resolved, nil
	case errors.Is(err, checkpoint.ErrExpired):
		return nil, fmt.Errorf("%w: %w", ErrExpired, err)
	case errors.Is(err, checkpoint.ErrConflict):
		if cur, gerr := c.store.GetQuestion(ctx, threadID, questionID); gerr == nil {
			if serr := statusError(cur); serr != nil {
				return nil, serr
			}
		}
		return nil, fmt.Errorf("%w: %w", ErrAlreadyAnswered, err)
	default:
		return nil, fmt.Errorf("hitl: recording answer to %q: %w", questionID, err)
	}
}

func statusError(q *checkpoint.Question) error {
	switch q.Status {
	case checkpoint.QuestionPending:
		return nil
	case checkpoint.QuestionTimedOut:
		return fmt.Errorf("%w: question %q timed out", ErrExpired, q.ID)
	case checkpoint.QuestionAborted:
		return fmt.Errorf("%w: question %q was aborted (%s)", ErrAborted, q.ID, q.Reason)
	default:
		by := ""
		if q.AnsweredBy != "" {
			by = " by " + q.AnsweredBy
		}
		return fmt.Errorf("%w: question %q was answered%s", ErrAlreadyAnswered, q.ID, by)
	}
}

// checkAnswer checks the shape of an answer against the question's kind
// and returns it as JSON.
func checkAnswer(q *checkpoint.Question, answer any) (json.RawMessage, error) {
	if q.Kind == KindApprove {
		if a, ok := plainApprove(answer); ok {
			// What the general path below gives such an answer, without
			// its decoding and encoding (approve_answer.go).
			if err := checkApprove(&a); err != nil {
				return nil, err
			}
			if a.Digest != "" && a.Digest != q.Digest {
				return nil, fmt.Errorf("%w (answer %s, question %s)", ErrDigestMismatch, a.Digest, q.Digest)
			}
			return encodeApprove(&a)
		}
	}
	return checkAnswerGeneral(q, answer)
}

// checkAnswerGeneral is checkAnswer for any answer.
func checkAnswerGeneral(q *checkpoint.Question, answer any) (json.RawMessage, error) {
	raw, err := toJSON(answer)
	if err != nil {
		return nil, fmt.Errorf("%w: answer cannot be encoded: %v", ErrWrongKind, err)
	}
	if err := duplicateKeys(raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWrongKind, err)
	}
	if raw, err = canonicalJSON(raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWrongKind, err)
	}
	switch q.Kind {
	case KindApprove:
		a, err := parseApprove(raw)
		if err != nil {
			return nil, err
		}
		if a.Digest != "" && a.Digest != q.Digest {
			return nil, fmt.Errorf("%w (answer %s, question %s)", ErrDigestMismatch, a.Digest, q.Digest)
		}
		if a.Decision == DecisionEdit {
			var p Payload
			if err := json.Unmarshal(q.Payload, &p); err == nil && len(p.ArgsSchema) > 0 {
				edited, _ := json.Marshal(a.EditedArgs)
				if err := agent.ValidateArgs(p.ToolName, p.ArgsSchema, edited); err != nil {
					return nil, fmt.Errorf("%w: %w", ErrInvalidAnswer, err)
				}
			}
		}
		return canonicalJSON(mustJSON(a))
	case interrupt.KindToolInterrupt:
		if err := checkToolDecision(q, raw); err != nil {
			return nil, err
		}
	case KindConfirm:
		if _, err := parseConfirm(raw); err != nil {
			return nil, err
		}
	case KindAsk:
		var p Payload
		_ = json.Unmarshal(q.Payload, &p)
		if len(p.Choices) > 0 {
			var s string
			if json.Unmarshal(raw, &s) != nil || !slices.Contains(p.Choices, s) {
				return nil, fmt.Errorf("%w: the answer must be one of %q", ErrWrongKind, p.Choices)
			}
		}
		if len(p.Schema) > 0 {
			if err := agent.ValidateArgs("form", p.Schema, raw); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalidAnswer, err)
			}
		}
	}
	return raw, nil
}

// checkToolDecision refuses an answer to a tool_interrupt question that
// interrupt.Interpret would read otherwise than it says: arguments with an
// action other than "edit" (dropped without a word), or the digest of
// another call. Anything else is the seed's (a malformed answer denies).
func checkToolDecision(q *checkpoint.Question, raw json.RawMessage) error {
	var d struct {
		Action    any             `json:"action"`
		Arguments json.RawMessage `json:"arguments"`
		Digest    *string         `json:"digest"`
	}
	if json.Unmarshal(raw, &d) != nil {
		return nil // not an object: true, false, ...
	}
	if len(d.Arguments) > 0 && string(d.Arguments) != "null" && d.Action != interrupt.ActionEdit {
		return fmt.Errorf("%w: only the action \"edit\" carries arguments (with %s they would be ignored): to run the call with other arguments, send the action \"edit\"", ErrWrongKind, jsonWord(d.Action))
	}
	if d.Digest != nil && *d.Digest != q.Digest {
		return fmt.Errorf("%w (answer %s, question %s)", ErrDigestMismatch, *d.Digest, q.Digest)
	}
	return nil
}

// answerDigest is the digest an answer carries ("" for none, or for an
// answer that is not an object, such as a tool_interrupt's true).
func answerDigest(raw json.RawMessage) string {
	var d struct {
		Digest string `json:"digest"`
	}
	if json.Unmarshal(raw, &d) != nil {
		return ""
	}
	return d.Digest
}

// jsonWord is v as JSON, for a message.
func jsonWord(v any) string {
	if v == nil {
		return "no action"
	}
	b, _ := json.Marshal(v)
	return "the action " + string(b)
}

// duplicateKeys reports an object, anywhere in the JSON text, with a key
// given twice: decoders differ on which one counts.
func duplicateKeys(raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	// keys holds, for each open object (nil for an array), the keys seen.
	var keys []map[string]bool
	expectKey := func() bool { return len(keys) > 0 && keys[len(keys)-1] != nil }
	afterValue := true // the next string in an object is a key
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				keys = append(keys, map[string]bool{})
				afterValue = true
				continue
			case '[':
				keys = append(keys, nil)
			default:
				keys = keys[:len(keys)-1]
			}
			afterValue = true
		case string:
			if expectKey() && afterValue {
				if keys[len(keys)-1][t] {
					return fmt.Errorf("the key %q is given twice in one object", t)
				}
				keys[len(keys)-1][t] = true
				afterValue = false
				continue
			}
			afterValue = true
		default:
			afterValue = true
		}
	}
}

// canonicalJSON re-encodes JSON text with object keys sorted and no
// spaces, numbers as written.
func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return jsontext.Marshal(v)
}

func mustJSON(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err) // an ApproveAnswer decoded from JSON encodes again
	}
	return raw
}

func toJSON(v any) (json.RawMessage, error) {
	switch x := v.(type) {
	case json.RawMessage:
		if !json.Valid(x) {
			return nil, errors.New("not valid JSON")
		}
		return x, nil
	case []byte:
		if !json.Valid(x) {
			return nil, errors.New("not valid JSON")
		}
		return x, nil
	case *ApproveAnswer:
		if x == nil {
			return nil, errors.New("no answer (a nil *ApproveAnswer)")
		}
		return json.Marshal(*x)
	}
	return json.Marshal(v)
}

// parseApprove reads an approve answer: an ApproveAnswer, or a JSON object
// of the same shape. Unknown decisions and edits without arguments are
// refused.
func parseApprove(raw json.RawMessage) (*ApproveAnswer, error) {
	a, ok := flatApprove(raw)
	if !ok {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		dec.UseNumber()
		if err := dec.Decode(&a); err != nil {
			return nil, fmt.Errorf("%w: an approve question takes {\"decision\": \"approve\"|\"deny\"|\"edit\", \"reason\", \"edited_args\", \"digest\"}: %v", ErrWrongKind, err)
		}
	}
	if err := checkApprove(&a); err != nil {
		return nil, err
	}
	return &a, nil
}

// checkApprove refuses an unknown decision, and an edit without
// arguments or another decision with them.
func checkApprove(a *ApproveAnswer) error {
	switch a.Decision {
	case DecisionApprove, DecisionDeny:
		if a.EditedArgs != nil {
			// The call would run as it is (or not at all) and the edit be
			// dropped without a word: the reviewer meant something else.
			return fmt.Errorf("%w: a %s carries no edited_args (they would be ignored): to run the call with other arguments, send the decision \"edit\"", ErrWrongKind, a.Decision)
		}
	case DecisionEdit:
		if a.EditedArgs == nil {
			return fmt.Errorf("%w: an edit needs edited_args", ErrWrongKind)
		}
	default:
		return fmt.Errorf("%w: decision %q; want approve, deny or edit", ErrWrongKind, a.Decision)
	}
	return nil
}

func parseConfirm(raw json.RawMessage) (bool, error) {
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil {
		return b, nil
	}
	var c struct {
		Yes *bool `json:"yes"`
	}
	if err := json.Unmarshal(raw, &c); err == nil && c.Yes != nil {
		return *c.Yes, nil
	}
	return false, fmt.Errorf("%w: a confirm question takes true, false or {\"yes\": bool}", ErrWrongKind)
}
