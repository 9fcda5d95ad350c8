package bash_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/exectest"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

// buildHelper builds cmd/tollgate-sandbox into dir and returns its path.
func buildHelper(t testing.TB, dir string) string {
	t.Helper()
	out := filepath.Join(dir, bash.HelperName)
	build := exec.Command("go", "build", "-o", out, "github.com/tollgate-ai/tollgate/cmd/tollgate-sandbox")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/tollgate-sandbox: %v\n%s", err, b)
	}
	return out
}

// The helper binary is used only when it sits next to the executable, no
// one but root and the process's user can replace it, and it is from the
// same build; otherwise the executable re-executes itself, and the note
// says why.
func TestFindHelper(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "tollgate")
	want := func(t *testing.T, wantPath, note string) {
		t.Helper()
		path, got := bash.FindHelper(self)
		if path != wantPath || !strings.Contains(got, note) || (note == "") != (got == "") {
			t.Fatalf("FindHelper = %q, %q; want %q and a note with %q", path, got, wantPath, note)
		}
	}
	t.Run("absent", func(t *testing.T) { want(t, self, "no tollgate-sandbox next to "+self) })
	helper := buildHelper(t, dir)
	t.Run("next to it", func(t *testing.T) { want(t, helper, "") })
	t.Run("group-writable", func(t *testing.T) {
		os.Chmod(helper, 0o775)
		defer os.Chmod(helper, 0o755)
		want(t, self, "writable by others")
	})
	t.Run("in a directory others write", func(t *testing.T) {
		os.Chmod(dir, 0o777)
		defer os.Chmod(dir, 0o700)
		want(t, self, dir+" is writable by others")
	})
	t.Run("sticky directory", func(t *testing.T) {
		os.Chmod(dir, 0o777|os.ModeSticky)
		defer os.Chmod(dir, 0o700)
		want(t, helper, "")
	})
	t.Run("owned by another user", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to give the file away")
		}
		os.Chown(helper, 65534, 65534)
		defer os.Chown(helper, 0, 0)
		want(t, self, "owned by uid 65534")
	})
	t.Run("symbolic link", func(t *testing.T) {
		other := t.TempDir()
		self := filepath.Join(other, "tollgate")
		if err := os.Symlink(helper, filepath.Join(other, bash.HelperName)); err != nil {
			t.Fatal(err)
		}
		if path, note := bash.FindHelper(self); path != helper || note != "" {
			t.Fatalf("FindHelper = %q, %q; want %q", path, note, helper)
		}
	})
	t.Run("another build", func(t *testing.T) {
		other := t.TempDir()
		self := filepath.Join(other, "tollgate")
		fake := filepath.Join(other, bash.HelperName)
		if err := exectest.WriteProgram(fake, []byte("#!/bin/sh\necho 0-0000000000000000\n")); err != nil {
			t.Fatal(err)
		}
		if path, note := bash.FindHelper(self); path != self || !strings.Contains(note, "another build") {
			t.Fatalf("FindHelper = %q, %q; want %q and another build", path, note, self)
		}
	})
}

// Commands started through the helper binary are confined as through the
// binary itself (the whole suite runs so in CI: TOLLGATE_TEST_SANDBOX_HELPER),
// and the supervisor of an unconfined command is the helper binary.
func TestHelperBinary(t *testing.T) {
	needSandbox(t)
	helper := buildHelper(t, t.TempDir())
	if err := bash.SetHelper(helper); err != nil {
		t.Fatal(err)
	}
	defer bash.SetHelper(os.Getenv(helperEnv))
	if r := bash.Check(); r.Helper != helper || r.HelperNote != "" {
		t.Fatalf("Check: helper %q (%s), want %q", r.Helper, r.HelperNote, helper)
	}
	dir := t.TempDir()
	secret := filepath.Join(dir, "store.db")
	if err := os.WriteFile(secret, []byte("the store"), 0o600); err != nil {
		t.Fatal(err)
	}
	ro := &bash.Options{Dir: dir, Profile: bash.ReadOnly, Masked: []string{secret}}
	if r := run(t, ro, "touch made; cat store.db; echo done"); r.ExitCode != 0 || strings.Contains(r.Stdout, "the store") || !strings.Contains(r.Stderr, "made") {
		t.Errorf("read-only through the helper binary: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "made")); err == nil {
		t.Error("a read-only command wrote through the helper binary")
	}
	ww := &bash.Options{Dir: dir, Profile: bash.WorkspaceWrite}
	if r := run(t, ww, "touch made && echo $TMPDIR"); r.ExitCode != 0 {
		t.Errorf("workspace-write through the helper binary: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "made")); err != nil {
		t.Errorf("workspace-write did not write: %v", err)
	}
	r, err := bash.Run(context.Background(), &bash.Options{Dir: dir}, "readlink /proc/$PPID/exe")
	if err != nil || strings.TrimSpace(r.Stdout) != helper {
		t.Errorf("the unconfined command's supervisor is %q (%v), want %s", r.Stdout, err, helper)
	}
}

// SetHelper refuses a helper binary others could replace, and keeps the
// one it had.
func TestSetHelperRefuses(t *testing.T) {
	helper := buildHelper(t, t.TempDir())
	os.Chmod(helper, 0o777)
	before := bash.Check().Helper
	if err := bash.SetHelper(helper); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Fatalf("SetHelper of a world-writable helper: %v", err)
	}
	if after := bash.Check().Helper; after != before {
		t.Fatalf("the helper changed to %q", after)
	}
}
