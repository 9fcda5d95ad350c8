package shell

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/internal/exectest"
)

// This file runs real bash against the analysis: a command string the
// analysis allows (it parses and needs no review) must not run a command
// the analysis did not list. The strings are built from a few harmless
// pieces around backquotes, here-documents and quotes, the places where a
// parser and bash are most likely to disagree; the only programs they can
// name are x1, x2 and x3, which a scratch directory provides and which
// only log their name.

// bashPieces are what generated command strings are made of. No piece
// writes a file, defines a function or starts a loop.
var bashPieces = []string{
	"x1", "x2", "x3", "x", "1", "echo", "true", "a", " ", " ", " ", "'", "'", `"`, `"`, "`", "`", `\`, "\\`", `\\`,
	";", "\n", "$(", ")", "<<E", "<<'E'", "<<-E", "\nE\n", "\nE", "E", "$x", "${x}", "#", "{ ", " }", "|", "&&",
	"'`'", `"` + "`" + `"`, "$'", `\'`, `\"`, "<<<", "$((1))",
	// Comments and line continuations: a comment that ends in a
	// backslash is where the parser and bash once disagreed.
	" #", "#\\\n", "\\\n", " # a \\", "\n#",
	// Here-documents whose delimiter has a quoted part and a suffix.
	"<<'E'#", "<<\"E\"#", "<<-'E'#", "<<$'E'#", "<<E''#", "<<''#", "<<'E'a", "<<E'#'",
	// Descriptors opened on the file f, and writes through /dev/fd.
	"3<f", " 3<f ", ">/dev/fd/3", " >/dev/stdout", "1<f ", "exec 3<f;", "exec ",
}

// bashInner are the pieces of a backquoted substitution's body in the
// strings genBash builds around one.
var bashInner = []string{
	"x2", "x2 ", " ", "'", `"`, "\\`", `\\`, `\`, "<<'E'\n", "<<E\n", "<<\"E\"\n", "\nE\n", "\nE", "#", ";", "\n",
	"$(", ")", "a", "'x3'", "`", "$'", "\\\\`", "\nx2\n", "\nx2", "<<'E'", "cat <<'E'\n", "echo '", "echo \"",
	"#\\\n", "<<'E'#", "<<E''#",
}

// genBash builds a command string from r: half of them pieces in any
// order, half a backquoted substitution with such pieces around and in
// it, which bash ends at its first unescaped backquote.
func genBash(r *rand.Rand) string {
	var b strings.Builder
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	switch r.IntN(4) {
	case 0:
		// A here-document: its operator, a delimiter with quoted parts,
		// what follows the word on its line, a body and an end line.
		b.WriteString(pick("x1 ", "echo ", "x1 a "))
		b.WriteString(pick("<<", "<<-", "<< "))
		b.WriteString(pick("E", "'E'", `"E"`, "$'E'", "E''", "''", `\E`, `E"#"`))
		b.WriteString(pick("", "#", "#;x3", ";x3", " x3", "a;x3", "#\\", " #;x3", "|x3"))
		b.WriteString("\n")
		for n := r.IntN(3); n > 0; n-- {
			b.WriteString(pick("x2\n", "`x2`\n", "$(x2)\n", "a\n", "E#\n", "E\\\n"))
		}
		b.WriteString(pick("E\n", "E#\n", "E", "\n", "Ea\n"))
		b.WriteString(pick("", "x3", "x2\n", "#\\\nx2"))
		return b.String()
	case 1:
		// Comments and continuations between commands.
		for n := 1 + r.IntN(4); n > 0; n-- {
			b.WriteString(pick("x1", "x2", "echo a", "x1 'a'", "x1 \"#\""))
			b.WriteString(pick(" #", " # a", "#", " #\\", " # a \\", "", ";", " \\"))
			b.WriteString(pick("\n", "\\\n", "; ", "\n#\n"))
		}
		return b.String()
	}
	if r.IntN(2) == 0 {
		b.WriteString([]string{"x1 ", "echo ", "x1 \"", "x1 '", "x=", "x1 <<E\n"}[r.IntN(6)])
		b.WriteString("`")
		for n := 1 + r.IntN(8); n > 0; n-- {
			b.WriteString(bashInner[r.IntN(len(bashInner))])
		}
		b.WriteString("`")
		for n := r.IntN(6); n > 0; n-- {
			b.WriteString([]string{" x3", "`", "'", `"`, ";", "\n", "\nE\n", " a", "#"}[r.IntN(9)])
		}
		return b.String()
	}
	b.WriteString([]string{"x1 ", "echo ", "x2 "}[r.IntN(3)])
	for n := 2 + r.IntN(14); n > 0; n-- {
		b.WriteString(bashPieces[r.IntN(len(bashPieces))])
	}
	return b.String()
}

// bashRunner runs command strings in a scratch directory whose only
// programs are x1, x2 and x3.
type bashRunner struct {
	bash, dir, log string
}

func newBashRunner(t testing.TB) *bashRunner {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "log")
	for _, name := range []string{"x1", "x2", "x3"} {
		script := "#!" + sh + "\necho " + name + " >> " + log + "\n"
		if err := exectest.WriteProgram(filepath.Join(bin, name), []byte(script)); err != nil {
			t.Fatal(err)
		}
	}
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	return &bashRunner{bash: bash, dir: dir, log: log}
}

// fileContent is what the scratch file f holds before each run: a string
// that rewrites it (through a descriptor opened on it and /dev/fd) must be
// one the analysis says writes.
const fileContent = "keep\n"

// fileChanged reports whether the last run changed the file f.
func (b *bashRunner) fileChanged() bool {
	data, err := os.ReadFile(filepath.Join(b.dir, "work", "f"))
	return err != nil || string(data) != fileContent
}

// run runs src with bash -c and returns the programs it ran, and whether
// bash -n accepts it.
func (b *bashRunner) run(t testing.TB, src string) (ran []string, parses bool) {
	t.Helper()
	_ = os.Remove(b.log)
	if err := os.WriteFile(filepath.Join(b.dir, "work", "f"), []byte(fileContent), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + filepath.Join(b.dir, "bin"), "HOME=" + filepath.Join(b.dir, "work"), "LANG=C"}
	parses = b.exec(t, env, "-n", src) == nil
	_ = b.exec(t, env, src)
	data, _ := os.ReadFile(b.log)
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if l != "" && !slices.Contains(ran, l) {
			ran = append(ran, l)
		}
	}
	return ran, parses
}

func (b *bashRunner) exec(t testing.TB, env []string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.bash, append([]string{"--norc", "--noprofile"}, append(args[:len(args)-1:len(args)-1], "-c", args[len(args)-1])...)...)
	cmd.Dir = filepath.Join(b.dir, "work")
	cmd.Env = env
	cmd.Stdin = nil
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Logf("bash -c %q timed out", args[len(args)-1])
	}
	return err
}

// missed returns the programs bash ran that an analysis which allows the
// string does not list.
func missed(a *Analysis, err error, ran []string) []string {
	if err != nil || a.NeedsReview() {
		return nil
	}
	var out []string
	for _, name := range ran {
		if !slices.Contains(a.Names(), name) {
			out = append(out, name)
		}
	}
	return out
}

// bashSeeds are strings where bash and a parser have disagreed, or could.
var bashSeeds = []string{
	"x1 `x2`",
	"echo `echo '`;x1;echo '`'",
	"echo \"`echo '`\"; x1 '`'",
	"x1 `x2 <<'E'\n`x3`\nE\n`",
	"x1 `cat <<'E'\n`\nx2\nE\n`",
	"echo `echo \"`x1`\"`",
	"echo `echo \\`x1\\``",
	"x1 <<E\n`x2`\nE",
	"x1 <<'E'\n`x2`\nE",
	"x1 <<E\n$(x2)\nE",
	"echo '`x1`'",
	"echo \"`x1`\"",
	"echo `# x1`",
	"echo `echo #`x1",
	"x1 $(echo ')' x2)",
	"x1 \"$(x2 \")\")\"",
	"echo $'\\'' x1 '",
	"x1 <<<`x2`",
	"echo `{ x1; }`",
	// Here-documents and substitutions inside each other. Bash runs no
	// program the analysis misses in any of them; bash -n rejects
	// "x1 <<E\n$(x2\nE\n)\nE", which the parser reads (listing more).
	"x1 $(cat <<E\n)\nE\n) x2",
	"x1 $(cat <<E\n)\nE\n)\nx2",
	"x1 \"$(cat <<'E'\n\"\nE\n)\" x2",
	"x1 <<E; x2\n$(x3)\nE",
	"x1 <<\\E\n$(x3)\nE",
	"x1 <<'E'\nE'\n$(x3)\nE",
	"x1 <<E\n`x3`\nE",
	"x1 <<\"E\"\n`x3`\nE",
	"x1 <<E\nE \n`x3`\nE",
	"x1 <<-E\n\t`x3`\n\tE",
	"x1 <<E x2\n`x3`\nE",
	"x1 $(x2 <<E\n`x3`\nE\n)",
	"x1 `x2 <<E\n\\`x3\\`\nE\n`",
	"x1 `x2 <<'E'\n\\`x3\\`\nE\n`",
	"x1 $(echo '$(' ) x2",
	"x1 $(# )\nx2)",
	"x1 `# `x2",
	"x1 ${x:-`x2`}",
	"x1 \"${x:-\"`x2`\"}\"",
	"x1 '${x:-`x2`}'",
	"x1 $'\\'' `x2` '",
	"x1 <<E\n$(x2\nE\n)\nE",
	"x1 <<E\n${x:-$(x2)}\nE",
	"x1 <<<$'a\\'' x2 '",
	"x1 <<E\naa\\\nE\n`x2`\nE",
}

// bashSafe reports whether src is made of the pieces' characters, with no
// redirection that writes and no parenthesis but $( and $((.
func bashSafe(src string) bool {
	if len(src) > 512 {
		return false
	}
	// The descriptor pieces are the only redirections that may write:
	// through /dev/fd or /dev/stdout, to the file f only.
	for _, tok := range []string{">/dev/fd/3", ">/dev/stdout", "3<f", "1<f", "exec"} {
		src = strings.ReplaceAll(src, tok, "")
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case strings.IndexByte("x123echotruaE \t:\n'\"`\\;$){}|&#<-", c) >= 0:
		case c == '(' && i > 0 && (src[i-1] == '$' || src[i-1] == '(' && i > 1 && src[i-2] == '$'):
		default:
			return false
		}
	}
	return true
}

// FuzzBashAgrees runs bash on command strings and fails when the analysis
// allows a string that runs a program it did not list. As a normal test
// it runs the seeds and a few hundred generated strings (a few seconds);
// go test -fuzz=FuzzBashAgrees explores further.
func FuzzBashAgrees(f *testing.F) {
	for _, s := range bashSeeds {
		f.Add(s)
	}
	for _, s := range bashDifferentials {
		f.Add(s)
	}
	r := rand.New(rand.NewPCG(12, 0))
	for range bashGenerated() {
		f.Add(genBash(r))
	}
	b := newBashRunner(f)
	// TOLLGATE_BASH_UNFIXED=1 switches off the checks of the known
	// differentials, to show that the generator finds them.
	if os.Getenv("TOLLGATE_BASH_UNFIXED") == "1" {
		differentialChecks = false
		f.Cleanup(func() { differentialChecks = true })
	}
	f.Fuzz(func(t *testing.T, src string) {
		if !bashSafe(src) {
			t.Skip() // only what the pieces can build: no writes, no functions
		}
		a, err := Parse(src)
		ran, parses := b.run(t, src)
		if m := missed(a, err, ran); len(m) > 0 {
			t.Errorf("bash -c %q runs %v, which the analysis does not list (it lists %q and asks nothing)", src, m, a.Names())
		}
		if err == nil && !a.NeedsReview() && !a.Writes() && b.fileChanged() {
			t.Errorf("bash -c %q rewrites the file f, and the analysis says it writes nothing and asks nothing", src)
		}
		if parses != (err == nil) && testing.Verbose() {
			t.Logf("bash -n and the parser disagree on %q: bash %v, parser %v", src, parses, err)
		}
	})
}

// bashGenerated is how many generated strings the fuzz test adds to its
// seeds: TOLLGATE_BASH_CASES, or 300.
func bashGenerated() int {
	if n, err := strconv.Atoi(os.Getenv("TOLLGATE_BASH_CASES")); err == nil && n >= 0 {
		return n
	}
	return 300
}

// bashDifferentials are the classes where mvdan.cc/sh and bash read a
// string differently, each of which runs x2 in bash while the parser, left
// to itself, sees no x2: a comment ending in a backslash (the parser takes
// the next line for more of the comment's command), and a here-document
// delimiter with a quoted part followed by # (the parser ends the word at
// the quote and reads a comment; bash's delimiter is E#, and ;x2 runs).
var bashDifferentials = []string{
	"x1 #\\\nx2",
	"x1 a # note \\\nx2 b",
	"x1 <<'E'#;x2\nE\n",
	"x1 <<\"E\"#;x2\nE\n",
	"x1 <<-'E'#;x2\nE\n",
	"x1 <<$'E'#;x2\nE\n",
	"x1 <<E''#;x2\nE\n",
	"x1 <<''#;x2\n\n",
}

// TestBashDifferentials runs each class in bash: bash runs x2, the
// parser without the checks lists no x2 and asks nothing, and with them
// the analysis asks.
func TestBashDifferentials(t *testing.T) {
	b := newBashRunner(t)
	for _, src := range bashDifferentials {
		ran, _ := b.run(t, src)
		if !slices.Contains(ran, "x2") {
			t.Errorf("bash -c %q runs %v, not x2", src, ran)
		}
		differentialChecks = false
		a, err := Parse(src)
		differentialChecks = true
		if err != nil || a.NeedsReview() || slices.Contains(a.Names(), "x2") {
			t.Errorf("without the checks, %q is not a differential: %v, names %q, reasons %q", src, err, a.Names(), a.Reasons())
		}
		if a, _ := Parse(src); !a.NeedsReview() {
			t.Errorf("%q runs x2 in bash, and the analysis asks nothing (it lists %q)", src, a.Names())
		}
	}
}
