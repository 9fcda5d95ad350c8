package policy

import (
	"context"
	"testing"

	"github.com/tollgate-ai/tollgate/policy/shell"
)

// FuzzSandbox checks that the sandbox policy never panics, never allows a
// command string that does not parse, never allows one the shell analysis
// wants a person to see, and never allows one that names secrets or files
// only known at run time (which may be secret ones inside the working
// directory; outside it, the read-only view is the kernel's). Seeds:
// testdata/fuzz/FuzzSandbox and the bypass corpus.
func FuzzSandbox(f *testing.F) {
	for _, s := range bypasses {
		f.Add(s)
	}
	for _, s := range harmless {
		f.Add(s)
	}
	p := loadSandbox(f)
	f.Fuzz(func(t *testing.T, cmd string) {
		d := p.Evaluate(context.Background(), bash(cmd))
		if d.Action != Allow {
			return
		}
		a, err := shell.Parse(cmd)
		if err != nil {
			t.Fatalf("allowed %q, which does not parse: %v", cmd, err)
		}
		if a.NeedsReview() {
			t.Fatalf("allowed %q, which needs review: %q", cmd, a.Reasons())
		}
		if len(a.Commands) == 0 {
			t.Fatalf("allowed %q, which runs no command", cmd)
		}
		for _, c := range a.Commands {
			if len(c.Unknown) > 0 || len(c.Secrets) > 0 {
				t.Fatalf("allowed %q, whose command %s names files only known at run time (%q) or secrets (%q)", cmd, c.String(), c.Unknown, c.Secrets)
			}
		}
	})
}
