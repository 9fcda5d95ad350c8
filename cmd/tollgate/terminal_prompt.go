package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/display"
	"github.com/tollgate-ai/tollgate/internal/qkind"
)

// The terminal's prompt: the question at it, what is typed, and the
// answer sent.

// next puts the first pending question at the prompt.
func (t *terminal) next(ctx context.Context) {
	if !t.settled {
		return
	}
	for _, q := range t.pending {
		if t.mine[q.ID] {
			continue
		}
		req, err := requestOf(q)
		if err != nil {
			continue
		}
		if t.keys.eof {
			// Nothing more can be typed here: the question waits for an
			// answer from elsewhere (listed by parked).
			return
		}
		t.show(q, req)
		// Keys pressed before the question was on the screen are not an
		// answer to it: on a terminal they are dropped (a script's piped
		// answers are meant for the questions in turn, and kept).
		if t.tty {
			t.keys.reset()
			flushInput(t.ttyIn)
		}
		t.cur = &asking{q: q, req: req, shown: time.Now()}
		if time.Since(t.closedAt) < time.Second {
			t.cur.grace = closedPromptGrace
		}
		t.setStage(req.Payload.Kind)
		return
	}
}

// requestOf is the question as the prompt shows it: for a kind that asks
// to run a call (approve, tool_interrupt), with the call's tool and
// arguments read as qkind reads them.
func requestOf(q *checkpoint.Question) (*hitl.Request, error) {
	req, err := hitl.RequestOf(q)
	if err != nil || !qkind.Of(q.Kind).Approval {
		return req, err
	}
	c, err := qkind.CallOf(q)
	if err != nil {
		return nil, err
	}
	req.Payload.ToolName, req.Payload.Args, req.Payload.Details = c.Tool, c.Args, c.Details
	return req, nil
}

// learnable reports whether the prompt offers to learn a rule from the
// question's answer: the learn service learns from approve questions.
func (t *terminal) learnable(kind string) bool {
	return t.learning != nil && kind == hitl.KindApprove
}

func (t *terminal) setStage(kind string) {
	switch {
	case qkind.Of(kind).Approval:
		t.cur.stage, t.cur.label = choosing, "[a]pprove, [d]eny, [e]dit?"
		if t.learnable(kind) {
			t.cur.label = "[a]pprove, [d]eny, [e]dit, [l]earn (approve, and allow calls like this)?"
		}
	case kind == hitl.KindConfirm:
		t.cur.stage, t.cur.label = confirming, "[y]es or [n]o?"
	case kind == hitl.KindAsk:
		t.cur.stage, t.cur.label = answering, "answer:"
	default:
		t.cur.stage, t.cur.label = answering, "answer (JSON):"
	}
	t.redraw()
}

// show prints a question as the reviewer must see it: every argument as
// the text it is, invisible characters made visible.
func (t *terminal) show(q *checkpoint.Question, req *hitl.Request) {
	p := req.Payload
	of := ""
	if n := len(t.turn); n > 1 {
		if i := slices.Index(t.turn, q.ID); i >= 0 {
			of = fmt.Sprintf(" (%d of %d)", i+1, n)
		}
	}
	hidden := 0
	switch {
	case qkind.Of(p.Kind).Approval:
		t.println(fmt.Sprintf("\n── approval needed: %s%s ── %s", display.Line(p.ToolName), of, q.ID))
		for _, l := range display.Args(p.Args) {
			t.println("   " + l)
		}
		hidden = display.HiddenJSON(p.Args)
		for _, l := range display.FactLines(display.Details(p.Details)) {
			t.println("   " + l)
		}
	case p.Kind == hitl.KindAsk:
		t.println(fmt.Sprintf("\n── question%s ── %s", of, q.ID))
		t.println("   " + display.Text(p.Question))
		hidden = display.Hidden(p.Question)
		if len(p.Choices) > 0 {
			t.println("   choices: " + display.Line(strings.Join(p.Choices, ", ")))
		}
	case p.Kind == hitl.KindConfirm:
		t.println(fmt.Sprintf("\n── confirm%s ── %s", of, q.ID))
		t.println("   " + display.Text(p.Message))
		hidden = display.Hidden(p.Message)
	default:
		t.println(fmt.Sprintf("\n── %s%s ── %s", display.Line(p.Kind), of, q.ID))
		t.println("   " + display.JSON(p.Raw))
	}
	if hidden > 0 {
		t.println(fmt.Sprintf("   ⚠ %d invisible or direction-changing character(s), shown as ⟨U+…⟩: what you see may not be what runs", hidden))
	}
	if !q.Deadline.IsZero() && !t.tty {
		t.println("   answer within " + left(q.Deadline))
	}
}

// promptText is the prompt's label with the time left.
func (t *terminal) promptText() string {
	if !t.cur.q.Deadline.IsZero() && t.cur.stage != editing {
		return fmt.Sprintf("(%s left) %s", left(t.cur.q.Deadline), t.cur.label)
	}
	return t.cur.label
}

// redraw draws the prompt line: the label, the time left, what is typed.
func (t *terminal) redraw() {
	if t.cur == nil {
		return
	}
	label := t.promptText()
	t.drawn = label
	if !t.tty {
		if !t.cur.printed {
			fmt.Fprint(t.out, t.cur.label+" ")
			t.cur.printed = true
		}
		return
	}
	typed := display.Line(string(t.keys.line))
	width := termWidth(t.ttyIn) - 1
	room := width - len([]rune(label)) - 1
	if r := []rune(typed); room > 8 && len(r) > room {
		typed = "…" + string(r[len(r)-room+1:])
	}
	fmt.Fprintf(t.out, "\r\x1b[2K%s %s", label, typed)
}

// clearPrompt ends the prompt line so that other output starts on a line
// of its own.
func (t *terminal) clearPrompt() {
	if t.cur == nil {
		return
	}
	if t.tty {
		fmt.Fprint(t.out, "\r\x1b[2K")
	} else if t.cur.printed {
		fmt.Fprintln(t.out)
		t.cur.printed = false
	}
}

// println prints a line of output, keeping the prompt, if any, below it.
func (t *terminal) println(s string) {
	if t.cur != nil && t.tty {
		fmt.Fprint(t.out, "\r\x1b[2K")
		fmt.Fprintln(t.out, s)
		t.redraw()
		return
	}
	if t.cur != nil && t.cur.printed {
		fmt.Fprintln(t.out)
		t.cur.printed = false
	}
	fmt.Fprintln(t.out, s)
	if t.cur != nil {
		t.redraw()
	}
}

// dropTyped forgets keys typed for a prompt that closed.
func (t *terminal) dropTyped() {
	if t.tty {
		t.keys.reset()
		flushInput(t.ttyIn)
	}
}

// input takes what was typed.
func (t *terminal) input(ctx context.Context, c chunk) {
	if c.err != nil {
		t.keys.eof = true
	}
	if t.cur == nil {
		// Typed while no question was asked: not an answer to the next.
		return
	}
	var line string
	if t.tty && c.at.Before(t.cur.shown.Add(t.cur.grace)) {
		t.keys.reset()
		if c.err != nil {
			t.noMoreInput()
		}
		return
	}
	if t.tty {
		var done bool
		if line, done = t.keys.take(c.data); !done {
			t.redraw()
			if c.err != nil {
				t.noMoreInput()
			}
			return
		}
		fmt.Fprint(t.out, "\r\x1b[2K"+t.cur.label+" "+display.Line(line)+"\n")
	} else {
		if len(c.data) == 0 && c.err != nil {
			t.noMoreInput()
			return
		}
		line = strings.TrimRight(string(c.data), "\r\n")
		if t.cur.printed {
			// A transcript: the answer read after its prompt.
			fmt.Fprintln(t.out, display.Line(line))
			t.cur.printed = false
		}
	}
	t.submit(ctx, strings.TrimSpace(line))
	if c.err != nil && t.cur != nil {
		t.noMoreInput()
	}
}

// noMoreInput: stdin ended; the open questions wait for answers from
// elsewhere or their deadlines.
func (t *terminal) noMoreInput() {
	t.clearPrompt()
	t.cur = nil
	if !t.listed {
		t.println("(no more input here)")
		t.listWaiting()
	}
}

// submit takes one line typed at the prompt.
func (t *terminal) submit(ctx context.Context, line string) {
	a := t.cur
	digest := a.req.Digest
	switch a.stage {
	case choosing:
		switch strings.ToLower(line) {
		case "a", "approve", "y", "yes":
			t.send(ctx, qkind.Approval(a.q.Kind, hitl.DecisionApprove, "", nil, digest))
		case "d", "deny", "n", "no":
			a.stage, a.label = reasoning, "reason:"
			t.redraw()
		case "l", "learn":
			if !t.learnable(a.q.Kind) {
				t.redraw()
				return
			}
			t.learnPreview(ctx, nil)
		case "e", "edit":
			if editor := os.Getenv("EDITOR"); editor != "" && t.tty {
				t.editInEditor(ctx, editor)
				return
			}
			t.println("   current: " + display.JSON(a.req.Payload.Args))
			a.stage, a.label = editing, "new arguments (JSON):"
			t.redraw()
		default:
			t.redraw()
		}
	case reasoning:
		t.send(ctx, qkind.Approval(a.q.Kind, hitl.DecisionDeny, line, nil, digest))
	case editing:
		t.sendEdit(ctx, []byte(line))
	case learning:
		t.learnStep(ctx, line)
	case confirming:
		switch strings.ToLower(line) {
		case "y", "yes":
			t.send(ctx, true)
		case "n", "no":
			t.send(ctx, false)
		default:
			t.redraw()
		}
	case answering:
		if a.req.Payload.Kind == hitl.KindAsk {
			t.send(ctx, line)
		} else if json.Valid([]byte(line)) {
			t.send(ctx, json.RawMessage(line))
		} else {
			t.println("   not JSON; try again")
		}
	}
}

// editInEditor opens the arguments in $EDITOR; the terminal is the
// editor's until it exits (nothing reads the keyboard meanwhile).
func (t *terminal) editInEditor(ctx context.Context, editor string) {
	// As the text it is (>> stays >>), invisible characters as \u
	// escapes the person can see and keep.
	current, _ := display.EditJSON(t.cur.req.Payload.Args)
	f, err := os.CreateTemp("", "tollgate-args-*.json")
	if err != nil {
		t.println("   edit failed: " + err.Error())
		return
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(current)
	f.Close()
	if err == nil {
		if t.restore != nil {
			t.restore()
		}
		var cancelled bool
		cancelled, err = t.runEditor(editor, f.Name())
		if restore, kerr := keysMode(t.ttyIn); kerr == nil {
			t.restore = restore
		}
		if t.stopSignal != nil {
			// SIGTERM while editing: nothing is sent; drive stops.
			return
		}
		if cancelled {
			t.println("   edit cancelled (Ctrl-C): nothing sent")
			t.backToChoice()
			return
		}
	}
	if err != nil {
		t.println(fmt.Sprintf("   edit failed: %s: %v", editor, err))
		t.redraw()
		return
	}
	edited, err := os.ReadFile(f.Name())
	if err != nil {
		t.println("   edit failed: " + err.Error())
		return
	}
	// The question may have closed while the editor was open.
	t.refresh(ctx)
	if t.cur != nil {
		t.sendEdit(ctx, edited)
	}
}

// runEditor runs $EDITOR on file and waits for it, still taking
// signals: SIGTERM (and SIGHUP, SIGQUIT) kills the editor and is kept in
// stopSignal for drive; Ctrl-C, which the editor gets too, cancels the
// edit instead of aborting the run.
func (t *terminal) runEditor(editor, file string) (cancelled bool, err error) {
	cmd := exec.Command("sh", "-c", editor+` "$1"`, "editor", file)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = t.ttyIn, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return false, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			return cancelled, err
		case sig := <-t.sigs:
			if sig == os.Interrupt {
				cancelled = true
				continue
			}
			t.stopSignal = sig
			_ = cmd.Process.Kill()
			<-done
			return true, nil
		}
	}
}

// backToChoice puts the question back at its first prompt.
func (t *terminal) backToChoice() {
	t.setStage(t.cur.req.Payload.Kind)
}

func (t *terminal) sendEdit(ctx context.Context, text []byte) {
	var m map[string]any
	if err := json.Unmarshal(text, &m); err != nil || m == nil {
		t.println("   the new arguments must be a JSON object, like " + display.JSON(t.cur.req.Payload.Args) + "; try again")
		t.backToChoice()
		return
	}
	// Leaving the editor without a change is not an approval.
	if reflect.DeepEqual(normalJSON(m), normalJSON(t.cur.req.Payload.Args)) {
		t.println("   no change: nothing sent")
		t.backToChoice()
		return
	}
	t.send(ctx, qkind.Approval(t.cur.q.Kind, hitl.DecisionEdit, "", m, t.cur.req.Digest))
}

// send records the answer through the host (checked as the service
// checks it). A refused answer says why and asks again; a question
// closed meanwhile says how.
func (t *terminal) send(ctx context.Context, answer any) {
	a := t.cur
	raw, err := json.Marshal(answer)
	if err == nil {
		_, err = t.host.Answer(ctx, t.thread, a.q.ID, raw, t.by)
	}
	if err == nil {
		t.mine[a.q.ID] = true
		t.cur = nil
		return
	}
	switch {
	case errors.Is(err, hitl.ErrAlreadyAnswered), errors.Is(err, hitl.ErrExpired), errors.Is(err, hitl.ErrAborted), errors.Is(err, hitl.ErrUnknownQuestion):
		t.cur = nil
		if q, gerr := t.store.GetQuestion(ctx, t.thread, a.q.ID); gerr == nil && q.Status != checkpoint.QuestionPending {
			t.told[q.ID] = true
			t.println("   too late: " + closedHow(q))
			return
		}
		t.println("   too late: " + answerRefusal(err))
	default:
		t.println("   refused: " + answerRefusal(err))
		a.stage = choosing
		t.setStage(a.req.Payload.Kind)
	}
}

// normalJSON is v as JSON decodes it (numbers as float64), for comparing.
func normalJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// answerRefusal words a refused answer in the user's terms.
func answerRefusal(err error) string {
	msg := err.Error()
	for _, prefix := range []string{"hitl: answer refused: ", "hitl: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	return msg
}
