package bash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tollgate-ai/tollgate/internal/sandboxhelper"
)

// helperBin is the binary started as the sandbox helper and the
// supervisor: found once (see findHelper), or set by SetHelper.
var helperBin struct {
	mu         sync.Mutex
	found      bool
	path, note string
	err        error
}

// helperPath returns the binary to start as the sandbox helper and the
// supervisor, and why it is not HelperName when it is not.
func helperPath() (path, note string, err error) {
	helperBin.mu.Lock()
	defer helperBin.mu.Unlock()
	if !helperBin.found {
		helperBin.found = true
		self, err := os.Executable()
		if err != nil {
			helperBin.err = fmt.Errorf("finding the binary to run the sandbox helper: %w", err)
		} else {
			helperBin.path, helperBin.note = findHelper(self)
		}
	}
	return helperBin.path, helperBin.note, helperBin.err
}

// SetHelper makes the process start path as the sandbox helper of the
// commands it starts from now on, instead of [HelperName] next to its
// executable: for a program installed elsewhere than its helper, and for
// benchmarks. It refuses a helper that someone other than root or this
// process's user could replace, or that is from another build (see
// [Check]). An empty path: the executable itself (re-executed; it must
// call [MaybeRunHelper]).
func SetHelper(path string) error {
	note := ""
	if path == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding the binary to run the sandbox helper: %w", err)
		}
		path, note = self, "SetHelper(\"\"): confined commands re-execute "+filepath.Base(self)+" itself"
	} else {
		real, err := usableHelper(path)
		if err != nil {
			return fmt.Errorf("sandbox helper %s: %w", path, err)
		}
		path = real
	}
	helperBin.mu.Lock()
	defer helperBin.mu.Unlock()
	helperBin.found, helperBin.path, helperBin.note, helperBin.err = true, path, note, nil
	return nil
}

// UseSpareHelpers turns spare sandbox helpers on or off for the commands
// this process starts from now on (off by default). A spare is a helper
// started before its command is known, while the agent waits for its
// next tool call: about half of a confined command's start is then off
// the command's path (see spare_linux.go). Turn it on only in a process
// that does not confine itself once commands have started (no Landlock
// domain, seccomp filter or the like entered by any of its threads):
// a helper started for a command is in its process's Landlock domain,
// which the kernel cannot report, while a spare started before it was
// entered is not. Turned off, a spare waiting is discarded.
func UseSpareHelpers(on bool) {
	spareHelpers.Store(on)
	if !on {
		discardSpare()
	}
}

// findHelper returns HelperName next to self if it may be run as the
// helper, and otherwise self, with the reason. It may be run when:
//
//   - no one but root and this process's user can replace it: the file
//     and every directory above it (symbolic links resolved) are owned by
//     one of them and writable by no one else (a directory with the
//     sticky bit, such as /tmp, may be: there no one else can rename or
//     remove what is not theirs). Whoever can replace the helper can run
//     code as every confined command's parent, unconfined;
//   - it speaks this build's protocol (sandboxhelper.Protocol(), asked of
//     it): a helper left from another build of tollgate must not read a
//     configuration it does not know whole (a masked path, a limit).
//
// What it runs is then the file as it is when each command starts: the
// directories are as safe as self's own, whose replacing would be no
// better for an attacker.
func findHelper(self string) (path, note string) {
	cand := filepath.Join(filepath.Dir(self), HelperName)
	if _, err := os.Lstat(cand); errors.Is(err, os.ErrNotExist) {
		return self, fmt.Sprintf("no %s next to %s: confined commands re-execute %s itself, which is slower to start (go install ./cmd/... installs both)", HelperName, self, filepath.Base(self))
	}
	real, err := usableHelper(cand)
	if err != nil {
		return self, fmt.Sprintf("%s not used (%v): confined commands re-execute %s itself, which is slower to start", cand, err, filepath.Base(self))
	}
	return real, ""
}

// usableHelper resolves the helper binary at path and says why it may not
// be run, if it may not (see findHelper).
func usableHelper(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	if err := onlyOwnerWrites(real); err != nil {
		return "", err
	}
	if err := askProtocol(real); err != nil {
		return "", err
	}
	return real, nil
}

// onlyOwnerWrites says why path could be replaced by someone other than
// root or this process's user, if it could (see findHelper).
func onlyOwnerWrites(path string) error {
	uid := uint32(os.Geteuid())
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	for p := path; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no owner", p)
		}
		if st.Uid != 0 && st.Uid != uid {
			return fmt.Errorf("%s is owned by uid %d, neither root nor this process's user", p, st.Uid)
		}
		sticky := fi.IsDir() && fi.Mode()&os.ModeSticky != 0
		if fi.Mode().Perm()&0o022 != 0 && !(sticky && p != path) {
			return fmt.Errorf("%s is writable by others (mode %v)", p, fi.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// askProtocol starts the helper binary at path in sandboxhelper's
// protocol mode and says why it is not the one this build needs, if it
// is not.
func askProtocol(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	cmd.Args = []string{"tollgate-sandbox-helper"}
	cmd.Env = []string{sandboxhelper.Env + "=" + sandboxhelper.ProtocolMode}
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("asking its protocol: %w", err)
	}
	if got := strings.TrimSpace(string(out)); !sandboxhelper.SameProtocol(got) {
		return fmt.Errorf("it is from another build (protocol %q, this one %s): install both from one checkout (go install ./cmd/...)", got, sandboxhelper.Protocol())
	}
	return nil
}
