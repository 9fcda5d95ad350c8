package policy

import (
	"bytes"
	"context"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Reloadable is a policy file that can be loaded again while in use: by a
// server on a signal or an admin request, or by [Reloadable.Watch] when the
// file changes. A file that no longer loads keeps the policy in force and
// reports why. It is safe for concurrent use.
type Reloadable struct {
	path string
	opts *Options
	cur  atomic.Pointer[Policy]

	mu      sync.Mutex // serialises reloads
	data    []byte     // the contents of the file in force, or of the last broken one
	lastErr error
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
	r := &Reloadable{path: path, opts: opts, data: data}
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
	r.cur.Store(p)
	return true, nil
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
