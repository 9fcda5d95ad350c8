package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// session is what the service knows of an agent's session: its threads
// and its recent calls.
type session struct {
	agent  Agent
	base   string
	id     string
	lanes  []*lane
	calls  map[string]*call // by tool_use_id
	change chan struct{}    // closed (and replaced) when a lane is freed or asks
	seen   time.Time
	// project is the directory the session's first call was made in.
	project string
	// open: the lanes before it are full (openLanes).
	open int
	// forgotten: calls of the session may be in its threads and not in
	// calls (it was read from the store, or calls were swept): a call
	// not in calls is looked for there.
	forgotten bool
}

// lane is one thread of a session.
type lane struct {
	n      int
	thread string
	busy   *call // the call whose run holds the thread
	// held: the thread's run is one this process does not know (it was
	// running when the session was read: parked, or resumed at start).
	held  bool
	bytes int // the size of its messages, as last read or counted since
	// known: version is the thread's version as this process last read
	// or wrote it (0: no thread), for the fast path's compare-and-set;
	// false once a run of the host may have written it since.
	known   bool
	version int64
	// read: what the thread holds was read from the store (not only
	// written by this process): it may hold calls another process
	// decided, which the fast path looks for before it writes a call.
	read bool
	// checked is when a held thread was last read, to see whether its
	// run ended (an end this process may not have seen); waiting: it
	// then had a question pending.
	checked time.Time
	waiting bool
}

// call is one PreToolUse call of a session.
type call struct {
	id   string
	tool string
	// key is the tool and input the call was made with (callKey): a hook
	// sent again with the call's id is this call only if it has the same.
	key     string
	input   json.RawMessage
	sess    *session
	lane    *lane
	runID   string
	asking  bool // its question is pending
	done    chan struct{}
	decided bool
	out     outcome
	at      time.Time // when it was decided
	waiters int
}

// outcome is what the agent is told of a call.
type outcome struct {
	allow  bool
	input  json.RawMessage // allowed with another input (an edit, confinement)
	reason string
}

// openLanes is the index of the session's first thread that is not
// full: the ones before it take no call again (a thread only grows), so
// that picking a thread costs the same however long the session.
// Under s.mu.
func (sess *session) openLanes(limit int) int {
	for sess.open < len(sess.lanes) && sess.lanes[sess.open].bytes >= limit {
		sess.open++
	}
	return sess.open
}

// signal wakes whoever waits for a lane of the session. Under s.mu.
func (sess *session) signal() {
	close(sess.change)
	sess.change = make(chan struct{})
}

// session returns the session, reading its threads from the store the
// first time this process sees it.
func (s *Service) session(ctx context.Context, a Agent, id string) (*session, error) {
	base := sessionThread(a, id)
	s.mu.Lock()
	s.sweepLocked()
	sess := s.sessions[base]
	s.mu.Unlock()
	if sess != nil {
		return sess, nil
	}
	lanes, project, err := s.readLanes(ctx, base)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess = s.sessions[base]; sess == nil {
		sess = &session{agent: a, base: base, id: id, lanes: lanes, project: project, calls: map[string]*call{},
			change: make(chan struct{}), seen: time.Now(), forgotten: len(lanes) > 0}
		s.sessions[base] = sess
	}
	return sess, nil
}

// projectOf is the session's project: the directory its first call was
// made in, which the policy's dir stays for the whole session (the agent
// may report another directory later: one it cd'd to, say).
func (s *Service) projectOf(sess *session, cwd string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess.project == "" {
		sess.project = cwd
	}
	return sess.project
}

// readLanes reads the threads a session has in the store, and its
// project, from the first call of its first thread.
func (s *Service) readLanes(ctx context.Context, base string) (lanes []*lane, project string, err error) {
	for n := 1; ; n++ {
		th, err := s.cfg.Store.LoadThread(ctx, laneThread(base, n))
		if errors.Is(err, checkpoint.ErrNotFound) {
			return lanes, project, nil
		}
		if err != nil {
			return nil, "", err
		}
		if n == 1 {
			// The first message alone: the thread may be long.
			var first struct {
				Text string `json:"text"`
			}
			dec := json.NewDecoder(bytes.NewReader(th.Messages))
			if t, _ := dec.Token(); t == json.Delim('[') && dec.More() && dec.Decode(&first) == nil {
				if e, ok := parseEnvelope(first.Text); ok {
					project = e.dir()
				}
			}
		}
		held := th.Status == checkpoint.ThreadRunning
		lanes = append(lanes, &lane{n: n, thread: th.ID, held: held, bytes: len(th.Messages), known: !held, version: th.Version, read: true})
	}
}

// sweepInterval and keepSession say how long the service remembers a
// session with no call waiting, and a decided call (for a hook sent again
// and for the call's result).
const (
	sweepInterval = time.Minute
	keepSession   = time.Hour
	keepCall      = 30 * time.Minute
)

func (s *Service) sweepLocked() {
	now := time.Now()
	if now.Sub(s.lastSweep) < sweepInterval {
		return
	}
	s.lastSweep = now
	for base, sess := range s.sessions {
		live := false
		for id, c := range sess.calls {
			if c.decided && c.waiters == 0 && now.Sub(c.at) > keepCall {
				delete(sess.calls, id)
				sess.forgotten = true
				continue
			}
			live = true
		}
		busy := false
		for _, l := range sess.lanes {
			busy = busy || l.busy != nil
		}
		if !live && !busy && now.Sub(sess.seen) > keepSession {
			delete(s.sessions, base)
		}
	}
}

// laneWait is how long a call waits for a thread of its session whose
// run is deciding another call (not waiting for a person) before it takes
// a thread of its own.
const laneWait = 2 * time.Second

// pickLane finds the call a thread of the session: the first whose run
// is done, else (after waiting a moment for one that is only deciding) a
// new one.
func (s *Service) pickLane(ctx context.Context, sess *session, c *call) (*lane, error) {
	deadline := time.Now().Add(laneWait)
	for {
		s.recheckHeld(ctx, sess)
		s.mu.Lock()
		var candidates, deciding int
		for _, l := range sess.lanes[sess.openLanes(s.cfg.ThreadBytes):] {
			if l.bytes >= s.cfg.ThreadBytes {
				continue
			}
			candidates++
			if l.busy == nil && !l.held {
				l.busy = c
				c.lane = l
				s.mu.Unlock()
				return l, nil
			}
			if l.busy != nil && !l.busy.asking || l.held && !l.waiting {
				deciding++
			}
		}
		if deciding == 0 || time.Now().After(deadline) {
			l := &lane{n: len(sess.lanes) + 1, busy: c, known: true}
			l.thread = laneThread(sess.base, l.n)
			sess.lanes = append(sess.lanes, l)
			c.lane = l
			s.mu.Unlock()
			return l, nil
		}
		change := sess.change
		s.mu.Unlock()
		select {
		case <-change:
		case <-time.After(min(time.Until(deadline), recheckRunning)):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// How often a held thread is read again: one that waits for a person
// seldom, one whose run is going on often (it is about to end).
const (
	recheckWaiting = time.Second
	recheckRunning = 50 * time.Millisecond
)

// recheckHeld reads the session's held threads again: a run this process
// did not start may have ended unseen, or be waiting for a person.
func (s *Service) recheckHeld(ctx context.Context, sess *session) {
	s.mu.Lock()
	var check []*lane
	for _, l := range sess.lanes[sess.openLanes(s.cfg.ThreadBytes):] {
		every := recheckRunning
		if l.waiting {
			every = recheckWaiting
		}
		if l.held && time.Since(l.checked) >= every {
			l.checked = time.Now()
			check = append(check, l)
		}
	}
	s.mu.Unlock()
	for _, l := range check {
		qs, _, err := s.cfg.Store.ListQuestions(ctx, checkpoint.QuestionFilter{ThreadID: l.thread, Status: checkpoint.QuestionPending, Limit: 1})
		if err != nil {
			continue
		}
		waiting := len(qs) > 0
		idle, size, version := false, 0, int64(0)
		if !waiting {
			th, err := s.cfg.Store.LoadThread(ctx, l.thread)
			if err != nil {
				continue
			}
			idle, size, version = th.Status != checkpoint.ThreadRunning, len(th.Messages), th.Version
		}
		s.mu.Lock()
		if l.held {
			l.waiting = waiting
			if idle {
				l.held, l.bytes, l.known, l.version, l.read = false, size, true, version, true
			}
		}
		s.mu.Unlock()
	}
}

// freeLane lets go of a lane c held.
func (s *Service) freeLane(l *lane, c *call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.busy == c {
		l.busy = nil
		c.sess.signal()
	}
}
