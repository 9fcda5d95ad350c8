//go:build unix

package readmetest

// Running a section.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func runSection(t *testing.T, dir, bin string, cmds []command) {
	for _, c := range cmds {
		if len(c.needs) > 0 {
			continue
		}
		for _, words := range simpleCommands(c.text) {
			if p := words[0]; !shellBuiltin[p] && p != "go" && !strings.Contains(p, "/") {
				if _, err := exec.LookPath(p); err != nil && p != "tollgate" {
					requirement(t, "README:%d: %s is not installed", c.line, p)
				}
			}
		}
	}
	s := startSession(t, dir, bin)
	defer s.end()
	checkout := false
	for _, c := range cmds {
		if c.ctrlC {
			if s.fg == nil {
				t.Fatalf("README:%d: %s, but nothing runs until Ctrl-C", c.line, c.text)
			}
			s.stopFg(c.line)
			continue
		}
		if len(c.needs) > 0 {
			t.Logf("README:%d: not run (needs %s): %s", c.line, strings.Join(c.needs, ", "), c.text)
			continue
		}
		text := strings.ReplaceAll(c.text, readmeAddr, s.addr)
		words := simpleCommands(text)
		if len(words) == 1 && words[0][0] == "go" {
			if w := words[0]; len(w) >= 3 && w[1] == "run" && w[2] == "./cmd/tollgate" {
				// In a checkout, go run ./cmd/tollgate is the command the
				// test built.
				checkout = true
				text = strings.Replace(text, "go run ./cmd/tollgate", "tollgate", 1)
			} else {
				t.Logf("README:%d: checked, not run: %s", c.line, c.text)
				continue
			}
		}
		if c.until {
			if s.fg != nil {
				s.stopFg(c.line)
			}
			s.startFg(c, text)
			continue
		}
		status, out := s.run(c, text)
		ok := status == c.exit
		if c.exitOrZero {
			ok = status == 0 || status == c.exit && os.Getenv("CI") != "true"
		}
		if !ok {
			want := strconv.Itoa(c.exit)
			if c.exitOrZero {
				want = "0"
			}
			t.Errorf("README:%d: %s\n  exit status %d, want %s; output:\n%s", c.line, c.text, status, want, indent(out))
		} else {
			t.Logf("README:%d: %s: exit %d\n%s", c.line, firstLine(c.text), status, indent(out))
		}
		checkPrints(t, c, out)
		if s.fg != nil {
			s.fg.settle(t, c.line)
		}
	}
	if s.fg != nil {
		s.stopFg(0)
	}
	s.end()
	allowed := func(name string) bool { return checkout && strings.HasPrefix(name, "tollgate.db") }
	entries, _ := os.ReadDir(s.start)
	for _, e := range entries {
		if !allowed(e.Name()) {
			t.Errorf("the section left %s in the directory it started in: a reader's current directory (cd to a temporary one first)", e.Name())
		}
	}
}

var shellBuiltin = map[string]bool{
	"cd": true, "export": true, "source": true, ".": true, "echo": true, "printf": true,
	"test": true, "[": true, "true": true, "false": true, "unset": true, "set": true, "read": true, "wait": true, "kill": true,
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func indent(s string) string {
	const max = 6000
	if len(s) > max {
		s = s[:max/2] + "\n...\n" + s[len(s)-max/2:]
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// session is one bash process that runs a section's commands, so that cd
// and export carry from one command to the next. Each command's status
// comes back on file descriptor 3.
type session struct {
	t      *testing.T
	start  string // the directory it starts in
	work   string // the test's own files: stdin, output
	env    []string
	addr   string // where a tollgate serve of this section listens
	sh     *exec.Cmd
	in     io.WriteCloser
	status chan string
	n      int
	fg     *service
	ended  bool
}

func startSession(t *testing.T, dir, bin string) *session {
	s := &session{t: t, start: filepath.Join(dir, "start"), work: filepath.Join(dir, "work"), addr: freeAddr(t)}
	home, tmp := filepath.Join(dir, "home"), filepath.Join(dir, "tmp")
	for _, d := range []string{s.start, s.work, home, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "TOLLGATE_"), k == "HOME", k == "TMPDIR", k == "PATH", k == "PWD", k == "OLDPWD",
			k == "CDPATH", k == "BASH_ENV", k == "ENV", k == "EDITOR", k == "VISUAL":
			continue
		}
		s.env = append(s.env, kv)
	}
	s.env = append(s.env, "HOME="+home, "TMPDIR="+tmp, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"TOLLGATE_ADDR="+s.addr)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(s.work, "bash.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.sh = exec.Command("bash", "--noprofile", "--norc")
	s.sh.Dir, s.sh.Env = s.start, s.env
	s.sh.Stdout, s.sh.Stderr = log, log
	s.sh.ExtraFiles = []*os.File{w}
	s.sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if s.in, err = s.sh.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.sh.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	log.Close()
	s.status = make(chan string)
	go func() {
		defer close(s.status)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			s.status <- sc.Text()
		}
	}()
	t.Cleanup(s.end)
	return s
}

// send writes script to bash and waits for its one line on fd 3.
func (s *session) send(script string, timeout time.Duration) (string, error) {
	if _, err := io.WriteString(s.in, script); err != nil {
		return "", fmt.Errorf("bash is gone: %v", err)
	}
	select {
	case l, ok := <-s.status:
		if !ok {
			return "", errors.New("bash exited")
		}
		return l, nil
	case <-time.After(timeout):
		return "", fmt.Errorf("no end after %v", timeout)
	}
}

// run runs one command in the session and returns its status and output.
func (s *session) run(c command, text string) (int, string) {
	s.n++
	in := "/dev/null"
	if c.stdin != nil {
		in = filepath.Join(s.work, fmt.Sprintf("in%d", s.n))
		if err := os.WriteFile(in, []byte(strings.Join(c.stdin, "\n")+"\n"), 0o644); err != nil {
			s.t.Fatal(err)
		}
	}
	out := filepath.Join(s.work, fmt.Sprintf("out%d", s.n))
	line, err := s.send(fmt.Sprintf("{ %s\n} <%s >%s 2>&1 3>&-; printf '%%s\\n' \"$?\" >&3\n", text, shQuote(in), shQuote(out)), commandTimeout)
	b, _ := os.ReadFile(out)
	if err != nil {
		s.t.Fatalf("README:%d: %s\n  %v; output so far:\n%s", c.line, c.text, err, indent(string(b)))
	}
	status, err := strconv.Atoi(line)
	if err != nil {
		s.t.Fatalf("README:%d: bash said %q", c.line, line)
	}
	return status, string(b)
}

// checkPrints fails t for each "# prints:" text of c its output does not
// show.
func checkPrints(t *testing.T, c command, out string) {
	t.Helper()
	for _, p := range c.prints {
		if !shows(out, p) {
			t.Errorf("README:%d: %s\n  the output does not show %q:\n%s", c.line, firstLine(c.text), p, indent(out))
		}
	}
}

// state is the session's current directory and environment, for a command
// the test starts itself.
func (s *session) state() (string, []string) {
	envFile := filepath.Join(s.work, "env")
	dir, err := s.send(fmt.Sprintf("env -0 >%s; printf '%%s\\n' \"$PWD\" >&3\n", shQuote(envFile)), 10*time.Second)
	if err != nil {
		s.t.Fatal(err)
	}
	b, err := os.ReadFile(envFile)
	if err != nil {
		s.t.Fatal(err)
	}
	env := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	return dir, env
}

func (s *session) end() {
	if s.ended {
		return
	}
	s.ended = true
	if s.fg != nil {
		s.fg.kill()
		s.fg = nil
	}
	s.in.Close()
	done := make(chan struct{})
	go func() { s.sh.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
	// Whatever the section left running in the background.
	syscall.Kill(-s.sh.Process.Pid, syscall.SIGKILL)
	<-done
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// service is a command that runs until Ctrl-C: tollgate serve.
type service struct {
	c      command
	cmd    *exec.Cmd
	base   string // http://host:port
	done   chan struct{}
	status int
	log    string
}

func (s *session) startFg(c command, text string) {
	t := s.t
	dir, env := s.state()
	s.n++
	logPath := filepath.Join(s.work, fmt.Sprintf("serve%d.log", s.n))
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command("bash", "-c", text)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	srv := &service{c: c, cmd: cmd, base: "http://" + serveAddr(text, env), done: make(chan struct{}), log: logPath}
	go func() {
		cmd.Wait()
		srv.status = cmd.ProcessState.ExitCode()
		close(srv.done)
	}()
	s.fg = srv
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-srv.done:
			t.Fatalf("README:%d: %s\n  exited with status %d before it answered /healthz:\n%s", c.line, c.text, srv.status, srv.output())
		default:
		}
		if body, code, err := get(srv.base + "/healthz"); err == nil && code == 200 && strings.TrimSpace(body) == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("README:%d: %s\n  /healthz did not answer in 30s:\n%s", c.line, c.text, srv.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, code, err := get(srv.base + "/readyz"); err != nil || code != 200 {
		t.Errorf("README:%d: /readyz: %d %v", c.line, code, err)
	}
	if body, code, err := get(srv.base + "/"); err != nil || code != 200 || !strings.Contains(body, "<html") {
		t.Errorf("README:%d: the page at %s/: %d %v\n%s", c.line, srv.base, code, err, indent(body))
	}
	t.Logf("README:%d: %s: up at %s", c.line, firstLine(c.text), srv.base)
	srv.settle(t, c.line)
}

// stopFg presses Ctrl-C: SIGINT to the service's process group, which
// must then exit 0.
func (s *session) stopFg(line int) {
	srv := s.fg
	s.fg = nil
	syscall.Kill(-srv.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-srv.done:
	case <-time.After(30 * time.Second):
		srv.kill()
		s.t.Fatalf("README:%d: %s did not stop within 30s of Ctrl-C:\n%s", line, srv.c.text, srv.output())
	}
	if srv.status != 0 {
		s.t.Errorf("README:%d: %s\n  exit status %d after Ctrl-C, want 0:\n%s", srv.c.line, srv.c.text, srv.status, srv.output())
	}
	out, _ := os.ReadFile(srv.log)
	checkPrints(s.t, srv.c, string(out))
}

func (srv *service) kill() {
	syscall.Kill(-srv.cmd.Process.Pid, syscall.SIGKILL)
	<-srv.done
}

func (srv *service) output() string {
	b, _ := os.ReadFile(srv.log)
	return indent(string(b))
}

// settle waits until none of the service's runs is active: each thread
// with an unfinished run is parked on a question still open.
func (srv *service) settle(t *testing.T, line int) {
	deadline := time.Now().Add(settleTimeout)
	for {
		quiet, err := srv.quiet()
		if err != nil {
			t.Errorf("README:%d: asking the service about its runs: %v", line, err)
			return
		}
		if quiet {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("README:%d: the service's runs are still active after %v:\n%s", line, settleTimeout, srv.output())
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (srv *service) quiet() (bool, error) {
	body, code, err := get(srv.base + "/v1/threads?status=running")
	if err != nil {
		return false, err
	}
	if code == http.StatusUnauthorized || code == http.StatusForbidden {
		return true, nil // not dev mode: nothing to see without a token
	}
	var list struct {
		Threads []struct {
			ID       string `json:"id"`
			RunState string `json:"run_state"`
		} `json:"threads"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		return false, fmt.Errorf("%d %s: %v", code, body, err)
	}
	for _, th := range list.Threads {
		if th.RunState != "parked" {
			return false, nil
		}
		body, _, err := get(srv.base + "/v1/threads/" + th.ID)
		if err != nil {
			return false, err
		}
		var one struct {
			Pending []json.RawMessage `json:"pending_questions"`
		}
		if err := json.Unmarshal([]byte(body), &one); err != nil {
			return false, err
		}
		if len(one.Pending) == 0 {
			return false, nil // answered: about to resume
		}
	}
	return true, nil
}

// serveAddr is where a tollgate serve command line listens.
func serveAddr(text string, env []string) string {
	for _, w := range simpleCommands(text) {
		for i, a := range w {
			v, ok := strings.CutPrefix(a, "--addr=")
			if !ok && a == "--addr" && i+1 < len(w) {
				v, ok = w[i+1], true
			}
			if ok {
				if strings.HasPrefix(v, ":") {
					v = "127.0.0.1" + v
				}
				return v
			}
		}
	}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "TOLLGATE_ADDR="); ok {
			return v
		}
	}
	return readmeAddr
}

func get(url string) (string, int, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b), resp.StatusCode, err
}
