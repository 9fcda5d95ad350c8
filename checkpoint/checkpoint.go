package checkpoint

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Sentinel errors. Stores wrap them so callers compare with [errors.Is],
// never with a driver's message text.
var (
	// ErrNotFound: the thread, tool call or question does not exist.
	// It wraps [sql.ErrNoRows] so errors.Is works across layers.
	ErrNotFound = fmt.Errorf("checkpoint: not found: %w", sql.ErrNoRows)

	// ErrConflict: a compare-and-set lost. The thread was saved by someone
	// else since it was loaded (stale version), the record already exists,
	// or the question is no longer pending (answered, timed out, aborted).
	ErrConflict = errors.New("checkpoint: conflict")

	// ErrExpired: an answer arrived after the question's deadline. The
	// question is still pending in the store until its timeout is recorded.
	ErrExpired = errors.New("checkpoint: question deadline has passed")

	// ErrBadCursor: a list's After is not a cursor that the same list
	// returned: malformed or altered, made for another order, or made by
	// the other list (ListQuestions and ListThreads cursors do not mix).
	// An HTTP server answers 400.
	ErrBadCursor = errors.New("checkpoint: bad cursor")

	// ErrUnavailable: the store could not be reached — its connection was
	// lost, the server restarts or refuses connections for a moment. A
	// write that failed so may have been made or not (the answer to its
	// commit was lost): read back what it wrote before making it again.
	// The same call may succeed once the store is back; an HTTP server
	// answers 503.
	ErrUnavailable = errors.New("checkpoint: the store is unavailable")
)

// ThreadStatus says whether a run is in progress on a thread.
type ThreadStatus string

const (
	// ThreadIdle: no run in progress; the next prompt starts a new run.
	ThreadIdle ThreadStatus = "idle"
	// ThreadRunning: a run started and has not reached its end. It may be
	// executing in some process, waiting for answers, or interrupted by a
	// crash or a cancelled context; Resume or AbortPending finish it.
	ThreadRunning ThreadStatus = "running"
)

// Thread is the durable state of one conversation. Messages are encoded by
// the agent package; stores treat them as opaque JSON.
type Thread struct {
	ID string
	// Version increases by one on every save; SaveThread is a
	// compare-and-set on it. Zero means "never saved".
	Version int64
	Status  ThreadStatus
	// RunID identifies the current (or last) run.
	RunID string
	// Messages is the JSON array of the thread's messages. Stores keep
	// each message byte for byte, as one record (Commit appends records),
	// not the spacing between messages: LoadThread returns "[", the
	// messages separated by ",", "]".
	Messages  json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ToolCallState is the life cycle of one tool call of one assistant turn.
type ToolCallState string

const (
	// ToolCallExecuting is written before the tool runs. A call found in
	// this state with no result after a crash has an unknown outcome.
	ToolCallExecuting ToolCallState = "executing"
	// ToolCallDone: the call has its result (run, blocked or failed).
	ToolCallDone ToolCallState = "done"
)

// ToolCall records the state of one tool call, so that a resumed run knows
// which calls already ran.
type ToolCall struct {
	ThreadID string
	RunID    string
	CallID   string
	Tool     string
	// Args is the JSON object the tool runs (or ran) with.
	Args  json.RawMessage
	State ToolCallState
	// Result is the agent-encoded tool result, set when State is done.
	Result    json.RawMessage
	UpdatedAt time.Time
}

// QuestionStatus is where a question is in its life: pending until exactly
// one of answered, timed out or aborted wins the compare-and-set.
type QuestionStatus string

const (
	QuestionPending  QuestionStatus = "pending"
	QuestionAnswered QuestionStatus = "answered"
	QuestionTimedOut QuestionStatus = "timed_out"
	QuestionAborted  QuestionStatus = "aborted"
)

// Question is a durable request for a person's answer. Its ID is
// deterministic and unique within its thread, so a run that re-enters the
// middleware after a restart finds it instead of asking twice.
type Question struct {
	ThreadID string
	ID       string
	RunID    string
	// CallID is the tool call the question is about, if any.
	CallID string
	// Tool is the name of the tool the question is about ("" when none),
	// as the caller gives it: stores never derive it from the payload.
	// Reviewers' queues filter on it ([QuestionFilter].Tool).
	Tool string
	// Kind tells the payload apart: "approve", "ask", "confirm",
	// "tool_interrupt", ...
	Kind    string
	Payload json.RawMessage
	// Digest binds an answer to what the reviewer saw: a hash of the tool
	// and its canonical arguments (empty when the question has no tool).
	Digest string
	Status QuestionStatus
	// Answer is the JSON answer, set when Status is answered.
	Answer json.RawMessage
	// AnsweredBy names who resolved the question (a reviewer, "timeout",
	// "abort").
	AnsweredBy string
	// Reason is the abort reason or other resolution note.
	Reason    string
	CreatedAt time.Time
	// Deadline is absolute; zero means none.
	Deadline   time.Time
	ResolvedAt time.Time
}

// Timeout returns the question's time to answer, in whole seconds, measured
// from creation; zero when it has no deadline.
func (q *Question) Timeout() time.Duration {
	if q.Deadline.IsZero() {
		return 0
	}
	return q.Deadline.Sub(q.CreatedAt)
}

// Resolution moves a pending question to a final status.
type Resolution struct {
	Status QuestionStatus
	Answer json.RawMessage
	By     string
	Reason string
	// At is the time of the resolution. For an answer the store refuses
	// At >= Deadline with ErrExpired; a timeout needs At >= Deadline.
	// Zero means the store's current time (never "no time": a zero At
	// must not let an answer slip past the deadline).
	At time.Time
}

// QuestionOrder is the order of [Store.ListQuestions]. Creation order is
// the order in which the store created the questions (CreateQuestion calls
// that returned created), which is also the order of their commits; it is
// not CreatedAt, which the caller may set.
type QuestionOrder int

const (
	// OldestFirst (the zero value): in creation order.
	OldestFirst QuestionOrder = iota
	// NewestFirst: in reverse creation order.
	NewestFirst
	// DeadlineFirst: the questions that have a deadline first, the soonest
	// first (equal deadlines in creation order); then those without one,
	// in creation order.
	DeadlineFirst
)

func (o QuestionOrder) String() string {
	switch o {
	case OldestFirst:
		return "oldest first"
	case NewestFirst:
		return "newest first"
	case DeadlineFirst:
		return "deadline first"
	}
	return "order " + strconv.Itoa(int(o))
}

// QuestionFilter selects questions to list or count. Zero fields do not
// filter; the others must all match, exactly (byte for byte).
type QuestionFilter struct {
	ThreadID string
	Status   QuestionStatus
	Tool     string
	Kind     string
	// Order is the order of the list (ListQuestions only).
	Order QuestionOrder
	// After is the cursor a previous ListQuestions call returned, with
	// the same Order (ListQuestions only).
	After string
	// Limit caps the page; zero (or less) means 100 (ListQuestions only).
	Limit int
}

// ThreadFilter selects threads to list. Zero fields do not filter.
type ThreadFilter struct {
	Status ThreadStatus
	// Questions keeps the threads that have a question in this status
	// (QuestionPending: threads waiting for an answer; QuestionTimedOut:
	// threads where a question timed out).
	Questions QuestionStatus
	// Search keeps the threads whose ID, one of whose messages (its JSON
	// text, as stored), or the tool of one of whose questions contains
	// it; ASCII letters match in either case.
	Search string
	// After is the cursor a previous ListThreads call returned.
	After string
	// Limit caps the page; zero (or less) means 100.
	Limit int
}

// Event is one entry of the append-only event log (the audit trail).
type Event struct {
	// Seq is assigned by the store: strictly increasing across the store.
	Seq      int64
	ThreadID string
	RunID    string
	Type     string
	Data     json.RawMessage
	At       time.Time
}

// Batch is a set of writes that [Store.Commit] commits together or not at
// all. Any field may be empty; an empty batch commits nothing. The writes
// keep the rules of the single-record methods:
//
//   - Thread: a compare-and-set on the thread's version, as SaveThread,
//     that appends messages instead of rewriting them (or creates the
//     thread, as CreateThread, when Version is zero).
//   - ToolCalls: as PutToolCall; writing ToolCallExecuting is a claim.
//   - Question: as CreateQuestion, with one more rule: a batch commits
//     only if it creates its question. When a question with that thread
//     and id exists, nothing of the batch is written, and Commit returns
//     the stored question with Created false and no error (so the events
//     that record a new question are never written for an old one).
//   - Resolve: as ResolveQuestion, a compare-and-set from pending.
//   - Events: as AppendEvent, in order.
//
// When one compare-and-set loses (a stale thread version, a claimed call,
// a question no longer pending, an answer after the deadline), nothing of
// the batch is written and Commit returns that write's error (wrapping
// ErrConflict, ErrExpired or ErrNotFound, as the single method would),
// also when the batch's question exists.
// So an audit event committed with a change exists exactly when the
// change does.
//
// On success Commit sets Thread.Version (and the thread's times) as
// SaveThread does. A store may commit several callers' batches in one
// database transaction (group commit); it returns to each caller only once
// that transaction is durable, and a batch that fails alone (its
// compare-and-set lost) is left out of it without failing the others.
type Batch struct {
	Thread    *ThreadWrite
	ToolCalls []*ToolCall
	Question  *Question
	Resolve   *Resolve
	Events    []*Event
	// Deferrable says that no one waits on this write's latency (its
	// caller has answered already): a store may hold it a moment, so that
	// the next write shares its transaction and its sync. Commit still
	// returns only once the batch is durable, as for any batch. The SQLite
	// store holds it up to 2 ms; the others ignore it.
	Deferrable bool
}

// ThreadWrite is the thread part of a [Batch].
type ThreadWrite struct {
	ID string
	// Version is the version the writer last read: the stored one must
	// equal it (ErrConflict otherwise). Zero creates the thread with
	// Version 1 (ErrConflict if it exists), as CreateThread.
	Version int64
	Status  ThreadStatus
	RunID   string
	// Append holds the messages added after the stored ones, each one JSON
	// value (kept byte for byte, as Thread.Messages). LoadThread returns
	// the stored messages and these as one JSON array.
	Append []json.RawMessage
	// CreatedAt is used when the write creates the thread; zero means the
	// store's current time. UpdatedAt is always the store's time.
	CreatedAt time.Time
	// UpdatedAt is set by Commit.
	UpdatedAt time.Time
}

// Resolve is the resolution part of a [Batch].
type Resolve struct {
	ThreadID, ID string
	Resolution   Resolution
}

// Committed is what [Store.Commit] wrote.
type Committed struct {
	// Question is the batch's question as stored: the new one when Created,
	// else the one that existed (and nothing was written).
	Question *Question
	Created  bool
	// Resolved is the question Resolve resolved.
	Resolved *Question
	// EventSeqs are the sequence numbers of the batch's events, in order.
	EventSeqs []int64
}

// Empty reports whether b writes nothing.
func (b *Batch) Empty() bool {
	return b.Thread == nil && len(b.ToolCalls) == 0 && b.Question == nil && b.Resolve == nil && len(b.Events) == 0
}

// NotificationKind says what changed.
type NotificationKind string

const (
	QuestionCreated  NotificationKind = "question_created"
	QuestionResolved NotificationKind = "question_resolved"
	// Resync means notifications may have been missed (for example the
	// store's connection to its database dropped and came back): the
	// subscriber re-lists everything it cares about. ThreadID and
	// QuestionID are empty.
	Resync NotificationKind = "resync"
)

// Notification tells a subscriber that something changed. It carries keys,
// not data: the subscriber reads the store to see the change, so a missed
// notification never loses anything that a re-list would not find.
type Notification struct {
	Kind       NotificationKind
	ThreadID   string
	QuestionID string
}

// Store is what the agent needs from durable storage. Every method is safe
// for concurrent use. Implementations: checkpoint/memory, checkpoint/sqlite,
// checkpoint/postgres; checkpoint/checkpointtest is the definition.
//
// JSON fields (each message of Thread.Messages, ToolCall.Args and Result, Question.Payload
// and Answer, Event.Data) must be valid JSON in UTF-8; a store keeps them
// byte for byte (spacing, key order, duplicate keys, numbers as written,
// escapes such as \u0000 inside strings). Bytes that are not valid UTF-8
// JSON, such as a raw NUL byte, may be refused with an error (PostgreSQL
// refuses them), never stored altered.
//
// Times are kept to the microsecond at least, and from 4713 BC to AD 294247
// at least (so any deadline of now plus a time.Duration); a time outside
// what a store can keep is refused with an error, never stored as another.
type Store interface {
	// CreateThread stores a new thread with Version 1. ErrConflict if the
	// id exists.
	CreateThread(ctx context.Context, t *Thread) error
	// LoadThread returns the thread, or ErrNotFound.
	LoadThread(ctx context.Context, id string) (*Thread, error)
	// SaveThread writes t if the stored version equals t.Version, and
	// then sets t.Version to the new version. ErrConflict otherwise. It
	// replaces every message: it costs what the thread holds, where
	// Commit's [ThreadWrite] appends and costs what it adds.
	SaveThread(ctx context.Context, t *Thread) error
	// ListThreads returns one page of the threads that match f, newest
	// first, and the cursor of the next page: "" when no thread that
	// matches follows the page (as the store was when it read the page).
	// Newest first is by CreatedAt, the latest first (CreatedAt never
	// changes after CreateThread), and for threads created at the same
	// instant, as the store keeps it, by ID in descending byte order.
	//
	// The threads have every field but Messages, which is nil: a listing
	// never reads the conversations. LoadThread reads one.
	//
	// Cursors are as ListQuestions' (opaque, URL-safe, no state in the
	// store; refused with ErrBadCursor when damaged or from ListQuestions),
	// and so are the guarantees: a thread's position never changes, so
	// paging from the first page to "" returns exactly once every thread
	// that existed and matched when the first page was read and still
	// matches when its page is read (a thread whose run ends meanwhile
	// is not returned by a Status running list); a thread created while
	// paging comes at most once (never when its CreatedAt is later than
	// the position reached, as the store's own clock makes it). With or
	// without Status, a page reads about Limit index entries however many
	// threads there are (sqlite and postgres); with Questions or Search it
	// reads the threads in order, and their questions or messages, until
	// the page is full: its cost grows with the threads it passes over.
	ListThreads(ctx context.Context, f ThreadFilter) ([]*Thread, string, error)

	// Commit applies every write of b in one transaction, durably: all of
	// them or none (see [Batch] for what a batch can hold and when it
	// commits). It is how the agent writes: one commit per durable point of
	// a run, with the audit events that record the change. The methods
	// below that write one record are the same as a Commit of a batch that
	// holds only that record.
	Commit(ctx context.Context, b *Batch) (*Committed, error)

	// PutToolCall records the state of one tool call. Writing
	// ToolCallExecuting is a claim: it succeeds only if the call has no
	// record yet, and returns ErrConflict otherwise, so that of two
	// processes driving the same run only one executes the tool. Writing
	// ToolCallDone inserts or replaces.
	PutToolCall(ctx context.Context, tc *ToolCall) error
	// ListToolCalls returns the calls recorded for a run, in no
	// particular order; with callIDs, only the calls among those (a run
	// reads the calls of its current turn, not every call it made: the
	// cost is that of the turn, not of the run).
	ListToolCalls(ctx context.Context, threadID, runID string, callIDs ...string) ([]*ToolCall, error)

	// CreateQuestion stores q (pending) unless a question with the same
	// thread and id exists; either way it returns the stored question and
	// whether this call created it.
	CreateQuestion(ctx context.Context, q *Question) (stored *Question, created bool, err error)
	// GetQuestion returns the question, or ErrNotFound.
	GetQuestion(ctx context.Context, threadID, id string) (*Question, error)
	// ListQuestions returns one page of the questions that match f, in
	// f.Order, and the cursor of the next page: "" when no question that
	// matches follows the page (as the store was when it read the page).
	//
	// A cursor is opaque, URL-safe text (base64url); it holds the position
	// of the page's last question in f.Order, no state in the store, so it
	// survives restarts and works on every handle on the same data. Passed
	// as f.After with the same Order, the next page starts right after that
	// position; with other filters it continues from the same position. A
	// question's position never changes, so paging from the first page to
	// "" returns exactly once, in order, every question that existed and
	// matched when the first page was read and still matches when its page
	// is read; a question created or changed while paging comes at most
	// once (with OldestFirst, questions created while paging come on later
	// pages). An After that is not such a cursor, or one made for another
	// Order or by ListThreads, is refused with an error wrapping
	// ErrBadCursor; an Order that is none of the constants, with an error.
	//
	// The first page, with Status pending, in any order, and with Tool
	// too, reads about Limit index entries however many questions are
	// pending (sqlite and postgres); Kind, and other statuses in deadline
	// order, filter or sort what the other fields select.
	ListQuestions(ctx context.Context, f QuestionFilter) ([]*Question, string, error)
	// CountQuestions returns how many questions match f's ThreadID,
	// Status, Tool and Kind (After, Limit and Order are ignored), as the
	// store was at one moment. It counts index entries: its cost grows
	// with the number that match, so it serves a gauge, not every request.
	CountQuestions(ctx context.Context, f QuestionFilter) (int64, error)
	// ResolveQuestion is a compare-and-set from pending: ErrNotFound,
	// ErrConflict (not pending any more; the stored question is returned
	// too), or ErrExpired (an answer at or after the deadline).
	ResolveQuestion(ctx context.Context, threadID, id string, r Resolution) (*Question, error)

	// AppendEvent adds e to the log and returns its sequence number.
	AppendEvent(ctx context.Context, e *Event) (int64, error)
	// ListEvents returns up to limit events of a thread (all threads when
	// threadID is "") with Seq > after, in order.
	ListEvents(ctx context.Context, threadID string, after int64, limit int) ([]*Event, error)

	// Subscribe delivers notifications of new and resolved questions until
	// ctx ends; then the channel is closed. Delivery is best effort (a
	// subscriber that falls behind may miss some): subscribers re-read the
	// store, they never take a notification as the data itself.
	Subscribe(ctx context.Context) (<-chan Notification, error)

	// Close releases the store's resources.
	Close() error
}

// CheckResolution is the compare-and-set rule every store applies to a
// question before resolving it with r: it must be pending (ErrConflict
// otherwise), an answer must come before the deadline (ErrExpired), and a
// timeout must not come before it.
func CheckResolution(q *Question, r Resolution) error {
	if q.Status != QuestionPending {
		return fmt.Errorf("question %q is %s: %w", q.ID, q.Status, ErrConflict)
	}
	switch r.Status {
	case QuestionAnswered:
		if !q.Deadline.IsZero() && !r.At.Before(q.Deadline) {
			return fmt.Errorf("question %q: answer at %s, deadline %s: %w", q.ID,
				r.At.UTC().Format(time.RFC3339Nano), q.Deadline.UTC().Format(time.RFC3339Nano), ErrExpired)
		}
	case QuestionTimedOut:
		if q.Deadline.IsZero() || r.At.Before(q.Deadline) {
			return fmt.Errorf("question %q: timeout at %s before its deadline", q.ID, r.At.UTC().Format(time.RFC3339Nano))
		}
	case QuestionAborted:
	default:
		return fmt.Errorf("question %q: cannot resolve as %q", q.ID, r.Status)
	}
	return nil
}
