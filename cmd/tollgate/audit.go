package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/display"
	"github.com/tollgate-ai/tollgate/internal/qkind"
)

func init() {
	register("audit", "read the audit log: every run, question, answer and tool call, on a store or a server", auditCmd)
}

const auditHelp = `usage: tollgate audit [--thread ID] [--after SEQ] [--limit N] [--json]

Prints the audit log, oldest first, one line an event: its sequence
number, when, the thread, the event, who (answered, denied, aborted),
the decision, the rule that asked, the digest of the call's arguments
(of a tool_result: of the arguments it ran with, after an edit the edited
ones), the time from question to answer, the tool, and a note (the
prompt, a reason, an error).

Events: run_started, question_asked, question_resolved (answered, timed
out or aborted), tool_result (allowed, approve, human_deny, edit,
policy_deny, timed_out, aborted, error, policy_allow: allowed by a rule
learned from an answer, named in RULE with its author in WHO; "ran" when
the token may not see questions, so that an approval cannot be told from
an allow), run_parked (waiting for answers), run_finished, aborted, and
a learned rule's rule_learned, rule_approved, rule_revoked (who, the
rule, the digest of the call it was learned from, its scope).

Against a server the log is read thread by thread (GET
/v1/threads/{id}/events): give --thread to read one.

examples:
  tollgate audit
  tollgate audit --thread t1                 the log of thread t1
  tollgate audit --after 120                 the events after sequence number 120
  tollgate audit --after 120 --limit 50      at most 50 of them
  tollgate audit --json | jq -c 'select(.type == "tool_result")'   one JSON object a line, as the API's Event
` + sourceFlagsHelp

func auditCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const name = "audit"
	fs, sf := sourceCommand(name, auditHelp, stderr)
	thread := fs.String("thread", "", "only the events of this thread `ID`")
	after := fs.Int64("after", 0, "only the events after this sequence number `SEQ`")
	limit := fs.Int("limit", 0, "at most `N` events (0: all)")
	asJSON := fs.Bool("json", false, "print each event as one line of JSON (the API's Event)")
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	if *after < 0 || *limit < 0 {
		return fs.usageError("--after and --limit take a number, 0 or more")
	}
	src, code := sf.openFor(ctx, fs, name, stderr, 0)
	if src == nil {
		return code
	}
	defer src.close()
	if *thread != "" {
		if _, err := findThread(ctx, src, *thread); err != nil {
			return fail(stderr, name, err)
		}
	}
	evs, err := src.events(ctx, *thread, *after, *limit)
	if err != nil {
		return fail(stderr, name, err)
	}
	if *asJSON {
		return printJSONLines(stdout, stderr, name, evs, eventLine)
	}
	if len(evs) == 0 {
		fmt.Fprintln(stdout, "no events")
		return 0
	}
	qs := &questionCache{src: src, threads: map[string]map[string]*checkpoint.Question{}}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tAT\tTHREAD\tEVENT\tWHO\tDECISION\tRULE\tDIGEST\tLATENCY\tTOOL\tNOTE")
	for _, e := range evs {
		r, err := auditLine(ctx, e, qs)
		if err != nil {
			tw.Flush()
			return fail(stderr, name, err)
		}
		cells := []string{strconv.FormatInt(e.Seq, 10), when(e.At), display.Line(e.ThreadID), display.Line(e.Type),
			r.who, r.decision, r.rule, shortDigest(r.digest), r.latency, r.tool, r.note}
		fmt.Fprintln(tw, row(cells))
	}
	tw.Flush()
	return 0
}

// row is a table's line: the cells separated by tabs, "-" for an empty one.
func row(cells []string) string {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
	}
	return strings.Join(cells, "\t")
}

// questionCache holds the questions of the threads seen, each thread's
// read once, by question id and by call id.
type questionCache struct {
	src     source
	threads map[string]map[string]*checkpoint.Question
	// hidden: the token may not see questions.
	hidden bool
}

// find returns the question of the thread with that id, or about that
// call; nil when there is none (or the token may not see questions).
func (c *questionCache) find(ctx context.Context, thread, id, callID string) (*checkpoint.Question, error) {
	m, ok := c.threads[thread]
	if !ok {
		qs, err := c.src.questions(ctx, thread, "")
		if err != nil && !forbidden(err) {
			return nil, err
		}
		c.hidden = c.hidden || err != nil
		m = map[string]*checkpoint.Question{}
		for _, q := range qs {
			m[q.ID] = q
			if q.CallID != "" {
				m["\x00call "+q.CallID] = q
			}
		}
		c.threads[thread] = m
	}
	if q := m[id]; id != "" && q != nil {
		return q, nil
	}
	if callID != "" {
		return m["\x00call "+callID], nil
	}
	return nil, nil
}

// auditRow is what one line says of an event.
type auditRow struct {
	who, decision, rule, digest, latency, tool, note string
}

// eventData is every field the agent and the host write in the data of
// their audit events (agent: audit calls; host: resolved).
type eventData struct {
	Prompt     string          `json:"prompt"`
	QuestionID string          `json:"question_id"`
	Questions  []string        `json:"questions"`
	CallID     string          `json:"call_id"`
	Kind       string          `json:"kind"`
	Tool       string          `json:"tool"`
	Status     string          `json:"status"`
	By         string          `json:"by"`
	Decision   string          `json:"decision"`
	Reason     string          `json:"reason"`
	Digest     string          `json:"digest"`
	Deadline   string          `json:"deadline"`
	LatencyMS  *int64          `json:"latency_ms"`
	IsError    bool            `json:"is_error"`
	StopReason string          `json:"stop_reason"`
	Error      string          `json:"error"`
	HITL       json.RawMessage `json:"hitl"`
	// A learned rule's events (checkpoint.RuleEvent).
	RuleID    string `json:"rule_id"`
	Scope     string `json:"scope"`
	ScopeKey  string `json:"scope_key"`
	ExpiresAt string `json:"expires_at"`
}

func auditLine(ctx context.Context, e *checkpoint.Event, qs *questionCache) (auditRow, error) {
	var d eventData
	dec := json.NewDecoder(bytes.NewReader(e.Data))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		return auditRow{note: clipRunes(display.JSON(e.Data), 80, "…")}, nil
	}
	var r auditRow
	switch e.Type {
	case "run_started":
		r.note = "prompt: " + clipRunes(display.Line(d.Prompt), 80, "…")
	case "question_asked", "question_resolved":
		q, err := qs.find(ctx, e.ThreadID, d.QuestionID, d.CallID)
		if err != nil {
			return r, err
		}
		r.digest, r.who = d.Digest, display.Line(d.By)
		if q != nil {
			r.tool, r.rule = display.Line(q.Tool), ruleOf(q)
			if r.digest == "" {
				r.digest = q.Digest
			}
		}
		if e.Type == "question_asked" {
			r.decision = "asked"
			r.note = "question " + display.Line(d.QuestionID)
			if d.Deadline != "" {
				if t, err := time.Parse(time.RFC3339Nano, d.Deadline); err == nil {
					r.note += ", deadline " + when(t)
				}
			}
			break
		}
		r.decision = d.Decision
		if r.decision == "" && d.Status == string(checkpoint.QuestionAnswered) && q != nil {
			r.decision = answerDecision(q)
		}
		if r.decision == "" {
			r.decision = d.Status
		}
		if d.LatencyMS != nil {
			r.latency = latency(time.Duration(*d.LatencyMS) * time.Millisecond)
		}
		r.note = "question " + display.Line(d.QuestionID)
		if d.Reason != "" {
			r.note += ": " + clipRunes(display.Line(d.Reason), 80, "…")
		}
	case "tool_result":
		r.tool, r.digest = display.Line(d.Tool), d.Digest
		var h struct {
			Decision string `json:"decision"`
			By       string `json:"by"`
			Rule     string `json:"matched_rule"`
			// A learned rule's allow names it and who taught it.
			Learned   string `json:"learned_rule"`
			LearnedBy string `json:"learned_by"`
		}
		_ = json.Unmarshal(d.HITL, &h)
		if h.Learned != "" {
			h.Rule, h.By = h.Learned, h.LearnedBy
		}
		q, err := qs.find(ctx, e.ThreadID, hitl.QuestionID(d.CallID), d.CallID)
		if err != nil {
			return r, err
		}
		r.decision, r.who, r.rule = h.Decision, display.Line(h.By), display.Line(h.Rule)
		if q != nil && qkind.Of(q.Kind).Approval {
			if r.rule == "" {
				r.rule = ruleOf(q)
			}
			if r.who == "" && q.Status == checkpoint.QuestionAnswered {
				r.who = display.Line(q.AnsweredBy)
			}
			if r.decision == "" && q.Status == checkpoint.QuestionAnswered {
				// An approval passes through with no trace.
				r.decision = answerDecision(q)
			}
		}
		switch {
		case r.decision != "":
		case d.IsError:
			r.decision = "error"
		case qs.hidden:
			r.decision = "ran" // allowed or approved: an approval leaves no trace
		default:
			r.decision = "allowed"
		}
		r.note = "call " + display.Line(d.CallID)
		if d.Reason != "" {
			r.note += ": " + clipRunes(display.Line(d.Reason), 80, "…")
		}
	case "run_parked":
		r.decision = "parked"
		r.note = "waiting for " + display.Line(strings.Join(d.Questions, ", "))
	case "run_finished":
		r.decision = d.StopReason
		if d.Error != "" {
			r.decision, r.note = "failed", clipRunes(display.Line(d.Error), 120, "…")
		}
	case "aborted":
		r.decision, r.note = "aborted", clipRunes(display.Line(d.Reason), 80, "…")
	case checkpoint.EventRuleLearned, checkpoint.EventRuleApproved, checkpoint.EventRuleRevoked:
		r.who, r.rule, r.digest, r.tool = display.Line(d.By), display.Line(d.RuleID), d.Digest, display.Line(d.Tool)
		r.decision = strings.TrimPrefix(e.Type, "rule_")
		r.note = "from question " + display.Line(d.QuestionID) + ", scope " + display.Line(strings.TrimSpace(d.Scope+" "+d.ScopeKey))
		if d.ExpiresAt != "" {
			r.note += ", expires " + display.Line(d.ExpiresAt)
		}
		if d.Reason != "" {
			r.note += ": " + clipRunes(display.Line(d.Reason), 80, "…")
		}
	default:
		r.note = clipRunes(display.JSON(e.Data), 80, "…")
	}
	return r, nil
}

// ruleOf is the rule that asked a question (its details' matched_rule).
func ruleOf(q *checkpoint.Question) string {
	req, err := hitl.RequestOf(q)
	if err != nil {
		return ""
	}
	if s, ok := req.Payload.Details["matched_rule"].(string); ok {
		return display.Line(s)
	}
	return ""
}

// answerDecision is the decision of an answered question: approve, deny
// or edit for an approval, yes or no, else "answered".
func answerDecision(q *checkpoint.Question) string {
	if a := qkind.Read(q.Kind, q.Answer); a.Readable {
		return a.Decision
	}
	return qkind.Answered
}

// shortDigest is enough of a digest to tell calls apart in a table.
func shortDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		d = d[:12]
	}
	return display.Line(d)
}

// latency is a question's time to answer, to the millisecond under a
// second and to the second above.
func latency(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
