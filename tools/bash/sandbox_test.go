package bash_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

func needSandbox(t *testing.T) {
	t.Helper()
	if err := bash.Check().Enforceable(bash.WorkspaceWrite); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI: the sandbox must be enforced here: %v", err)
		}
		t.Skip(err)
	}
}

func TestWorkspaceWrite(t *testing.T) {
	needSandbox(t)
	dir, outside := t.TempDir(), t.TempDir()
	t.Setenv("TOLLGATE_LISTED", "kept")
	t.Setenv("TOLLGATE_UNLISTED", "dropped")
	opts := &bash.Options{Dir: dir, Profile: bash.WorkspaceWrite, Env: []string{"TOLLGATE_LISTED"}}
	r, err := bash.Run(context.Background(), opts,
		"echo in > inside && mkdir -p a/b && mv inside a/b/ && echo $TMPDIR > a/tmpdir && touch $TMPDIR/x && "+
			"echo $TOLLGATE_LISTED-$TOLLGATE_UNLISTED; touch "+outside+"/no")
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode == 0 || !strings.Contains(r.Stdout, "kept-\n") || !strings.Contains(r.Stderr, "cannot touch") {
		t.Fatalf("result %+v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", "b", "inside")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(outside, "no")); err == nil {
		t.Fatal("wrote outside the working directory")
	}
	tmp, _ := os.ReadFile(filepath.Join(dir, "a", "tmpdir"))
	if _, err := os.Stat(strings.TrimSpace(string(tmp))); len(tmp) < 2 || err == nil {
		t.Fatalf("the private TMPDIR %q is still there", tmp)
	}
}

func TestProfileNotEnforceableIsNotRun(t *testing.T) {
	// A binary that does not call MaybeRunHelper cannot confine: here it
	// does, so check the profile names instead.
	if _, err := bash.ParseProfile("sandboxed"); err == nil {
		t.Fatal("unknown profile accepted")
	}
	if got := bash.Stricter(bash.WorkspaceWrite, bash.ReadOnly); got != bash.ReadOnly {
		t.Fatal(got)
	}
	if got := bash.Stricter("", bash.Unconfined); got != bash.Unconfined {
		t.Fatal(got)
	}
}

// TestDecideTightens: the profile Decide requires wins over a looser
// configured one; an error from it and the command is not run.
func TestDecideTightens(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	var saw string
	tool := bash.New(&bash.Options{Dir: dir, Profile: bash.WorkspaceWrite,
		Decide: func(ctx context.Context, args json.RawMessage) (bash.Profile, error) {
			saw = string(args)
			if strings.Contains(saw, "refuse") {
				return "", errors.New("the policy changed")
			}
			return bash.ReadOnly, nil
		}})
	r := runOne(t, tool, "touch x")
	if !strings.Contains(r.Content, "Read-only file system") || saw != `{"cmd":"touch x"}` {
		t.Fatalf("%+v, Decide saw %s", r, saw)
	}
	r = runOne(t, tool, "touch refuse")
	if !r.IsError || !strings.Contains(r.Content, "not run: the policy changed") {
		t.Fatalf("%+v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "refuse")); err == nil {
		t.Fatal("ran")
	}
}

// TestConfinedTimeout: a confined command that runs past the timeout is
// killed with its tree.
func TestConfinedTimeout(t *testing.T) {
	needSandbox(t)
	start := time.Now()
	r, err := bash.Run(context.Background(), &bash.Options{Dir: t.TempDir(), Profile: bash.ReadOnly, Timeout: 300 * time.Millisecond}, "sleep 30 & sleep 30")
	if err == nil || !r.TimedOut {
		t.Fatalf("%+v %v", r, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
}
