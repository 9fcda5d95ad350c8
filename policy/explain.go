package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/tollgate-ai/tollgate/policy/shell"
)

// Explanation is a decision with what led to it, for people.
type Explanation struct {
	Call     Call
	Decision Decision
	// Shell is the analysis of the command string, when the tool is a
	// shell tool and the argument a string.
	Shell *shell.Analysis
	// Effects say what the command string would do, and Risk the highest
	// of their risks (shell calls only, whatever the action): what the
	// reviewer of an ask is shown.
	Effects []shell.Effect
	Risk    shell.Risk
}

// Explain decides call and keeps what led to the decision.
func (p *Policy) Explain(ctx context.Context, call Call) *Explanation {
	e := &Explanation{Call: call, Decision: p.Evaluate(ctx, call)}
	if arg, ok := p.ShellArg(call.Tool); ok {
		if src, ok := call.Args[arg].(string); ok {
			a := p.cache.analyze(src)
			e.Shell, e.Effects = a.Analysis, a.effects()
			e.Risk = shell.RiskOf(e.Effects)
		}
	}
	return e
}

// Write prints the explanation: the decision and why, what the call
// would do (its effects and risk, as the reviewer of an ask reads them),
// the commands the shell analysis found and why it wants a person, and
// every rule that matched.
func (e *Explanation) Write(w io.Writer) error {
	var b strings.Builder
	d := e.Decision
	fmt.Fprintf(&b, "decision: %s (rule %s)\n", d.Action, d.Rule)
	fmt.Fprintf(&b, "why:      %s\n", d.Why())
	if d.Reason != "" {
		fmt.Fprintf(&b, "reason:   %s\n", d.Reason)
	}
	if len(e.Effects) > 0 {
		fmt.Fprintf(&b, "risk:     %s\n", e.Risk)
		b.WriteString("effects:\n")
		for _, x := range e.Effects {
			fmt.Fprintf(&b, "  - %s", x.Text)
			if x.Command != "" {
				fmt.Fprintf(&b, "   [%s]", x.Command)
			}
			fmt.Fprintf(&b, " (%s)\n", x.Risk)
		}
	}
	if d.Runs != "" {
		fmt.Fprintf(&b, "runs:     %s\n", d.Runs)
	}
	if d.Action == Allow && (d.Sandbox != "" || e.Shell != nil) {
		if d.Sandbox != "" {
			fmt.Fprintf(&b, "sandbox:  %s (required by the rule; enforced by the kernel)\n", d.Sandbox)
		} else {
			b.WriteString("sandbox:  the tool's profile (no rule requires one)\n")
		}
	}
	if d.Action == Ask {
		fmt.Fprintf(&b, "timeout:  %s\n", d.Timeout)
		if d.Impact != "" {
			fmt.Fprintf(&b, "impact:   %s\n", d.Impact)
		}
	}
	if e.Shell != nil {
		b.WriteString("commands:\n")
		if len(e.Shell.Commands) == 0 {
			b.WriteString("  (none)\n")
		}
		for i, c := range e.Shell.Commands {
			fmt.Fprintf(&b, "  %d. %s", i+1, c.String())
			if len(c.Via) > 0 {
				fmt.Fprintf(&b, "   [via %s]", strings.Join(c.Via, " > "))
			}
			b.WriteByte('\n')
			if len(c.Outside) > 0 {
				fmt.Fprintf(&b, "     outside the working directory: %s\n", strings.Join(c.Outside, "; "))
			}
			if len(c.Secrets) > 0 {
				fmt.Fprintf(&b, "     may hold secrets: %s\n", strings.Join(c.Secrets, "; "))
			}
		}
		if reasons := e.Shell.Reasons(); len(reasons) > 0 {
			b.WriteString("review:\n")
			for _, r := range reasons {
				fmt.Fprintf(&b, "  - %s\n", r)
			}
		}
	}
	b.WriteString("matched:\n")
	if len(d.Matched) == 0 {
		b.WriteString("  (no rule)\n")
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, m := range d.Matched {
		what := m.Command
		if what == "" {
			what = "(the call)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", m.Action, m.Rule, what, m.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// MarshalJSON encodes the explanation for programs, and for people who
// read it: <, > and & are not escaped.
func (e *Explanation) MarshalJSON() ([]byte, error) {
	type decision struct {
		Action         Action         `json:"action"`
		Rule           string         `json:"rule"`
		Why            string         `json:"why"`
		Reason         string         `json:"reason,omitempty"`
		Sandbox        string         `json:"sandbox,omitempty"`
		TimeoutSeconds float64        `json:"timeout_seconds,omitempty"`
		Details        map[string]any `json:"details,omitempty"`
		Matched        []Match        `json:"matched"`
	}
	d := e.Decision
	matched := d.Matched
	if matched == nil {
		matched = []Match{}
	}
	out := struct {
		Tool     string          `json:"tool"`
		Args     map[string]any  `json:"args"`
		Decision decision        `json:"decision"`
		Effects  []shell.Effect  `json:"effects,omitempty"`
		Risk     shell.Risk      `json:"risk,omitempty"`
		Shell    *shell.Analysis `json:"shell,omitempty"`
	}{
		Tool: e.Call.Tool, Args: e.Call.Args, Shell: e.Shell, Effects: e.Effects, Risk: e.Risk,
		Decision: decision{Action: d.Action, Rule: d.Rule, Why: d.Why(), Reason: d.Reason, Sandbox: d.Sandbox,
			TimeoutSeconds: d.Timeout.Seconds(), Details: d.Details(), Matched: matched},
	}
	// Commands are full of '>' and '&': written as they are, not as
	// json.Marshal's \u003e and \u0026. (An encoder that escapes HTML
	// escapes this output again: encode with SetEscapeHTML(false).)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
