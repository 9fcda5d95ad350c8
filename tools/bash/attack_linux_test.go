package bash_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/exectest"
	"github.com/tollgate-ai/tollgate/internal/pgtest"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

// The attacks of the third review, each run unconfined first (the test's
// control: the attack works there) and then under each confined profile,
// where it must fail.

var confined = []bash.Profile{bash.ReadOnly, bash.WorkspaceWrite}

// withProbe returns a working directory holding a copy of the test binary,
// ./probe, which commands run in one of its probe modes (see probes).
func withProbe(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := exectest.WriteProgram(filepath.Join(dir, "probe"), data); err != nil {
		t.Fatal(err)
	}
	return dir
}

func run(t *testing.T, opts *bash.Options, cmd string) bash.Result {
	t.Helper()
	r, err := bash.Run(context.Background(), opts, cmd)
	if err != nil {
		t.Fatalf("%s: %v\n%+v", opts.Profile, err, r)
	}
	return r
}

// Attack A: an allowed command makes a UNIX socket through io_uring (the
// seccomp filter saw no socket call), connects to the store's PostgreSQL
// over its local socket (trust authentication) and writes the store.
func TestAttackIoUringToPostgres(t *testing.T) {
	needSandbox(t)
	dsn := pgtest.Start(t)
	sock := pgtest.Socket(t)
	dir := withProbe(t)
	table := "pwned_" + strconv.Itoa(os.Getpid())
	cmd := "./probe tollgate-io-uring-pg " + sock + " 'CREATE TABLE " + table + " ()'"
	exists := func() bool {
		err := pgtest.Exec(context.Background(), dsn, "SELECT 'public."+table+"'::regclass")
		return err == nil
	}

	r := run(t, &bash.Options{Dir: dir, Profile: bash.Unconfined}, cmd)
	if r.ExitCode != 0 || !exists() {
		t.Fatalf("unconfined: the attack failed, the test proves nothing: %+v", r)
	}
	if err := pgtest.Exec(context.Background(), dsn, "DROP TABLE "+table); err != nil {
		t.Fatal(err)
	}
	for _, p := range confined {
		// The socket's directory is masked too (as serve passes it); the
		// filter is what the probe meets first.
		r := run(t, &bash.Options{Dir: dir, Profile: p, Masked: []string{filepath.Dir(sock)}}, cmd)
		if r.ExitCode == 0 || exists() {
			t.Fatalf("%s: the command reached the store: %+v", p, r)
		}
		if !strings.Contains(r.Stdout, "io_uring_setup: operation not permitted") {
			t.Errorf("%s: want io_uring refused by the filter: %+v", p, r)
		}
		// Without io_uring, the socket is still out of reach: the view has
		// no socket there, whatever makes the socket.
		r = run(t, &bash.Options{Dir: dir, Profile: p, Masked: []string{filepath.Dir(sock)}}, "test -e "+sock+" && echo visible || echo absent")
		if strings.TrimSpace(r.Stdout) != "absent" {
			t.Errorf("%s: the socket is in the view: %+v", p, r)
		}
	}
}

// stateFiles writes tollgate's state into dir as the default layout of a
// review had it: the SQLite store (and its WAL), a policy, a tokens file.
func stateFiles(t *testing.T, dir string) (paths []string, contents map[string]string) {
	t.Helper()
	contents = map[string]string{
		"tollgate.db":                     "SQLite format 3\x00 secret-store-row",
		"tollgate.db-wal":                 "secret-wal-row of another team",
		"tollgate.db-shm":                 "secret-shm",
		"policy.yaml":                     "version: 1\ndefault: ask\n",
		"tollgate-gateway.reviewer-token": "secret-reviewer-token",
		"state/tollgate.tokens":           "secret-page-token",
	}
	for name, body := range contents {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(name) == "." {
			paths = append(paths, p)
		}
	}
	paths = append(paths, filepath.Join(dir, "state")) // a masked directory
	return paths, contents
}

// Attacks B, C and D: tollgate's store, policy and tokens in the working
// directory are read and written by the command.
func TestAttackStateInWorkingDirectory(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	masked, contents := stateFiles(t, dir)
	cmd := `cat tollgate.db tollgate.db-wal tollgate.db-shm tollgate-gateway.reviewer-token state/tollgate.tokens; grep -ra secret . ; ` +
		`printf 'version: 1\ndefault: allow\n' > policy.yaml; echo forged >> tollgate.db; echo x > tollgate.db-wal; ` +
		`rm -f tollgate-gateway.reviewer-token; mv tollgate.db-shm moved; echo t > state/tollgate.tokens; true`
	check := func(p bash.Profile) (read, wrote []string) {
		r := run(t, &bash.Options{Dir: dir, Profile: p, Masked: masked}, cmd)
		for name, body := range contents {
			if strings.Contains(r.Stdout, strings.TrimPrefix(body, "SQLite format 3\x00 ")) && strings.Contains(body, "secret") {
				read = append(read, name)
			}
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || string(got) != body {
				wrote = append(wrote, name)
			}
		}
		return read, wrote
	}
	read, wrote := check(bash.Unconfined)
	if len(read) < 5 || len(wrote) < 5 {
		t.Fatalf("unconfined: read %q, wrote %q: the attacks failed, the test proves nothing", read, wrote)
	}
	for _, p := range confined {
		os.Remove(filepath.Join(dir, "moved"))
		masked, contents = stateFiles(t, dir)
		read, wrote := check(p)
		if len(read) > 0 || len(wrote) > 0 {
			t.Errorf("%s: read %q, wrote %q", p, read, wrote)
		}
	}
}

// The host's /proc showed every process's command line, serve's with a
// DSN's password; the command's /proc holds its own processes only.
func TestAttackProcShowsNoHostProcess(t *testing.T) {
	needSandbox(t)
	dir := withProbe(t)
	secret := "postgres://alice:s3cret-in-proc@db/tollgate"
	other := exec.Command(filepath.Join(dir, "probe"), "tollgate-sleep", "--store", secret)
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	cmd := `cat /proc/[0-9]*/cmdline | tr '\0' ' '; echo; ls /proc | grep -c '^[0-9]'`
	r := run(t, &bash.Options{Dir: dir, Profile: bash.Unconfined}, cmd)
	if !strings.Contains(r.Stdout, secret) {
		t.Fatalf("unconfined: no secret in /proc, the test proves nothing: %+v", r)
	}
	count := regexp.MustCompile(`(?m)^(\d+)$`)
	for _, p := range confined {
		r := run(t, &bash.Options{Dir: dir, Profile: p}, cmd)
		if strings.Contains(r.Stdout, secret) {
			t.Errorf("%s: the host's processes are in /proc: %+v", p, r)
		}
		m := count.FindStringSubmatch(r.Stdout)
		if n, _ := strconv.Atoi(m[len(m)-1]); m == nil || n > 5 {
			t.Errorf("%s: %d processes in /proc: %+v", p, n, r)
		}
	}
}

// As root, RLIMIT_NPROC does not apply: a review started 2,000 processes
// under the "512" limit. The PID namespace's pid_max holds.
func TestAttackForkBomb(t *testing.T) {
	needSandbox(t)
	if !bash.Check().PidCap {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI: no process cap here: %s", bash.Check().PidCapErr)
		}
		t.Skip(bash.Check().PidCapErr)
	}
	dir := withProbe(t)
	const procs, tries = 400, 700
	opts := func(p bash.Profile) *bash.Options {
		return &bash.Options{Dir: dir, Profile: p, Limits: bash.Limits{Procs: procs}}
	}
	started := regexp.MustCompile(`started (\d+) of`)
	count := func(r bash.Result) int {
		m := started.FindStringSubmatch(r.Stdout)
		if m == nil {
			t.Fatalf("no count: %+v", r)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	cmd := "./probe tollgate-fork " + strconv.Itoa(tries)
	if n := count(run(t, opts(bash.Unconfined), cmd)); n != tries {
		t.Fatalf("unconfined: started %d of %d, the test proves nothing", n, tries)
	}
	for _, p := range confined {
		if n := count(run(t, opts(p), cmd)); n >= procs {
			t.Errorf("%s: started %d processes, the cap is %d (uid %d)", p, n, procs, os.Getuid())
		}
	}
}

// No memory limit: a review allocated 3 GiB. RLIMIT_AS holds, for root too.
func TestAttackMemory(t *testing.T) {
	needSandbox(t)
	dir := withProbe(t)
	const limit, size = 512 << 20, 1 << 30
	cmd := "./probe tollgate-alloc " + strconv.Itoa(size)
	want := "allocated " + strconv.Itoa(size)
	opts := func(p bash.Profile) *bash.Options {
		return &bash.Options{Dir: dir, Profile: p, Limits: bash.Limits{Memory: limit}}
	}
	if r := run(t, opts(bash.Unconfined), cmd); !strings.Contains(r.Stdout, want) {
		t.Fatalf("unconfined: %+v: the allocation failed, the test proves nothing", r)
	}
	for _, p := range confined {
		r := run(t, opts(p), cmd)
		// The probe is a Go program: under the limit either its
		// allocation fails or the runtime cannot reserve its heap.
		if strings.Contains(r.Stdout, want) || !strings.Contains(r.Stderr, "out of memory") && !strings.Contains(r.Stderr, "failed to reserve") {
			t.Errorf("%s: want the allocation of %d bytes to fail under a limit of %d: %+v", p, size, limit, r)
		}
	}
}
