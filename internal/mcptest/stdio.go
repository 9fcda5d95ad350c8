package mcptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The environment variables the stdio server program reads.
const (
	// EnvLedger names the file the program appends its ledger to, one JSON
	// [Call] a line (read it with [ReadLedger]). Unset: no ledger.
	EnvLedger = "MCPTEST_LEDGER"
	// EnvStartLog names a file to which the program appends "start <pid>"
	// each time it starts.
	EnvStartLog = "MCPTEST_START_LOG"
	// EnvExitAfterStart set to "1" makes the program exit with status
	// [ExitAfterStartStatus] right after it wrote its start line.
	EnvExitAfterStart = "MCPTEST_EXIT_AFTER_START"
)

// The stdio server program's exit statuses.
const (
	// CrashStatus is the status the program exits with when the tool crash
	// is called.
	CrashStatus = 3
	// ExitAfterStartStatus is the status the program exits with when
	// [EnvExitAfterStart] is "1".
	ExitAfterStartStatus = 4
)

// stdioBinPrefix starts the name of the directories the program is built in.
const stdioBinPrefix = "mcptest-stdioserver-"

var stdioBuild struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// BuildStdioServer builds the stdio server program (the package
// internal/mcptest/stdioserver) once per test binary and returns the path
// of the executable; a failed build fails the test with the build's output.
//
// The program serves the tools of [NewServer] over stdin and stdout (logging
// to stderr), its hang tool blocking for good whatever the client does, plus
// crash {}, which records the call and then exits the process with status
// [CrashStatus] before any response. It records into the file named by
// [EnvLedger], logs its starts to [EnvStartLog], and exits at once if
// [EnvExitAfterStart] is "1". Once hang was called the program no longer
// exits when its stdin closes: only a signal ends it.
//
// The executable lives in a fresh directory under [os.TempDir]; directories
// left there by test binaries more than a day ago are removed.
func BuildStdioServer(t testing.TB) string {
	t.Helper()
	stdioBuild.once.Do(buildStdioServer)
	if stdioBuild.err != nil {
		t.Fatalf("mcptest: building the stdio server: %v\n%s", stdioBuild.err, stdioBuild.out)
	}
	return stdioBuild.path
}

func buildStdioServer() {
	removeStaleBuilds()
	dir, err := os.MkdirTemp(os.TempDir(), stdioBinPrefix)
	if err != nil {
		stdioBuild.err = err
		return
	}
	bin := filepath.Join(dir, "stdioserver")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	goTool := "go"
	if p, err := exec.LookPath("go"); err == nil {
		goTool = p
	} else if root := os.Getenv("GOROOT"); root != "" {
		goTool = filepath.Join(root, "bin", "go")
	}
	// Build from this file's directory when the sources are there, so the
	// build works whatever the test's working directory; by import path
	// otherwise (a -trimpath build of the test).
	cmd := exec.Command(goTool, "build", "-o", bin, "github.com/tollgate-ai/tollgate/internal/mcptest/stdioserver")
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		if src := filepath.Join(filepath.Dir(file), "stdioserver"); isDir(src) {
			cmd = exec.Command(goTool, "build", "-o", bin, ".")
			cmd.Dir = src
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		stdioBuild.err = err
		stdioBuild.out = out
		_ = os.RemoveAll(dir)
		return
	}
	stdioBuild.path = bin
}

// removeStaleBuilds removes the build directories more than a day old.
func removeStaleBuilds() {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), stdioBinPrefix) {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 24*time.Hour {
			_ = os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
		}
	}
}

// removeStdioServer removes the built program, if any (for TestMain).
func removeStdioServer() {
	if stdioBuild.path != "" {
		_ = os.RemoveAll(filepath.Dir(stdioBuild.path))
	}
}

func isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}

// ReadLedger reads the calls the stdio server program recorded in the file at
// path (see [EnvLedger]), oldest first. A missing file holds no calls; a
// line that is not a JSON [Call] fails the test.
func ReadLedger(t testing.TB, path string) []Call {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatalf("mcptest: reading the ledger: %v", err)
	}
	var calls []Call
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var c Call
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatalf("mcptest: ledger %s line %d: %v: %q", path, n, err, line)
		}
		calls = append(calls, c)
	}
	return calls
}
