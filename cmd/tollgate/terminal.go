package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/display"
	"github.com/tollgate-ai/tollgate/internal/storeurl"
	"github.com/tollgate-ai/tollgate/policy/learn"
)

// closedPromptGrace is how long keys are not taken after a prompt that
// follows one closed under the person's fingers (answered elsewhere,
// timed out): an Enter meant for the old question must not answer the
// new one, which nobody has read yet.
const closedPromptGrace = 750 * time.Millisecond

// terminal shows one thread's run and asks its questions, one at a time
// and in the order of the calls. It never waits on the keyboard alone:
// the prompt is one of several things it watches (the run's events, the
// store, the clock, signals), so an answer given elsewhere or a deadline
// closes the prompt at once.
type terminal struct {
	host    *host.Host
	store   checkpoint.Store
	thread  string
	storeID string // the --store value, for the commands it suggests
	by      string
	out     io.Writer
	errOut  io.Writer
	noWait  bool
	resumed bool
	// sigs are the signals drive takes; stopSignal is one that came while
	// $EDITOR had the terminal and stops the run when it is back.
	sigs       <-chan os.Signal
	stopSignal os.Signal

	// tty: a person at a terminal (stdin and stdout are one): keys are
	// read one by one, the prompt redraws its countdown.
	tty     bool
	ttyIn   *os.File
	restore func()
	keys    *keyboard

	// pending are the thread's open questions in call order; cur is the
	// one at the prompt.
	pending []*checkpoint.Question
	cur     *asking
	// mine are the questions answered at this terminal (their closing is
	// not news); told are those whose closing was already reported.
	mine, told map[string]bool
	// settled: the run has asked what it asks this turn (it parked, or
	// asked nothing new for a while): questions are shown only then, so
	// that the first shown is the first call's.
	settled bool
	// turn: the questions of the current turn, in call order.
	turn []string
	// callOrder is each question's call position in the thread.
	callOrder map[string]int
	// closedAt is when a prompt last closed by something other than an
	// answer typed here.
	closedAt time.Time
	// hopeless: a question nobody can ever answer (no more input, a
	// memory store, no deadline): the run cannot go on.
	hopeless bool
	// listed: the waiting questions were printed for answering elsewhere.
	listed bool
	// drawn is the prompt text last drawn.
	drawn      string
	aborting   bool
	interrupts int
	// learning, when set, offers "approve, and allow calls like this"
	// ([l]earn) at an approval's prompt.
	learning *learn.Service
}

// asking is the question at the prompt and where its answer is.
type asking struct {
	q     *checkpoint.Question
	req   *hitl.Request
	stage stage
	// label is the prompt text of the stage.
	label string
	// printed: the prompt was printed (not on a terminal, where it is
	// printed once rather than redrawn).
	printed bool
	// shown is when the question was put on the screen; keys read before
	// shown+grace are not taken (grace follows a prompt that closed while
	// the person may have been typing for it).
	shown time.Time
	grace time.Duration
	// preview is the rule being learned (stage learning).
	preview *learn.Preview
}

type stage int

const (
	choosing   stage = iota // [a]pprove, [d]eny, [e]dit?
	reasoning               // the deny reason
	editing                 // new arguments as one line of JSON
	confirming              // [y]es or [n]o?
	answering               // free text, or JSON for unknown kinds
	learning                // save the learned rule for where, or change a match
)

func newTerminal(h *host.Host, thread, storeID, by string, stdin io.Reader, stdout, stderr io.Writer) *terminal {
	t := &terminal{host: h, store: h.Store(), thread: thread, storeID: storeID, by: by,
		out: stdout, errOut: stderr, mine: map[string]bool{}, told: map[string]bool{}, callOrder: map[string]int{}}
	in, inOK := stdin.(*os.File)
	outF, outOK := stdout.(*os.File)
	if inOK && outOK && isTerminal(in) && isTerminal(outF) {
		if restore, err := keysMode(in); err == nil {
			t.tty, t.ttyIn, t.restore = true, in, restore
		}
	}
	t.keys = newKeyboard(stdin, t.tty)
	return t
}

// close puts the terminal back as it was.
func (t *terminal) close() {
	if t.restore != nil {
		t.restore()
		t.restore = nil
	}
}

// shutdown stops the host, giving runs in progress a moment to finish or
// park; what is cut off is left resumable.
func (t *terminal) shutdown(ctx context.Context) host.Stats {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	st, _ := t.host.Shutdown(sctx)
	return st
}

// drive shows the run until it ends and returns the exit code. stop is
// closed when the caller's context ends (treated as SIGTERM).
func (t *terminal) drive(ctx context.Context, stop <-chan struct{}, events <-chan agent.Event, sigs <-chan os.Signal) int {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	// The countdown is checked four times a second and redrawn when the
	// second shown changes, so that it never skips one under load.
	countdown := time.NewTicker(250 * time.Millisecond)
	defer countdown.Stop()
	aborted := make(chan error, 1)
	t.sigs = sigs
	// Questions stored before this process started (--resume) are all
	// there is to show; a new run's are shown once it has asked them.
	t.settled = t.resumed
	t.refresh(ctx)
	for {
		if t.cur == nil && !t.aborting {
			t.next(ctx)
		}
		if t.cur != nil && !t.aborting {
			t.keys.ask()
		}
		select {
		case e, ok := <-events:
			if !ok {
				fmt.Fprintln(t.errOut, "tollgate: lost the run's events")
				return exitFailed
			}
			if e.Meta().ThreadID != t.thread {
				continue
			}
			if code, done := t.event(ctx, e); done {
				t.shutdown(ctx)
				return code
			}
		case c := <-t.keys.got:
			t.keys.asked = false
			t.input(ctx, c)
			if t.stopSignal != nil {
				return t.terminate(ctx, "stopped by "+signalName(t.stopSignal))
			}
			if t.hopeless {
				return exitFailed
			}
		case <-countdown.C:
			if t.tty && t.cur != nil && !t.cur.q.Deadline.IsZero() && t.promptText() != t.drawn {
				t.redraw()
			}
		case <-tick.C:
			if code, done := t.poll(ctx); done {
				if code == exitFinished {
					t.drain(ctx, events)
				}
				t.shutdown(ctx)
				return code
			}
		case err := <-aborted:
			t.clearPrompt()
			if err != nil {
				fmt.Fprintln(t.errOut, "tollgate: abort:", display.Line(err.Error()))
				t.shutdown(ctx)
				return exitFailed
			}
			t.showEnd(ctx, "aborted")
			t.shutdown(ctx)
			return exitInterrupted
		case <-stop:
			// The caller's context ends on a signal too (main's
			// NotifyContext): that signal, if any, says what to do.
			stop = nil
			if t.aborting {
				// The Ctrl-C that ended it is being handled.
				continue
			}
			select {
			case sig := <-sigs:
				if code, done := t.signal(ctx, sig, aborted); done {
					return code
				}
			case <-time.After(200 * time.Millisecond):
				return t.terminate(ctx, "stopped")
			}
		case sig := <-sigs:
			if code, done := t.signal(ctx, sig, aborted); done {
				return code
			}
		}
	}
}

// signal handles a signal: the first Ctrl-C aborts the run (the result
// comes on aborted), a second exits at once; SIGTERM and SIGHUP stop the
// run resumable.
func (t *terminal) signal(ctx context.Context, sig os.Signal, aborted chan<- error) (code int, done bool) {
	if sig == sigStop {
		// Ctrl-Z: give the terminal back as it was, stop, and take it
		// again on fg.
		t.clearPrompt()
		t.close()
		suspend()
		if t.tty {
			if restore, err := keysMode(t.ttyIn); err == nil {
				t.restore = restore
			}
		}
		t.drawn = ""
		t.redraw()
		return 0, false
	}
	if sig != os.Interrupt {
		return t.terminate(ctx, "stopped by "+signalName(sig)), true
	}
	t.interrupts++
	t.clearPrompt()
	if t.interrupts > 1 || t.aborting {
		fmt.Fprintln(t.errOut, "tollgate: interrupted again; exiting now (the abort may be unfinished: see tollgate threads show)")
		return exitInterrupted, true
	}
	fmt.Fprintln(t.out, "^C aborting the run: pending calls are denied (Ctrl-C again to exit at once)")
	t.aborting = true
	t.cur = nil
	go func() {
		aborted <- t.host.Abort(ctx, t.thread, "interrupted at the terminal (Ctrl-C) by "+t.by)
	}()
	return 0, false
}

// drain shows the events still on their way when the store says the run
// has ended (its last message comes after the status changes).
func (t *terminal) drain(ctx context.Context, events <-chan agent.Event) {
	quiet := time.NewTimer(500 * time.Millisecond)
	defer quiet.Stop()
	for {
		select {
		case e, ok := <-events:
			if !ok {
				return
			}
			if e.Meta().ThreadID != t.thread {
				continue
			}
			if _, done := t.event(ctx, e); done {
				return
			}
		case <-quiet.C:
			return
		}
	}
}

// storeArg is the --store flag of a suggested command ("" when the store
// came from $TOLLGATE_STORE, which the next command reads too), never
// with a password.
func (t *terminal) storeArg() string {
	if os.Getenv("TOLLGATE_STORE") == t.storeID {
		return ""
	}
	return "--store " + shellWord(storeurl.Redacted(t.storeID)) + " "
}

// resumeCommand is the command that goes on with the run.
func (t *terminal) resumeCommand() string {
	return "tollgate run " + t.storeArg() + "--thread " + shellWord(t.thread) + " --resume"
}

// modelText prints what the model wrote with every line marked, so that
// model text can never pass for tollgate's own lines (a question, an
// outcome).
func modelText(text string) string {
	lines := strings.Split(strings.TrimRight(display.Text(text), "\n"), "\n")
	return "assistant:\n  │ " + strings.Join(lines, "\n  │ ")
}

// terminate stops the run so that it can go on later, and says how.
func (t *terminal) terminate(ctx context.Context, why string) int {
	t.clearPrompt()
	st := t.shutdown(ctx)
	msg := fmt.Sprintf("tollgate: %s; the run is left unfinished", why)
	if t.storeID != "memory" {
		msg += ": go on with\n  " + t.resumeCommand()
	} else {
		msg += " (the memory store forgets it: use --store sqlite:PATH to be able to resume)"
	}
	if st.Active > 0 {
		msg += fmt.Sprintf("\n(%d run(s) were cut off; a tool cut off mid-way is reported as of unknown outcome, never run twice)", st.Active)
	}
	fmt.Fprintln(t.errOut, msg)
	return exitTerminated
}

func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return s.String()
}

// event shows one of the run's events; done reports the run's end.
func (t *terminal) event(ctx context.Context, e agent.Event) (code int, done bool) {
	switch e := e.(type) {
	case *agent.MessageEvent:
		if e.Message.Text != "" && e.Message.StopReason != "aborted" {
			t.println(modelText(e.Message.Text))
		}
	case *agent.ToolCallStartedEvent:
		var args map[string]any
		_ = json.Unmarshal(e.Args, &args)
		t.println("→ " + display.Line(e.Call.Name) + " (call " + display.Line(e.Call.ID) + ")")
		for _, l := range display.Args(args) {
			t.println(indent(l, "     "))
		}
	case *agent.ToolCallFinishedEvent:
		var q *checkpoint.Question
		if got, err := t.store.GetQuestion(ctx, t.thread, hitl.QuestionID(e.Call.ID)); err == nil {
			q = got
		}
		// A call with no trace and no question was let through by the
		// policy (or --allow-all).
		head := "← " + display.Line(e.Call.Name) + " (call " + display.Line(e.Call.ID) + "): " + cmp.Or(display.Outcome(e.Result, q), display.AllowedByPolicy)
		t.println(head)
		// A call the policy or a person stopped has the reason in its
		// outcome: its result is that reason again.
		if body := display.Result(e.Result); body != "" && !stoppedByHITL(e.Result) {
			t.println(indent(body, "   "))
		}
	case *agent.HitlRequestEvent, *agent.HitlResolvedEvent, *agent.RunParkedEvent, *host.ResolvedEvent:
		switch e := e.(type) {
		case *agent.HitlRequestEvent:
			t.settled = e.Existing
		case *agent.RunParkedEvent:
			t.settled = true
		}
		t.refresh(ctx)
		if _, ok := e.(*agent.RunParkedEvent); ok {
			return t.parked()
		}
	case *agent.RunFinishedEvent:
		if t.aborting {
			// Stopped by the abort (Ctrl-C): its result says how it ended.
			return 0, false
		}
		if e.Err != nil {
			t.clearPrompt()
			fmt.Fprintln(t.errOut, "tollgate: the run stopped:", display.Line(e.Err.Error()))
			if t.storeID != "memory" {
				fmt.Fprintf(t.errOut, "  retry with: %s\n", t.resumeCommand())
			}
			return exitFailed, true
		}
		return exitFinished, true
	case *agent.AgentAbortedEvent:
		if !t.aborting {
			// Aborted elsewhere (tollgate threads abort, the page).
			t.clearPrompt()
			t.println("the run was aborted elsewhere: " + display.Text(e.Reason))
			return exitFailed, true
		}
	}
	return 0, false
}

// parked: the run waits for answers. With --no-wait, or when nothing can
// be typed here any more, the questions are listed for answering
// elsewhere.
func (t *terminal) parked() (int, bool) {
	if len(t.pending) == 0 {
		return 0, false
	}
	if t.noWait {
		t.clearPrompt()
		t.listWaiting()
		fmt.Fprintln(t.errOut, "tollgate: the run waits for answers (exit 3); it goes on when they come, under tollgate serve or tollgate run --resume on this store")
		return exitWaiting, true
	}
	if t.keys.eof && !t.listed {
		t.listWaiting()
	}
	if t.hopeless {
		return exitFailed, true
	}
	return 0, false
}

// listWaiting prints the pending questions with their ids and the
// command that answers them.
func (t *terminal) listWaiting() {
	t.listed = true
	for _, q := range t.pending {
		t.println(fmt.Sprintf("waiting: %s  %s%s", q.ID, display.Summary(q), deadlineNote(q)))
	}
	if len(t.pending) > 0 {
		if t.storeID == "memory" {
			for _, q := range t.pending {
				if q.Deadline.IsZero() {
					t.hopeless = true
					fmt.Fprintf(t.errOut, "tollgate: nobody can answer %s: no more input here, the memory store is seen by no other process, and it has no deadline; stopping (use --store sqlite:PATH to answer from elsewhere)\n", display.Line(q.ID))
					return
				}
			}
			t.println("nobody else can answer a question in a memory store: it stays open until its deadline (use --store sqlite:PATH)")
			return
		}
		answers := answerWords(t.pending[0].Kind)
		if t.learnable(t.pending[0].Kind) {
			answers += "|learn" // as the prompt offers [l]earn
		}
		t.println(fmt.Sprintf("answer with: tollgate questions answer %s--thread %s %s %s", t.storeArg(), shellWord(t.thread), shellWord(t.pending[0].ID), answers))
	}
}

func deadlineNote(q *checkpoint.Question) string {
	if q.Deadline.IsZero() {
		return ""
	}
	return fmt.Sprintf("  (%s left)", left(q.Deadline))
}

func left(deadline time.Time) string {
	d := time.Until(deadline)
	if d < 0 {
		d = 0
	}
	return d.Truncate(time.Second).String()
}

// poll is the once-a-second check: the countdown, and the store as the
// truth in case an event was missed.
func (t *terminal) poll(ctx context.Context) (int, bool) {
	t.refresh(ctx)
	// A run that waits in process (a question asked inside a tool) does
	// not park: a question asked more than a second ago is shown anyway.
	for _, q := range t.pending {
		if time.Since(q.CreatedAt) > time.Second {
			t.settled = true
		}
	}
	if t.cur != nil {
		t.redraw()
	}
	th, err := t.store.LoadThread(ctx, t.thread)
	if err != nil {
		return 0, false
	}
	if th.Status == checkpoint.ThreadIdle && !t.aborting {
		return exitFinished, true
	}
	if st, runErr := t.host.State(th); st == host.RunFailed && !t.aborting {
		t.clearPrompt()
		fmt.Fprintln(t.errOut, "tollgate: the run stopped:", display.Line(fmt.Sprint(runErr)))
		return exitFailed, true
	}
	return 0, false
}

// refresh reads the thread's open questions and says what happened to
// those that closed without an answer typed here, closing the prompt of
// the one it was asking.
func (t *terminal) refresh(ctx context.Context) {
	qs, err := t.openQuestions(ctx)
	if err != nil {
		return
	}
	open := func(id string) bool {
		return slices.ContainsFunc(qs, func(q *checkpoint.Question) bool { return q.ID == id })
	}
	var closed []string
	for _, q := range t.pending {
		if !open(q.ID) {
			closed = append(closed, q.ID)
		}
	}
	if t.cur != nil && !open(t.cur.q.ID) && !slices.Contains(closed, t.cur.q.ID) {
		closed = append(closed, t.cur.q.ID)
	}
	t.pending = qs
	t.noteTurn(qs)
	for _, id := range closed {
		if t.cur != nil && t.cur.q.ID == id {
			t.clearPrompt()
			t.cur = nil
			t.dropTyped()
			t.closedAt = time.Now()
		}
		if t.mine[id] || t.told[id] {
			continue
		}
		q, err := t.store.GetQuestion(ctx, t.thread, id)
		if err != nil {
			continue
		}
		t.told[id] = true
		t.println("   " + closedHow(q))
	}
}

// noteTurn keeps the questions of the current turn in call order, for
// "(2 of 3)": a new turn starts when every question known is closed.
func (t *terminal) noteTurn(open []*checkpoint.Question) {
	if len(open) == 0 {
		return
	}
	stillOpen := false
	for _, id := range t.turn {
		if slices.ContainsFunc(open, func(q *checkpoint.Question) bool { return q.ID == id }) {
			stillOpen = true
		}
	}
	if !stillOpen {
		t.turn = nil
	}
	for _, q := range open {
		if !slices.Contains(t.turn, q.ID) {
			t.turn = append(t.turn, q.ID)
		}
	}
	// In call order, whatever order the questions were stored in (the
	// calls of a turn are asked concurrently).
	slices.SortStableFunc(t.turn, func(a, b string) int { return t.callPos(a) - t.callPos(b) })
}

// callPos is the position of a question's call in the thread, as last
// read (questions of unknown calls last).
func (t *terminal) callPos(questionID string) int {
	if i, ok := t.callOrder[questionID]; ok {
		return i
	}
	return len(t.callOrder)
}

// closedHow says how a question closed without an answer typed here.
func closedHow(q *checkpoint.Question) string {
	switch q.Status {
	case checkpoint.QuestionTimedOut:
		d := q.Deadline.Sub(q.CreatedAt).Round(time.Second)
		return fmt.Sprintf("⏱ %s: timed out, no answer within %s", q.ID, d)
	case checkpoint.QuestionAborted:
		return fmt.Sprintf("✗ %s: %s", q.ID, display.Resolution(q))
	}
	return fmt.Sprintf("✓ %s was answered elsewhere: %s", q.ID, display.Resolution(q))
}

// openQuestions returns the thread's pending questions in the order of
// the calls they are about (then as asked).
func (t *terminal) openQuestions(ctx context.Context) ([]*checkpoint.Question, error) {
	var all []*checkpoint.Question
	f := checkpoint.QuestionFilter{ThreadID: t.thread, Status: checkpoint.QuestionPending, Order: checkpoint.OldestFirst}
	for {
		qs, next, err := t.store.ListQuestions(ctx, f)
		if err != nil {
			return nil, err
		}
		all = append(all, qs...)
		if next == "" {
			break
		}
		f.After = next
	}
	// The thread is read only when a question shows up whose call's place
	// is not known yet, not at every poll.
	if slices.ContainsFunc(all, func(q *checkpoint.Question) bool { _, ok := t.callOrder[q.ID]; return !ok }) {
		if th, err := t.store.LoadThread(ctx, t.thread); err == nil {
			pos := callPositions(th.Messages)
			for _, q := range all {
				if i, ok := pos[q.CallID]; ok {
					t.callOrder[q.ID] = i
				}
			}
		}
	}
	slices.SortStableFunc(all, func(a, b *checkpoint.Question) int { return t.callPos(a.ID) - t.callPos(b.ID) })
	return all, nil
}

// showEnd prints the thread's last message (the abort's terminal
// message).
func (t *terminal) showEnd(ctx context.Context, what string) {
	th, err := t.store.LoadThread(ctx, t.thread)
	var msgs []agent.Message
	if err == nil && json.Unmarshal(th.Messages, &msgs) == nil && len(msgs) > 0 {
		if m := msgs[len(msgs)-1]; m.StopReason != "" {
			t.println(fmt.Sprintf("assistant (%s): %s", m.StopReason, display.Text(m.Text)))
			return
		}
	}
	t.println(what)
}

// stoppedByHITL: the policy or a person kept the call from running (its
// content is the reason, told by the outcome).
func stoppedByHITL(r agent.ToolResult) bool {
	for _, key := range []string{"hitl", "interrupt"} {
		if h, ok := r.Details[key].(map[string]any); ok {
			if d, _ := h["decision"].(string); d != "" && d != "edit" && d != "approve" {
				return true
			}
		}
	}
	return false
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}
