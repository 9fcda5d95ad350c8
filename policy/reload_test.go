package policy

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const allowLs = "rules:\n  - {name: ls, tool: bash, command: ls, action: allow}\n"
const blockLs = "rules:\n  - {name: no-ls, tool: bash, command: ls, action: block}\n"

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceFile writes a file the way careful tools do: a new file renamed
// over the old one, so that no reader sees it half written.
func replaceFile(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	writeFile(t, tmp, data)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestReloadable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "p.yaml")
	writeFile(t, path, allowLs)
	r, err := NewReloadable(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d := r.Evaluate(ctx, bash("ls")); d.Action != Allow {
		t.Fatalf("got %s", d.Action)
	}
	if changed, err := r.Reload(); changed || err != nil {
		t.Errorf("unchanged file: changed %v, err %v", changed, err)
	}

	writeFile(t, path, blockLs)
	if changed, err := r.Reload(); !changed || err != nil {
		t.Errorf("changed file: changed %v, err %v", changed, err)
	}
	if d := r.Evaluate(ctx, bash("ls")); d.Action != Block {
		t.Errorf("after reload: %s", d.Action)
	}

	// A broken file keeps the policy in force and says why, every time.
	writeFile(t, path, "rules:\n  - {name: x, tool: bash, action: alow}\n")
	for range 2 {
		changed, err := r.Reload()
		if changed || err == nil || !strings.Contains(err.Error(), `p.yaml:2:`) || !strings.Contains(err.Error(), `unknown action "alow"`) {
			t.Errorf("broken file: changed %v, err %v", changed, err)
		}
	}
	if r.Err() == nil {
		t.Error("Err() forgets the broken file")
	}
	if d := r.Evaluate(ctx, bash("ls")); d.Action != Block {
		t.Errorf("the old policy must stay in force: %s", d.Action)
	}

	writeFile(t, path, allowLs)
	if changed, err := r.Reload(); !changed || err != nil || r.Err() != nil {
		t.Errorf("fixed file: changed %v, err %v, Err %v", changed, err, r.Err())
	}
	if d := r.Evaluate(ctx, bash("ls")); d.Action != Allow {
		t.Errorf("after the fix: %s", d.Action)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reload(); err == nil || r.Policy() == nil {
		t.Errorf("a missing file is an error and keeps the policy: %v", err)
	}
}

func TestNewReloadableBroken(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "p.yaml")
	writeFile(t, path, "rules: [")
	if _, err := NewReloadable(path, nil); err == nil {
		t.Error("the first load must succeed")
	}
}

func TestWatch(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "p.yaml")
	writeFile(t, path, allowLs)
	r, err := NewReloadable(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	type report struct {
		changed bool
		err     error
	}
	reports := make(chan report, 10)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		r.Watch(ctx, 5*time.Millisecond, func(changed bool, err error) { reports <- report{changed, err} })
	})
	defer func() { cancel(); wg.Wait() }()

	replaceFile(t, path, "rules: [")
	if rep := <-reports; rep.changed || rep.err == nil {
		t.Errorf("broken: %+v", rep)
	}
	replaceFile(t, path, blockLs)
	if rep := <-reports; !rep.changed || rep.err != nil {
		t.Errorf("fixed: %+v", rep)
	}
	if d := r.Evaluate(context.Background(), bash("ls")); d.Action != Block {
		t.Errorf("after the watch reloaded: %s", d.Action)
	}
	select {
	case rep := <-reports:
		t.Errorf("unexpected report %+v", rep)
	case <-time.After(30 * time.Millisecond):
	}
}

// A reload that may allow more than the policy it replaces says what;
// one that allows the same or less says nothing.
func TestReloadLoosened(t *testing.T) {
	t.Parallel()
	const base = `default: ask
rules:
  - {name: ls, tool: bash, command: ls, action: allow, sandbox: read-only}
  - {name: no-rm, tool: bash, command: rm, action: block}
  - {name: git, tool: bash, command: git, action: ask}
`
	for _, c := range []struct {
		name, after string
		want        []string
		before      string
	}{
		{"same rules, other words", strings.Replace(base, "action: ask}", "action: ask, impact: changes the repository, description: git}", 1), nil, ""},
		{"stricter default", strings.Replace(base, "default: ask", "default: block", 1), nil, ""},
		{"an allow rule removed", strings.Replace(base, "  - {name: ls, tool: bash, command: ls, action: allow, sandbox: read-only}\n", "", 1), nil, ""},
		{"default allow", strings.Replace(base, "default: ask", "default: allow", 1), []string{"the default is allow, was ask"}, ""},
		{"a new allow", base + "  - {name: cat, tool: bash, command: cat, action: allow}\n", []string{`rule "cat" allows more (new, or changed)`}, ""},
		{"a wider sandbox", strings.Replace(base, "sandbox: read-only", "sandbox: workspace-write", 1), []string{`rule "ls" allows more (new, or changed)`}, ""},
		{"a block made ask", strings.Replace(base, "command: rm, action: block", "command: rm, action: ask", 1), []string{`rule "no-rm" (block) is gone or changed`}, ""},
		{"an ask made allow", strings.Replace(base, "command: git, action: ask", "command: git, action: allow", 1),
			[]string{`rule "git" allows more (new, or changed)`, `rule "git" (ask) is gone or changed`}, ""},
		{"sh no longer a shell", "shell: {bash: cmd}\n" + base, []string{"tool sh is no longer analysed as a shell on its argument script"}, "shell: {bash: cmd, sh: script}\n" + base},
	} {
		path := filepath.Join(t.TempDir(), "p.yaml")
		writeFile(t, path, cmp.Or(c.before, base))
		r, err := NewReloadable(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, c.after)
		if changed, err := r.Reload(); !changed || err != nil {
			t.Fatalf("%s: changed %v, err %v", c.name, changed, err)
		}
		if got := r.Loosened(); !slices.Equal(got, c.want) {
			t.Errorf("%s: Loosened() = %q, want %q", c.name, got, c.want)
		}
	}
}
