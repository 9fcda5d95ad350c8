package policy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate-ai/tollgate/policy"
)

// A policy's digest is its file's: the same file, the same digest; any
// change, a comment's included, another; a reload changes it.
func TestDigest(t *testing.T) {
	const src = "version: 1\ndefault: ask\nrules:\n  - name: ls\n    tool: bash\n    command: [ls]\n    action: allow\n"
	a, err := policy.Parse("a.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.Parse("b.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := policy.Parse("a.yaml", []byte(src+"# reviewed\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest() != b.Digest() || a.Digest() == c.Digest() || len(a.Digest()) != 16 {
		t.Errorf("digests %q %q %q: want the first two equal, the third another, 16 hex digits", a.Digest(), b.Digest(), c.Digest())
	}
	file := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := policy.NewReloadable(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Digest() != a.Digest() {
		t.Errorf("reloadable %q, parsed %q", r.Digest(), a.Digest())
	}
	if err := os.WriteFile(file, []byte(src+"# reviewed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed, err := r.Reload(); err != nil || !changed {
		t.Fatalf("reload: %v, %v", changed, err)
	}
	if r.Digest() != c.Digest() {
		t.Errorf("after the reload %q, want %q", r.Digest(), c.Digest())
	}
}
