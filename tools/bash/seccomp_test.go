package bash_test

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/internal/exectest"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

// Found by review: Landlock does not govern chmod, utimes or extended
// attributes, nor (below ABI 9) connecting to a pathname UNIX socket; the
// read-only profile's seccomp filter refuses them.
func TestReadOnlyKeepsMetadataAndUnixSocketsOutside(t *testing.T) {
	needSandbox(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("the seccomp filter is for amd64")
	}
	dir, outside := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(victim)
	sock := filepath.Join(outside, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, _ := io.ReadAll(c)
			got <- string(b)
			c.Close()
		}
	}()
	exe, _ := os.Executable()
	client := filepath.Join(dir, "client")
	data, _ := os.ReadFile(exe)
	if err := exectest.WriteProgram(client, data); err != nil {
		t.Fatal(err)
	}
	cmd := "chmod 777 " + victim + "; touch -d 2001-01-01 " + victim + "; ./client tollgate-unix-client " + sock + "; echo done"

	// Unconfined, the same command does all three: the test sees harm.
	if _, err := bash.Run(context.Background(), &bash.Options{Dir: dir, Profile: bash.Unconfined}, cmd); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(victim); st.Mode().Perm() != 0o777 || st.ModTime().Year() != 2001 {
		t.Fatalf("unconfined: mode %v time %v; the test's commands do no harm", st.Mode(), st.ModTime())
	}
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("unconfined: the socket was not reached; the test proves nothing")
	}
	os.Chmod(victim, 0o600)
	os.Chtimes(victim, before.ModTime(), before.ModTime())

	r, err := bash.Run(context.Background(), &bash.Options{Dir: dir, Profile: bash.ReadOnly}, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Stdout, "done") {
		t.Fatalf("the confined command did not run to its end: %+v", r)
	}
	st, _ := os.Stat(victim)
	if st.Mode().Perm() != 0o600 || !st.ModTime().Equal(before.ModTime()) {
		t.Errorf("read-only changed a file outside: mode %v time %v\n%+v", st.Mode(), st.ModTime(), r)
	}
	select {
	case m := <-got:
		t.Errorf("read-only reached a UNIX socket outside: %q", m)
	case <-time.After(300 * time.Millisecond):
	}
}

// Found by review: with a ~/.gitconfig the confined command could not read,
// every git command failed, so the read-only git rules were useless.
func TestConfinedGitWithAnUnreadableHome(t *testing.T) {
	needSandbox(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	home, repo := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = x\n"), 0o600)
	t.Setenv("HOME", home)
	if out, err := exec.Command("git", "-C", repo, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	os.WriteFile(filepath.Join(repo, "f"), []byte("x"), 0o644)
	r, err := bash.Run(context.Background(), &bash.Options{Dir: repo, Profile: bash.ReadOnly}, "git status --short")
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 0 || !strings.Contains(r.Stdout, "f") {
		t.Fatalf("git status under read-only: %+v", r)
	}
}

// A command that makes a directory of its TMPDIR unwritable does not leave
// it behind.
func TestTmpdirRemovedEvenWhenLockedUp(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	r, err := bash.Run(context.Background(), &bash.Options{Dir: dir, Profile: bash.WorkspaceWrite},
		"mkdir $TMPDIR/d && touch $TMPDIR/d/f && chmod 500 $TMPDIR/d && echo $TMPDIR > where")
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	where, _ := os.ReadFile(filepath.Join(dir, "where"))
	if _, err := os.Stat(strings.TrimSpace(string(where))); err == nil {
		t.Fatalf("TMPDIR %s is still there", where)
	}
}
