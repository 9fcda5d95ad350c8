package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/jsontext"
	"github.com/tollgate-ai/tollgate/policy"
)

// envelope is a call as its run's prompt holds it: the relay makes the
// call from it, the policy reads the directory from it, and whoever reads
// the thread sees where the call came from. The prompt is written by the
// service alone (the server takes no message on these threads).
type envelope struct {
	Agent   Agent  `json:"agent"`
	Session string `json:"session"`
	// Cwd is the directory the agent says the call is made in; Project
	// the one the session's first call was made in, which the policy
	// sees as dir.
	Cwd            string          `json:"cwd,omitempty"`
	Project        string          `json:"project,omitempty"`
	Transcript     string          `json:"transcript,omitempty"`
	PermissionMode string          `json:"permission_mode,omitempty"`
	Turn           string          `json:"turn,omitempty"`
	Tool           string          `json:"tool"`
	Call           string          `json:"call"`
	Input          json.RawMessage `json:"input"`
	// WaitSeconds is how long the hook could wait: a question is given
	// no longer.
	WaitSeconds int      `json:"wait_seconds,omitempty"`
	Confine     *Confine `json:"confine,omitempty"`
}

// dir is the directory the policy reads as dir: the session's project;
// none — so that no file is inside it — when that is no project but a
// directory holding much more (broadProject). The agent says where it
// works, and a session started in the home directory (or a hostile
// payload saying "/") would otherwise have ~/.bashrc, ~/.gitconfig or
// /etc/cron.d inside its "project", written without a question.
func (e *envelope) dir() string {
	d := e.Project
	if d == "" {
		d = e.Cwd
	}
	if broadProject(d) {
		return ""
	}
	return d
}

// broadProject reports whether d cannot be taken for a project: not an
// absolute path, the root or a directory just under it (/etc, /home,
// /tmp), a home directory (/home/NAME, /Users/NAME, this process's home)
// or a directory above this process's home; its symbolic links resolved
// where it exists here (/proc/self/root is /).
func broadProject(d string) bool {
	if !path.IsAbs(d) {
		return true
	}
	d = path.Clean(d)
	if r, err := filepath.EvalSymlinks(d); err == nil {
		d = r
	}
	if strings.Count(d, "/") <= 1 {
		return true // "/", "/etc", "/home", "/tmp", "/root"
	}
	if parent := path.Dir(d); parent == "/home" || parent == "/Users" {
		return true
	}
	home := resolvedHome()
	return home != "" && (home == d || strings.HasPrefix(home, d+"/"))
}

// resolvedHome is this process's home directory, its links resolved; ""
// when it has none. Read once: broadProject runs for every call.
var resolvedHome = sync.OnceValue(func() string {
	home, err := os.UserHomeDir()
	if err != nil || !path.IsAbs(home) {
		return ""
	}
	if r, err := filepath.EvalSymlinks(home); err == nil {
		home = r
	}
	return path.Clean(home)
})

// EnvelopeMark starts the last line of a call's prompt, which holds the
// call as JSON (threads show leaves the line out).
const EnvelopeMark = "hook-call: "

const envelopeMark = EnvelopeMark

// prompt is the text of the call's run: a line for people, the session's
// lines on a thread's first call, and the envelope.
func (e *envelope) prompt(lane int, first bool, base string) (string, error) {
	raw, err := jsontext.Marshal(e)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if first {
		fmt.Fprintf(&b, "%s session %s", e.Agent.Title(), e.Session)
		if e.Cwd != "" {
			fmt.Fprintf(&b, " in %s", e.Cwd)
		}
		b.WriteString(".\n")
		if e.Transcript != "" {
			fmt.Fprintf(&b, "Transcript: %s\n", e.Transcript)
		}
		if lane > 1 {
			fmt.Fprintf(&b, "(This is the session's thread %d: its calls go here while the threads before it wait for people, or once they are full; the session starts on thread %s.)\n", lane, base)
		}
	}
	fmt.Fprintf(&b, "%s calls %s (call %s).\n%s%s", e.Agent.Title(), e.Tool, e.Call, envelopeMark, raw)
	return b.String(), nil
}

// parseEnvelope reads the envelope of a prompt: its last line. (The
// envelope is JSON, which holds no raw newline: a call's input that holds
// the mark cannot pass for the line.)
func parseEnvelope(text string) (*envelope, bool) {
	i := strings.LastIndex(text, "\n"+envelopeMark)
	switch {
	case i >= 0:
		i++
	case strings.HasPrefix(text, envelopeMark):
		i = 0
	default:
		return nil, false
	}
	var e envelope
	if err := json.Unmarshal([]byte(text[i+len(envelopeMark):]), &e); err != nil || e.Call == "" || e.Tool == "" {
		return nil, false
	}
	return &e, true
}

// envelopeOf finds the envelope of a call in a thread's messages: the
// prompt of the run that made it.
func envelopeOf(msgs []agent.Message, callID string) (*envelope, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role != agent.RoleUser || m.Result != nil {
			continue
		}
		if e, ok := parseEnvelope(m.Text); ok && e.Call == callID {
			return e, true
		}
	}
	return nil, false
}

// relay is the "model" of the hooks' threads: a run's first turn makes
// the agent's call its prompt holds; its second ends the run.
type relay struct{ s *Service }

func (r relay) Complete(ctx context.Context, req *agent.Request, _ func(string)) (*agent.Message, error) {
	// The run's prompt is its last user message; what follows it is the
	// run's own.
	p := -1
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == agent.RoleUser && m.Result == nil {
			p = i
			break
		}
	}
	if p < 0 {
		return nil, errors.New("hooks: a run without a prompt")
	}
	env, ok := parseEnvelope(req.Messages[p].Text)
	if !ok || !IsThread(agent.ThreadFrom(ctx)) {
		return &agent.Message{Role: agent.RoleAssistant, StopReason: agent.StopEndTurn,
			Text: "This thread is a coding agent's session: its calls come from the agent's hooks, and a message here makes none."}, nil
	}
	for _, m := range req.Messages[p+1:] {
		if m.Result != nil && m.Result.CallID == env.Call {
			h, _ := m.Result.Details["hook"].(map[string]any)
			return &agent.Message{Role: agent.RoleAssistant, StopReason: agent.StopEndTurn, Text: endText(env, h["decision"] == "allow")}, nil
		}
	}
	return &agent.Message{Role: agent.RoleAssistant, StopReason: agent.StopToolUse,
		ToolCalls: []agent.ToolCall{{ID: env.Call, Name: env.Tool, Arguments: env.Input}}}, nil
}

// endText is the relay's last message of a call's run.
func endText(env *envelope, allowed bool) string {
	if allowed {
		return env.Agent.Title() + " was told to run the call."
	}
	return "The call was not allowed; " + env.Agent.Title() + " was told why."
}

// policy is the service's policy as the hooks' threads run it: it sees
// the directory the agent works in; its questions say which agent asks,
// where, and last no longer than the hook waits; a Bash call a confining
// hook sends is asked where the kernel there cannot confine it.
func (s *Service) policy() hitl.Policy {
	return func(ctx context.Context, c *hitl.PolicyContext) hitl.ApprovalDecision {
		env, ok := envelopeOf(c.Messages, c.CallID)
		if !ok {
			return hitl.Deny("tollgate: this call did not come from a coding agent's hook")
		}
		return s.policyFor(ctx, c, env)
	}
}

// policyFor is the service's policy on a call of env.
func (s *Service) policyFor(ctx context.Context, c *hitl.PolicyContext, env *envelope) hitl.ApprovalDecision {
	pc := *c
	pc.Dir = env.dir()
	d := s.cfg.Policy(ctx, &pc)
	if d.Action() == "approve" && env.Confine != nil && c.Tool == "Bash" && !env.Confine.Enforced {
		why := env.Confine.WhyNot
		if why == "" {
			why = "the kernel there does not enforce the read-only profile"
		}
		d = hitl.AskUser(hitl.AskOptions{Details: map[string]any{"matched_rule": "confine",
			"impact": "the policy allows this command, but the hook asked for it to run confined, and it cannot be on the agent's machine: " + why}})
	}
	if d.Action() != "ask" {
		return d
	}
	timeout := d.Timeout()
	if timeout <= 0 {
		timeout = policy.DefaultTimeout
	}
	details := map[string]any{"agent": env.Agent.Title(), "session": env.Session}
	if env.Cwd != "" {
		details["cwd"] = env.Cwd
	}
	if d := env.dir(); d != env.Cwd {
		details["project"] = d
	}
	if env.Transcript != "" {
		details["transcript"] = env.Transcript
	}
	if w := time.Duration(env.WaitSeconds) * time.Second; w > 0 && w-waitMargin < timeout {
		// The hook stops waiting then: a question open longer would
		// count down to an answer nobody takes.
		timeout = max(w-waitMargin-time.Second, time.Second)
		details["hook_wait"] = fmt.Sprintf("the agent's hook waits %s, so this question lasts %s", w, timeout)
	}
	for k, v := range d.Details() {
		details[k] = v
	}
	return hitl.AskUser(hitl.AskOptions{Timeout: timeout, Details: details})
}

// handOn is the run of every relayed call the policy (or a person) let
// through: it tells the agent's hook to go on, with the input the call
// runs with, and records that the agent was told. The agent runs the
// call; what comes back is recorded from its PostToolUse hook.
func (s *Service) handOn(ctx context.Context, _ map[string]any) (agent.ToolResult, error) {
	tc := agent.ToolCallFrom(ctx)
	if tc == nil {
		return agent.ToolResult{}, errors.New("hooks: a relayed call outside a run")
	}
	env, ok := envelopeOf(tc.Messages, tc.Call.ID)
	if !ok {
		return agent.ToolResult{}, errors.New("hooks: the call's envelope is missing")
	}
	input := tc.RawArgs
	edited := !sameJSON(input, env.Input)
	hook := map[string]any{"decision": "allow", "agent": string(env.Agent)}
	var reason string
	q, err := tc.Question(ctx, hitl.QuestionID(tc.Call.ID))
	switch {
	case err == nil && q.Status == checkpoint.QuestionAnswered:
		hook["by"] = q.AnsweredBy
		reason = "tollgate: approved by " + q.AnsweredBy
		if edited {
			reason += ", who edited the call: the edited call runs"
		}
	case err != nil && !errors.Is(err, checkpoint.ErrNotFound):
		return agent.ToolResult{}, err
	default:
		input, reason, err = s.policyAllows(ctx, hook, tc.ThreadID, tc.Call.Name, input, env)
		if err != nil {
			return agent.ToolResult{}, err
		}
	}
	if c := s.callOn(tc.ThreadID, tc.Call.ID); c != nil {
		s.decide(c, s.allowed(c, input, reason))
	}
	return allowResult(env, hook, reason, input), nil
}

// policyAllows is what a call the policy lets through runs with, and
// why, told to the agent: the policy file's rule, and (when the hook asks
// for confinement) the Bash command under tollgate sandbox exec. It fills
// in hook, the result's record of what the agent was told.
func (s *Service) policyAllows(ctx context.Context, hook map[string]any, thread, tool string, input json.RawMessage, env *envelope) (json.RawMessage, string, error) {
	reason := "tollgate: allowed by the policy"
	profile := ""
	if s.cfg.Explain != nil {
		var args map[string]any
		_ = json.Unmarshal(input, &args)
		d := s.cfg.Explain(ctx, policy.Call{Tool: tool, Args: args, ThreadID: thread, Dir: env.dir()})
		switch {
		case d.Learned != nil:
			// "(rule (learned))" would hide which rule and whose
			// answer: the agent and the thread name them, as run does.
			reason = "tollgate: " + d.Reason
			hook["rule"] = d.Rule
		case d.Rule != "":
			reason += " (rule " + d.Rule + ")"
			hook["rule"] = d.Rule
		}
		profile = d.Sandbox
	}
	if env.Confine != nil && tool == "Bash" {
		confined, p, err := confine(input, env.Confine, profile)
		if err != nil {
			return nil, "", err
		}
		input = confined
		hook["confined"] = p
		reason += "; it runs confined (" + p + ")"
	}
	return input, reason, nil
}

// allowResult is the result of a call the agent was told to run: what
// it was told (hook, reason), and the input that runs when it is not the
// call's own (confined).
func allowResult(env *envelope, hook map[string]any, reason string, input json.RawMessage) agent.ToolResult {
	hook["reason"] = reason
	if _, ok := hook["confined"]; ok {
		// What runs is not the call's input (an edit is: the call's
		// record keeps it).
		var ran any
		_ = json.Unmarshal(input, &ran)
		hook["input"] = ran
	}
	content := fmt.Sprintf("%s was told to run the call (%s).", env.Agent.Title(), strings.TrimPrefix(reason, "tollgate: "))
	return agent.ToolResult{Content: content, Details: map[string]any{"hook": hook}}
}

// confine puts a Bash call's command under tollgate sandbox exec with the
// profile (read-only when none is required).
func confine(input json.RawMessage, c *Confine, profile string) (json.RawMessage, string, error) {
	if profile == "" {
		profile = policy.SandboxReadOnly
	}
	var args map[string]any
	if err := json.Unmarshal(input, &args); err != nil {
		return nil, "", err
	}
	cmd, _ := args["command"].(string)
	args["command"] = ShellQuote(c.Exe) + " sandbox exec --profile " + profile + " -- " + ShellQuote(cmd)
	out, err := jsontext.Marshal(args)
	return out, profile, err
}

// ShellQuote is s as one word of a POSIX shell, exactly: in single quotes
// unless it holds only characters no shell reads specially.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:,@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// maxOutput bounds the output of a call kept in the audit log.
const maxOutput = 16 << 10

// post records what a call the agent ran gave back: a tool_output entry
// in the audit log of the call's thread (the page and threads show put
// it under the call).
func (s *Service) post(ctx context.Context, a Agent, p *payload) error {
	base := sessionThread(a, p.SessionID)
	thread, runID := base, ""
	notAllowed := "tollgate has no record of this call in the session"
	s.mu.Lock()
	if sess := s.sessions[base]; sess != nil {
		if c := sess.calls[p.ToolUseID]; c != nil && c.lane != nil {
			thread, runID = c.lane.thread, c.runID
			notAllowed = c.notAllowed(p)
		}
	}
	s.mu.Unlock()
	if runID == "" {
		// A call this process does not remember: look in the session's
		// threads for its run.
		for n := 1; ; n++ {
			l := laneThread(base, n)
			id := host.IdempotentRunID(l, idempotencyKey(p.ToolUseID))
			recs, err := s.cfg.Store.ListToolCalls(ctx, l, id, p.ToolUseID)
			if err != nil {
				return err
			}
			if len(recs) > 0 {
				thread, runID = l, id
				notAllowed = recordNotAllowed(recs[0], p)
				break
			}
			if _, err := s.cfg.Store.LoadThread(ctx, l); err != nil {
				break // past the session's threads: on its first
			}
		}
	}
	data := map[string]any{"call_id": p.ToolUseID, "tool": p.ToolName, "agent": string(a), "event": p.Event}
	if p.Event == EventPostToolUseFailure {
		data["is_error"] = true
		data["output"] = clipText(p.Error, maxOutput)
		if p.IsInterrupt {
			data["interrupted"] = true
		}
	} else {
		out, isErr := outputText(p.ToolResponse)
		data["output"] = clipText(out, maxOutput)
		data["is_error"] = isErr
	}
	if p.DurationMS != nil {
		data["duration_ms"] = *p.DurationMS
	}
	if notAllowed != "" {
		// Forged (whoever holds the hook's token can send it), or the agent
		// ran a call its hook did not let through: either way not a call's
		// output like any other.
		data["not_allowed"] = notAllowed
	}
	raw, err := jsontext.Marshal(data)
	if err != nil {
		return err
	}
	_, err = s.cfg.Store.AppendEvent(ctx, &checkpoint.Event{ThreadID: thread, RunID: runID, Type: OutputEvent, Data: raw, At: time.Now()})
	return err
}

// notAllowed is why the agent's report p of the call is not of a call
// tollgate let through ("" when it is). Under s.mu.
func (c *call) notAllowed(p *payload) string {
	switch {
	case c.tool != p.ToolName:
		return "the call was of " + c.tool + ", not " + p.ToolName
	case !c.decided:
		return "the call was still waiting for a person's answer"
	case !c.out.allow:
		return "tollgate did not let the call through"
	case c.out.input != nil && !sameJSON(c.out.input, p.ToolInput),
		c.out.input == nil && c.key != callKey(p):
		return otherInput
	}
	return ""
}

// otherInput is notAllowed of a call reported run with another input than
// the one tollgate let through (the call's own, an edit, its confined
// form): an agent that ignored an edit ran what the reviewer did not see.
const otherInput = "the agent reports it ran the call with other input than tollgate let through"

// recordNotAllowed is notAllowed of a call known from its record.
func recordNotAllowed(rec *checkpoint.ToolCall, p *payload) string {
	if rec.Tool != p.ToolName {
		return "the call was of " + rec.Tool + ", not " + p.ToolName
	}
	var r agent.ToolResult
	if rec.State != checkpoint.ToolCallDone || json.Unmarshal(rec.Result, &r) != nil {
		return "the call was not decided"
	}
	h, ok := r.Details["hook"].(map[string]any)
	if !ok || h["decision"] != "allow" {
		return "tollgate did not let the call through"
	}
	ran := rec.Args // the call's own input, or the reviewer's edit
	if confined, ok := h["input"]; ok {
		ran, _ = json.Marshal(confined)
	}
	if !sameJSON(ran, p.ToolInput) {
		return otherInput
	}
	return ""
}

// OutputEvent is the type of the audit entry that records what a call a
// coding agent ran gave back (from its PostToolUse or PostToolUseFailure
// hook): call_id, tool, agent, event, is_error, output (at most 16 KiB),
// duration_ms, and not_allowed when tollgate did not let that call
// through (it was denied, still waited for a person, was of another
// tool, ran with another input than the one let through — the agent's
// own, the reviewer's edit, its confined form — or is not one of the
// session's calls): why, in words.
const OutputEvent = "tool_output"

// outputText is a tool's response as text: a shell's output and error
// streams, a string as it is, anything else as JSON.
func outputText(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, false
	}
	var sh struct {
		Stdout      *string `json:"stdout"`
		Stderr      string  `json:"stderr"`
		Interrupted bool    `json:"interrupted"`
	}
	if json.Unmarshal(raw, &sh) == nil && sh.Stdout != nil {
		out := *sh.Stdout
		if sh.Stderr != "" {
			if out != "" && !strings.HasSuffix(out, "\n") {
				out += "\n"
			}
			out += "[stderr]\n" + sh.Stderr
		}
		return out, sh.Interrupted
	}
	return string(agent.CanonicalArgs(raw)), false
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[output truncated: %d more bytes]", len(s)-cut)
}
