package learn

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/policy"
)

// Radius is a rule's blast radius before it is saved: what it would have
// done to the calls people were asked about, and what it would allow
// that nobody has seen.
type Radius struct {
	// Scanned is how many of the tool's latest questions were read (at
	// most RadiusOptions.Last, of the threads the reader may see).
	Scanned int `json:"scanned"`
	// Matched is how many of them the rule would have allowed, in its
	// scope; Approved of those people approved, Unanswered were never
	// answered (timed out, aborted, waiting).
	Matched    int `json:"matched"`
	Approved   int `json:"approved"`
	Unanswered int `json:"unanswered"`
	// Denied are the matched calls people denied: the rule would have
	// allowed each without asking (a flag each). Edited are those people
	// ran only changed.
	Denied []Past `json:"denied"`
	Edited []Past `json:"edited"`
	// Unseen are calls the rule allows that none of the scanned
	// questions asked about: a few of what widening lets through.
	Unseen []string `json:"unseen"`
}

// Past is one earlier question a rule would have answered.
type Past struct {
	ThreadID   string    `json:"thread_id"`
	QuestionID string    `json:"question_id"`
	By         string    `json:"by"`
	Reason     string    `json:"reason,omitempty"`
	At         time.Time `json:"at"`
	// Call is the call, in a line: its command string, or its arguments.
	Call string `json:"call"`
}

// RadiusOptions say what to read.
type RadiusOptions struct {
	// Last is how many of the tool's latest questions to read; zero: 500.
	Last int
	// Sees says which threads' questions the reader may see; nil: all.
	Sees func(threadID string) bool
	// Examples is how many unseen calls to show; zero: 3, negative:
	// none.
	Examples int
}

// Measure reads the latest questions about the spec's tool and says
// what the rule, in scope, would have done to each.
func Measure(ctx context.Context, store checkpoint.Store, s *Spec, scope Scope, o RadiusOptions) (*Radius, error) {
	if o.Last <= 0 {
		o.Last = 500
	}
	if o.Examples == 0 {
		o.Examples = 3
	}
	r := &Radius{Denied: []Past{}, Edited: []Past{}, Unseen: []string{}}
	seen := map[string]bool{}
	cache := &plainCache{}
	for q, err := range checkpoint.Questions(ctx, store, checkpoint.QuestionFilter{Tool: s.Tool, Kind: hitl.KindApprove,
		Order: checkpoint.NewestFirst, Limit: min(200, o.Last)}) {
		if err != nil {
			return nil, err
		}
		if r.Scanned >= o.Last {
			break
		}
		if o.Sees != nil && !o.Sees(q.ThreadID) {
			continue
		}
		r.Scanned++
		call, ok := CallOf(q)
		if !ok {
			continue
		}
		seen[callKey(call.Args)] = true
		if !scope.Holds(call.ThreadID, call.Dir) || !s.allows(call, cache) {
			continue
		}
		r.Matched++
		past := Past{ThreadID: q.ThreadID, QuestionID: q.ID, By: q.AnsweredBy, At: q.ResolvedAt, Call: callLine(s, call)}
		if q.Status != checkpoint.QuestionAnswered {
			r.Unanswered++
			continue
		}
		var a hitl.ApproveAnswer
		_ = json.Unmarshal(q.Answer, &a)
		switch a.Decision {
		case hitl.DecisionDeny:
			past.Reason = a.Reason
			r.Denied = append(r.Denied, past)
		case hitl.DecisionEdit:
			r.Edited = append(r.Edited, past)
		default:
			r.Approved++
		}
	}
	if o.Examples > 0 {
		r.Unseen = unseen(s, seen, o.Examples)
	}
	return r, nil
}

// CallOf is the call an approval question asks about, as the policy saw
// it: its tool, arguments, thread, and the directory it works in (the
// question's details say it: dir, or a coding agent's cwd).
func CallOf(q *checkpoint.Question) (policy.Call, bool) {
	var p struct {
		Tool    string         `json:"tool_name"`
		Args    map[string]any `json:"args"`
		Details map[string]any `json:"details"`
	}
	if q.Kind != hitl.KindApprove || json.Unmarshal(q.Payload, &p) != nil || p.Tool == "" {
		return policy.Call{}, false
	}
	if p.Args == nil {
		p.Args = map[string]any{}
	}
	call := policy.Call{Tool: p.Tool, Args: p.Args, ThreadID: q.ThreadID}
	if d, ok := p.Details["dir"].(string); ok {
		call.Dir = d
	} else if d, ok := p.Details["cwd"].(string); ok {
		call.Dir = d
	}
	if a, ok := p.Details["annotations"].(map[string]any); ok {
		call.Annotations = a
	}
	return call, true
}

func callKey(args map[string]any) string {
	b, _ := canonical(args)
	return string(b)
}

// callLine is a call in one line: its command string, or its arguments.
func callLine(s *Spec, call policy.Call) string {
	if s.Shell != nil {
		if src, ok := call.Args[s.Shell.Arg].(string); ok {
			return src
		}
	}
	b, _ := canonical(call.Args)
	return string(b)
}

// Words a widened slot may take, to show what a rule allows.
var (
	sampleFiles  = []string{"README.md", "src/main.go", "docs/notes.txt", "test/data.json"}
	sampleWords  = []string{"main", "HEAD~10", "v1.2.3", "other"}
	sampleValues = []string{"full", "%an", "json", "0"}
)

// unseen makes up to n calls the spec allows that are not among seen:
// each widened slot or field takes sample values in turn.
func unseen(s *Spec, seen map[string]bool, n int) []string {
	out := []string{}
	for k := 0; k < 4 && len(out) < n; k++ {
		args, ok := variant(s, k)
		if !ok {
			break
		}
		call := policy.Call{Tool: s.Tool, Args: args}
		line := callLine(s, call)
		if seen[callKey(args)] || slices.Contains(out, line) || !s.Allows(call) {
			continue
		}
		out = append(out, line)
	}
	return out
}

// variant is the k-th made-up call of a spec: its widened slots and
// fields given the k-th sample; false when nothing is widened.
func variant(s *Spec, k int) (map[string]any, bool) {
	args := map[string]any{}
	widened := false
	if sh := s.Shell; sh != nil {
		words := make([][]string, len(sh.Commands))
		for i, c := range sh.Commands {
			for _, a := range c.Args {
				w := a.Word
				switch {
				case a.Match == Inside:
					w, widened = sampleFiles[k%len(sampleFiles)], true
					if a.Role == RoleOperand {
						w = "./" + w
					}
				case a.Match == Any && a.Prefix != "":
					w, widened = sampleValues[k%len(sampleValues)], true
				case a.Match == Any:
					w, widened = sampleWords[k%len(sampleWords)], true
				}
				words[i] = append(words[i], a.Prefix+w)
			}
		}
		args[sh.Arg] = sh.render(words)
	}
	for _, f := range s.Args {
		var v any
		_ = json.Unmarshal(f.Value, &v)
		switch f.Match {
		case Any:
			widened = true
			if k%2 == 1 {
				continue // absent
			}
			v = fmt.Sprintf("anything %d", k+1)
		case Range:
			widened = true
			v = *f.Min + (*f.Max-*f.Min)*float64(k%3)/2
		case Inside:
			widened = true
			v = strings.TrimSuffix(f.Dir, "/") + "/" + sampleFiles[k%len(sampleFiles)]
		}
		args[f.Name] = v
	}
	return args, widened
}
