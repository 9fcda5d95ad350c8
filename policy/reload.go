package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goccy/go-yaml"
)

// Reloadable is a policy file that can be loaded again while in use: by a
// server on a signal or an admin request, or by [Reloadable.Watch] when the
// file changes. A file that no longer loads keeps the policy in force and
// reports why. It is safe for concurrent use.
type Reloadable struct {
	path string
	opts *Options
	cur  atomic.Pointer[Policy]

	mu       sync.Mutex // serialises reloads
	data     []byte     // the contents of the file in force, or of the last broken one
	inForce  []byte     // the contents of the file in force
	lastErr  error
	loosened []string // what the last reload allowed that the policy before it did not
}

// NewReloadable loads the policy file at path. The first load must
// succeed.
func NewReloadable(path string, opts *Options) (*Reloadable, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := Parse(path, data, opts)
	if err != nil {
		return nil, err
	}
	r := &Reloadable{path: path, opts: opts, data: data, inForce: data}
	r.cur.Store(p)
	return r, nil
}

// Policy returns the policy in force.
func (r *Reloadable) Policy() *Policy { return r.cur.Load() }

// Evaluate decides a call with the policy in force.
func (r *Reloadable) Evaluate(ctx context.Context, call Call) Decision {
	return r.cur.Load().Evaluate(ctx, call)
}

// Reload reads the file again. When it changed and loads, the new policy
// takes effect and changed is true. When it does not load, the policy in
// force stays and the error says why (until the file is fixed, each Reload
// reports the same error again).
func (r *Reloadable) Reload() (changed bool, err error) {
	data, err := os.ReadFile(r.path)
	return r.load(data, err)
}

// load puts the policy in data in force, if it changed and loads.
func (r *Reloadable) load(data []byte, readErr error) (changed bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if readErr != nil {
		r.lastErr = readErr
		return false, readErr
	}
	if bytes.Equal(data, r.data) {
		return false, r.lastErr
	}
	r.data = data
	p, err := Parse(r.path, data, r.opts)
	if err != nil {
		r.lastErr = err
		return false, err
	}
	r.lastErr = nil
	r.loosened = Looser(r.cur.Load(), r.inForce, p, data)
	r.inForce = data
	r.cur.Store(p)
	return true, nil
}

// Loosened says what the policy put in force by the last reload that
// changed it may allow that the one before it did not, one phrase each
// (rule "rm" allows more (new, or changed)); nil when it allows nothing
// more. A server logs it as a warning and shows it to reviewers: a policy
// file a tool could write would otherwise loosen the policy silently.
func (r *Reloadable) Loosened() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.loosened)
}

// ruleShape is what decides whether a rule lets a call through: the rule
// without its name, descriptions and the words shown to people.
type ruleShape struct {
	Name        string `yaml:"name"`
	Tool        any    `yaml:"tool"`
	Command     any    `yaml:"command"`
	When        string `yaml:"when"`
	Action      string `yaml:"action"`
	AllowWrites bool   `yaml:"allow_writes"`
	Sandbox     string `yaml:"sandbox"`
	Learnable   *bool  `yaml:"learnable"`
}

func (s ruleShape) key() string {
	s.Name = ""
	b, _ := json.Marshal(s)
	return string(b)
}

// Looser compares two loaded policies and the files they were loaded
// from, and says what after may allow that before did not: a default
// less strict; an allow rule that before did not have, word for word
// (tool, command, condition, sandbox, allow_writes); an ask or block rule
// of before that after lacks or changed (learnable too); a tool no longer
// analysed as a shell; learned rules turned on, or no longer waiting for
// a second reviewer. It errs on the side of saying so: a rule made stricter in place
// counts as changed. Nil: after allows nothing more.
func Looser(before *Policy, beforeData []byte, after *Policy, afterData []byte) []string {
	var out []string
	if after.def.rank() < before.def.rank() {
		out = append(out, fmt.Sprintf("the default is %s, was %s", after.def, before.def))
	}
	switch {
	case before.learn.off && !after.learn.off:
		out = append(out, "learned rules are turned on (learn: enabled)")
	case before.learn.secondReviewer && !after.learn.secondReviewer && !after.learn.off:
		out = append(out, "a learned rule no longer waits for a second reviewer (learn: second_reviewer)")
	}
	for tool, arg := range before.shell {
		if after.shell[tool] != arg {
			out = append(out, fmt.Sprintf("tool %s is no longer analysed as a shell on its argument %s", tool, arg))
		}
	}
	type file struct {
		Rules []ruleShape `yaml:"rules"`
	}
	var b, a file
	if yaml.Unmarshal(beforeData, &b) != nil || yaml.Unmarshal(afterData, &a) != nil {
		// Both loaded, so both decode; if not, say it rather than nothing.
		return append(out, "the rules could not be compared")
	}
	shapes := func(rules []ruleShape) map[string]bool {
		m := map[string]bool{}
		for _, r := range rules {
			m[r.key()] = true
		}
		return m
	}
	was, now := shapes(b.Rules), shapes(a.Rules)
	for i, r := range a.Rules {
		if Action(r.Action) == Allow && !was[r.key()] {
			out = append(out, fmt.Sprintf("rule %s allows more (new, or changed)", ruleLabel(r, i)))
		}
	}
	for i, r := range b.Rules {
		if Action(r.Action) != Allow && !now[r.key()] {
			out = append(out, fmt.Sprintf("rule %s (%s) is gone or changed", ruleLabel(r, i), r.Action))
		}
	}
	return out
}

func ruleLabel(r ruleShape, i int) string {
	if r.Name != "" {
		return strconv.Quote(r.Name)
	}
	return fmt.Sprintf("#%d", i+1)
}

// Err returns the error of the last reload, nil when the file in force is
// the file on disk.
func (r *Reloadable) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

// Watch reads the file every interval until ctx is done, and reloads it
// once a change has stayed the same for one interval (so that a file
// caught half written is not reported as broken). It calls report (if not
// nil) after each reload that changed the policy or failed, once per
// distinct error. It polls rather than subscribing to file events, which
// works on every file system, including mounted config maps whose files
// are replaced by a rename.
func (r *Reloadable) Watch(ctx context.Context, interval time.Duration, report func(changed bool, err error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastReported error
	var pending []byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		data, err := os.ReadFile(r.path)
		if err == nil {
			r.mu.Lock()
			same := bytes.Equal(data, r.data)
			r.mu.Unlock()
			if same {
				pending = nil
				continue
			}
			if !bytes.Equal(data, pending) {
				pending = data // changed since the last tick: let it settle
				continue
			}
		}
		pending = nil
		changed, err := r.load(data, err)
		if report == nil {
			continue
		}
		// A broken file is reported once, not on every tick.
		if changed || err != nil && (lastReported == nil || err.Error() != lastReported.Error()) {
			report(changed, err)
		}
		lastReported = err
	}
}
