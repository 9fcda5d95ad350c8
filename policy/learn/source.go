package learn

import (
	"context"
	"errors"
	"path"
	"regexp"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/policy"
)

// Source is the learned rules of a store, for a policy
// ([policy.Options].Learned): it reads them on every call the policy
// asks about, so that a rule learned, approved or revoked in any process
// (another replica, the command line) holds at once.
type Source struct {
	Store checkpoint.RuleStore
	// Clock tells expired rules; nil: the system clock.
	Clock clock.Clock
}

var _ policy.Learned = (*Source)(nil)

// NewSource returns the learned rules of store, or an error when the
// store keeps none (a wrapper that does not pass RuleStore on).
func NewSource(store checkpoint.Store) (*Source, error) {
	rs, ok := store.(checkpoint.RuleStore)
	if !ok {
		return nil, errors.New("learn: this store keeps no learned rules")
	}
	return &Source{Store: rs}, nil
}

// Allow returns the first live rule, oldest first, whose scope holds the
// call and whose spec allows it; with second, only rules a second
// reviewer approved.
func (s *Source) Allow(ctx context.Context, call policy.Call, second bool) (*policy.LearnedRule, error) {
	rules, err := s.Store.ListRules(ctx, checkpoint.RuleFilter{Tool: call.Tool, Unrevoked: true, Scopes: scopesOf(call)})
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if s.Clock != nil {
		now = s.Clock.Now()
	}
	cache := &plainCache{}
	for _, r := range rules {
		if !r.Live(now) || second && !r.SecondApproved() {
			continue
		}
		spec, err := ParseSpec(r.Spec)
		if err != nil {
			continue // a rule this tollgate cannot read allows nothing
		}
		if spec.allows(call, cache) {
			return &policy.LearnedRule{ID: r.ID, By: r.CreatedBy, Second: r.ApprovedBy, Scope: ScopeOf(r).String()}, nil
		}
	}
	return nil, nil
}

// continuation is a further thread of a coding agent's session:
// claude-code:ID~2 continues claude-code:ID.
var continuation = regexp.MustCompile(`^(.+)~[0-9]+$`)

// scopesOf are the scopes that hold a call: everyone; its thread, and
// the session's first thread when it is a further one; its directory and
// every directory above it.
func scopesOf(call policy.Call) []checkpoint.ScopeRef {
	out := []checkpoint.ScopeRef{{Scope: checkpoint.ScopeEveryone}}
	if call.ThreadID != "" {
		out = append(out, checkpoint.ScopeRef{Scope: checkpoint.ScopeThread, Key: call.ThreadID})
		if m := continuation.FindStringSubmatch(call.ThreadID); m != nil {
			out = append(out, checkpoint.ScopeRef{Scope: checkpoint.ScopeThread, Key: m[1]})
		}
	}
	if path.IsAbs(call.Dir) {
		for d := path.Clean(call.Dir); ; d = path.Dir(d) {
			out = append(out, checkpoint.ScopeRef{Scope: checkpoint.ScopeDir, Key: d})
			if d == "/" {
				break
			}
		}
	}
	return out
}

// Holds reports whether the scope holds a call in thread, working in dir.
func (s Scope) Holds(thread, dir string) bool {
	switch s.Kind {
	case checkpoint.ScopeEveryone:
		return true
	case checkpoint.ScopeThread:
		if thread == s.Key {
			return true
		}
		m := continuation.FindStringSubmatch(thread)
		return m != nil && m[1] == s.Key
	case checkpoint.ScopeDir:
		return path.IsAbs(dir) && pathIn(dir, "", s.Key)
	}
	return false
}
