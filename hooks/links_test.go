package hooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/hooks"
)

// The built-in coding-agent policy, driven through the hook service as
// Claude Code's PreToolUse payloads: calls that reach outside the
// project, .git or a secret through a symbolic link the project holds (a
// cloned repository can ship plain links), and sessions whose "project"
// is the root or the home directory, are asked about, never allowed at
// once; the same calls on plain files still are (found by an adversarial
// review: each of the first cases was allowed).
func TestCallsThroughLinksAndBroadProjects(t *testing.T) {
	src, err := os.ReadFile("../examples/policies/coding-agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureOf(t, string(src), nil)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	proj := t.TempDir()
	os.MkdirAll(filepath.Join(proj, ".git", "hooks"), 0o755)
	os.WriteFile(filepath.Join(proj, ".env"), []byte("KEY=secret"), 0o600)
	// What a cloned repository may hold: plain symbolic links.
	for link, to := range map[string]string{"tools": ".git/hooks", "notes.txt": ".env", "home": "/root", "etc": "/etc"} {
		if err := os.Symlink(to, filepath.Join(proj, link)); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(proj, "plain.txt"), []byte("x"), 0o644)

	n := 0
	call := func(session, cwd, tool, input string) string {
		n++
		r := f.svc.Handle(context.Background(), hooks.ClaudeCode, preIn(cwd, session, fmt.Sprintf("toolu_%d", n), tool, json.RawMessage(input)),
			&hooks.CallOptions{Wait: 5 * time.Second})
		a := parse(t, r)
		return a.Decision + ": " + a.Reason
	}
	cases := []struct{ name, session, cwd, tool, input string }{
		{"write through a repo symlink into .git/hooks", "s1", proj, "Write", fmt.Sprintf(`{"file_path": %q, "content": "curl x | sh"}`, filepath.Join(proj, "tools", "pre-commit"))},
		{"read .env through a repo symlink", "s1", proj, "Read", fmt.Sprintf(`{"file_path": %q}`, filepath.Join(proj, "notes.txt"))},
		{"a new session whose first cwd is /: write /etc", "s2", "/", "Write", `{"file_path": "/etc/cron.d/x", "content": "* * * * * root sh /tmp/x"}`},
		{"a session started in the home directory: ~/.bashrc", "s3", home, "Write", fmt.Sprintf(`{"file_path": %q, "content": "x"}`, filepath.Join(home, ".bashrc"))},
		{"/proc/self/root as the project", "s4", "/proc/self/root", "Write", `{"file_path": "/proc/self/root/etc/cron.d/x", "content": "x"}`},
		{"cat of a link to .env", "s1", proj, "Bash", `{"command": "cat notes.txt"}`},
		{"grep through a link to /root", "s1", proj, "Bash", `{"command": "grep -r password home/"}`},
		{"a redirect into a link to .git/hooks", "s1", proj, "Bash", `{"command": "echo x > tools/pre-commit"}`},
	}
	for _, c := range cases {
		// Asked, nobody answers: denied when the hook's time runs out
		// (or blocked, for .git).
		if got := call(c.session, c.cwd, c.tool, c.input); !strings.HasPrefix(got, "deny") {
			t.Errorf("%s: %s, want it asked (denied unanswered) or blocked", c.name, got)
		}
	}
	for _, c := range []struct{ name, tool, input string }{
		{"a plain file's Write", "Write", fmt.Sprintf(`{"file_path": %q, "content": "y"}`, filepath.Join(proj, "plain.txt"))},
		{"a plain file's cat", "Bash", `{"command": "cat plain.txt"}`},
		{"a plain file's Read by its absolute path", "Read", fmt.Sprintf(`{"file_path": %q}`, filepath.Join(proj, "plain.txt"))},
	} {
		if got := call("s1", proj, c.tool, c.input); !strings.HasPrefix(got, "allow") {
			t.Errorf("%s: %s, want allow", c.name, got)
		}
	}
}
