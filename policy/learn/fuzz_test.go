package learn_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/internal/exectest"
	"github.com/tollgate-ai/tollgate/policy/learn"
	"github.com/tollgate-ai/tollgate/policy/shell"
)

// The commands rules are learned from in the fuzz tests.
var fuzzLearned = []string{
	"git diff", "npm test", "git diff HEAD~3 -- src/", "grep -r foo src", "go test ./... 2>&1 | tail -20",
	"head -n 5 a.txt", "cd web && npm test", "NO_COLOR=1 npm test", "cat <<'EOF' > notes.txt\nhello\nEOF",
	"ls -la docs", "grep --color=always -n foo src", "git log --format=%H -n 3",
}

// fuzzTokens are what the generator puts into a learned command: every
// character and construct that matters to the shell.
var fuzzTokens = []string{
	"#", "\\", "'", "\"", ";", "&&", "||", "|", "|&", "$(", ")", "`", ">", "<", ">>", "2>&1", "&>", "<<<",
	"<<EOF\n", "\nEOF\n", "<<'EOF'\n", "<<-EOF\n", "&", "$x", "${x}", "$1", "*", "?", "[a]", "~", "~/", "{a,b}",
	" ", "  ", "\t", "\n", "-", "--", "--output=x", "-c", "x", "../", "/etc/passwd", ".env", "rm", "curl",
	"$((1))", "<(id)", ">(id)", "=", "A=1 ", "!", "(", ")", "{ ", "; }", "\\\n", "'\\''", "\"$", "$'x'",
	"if ", "then ", "fi", "for i in 1; do ", "done", "eval ", "sudo ", "bash -c ", "xargs ", "time ",
}

// shapeHolds is the oracle: whether a command string's analysis (the
// policy's own reading, another code path than the learned rule's) is
// the shape's: the same commands and names, no review, no wrapper,
// nothing computed, no secret, each argument fitting its slot, the same
// redirections.
func shapeHolds(s *learn.Spec, src string) (bool, string) {
	a, err := shell.Parse(src)
	if err != nil || len(a.Reasons()) > 0 {
		return false, "the analysis asks about it"
	}
	sh := s.Shell
	if len(a.Commands) != len(sh.Commands) {
		return false, "another number of commands"
	}
	for i, c := range a.Commands {
		want := sh.Commands[i]
		switch {
		case c.Dynamic || c.DynamicArgs || len(c.Via) > 0 || len(c.Secrets) > 0 || len(c.Unknown) > 0:
			return false, c.Path + " is computed, wrapped or reads secrets"
		case c.Path != want.Name:
			return false, "command " + c.Path + " is not " + want.Name
		case !slices.Equal(c.Env, want.Env) && !(len(c.Env) == 0 && len(want.Env) == 0):
			return false, "another environment"
		case len(c.Args) != len(want.Args):
			return false, "another number of arguments"
		case len(c.Redirects) != len(want.Redirects):
			return false, "other redirections"
		}
		for j, slot := range want.Args {
			w := c.Args[j]
			rest, ok := strings.CutPrefix(w, slot.Prefix)
			fits := ok
			switch slot.Match {
			case learn.Exact:
				fits = fits && rest == slot.Word
			case learn.Any:
				fits = fits && (slot.Prefix != "" || rest != "" && rest[0] != '-')
			case learn.Inside:
				clean := path.Clean(rest)
				fits = fits && rest != "" && !strings.ContainsAny(rest[:1], "/-~") && clean != ".." && !strings.HasPrefix(clean, "../")
			}
			if !fits {
				return false, "argument " + w + " does not fit " + string(slot.Match) + " " + slot.Prefix + slot.Word
			}
		}
		for j, r := range want.Redirects {
			got := c.Redirects[j]
			if got.Op != r.Op || got.FD != r.FD || r.Body == "" && got.Target != r.Word {
				return false, "redirection " + got.Op + got.Target + " is not " + r.Op + r.Word
			}
		}
	}
	return true, ""
}

// mutate inserts tokens into src, each at a place the rand picks.
func mutate(r *rand.Rand, src string, n int) string {
	for range n {
		tok := fuzzTokens[r.IntN(len(fuzzTokens))]
		at := r.IntN(len(src) + 1)
		if r.IntN(3) == 0 {
			// At a word's edge more often: where a token changes the
			// command rather than a word.
			if i := strings.LastIndexAny(src[:at], " \n"); i >= 0 {
				at = i + 1
			} else {
				at = 0
			}
		}
		src = src[:at] + tok + src[at:]
	}
	return src
}

// widened is the proposal of a learned command with each slot given one
// of its choices, as the rand picks.
func widened(t testing.TB, r *rand.Rand, learned string) *learn.Spec {
	p, err := learn.Propose(bashCall(learned), "cmd")
	if err != nil {
		t.Fatalf("Propose(%q): %v", learned, err)
	}
	for i := range p.Spec.Shell.Commands {
		for j := range p.Spec.Shell.Commands[i].Args {
			s := &p.Spec.Shell.Commands[i].Args[j]
			c := s.Choices()
			s.Match = c[r.IntN(len(c))]
		}
	}
	if err := p.Check(p.Spec); err != nil {
		t.Fatalf("widened %q: %v", learned, err)
	}
	return &p.Spec
}

// checkLearned: when the rule from learned allows src, src's parse is the
// learned shape, and bash, running it with logging programs in place of
// the commands, runs nothing but the shape's commands with the words the
// analysis read.
func checkLearned(t *testing.T, b *shapeRunner, s *learn.Spec, learned, src string) bool {
	t.Helper()
	if !s.Allows(bashCall(src)) {
		return false
	}
	if ok, why := shapeHolds(s, src); !ok {
		t.Fatalf("the rule from %q (%s) allows %q, whose parse is not its shape: %s", learned, s.String(), src, why)
	}
	if b != nil {
		b.check(t, src)
	}
	return true
}

// TestLearnedShapeRandom is the fuzz test's property on random strings
// made from the learned commands (a fixed seed: the same strings every
// run; go test -fuzz FuzzLearnedShape looks further).
func TestLearnedShapeRandom(t *testing.T) {
	n := 2000
	if os.Getenv("CI") == "true" {
		n = 20000
	}
	b := newShapeRunner(t)
	r := rand.New(rand.NewPCG(25, 2026))
	allowed := 0
	for i := range n {
		learned := fuzzLearned[i%len(fuzzLearned)]
		s := widened(t, r, learned)
		src := mutate(r, learned, 1+r.IntN(3))
		if checkLearned(t, b, s, learned, src) {
			allowed++
		}
	}
	// Some mutations keep the command (a space, a comment, quotes): the
	// property was tested on allowed strings, not only refused ones.
	if allowed < n/50 {
		t.Errorf("only %d of %d strings were allowed: the generator tests refusals only", allowed, n)
	}
	t.Logf("%d of %d mutated commands allowed, each checked against its parse and bash", allowed, n)
}

func FuzzLearnedShape(f *testing.F) {
	for i := range fuzzLearned {
		f.Add(uint8(i), uint64(i), "")
		f.Add(uint8(i), uint64(7*i+1), "x;#")
	}
	b := newShapeRunner(f)
	f.Fuzz(func(t *testing.T, which uint8, seed uint64, extra string) {
		learned := fuzzLearned[int(which)%len(fuzzLearned)]
		r := rand.New(rand.NewPCG(seed, uint64(which)))
		s := widened(t, r, learned)
		src := mutate(r, learned, 1+r.IntN(3))
		if extra != "" {
			at := r.IntN(len(src) + 1)
			src = src[:at] + extra + src[at:]
		}
		checkLearned(t, b, s, learned, src)
	})
}

// shapeRunner runs command strings with bash in a scratch directory whose
// only programs log their names and arguments.
type shapeRunner struct {
	bash, dir, log string
}

// newShapeRunner returns nil without bash (the parse is still checked).
func newShapeRunner(t testing.TB) *shapeRunner {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no bash: the learned shapes cannot be checked against it")
		}
		t.Log("no bash: the learned shapes are checked against their parse only")
		return nil
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	work := filepath.Join(dir, "work")
	for _, d := range []string{bin, work, filepath.Join(work, "web"), filepath.Join(work, "src")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(dir, "log")
	for _, name := range []string{"git", "npm", "grep", "go", "tail", "head", "cat", "ls"} {
		// One write a record: programs in a pipe run at once.
		script := "#!" + bash + "\nrec=$(printf '%s\\x1f' \"${0##*/}\" \"$@\")\nprintf '%s\\x1e' \"$rec\" >> " + log + "\n"
		if err := exectest.WriteProgram(filepath.Join(bin, name), []byte(script)); err != nil {
			t.Fatal(err)
		}
	}
	return &shapeRunner{bash: bash, dir: dir, log: log}
}

// check runs src and compares each program bash ran, with its arguments,
// with a command of src's analysis.
func (b *shapeRunner) check(t *testing.T, src string) {
	t.Helper()
	_ = os.Remove(b.log)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.bash, "--norc", "--noprofile", "-c", src)
	cmd.Dir = filepath.Join(b.dir, "work")
	cmd.Env = []string{"PATH=" + filepath.Join(b.dir, "bin"), "HOME=" + filepath.Join(b.dir, "work"), "LANG=C"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	_ = cmd.Run()
	a, _ := shell.Parse(src)
	var want [][]string
	for _, c := range a.Commands {
		want = append(want, append([]string{c.Name}, c.Args...))
	}
	data, _ := os.ReadFile(b.log)
	for _, rec := range strings.Split(strings.TrimSuffix(string(data), "\x1e"), "\x1e") {
		if rec == "" {
			continue
		}
		got := strings.Split(strings.TrimSuffix(rec, "\x1f"), "\x1f")
		if !slices.ContainsFunc(want, func(w []string) bool { return slices.Equal(w, got) }) {
			t.Fatalf("bash ran %q for %q, which the learned rule allows as %q", got, src, want)
		}
	}
}
