package shell

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// names returns "name" for each command, "$" for a dynamic one and "()"
// for a statement of redirections only.
func names(a *Analysis) string {
	var out []string
	for _, c := range a.Commands {
		switch {
		case c.Dynamic:
			out = append(out, "$")
		case c.Name == "" && len(c.Redirects) > 0:
			out = append(out, "()")
		default:
			out = append(out, c.Name)
		}
	}
	return strings.Join(out, " ")
}

func TestCommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src    string
		names  string
		review bool
	}{
		// Lists, pipelines, groups.
		{"ls", "ls", false},
		{"ls; rm -rf ~", "ls rm", false},
		{"ls && rm x || echo no", "ls rm echo", false},
		{"ls | sh", "ls sh", true},
		{"ls |& cat", "ls cat", false},
		{"ls & rm x", "ls rm", false},
		{"ls\nrm x", "ls rm", false},
		{"(ls; rm x)", "ls rm", false},
		{"{ ls; rm x; }", "ls rm", false},
		{"! rm x", "rm", false},
		{"time rm x", "rm", false},
		{"coproc rm x", "rm", false},
		// Substitutions.
		{"ls $(rm x)", "rm ls", false},
		{"echo `rm x`", "rm echo", false},
		{`echo "$(rm x)"`, "rm echo", false},
		{"cat <(rm x) >(tee y)", "rm tee cat", false},
		{"x=$(rm y)", "rm", false},
		{"x=$(rm y) ls", "rm ls", false},
		{"echo ${x:-$(rm y)}", "rm echo", false},
		{"cat <<EOF\n$(rm x)\nEOF", "rm cat", false},
		{"cat <<'EOF'\n$(rm x)\nEOF", "cat", false},
		{"ls > $(rm x)", "rm ls", true}, // a computed target may be /dev/tcp/...
		// Compound commands.
		{"if ls; then rm x; elif cat; then :; else wc; fi", "ls rm cat : wc", false},
		{"while ls; do rm x; done", "ls rm", false},
		{"until ls; do rm x; done", "ls rm", false},
		{"for f in $(ls); do rm $f; done", "ls rm", false},
		{"case $(ls) in a) rm x;; *) cat;; esac", "ls rm cat", false},
		{"f() { rm x; }; f", "rm f", true},
		{"function f { rm x; }", "rm", true},
		{"[[ $(rm x) == y ]]", "rm", false},
		// Quoting does not change the name.
		{"r''m x", "rm", false},
		{`\rm x`, "rm", false},
		{`"rm" x`, "rm", false},
		{`r"m" x`, "rm", false},
		{`$'\x72m' x`, "rm", false},
		{`$'\162m' x`, "rm", false},
		{"/bin/rm x", "rm", false},
		{"/usr/bin/../bin/rm x", "rm", false},
		{"./rm x", "./rm", false},
		{`echo "a; rm x"`, "echo", false},
		{"echo 'a && rm x'", "echo", false},
		{"ls # ; rm x", "ls", false},
		// Names computed at run time.
		{"$x y", "$", true},
		{"${x} y", "$", true},
		{"$(echo rm) y", "echo $", true},
		{"`echo rm` y", "echo $", true},
		{"$0 -c 'rm x'", "$", true},
		{"r${x}m y", "$", true},
		{"cat${IFS}/etc/passwd", "$", true},
		{"/bin/r? x", "$", true},
		{"/bin/r[m] x", "$", true},
		{"{rm,-rf,/}", "rm", true},
		{"x=rm; $x y", "$", true},
		// Wrappers.
		{"sudo rm x", "sudo rm", false},
		{"sudo -u root -E rm x", "sudo rm", false},
		{"env rm x", "env rm", false},
		{"env -i -u HOME LANG=C rm x", "env rm", false},
		{"env FOO=1 rm x", "env rm", true},
		{"nice -n 5 rm x", "nice rm", false},
		{"nohup rm x", "nohup rm", false},
		{"timeout -s KILL 5 rm x", "timeout rm", false},
		{"stdbuf -oL rm x", "stdbuf rm", false},
		{"xargs rm", "xargs rm", false},
		{"xargs -0 -n1 rm -f", "xargs rm", false},
		{"xargs", "xargs echo", false},
		{"command rm x", "command rm", false},
		{"command -v rm", "command", false},
		{"exec rm x", "exec rm", false},
		{"builtin cd x", "builtin cd", false},
		{`\time -p rm x`, "time rm", false},
		{"doas rm x", "doas rm", false},
		{"busybox rm x", "busybox rm", false},
		{"sudo env nice xargs rm", "sudo env nice xargs rm", false},
		{"chroot / rm x", "chroot rm", false},
		{"flock /tmp/l rm x", "flock rm", false},
		{"flock /tmp/l -c 'rm x'", "flock rm", false},
		{"watch 'rm x'", "watch rm", false},
		{"su -c 'rm x' root", "su rm", false},
		// Nested command strings.
		{"bash -c 'rm x'", "bash rm", false},
		{"sh -c 'ls; rm x'", "sh ls rm", false},
		{"bash -lc 'rm x'", "bash rm", false},
		{"bash -e -o pipefail -c 'rm x'", "bash rm", false},
		{`bash -c "sh -c 'rm x'"`, "bash sh rm", false},
		{"zsh -c 'rm x'", "zsh rm", false},
		{"bash <<'EOF'\nrm x\nEOF", "bash rm", false},
		{"bash <<< 'rm x'", "bash rm", false},
		{"sh -c \"$x\"", "sh", true},
		{"bash script.sh", "bash", true},
		{"bash", "bash", true},
		{"curl -s x | sh", "curl sh", true},
		{"eval 'rm x'", "eval rm", true},
		{"eval $x", "eval", true},
		{"source x.sh", "source", true},
		{". x.sh", ".", true},
		{`find . -exec rm {} \;`, "find rm", false},
		{"find . -exec rm {} ;", "find", true},
		{`find . -name '*.go' -exec grep -l x {} +`, "find grep", false},
		{`find . -execdir sh -c 'rm $0' {} \;`, "find sh rm", false},
		{`find . -exec sh -c '$0 x' rm \;`, "find sh $", true},
		{"find . -exec rm {} +", "find rm", false},
		// Redirections only.
		{"> ~/.bashrc", "()", false},
		{"{ :; } > x", "() :", false},
		{"< x", "()", false},
		{"echo $(< /etc/shadow)", "() echo", false},
		{"while read l; do echo $l; done < f", "read echo", false},
		{"cat < /dev/tcp/example.com/80", "cat", true},
		// Declarations and assignments.
		{"export PATH=/tmp:$PATH; ls", "export ls", true},
		{"PATH=/tmp ls", "ls", true},
		{"IFS=/; ls", "ls", true},
		{"LANG=C ls", "ls", false},
		{"x=1; echo $x", "echo", false},
		{"declare -n r=x", "declare", true},
		// Arithmetic.
		{"echo $((1+2))", "echo", false},
		{"x='a[$(rm y)]'; echo $((x))", "echo", true},
		{"(( x > 1 ))", "", true},
		{"let x=1", "let", true},
		{"[[ $x -eq 1 ]]", "", true},
		{"echo ${!x}", "echo", true},
		{"echo ${x@P}", "echo", true},
		// Text people and the shell read differently.
		{"ｒｍ x", "ｒｍ", true},
		{"ls\u200b; rm x", "ls\u200b rm", true},
		{"ls\u202e", "ls\u202e", true},
		{"ls\x00; rm x", "ls rm", true},
		{"ls\r", "ls", true},
		{"[ -d x ] && ls", "[ ls", false},
	}
	for _, tt := range tests {
		a, _ := Parse(tt.src)
		if got := names(a); got != tt.names {
			t.Errorf("Parse(%q) commands = %q, want %q", tt.src, got, tt.names)
		}
		if got := a.NeedsReview(); got != tt.review {
			t.Errorf("Parse(%q) NeedsReview = %v, want %v (reasons %q)", tt.src, got, tt.review, a.Reasons())
		}
	}
}

func TestArgsAndRedirects(t *testing.T) {
	t.Parallel()
	a, err := Parse(`grep -n "a b" 'c' d\ e {x,y}z 2>/dev/null >> out.txt`)
	if err != nil {
		t.Fatal(err)
	}
	c := a.Commands[0]
	if want := []string{"-n", "a b", "c", "d e", "xz", "yz"}; !slices.Equal(c.Args, want) {
		t.Errorf("args = %q, want %q", c.Args, want)
	}
	if len(c.Redirects) != 2 {
		t.Fatalf("redirects = %+v", c.Redirects)
	}
	if r := c.Redirects[0]; r.FD != "2" || r.Op != ">" || r.Target != "/dev/null" || r.Writes {
		t.Errorf("redirect 0 = %+v, want 2>/dev/null that does not write", r)
	}
	if r := c.Redirects[1]; r.Op != ">>" || r.Target != "out.txt" || !r.Writes {
		t.Errorf("redirect 1 = %+v, want >>out.txt that writes", r)
	}
	if !c.Writes || !a.Writes() {
		t.Error("the command writes a file")
	}
	if c.DynamicArgs {
		t.Error("no argument is dynamic")
	}
}

func TestWrites(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src    string
		writes bool
	}{
		{"echo x > f", true},
		{"echo x >> f", true},
		{"echo x >| f", true},
		{"echo x &> f", true},
		{"echo x &>> f", true},
		{"echo x >& f", true},
		{"cat <> f", true},
		{"echo x > $f", true},
		{"echo x > /dev/null", false},
		{"echo x 2>&1", false},
		{"echo x >&2", false},
		{"echo x 1>&-", false},
		{"echo x > /dev/stderr", false},
		{"cat < f", false},
		{"{ echo x; } > f", true},
		{"while read l; do echo $l; done < f > g", true},
		{"exec 3> f", true},
		{"sort -o f x", true},
		{"sed -i s/a/b/ f", true},
		{"find . -fprint f", true},
		{"tee f", true},
		{"tee /dev/null", false},
		{"uniq a b", true},
		// Writing to /dev/fd/N, /dev/stdout or /dev/stderr opens again
		// the file that descriptor is open on, for writing.
		{"echo x 3<Makefile >/dev/fd/3", true},
		{"echo x >/dev/fd/3", false},
		{"echo x 3</dev/null >/dev/fd/3", false},
		{"echo x 3< <(ls) >/dev/fd/3", false},
		{"echo x 3</dev/urandom >/dev/fd/3", false},
		{"exec 3<Makefile; echo x >/dev/fd/3", true},
		{"command exec 3<f; echo x >/dev/fd/3", true},
		{"for i in 1 2; do echo x >/dev/fd/3; exec 3<f; done", true},
		{"exec {v}<f; echo x >/dev/fd/10", true},
		{"exec 4<f 3<&4; echo x >/dev/fd/3", true},
		{"exec 3<f; exec 3<&-; echo x >/dev/fd/3", true}, // in a loop it may still be open
		{"exec 3>&1; echo x >/dev/fd/3", false},
		{"{ exec 3>&1; } <f >/dev/null; echo x >/dev/fd/3", true},
		{"exec <f; echo x >/dev/fd/0", true},
		{"echo x 2<f >/dev/stderr", true},
		{"echo x 1<f >/dev/stdout", true},
		{"echo x 2>/dev/null >/dev/stderr", false},
		{"{ echo x >/dev/stdout; } <f 1<&0", true},
		{"{ echo x > /dev/fd/3; } 3<f", true},
		{"echo x 3<f >&3", false}, // a descriptor open for reading cannot be written
		{"echo x 3<f 1<&3 >/dev/stdout", true},
		{"echo x >/dev/stdin", true},
		{"echo x 3<f >/proc/self/fd/3", true},
		{"echo x >/proc/self/fd/1", true},
		{"bash -c 'echo x >/dev/fd/3' 3<f", true},
		{"echo x | tee /dev/fd/3 3<f", true},
		{"echo x | tee /dev/stdout", false},
		{"uniq a /dev/stdout", false},
		{"uniq a /dev/fd/4 4<f", true},
	}
	for _, tt := range tests {
		a, _ := Parse(tt.src)
		if got := a.Writes(); got != tt.writes {
			t.Errorf("Parse(%q).Writes() = %v, want %v", tt.src, got, tt.writes)
		}
	}
}

// TestDifferentials checks where mvdan.cc/sh and bash read a string
// differently (bash_test.go runs them): a comment ending in a backslash,
// and a here-document delimiter followed by anything but a blank, a
// newline or an operator. Their harmless neighbours need no review.
func TestDifferentials(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"echo hi #\\\ntouch PWNED", "echo hi # a note \\\ntouch x", "ls #\\\\\nx", "echo $(ls #\\\n) x",
		"bash -c 'echo #\\\ntouch x'", "if true; then ls #\\\nfi; x; fi", "case a in a) ls #\\\n;; esac; x",
		"cat <<'E'#;touch PWNED\nE\n", "cat <<\"E\"#;x\nE", "cat <<-'E'#;x\nE", "cat <<$'E'#;x\nE", "cat <<E''#;x\nE",
		"cat <<''#;x\n\n", "cat <<'E'\\#;x\nE", "sh -c \"cat <<'E'#;x\nE\n\"", "echo $(cat <<'E'#;x\nE\n)",
	} {
		if a, _ := Parse(src); !a.NeedsReview() {
			t.Errorf("Parse(%q) needs no review; it lists %q", src, a.Names())
		}
	}
	for _, src := range []string{
		"ls # a comment", "ls #\nls", "echo a#b", "echo 'a'#b", "ls # a \\ b", "cat <<'E'\nx\nE", "cat <<E;ls\nE",
		"cat <<'E' | wc -l\nx\nE", "x=$(cat <<E\nx\nE\n)", "cat <<E&\nx\nE", "cat <<E>&2\nx\nE", "cat <<E\t\nx\nE",
	} {
		if a, err := Parse(src); err != nil || a.NeedsReview() {
			t.Errorf("Parse(%q) needs review: %q (err %v)", src, a.Reasons(), err)
		}
	}
}

// TestRiskyOptions checks options of commonly allowed commands that run
// programs or write files.
func TestRiskyOptions(t *testing.T) {
	t.Parallel()
	risky := []string{
		"find . -delete", "find . -fprint /tmp/x", "find . -fprintf /tmp/x %p", "find . -fls x", "find $DIR",
		"find . -name *.go",
		"git -c core.pager=sh log", "git -ccore.pager=sh log", "git --config-env=core.pager=X log",
		"git --exec-path=/tmp log", "git -C /tmp/x log", "git --git-dir=/tmp/x log", "git --work-tree=/ status",
		"git --no-pager -c alias.x='!rm y' x", "git diff --output=/tmp/x", "git log --out=/tmp/x",
		"git grep -O foo", "git grep --open-files-in-pager=sh foo", "git grep -iOsh foo", "git grep --open foo",
		"git clone --upload-pack='rm x' u", "git clone -u 'rm x' u", "git ls-remote --upload-pack=x u",
		"git push --receive-pack=x", "git archive --remote=x --exec=y", "git rebase -x 'rm y'",
		"git rebase --exec 'rm y'", "git difftool -x rm", "git submodule foreach rm x", "git bisect run rm x",
		"git filter-branch --tree-filter 'rm x'", "git clone --template=/tmp/t u", "git clone -c core.fsmonitor=x u",
		"git format-patch -o /tmp x", "git log $RANGE",
		"sed -i s/a/b/ f", "sed -ni s/a/b/p f", "sed --in-place s/a/b/ f", "sed --in s/a/b/ f", "sed -i.bak s/a/b/ f",
		"sed -E -i s/a/b/ f", "sed 's/a/b/e' f", "sed '1e rm x' f", "sed -n '1,$e id' f", "sed 'w /tmp/x' f",
		"sed -n '/x/w out' f", "sed 's/a/b/w out' f", "sed -e p -e 'e id' f", "sed -f script.sed f",
		"sed '$!{e id\n}' f", "sed 'W out' f", "sed \"s/$x/y/\" f",
		`awk 'BEGIN{system("rm x")}'`, `awk '{print | "sh"}'`, `awk '{"date" | getline d}'`, `awk '{print > "/tmp/x"}'`,
		`awk '{printf "%s", $0 >> "x"}'`, `awk -f prog.awk`, `awk '@load "x"'`, `gawk -l filefuncs 1`,
		`awk '/"/ {system("rm x")} /"/'`, "mawk -W exec prog", `awk -e 'BEGIN{system("id")}'`,
		"sort -o /tmp/x f", "sort --output=/tmp/x f", "sort -uo /tmp/x f", "sort --o=/tmp/x f",
		"sort --compress-program=sh f", "sort --compress=sh f", "sort -T /tmp f",
		"tar --to-command='sh -c x' -xf a.tar", "tar --checkpoint=1 --checkpoint-action=exec=sh -cf a.tar x",
		"tar -I 'sh -c x' -xf a.tar", "tar xf a.tar", "tar -xf a.tar", "tar czf a.tgz .", "tar -F x -cf a.tar .",
		"tar -cf a.tar *",
		"less '+!rm x' f", "less -k keys f", "more +/x f", "less -o /tmp/x f", "less --log-file=/tmp/x f",
		"man -P 'rm x' ls", "man --pager=sh ls", "man -H ls",
		"rg --pre sh x", "rg --pre=sh x", "rg --hostname-bin=sh x",
		"date -s 2020-01-01", "date --set=x",
		"tree -o /tmp/x", "tree -R -H .", "uniq in out", "xxd in out", "file -C -m x", "yq -i .a=1 f.yaml",
		"printf -v 'a[$(rm x)]' %s y", "read 'a[$(rm x)]'", "unset 'a[$(rm x)]'", "test -v 'a[$(rm x)]'",
		"mapfile -C 'rm x' a", "trap 'rm x' EXIT", "alias ls='rm x'", "hash -p /tmp/rm ls", "enable -f x.so y",
		"complete -C 'rm x' ls", "bind -x '\"a\": rm x'", "fc -s", "sudo -e /etc/x", "sudoedit /etc/x",
		"sudo -s", "sudo -i", "env -S 'rm x'", "env --split-string='rm x'", "xargs -I{} sh -c 'rm {}'",
		"ls | xargs git log", "ls | xargs sed s/a/b/", `\time -o /tmp/x ls`, "/usr/bin/time --output=x ls", "busybox --install /tmp",
		// awk: strings, /inet, getline, ARGV, -W and long options, --sandbox
		// outside gawk.
		`awk 'BEGIN{print "}" > "/tmp/x"}'`, `awk 'BEGIN{print ";" > "/tmp/x"}'`, `awk 'BEGIN{print "{" > "/tmp/x"}'`,
		`awk 'BEGIN{print "\"}\"" > "/tmp/x"}'`, `awk 'BEGIN{getline l < "/inet/tcp/0/h/80"}'`,
		`awk 'BEGIN{f = "/etc/passwd"; while ((getline l < f) > 0) print l}'`, `awk 'BEGIN{ARGV[1] = "x"}'`,
		`awk -W source='BEGIN{system("id")}'`, `awk -Wsource='BEGIN{system("id")}'`, `awk -W source 'BEGIN{system("id")}'`,
		`awk -Wso='BEGIN{system("id")}'`, "awk -W include=x", "awk -W load=x", "awk -W exec x", "awk -W e x",
		"awk -W dump-variables=F 1", "awk -W dump 1", "awk -W profile=F 1", "awk -W pretty-print 1", "awk -W debug 1",
		"awk -W unknown 1", "awk -W", "awk -W $x 1", `awk --source='BEGIN{system("id")}'`, "awk --include=x", "awk --load=x",
		"awk --exec=x", "awk --dump-variables=F 1", "awk --profile=F 1", "awk --pretty-print=F 1", "awk --nosuch 1",
		`awk --sandbox 'BEGIN{system("id")}'`, `awk -S 'BEGIN{system("id")}'`, `mawk -W sandbox 'BEGIN{system("id")}'`,
		`gawk --sand 'BEGIN{system("id")}'`,
		// sed labels end at white space and ;.
		"sed -n ':a e id' f", "sed 't x e id\n:x' f", "sed 'v 4.2 e id' f", "sed -n ':a w /tmp/x' f", "sed ':a\te id' f",
		"sed 'b x;e id' f", "sed 'bx\fe id' f",
		// Computed redirection targets that may be /dev/tcp.
		"cat < /dev/${x:-tcp}/h/80", "x=tcp; cat < /dev/$x/h/80", "cat 3< /dev/$x", "cat <> $f", "echo >& $f",
		"cat <& $fd", "cat < \"$dir/x\"", "cat < {/dev/tcp/h/80,}", "cat < /dev/t?p/h/80", "cat < ~/$x", "cat < /de\v/$x",
		// Variables that change what runs, set by builtins.
		"read PATH", "read -r x PATH", "read -a PATH", "read -d '' PATH", "read $x", "mapfile PATH", "readarray -t PATH",
		"printf -v PATH x", "echo x | xargs --process-slot-var=PATH ls", "xargs --process-slot-var=$v ls",
		"declare PATH", "local PATH", "typeset -x LD_PRELOAD", "readonly IFS", ": ${PATH:=x}", "echo ${HOME=x}",
		"unset PATH", "unset -v IFS", "getopts a PATH", "wait -n -p PATH", "coproc PATH { ls; }",
		// git branch writes; --bare.
		"git branch -D x", "git branch -d x", "git branch -m a b", "git branch -c a b", "git branch x",
		"git branch --set-upstream-to=x", "git branch -uX", "git branch -u X", "git branch --unset-upstream",
		"git branch --edit-description", "git branch -f x HEAD", "git branch --track x", "git --bare log",
		"git branch -v x", "git branch -q x", "git branch --no-track x", "git branch --create-reflog x",
	}
	for _, src := range risky {
		a, _ := Parse(src)
		if !a.NeedsReview() {
			t.Errorf("Parse(%q) needs no review; commands %+v", src, a.Commands)
		}
	}
	safe := []string{
		"find . -name '*.go' -type f", "find . -maxdepth 2 -newer x -print", "find . -exec grep -l x {} +",
		"git status", "git log --oneline -n 5", "git --no-pager diff HEAD~1", "git diff --stat", "git grep -n foo",
		"git grep -e TODO -e FIXME", "git show HEAD:go.mod", "git log -p -- '*.go'",
		"sed -n '1,20p' f", "sed 's/a/b/g' f", "sed -e 's/x/y/' -e '/z/d' f", "sed -n '/start/,/end/p' f",
		`sed 's/\/usr/\/opt/g' f`, "sed 's|a|b|g' f", "sed '1i hello' f", "sed -E 's/(a)+/\\1/' f",
		"sed --sandbox 's/a/b/e' f", "sed 'y/abc/xyz/' f", "sed '$d' f", "sed '2q' f", "sed -n '$=' f",
		`awk '{print $1}' f`, `awk -F: '$3 > 1000 {print $1}' /etc/passwd`, `awk 'NR==1 || NR==2'`,
		`awk '{ s += $1 } END { print s }' f`, `awk -v x=1 '{print x}'`, `gawk --sandbox 'BEGIN{system("x")}'`,
		`gawk -S 'BEGIN{print "x" > "f"}'`, `gawk -W sandbox 'BEGIN{system("id")}'`, `awk -W version`, `awk -W interactive '{print}'`, `awk --posix '{print}'`,
		`awk 'BEGIN { print "a;b" }'`, `awk '{ print "}" }'`, `awk '$1 > 3 { print }'`, `awk -F'|' '{print $2}' f`,
		`sed -n '/start/,/end/{p;b end' -e ':end' -e '}' f`, "sed ':a;N;$!ba;s/\\n/ /g' f", "sed -n 'b end\n:end' f",
		"sed -e :a -e '$!N;s/\\n//;ta' f", "sed 'v 4.2' f",
		"read -r line", "read -a arr", "mapfile -t lines < f", "printf '%s' -v", "declare -a xs", "unset x",
		": ${x:=1}", "echo x | xargs --process-slot-var=slot -P2 echo",
		"git branch -a", "git branch -vv --list 'feat*'", "git branch --contains HEAD", "git branch --show-current",
		"cat < out/$name.txt", "echo x > /dev/stderr", "while read l; do echo $l; done < <(ls)", "IFS=: read -r a b", "cat <<< $x",
		"sort -u f", "sort -k 2 -t , f", "sort -n -r f", "tar -tf a.tar", "tar tzf a.tgz",
		"less f", "more f", "man ls", "rg -n foo", "rg --pretty foo", "rg --pre-glob '*.gz' foo",
		"date +%s", "date -d yesterday", "tree -L 2", "uniq -c f", "xxd f", "file f", "yq .a f.yaml", "time -p ls",
		"printf '%s\\n' a", "test -f x", "[ -d x ]", "xargs grep foo", "xargs -0 cat", "ls | xargs -I{} echo {}",
		"echo $HOME", "cat ~/notes.txt", "ls -la /tmp", "wc -l *.go", "grep -r foo .",
		"cat x | grep y | sort | uniq -c | sort -rn | head",
	}
	for _, src := range safe {
		a, err := Parse(src)
		if err != nil || a.NeedsReview() {
			t.Errorf("Parse(%q) needs review: %q (err %v)", src, a.Reasons(), err)
		}
	}
}

// TestFiles checks the files commands name, and which of them may lie
// outside the working directory or hold secrets.
func TestFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src              string
		files            string // Files of the last command, joined by spaces
		outside, secrets bool   // any command's
	}{
		{"cat a b", "a b", false, false},
		{"cat /etc/passwd", "/etc/passwd", true, false},
		{"cat ~/x", "~/x", true, false},
		{"cat ../x", "../x", true, false},
		{"cat a/../../x", "a/../../x", true, false},
		{"cat a/../b", "a/../b", false, false},
		{"cat .*/x", ".*/x", true, true},
		{"cat $f", "$f", true, false},
		{`cat "$(echo x)"`, `"$(echo x)"`, true, false},
		{"cat <(ls)", "<(ls)", false, false},
		{"cat < /etc/passwd", "", true, false},
		{"cat < x 2>/dev/null > /dev/stdout", "", false, false},
		{"head -n 20 go.mod", "go.mod", false, false},
		{"head -c 16 /dev/urandom", "/dev/urandom", false, false},
		{"grep -rn TODO .", ".", false, false},
		{"grep -e /x/ -f pats f", "pats f", false, false},
		{"grep --regexp=/x/ f", "f", false, false},
		{"grep --file=/etc/x f", "/etc/x f", true, false},
		{"grep -r x --include='*.pem' .", ".", false, true},
		{"rg -n /api/ src", "src", false, false},
		{"rg --files /etc", "/etc", true, false},
		{"ls -la /tmp", "/tmp", true, false},
		{"ls .ssh", ".ssh", false, false}, // names only
		{"cut -d/ -f2 f", "f", false, false},
		{"sort -t/ -k2 f", "f", false, false},
		{"tr / _", "", false, false},
		{"echo /etc/shadow $HOME", "", false, false},
		{"cd", "", true, false},
		{"cd -", "", true, false},
		{"cd src", "src", false, false},
		{"cd ..", "..", true, false},
		{"cd .ssh", ".ssh", false, true},
		{"test -f /etc/x", "/etc/x", true, false},
		{"[ -n /etc/x ]", "", false, false},
		{"jq .name package.json", "package.json", false, false},
		{"jq -r .env c.json", "c.json", false, false},
		{"jq -n env", "", false, true},
		{"jq -n '$ENV.X'", "", false, true},
		{"jq -f prog.jq data.json", "prog.jq data.json", false, true},
		{"jq --rawfile k /etc/x -n 1", "/etc/x", true, false},
		{"jq -n --args '$ARGS' /etc/x", "", false, false},
		{"jq -n 'import \"x\" as $x; $x'", "", true, false},
		{"sed -n 1p f", "f", false, false},
		{"sed -n '1r /etc/x\np' f", "f /etc/x", true, false},
		{"sed -e p -e 'R .env' f", "f .env", false, true},
		{"awk '{print}' f x=1", "f", false, false},
		{"awk 'BEGIN{print ENVIRON[\"HOME\"]}'", "", false, true},
		{"awk -f prog.awk /etc/x", "prog.awk /etc/x", true, false},
		{"find . -name '*.go'", ".", false, false},
		{"find / -name x", "/", true, false},
		{"find . -name 'id_*' -exec cat {} +", "{}", false, true},
		{"find . -newer /etc/x", ". /etc/x", true, false},
		{"git show HEAD:go.mod", "HEAD:go.mod", false, false},
		// Objects named by id may be committed secrets; listings read from
		// files and magic files are content reads.
		{"git cat-file -p 3f2a9c1", "3f2a9c1", false, true},
		{"git cat-file blob 3f2a9c1e", "blob 3f2a9c1e", false, true},
		{"git cat-file -p 3f2a9c1^{}", "3f2a9c1^{}", false, true},
		{"git cat-file -t 3f2a9c1", "3f2a9c1", false, false},
		{"git cat-file -p HEAD", "HEAD", false, false},
		{"git show 3f2a9c1", "3f2a9c1", false, true},
		{"git show --stat 3f2a9c1", "3f2a9c1", false, true},
		{"git show 3f2a9c1~1", "3f2a9c1~1", false, false},
		{"git show HEAD~2", "HEAD~2", false, false},
		{"tree --fromfile .env", ".env", false, true},
		{"tree --hintro=.env .", ".env .", false, true},
		{"tree --houtro .env -H x .", ".env .", false, true},
		{"tree --infofile=id_rsa", "id_rsa", false, true},
		{"tree -L 2 .env", ".env", false, false},
		{"file -m .env x", ".env x", false, true},
		{"file --magic-file=server.key x", "server.key x", false, true},
		{"file .env", ".env", false, false},
		{"file -f .env", ".env", true, true},
		{"du --files0-from=.env", ".env", true, true},
		{"git show HEAD:.env", "HEAD:.env", false, true},
		{"git show :0:.env", ":0:.env", false, true},
		{"git log -p -- src", "src", false, false},
		{"git grep -n /api/", "", false, false},
		{"git diff --no-index /a /b", "/a /b", true, false},
		{"git blame --contents=/etc/x f", "/etc/x f", true, false},
		{"git diff -O/etc/x", "/etc/x", true, false},
		{"git branch --list 'feat*'", "", false, false},
		{"xargs cat", "", true, false},
		{"xargs echo", "", false, false},
		{"find . -print0 | xargs -0 cat", "", false, false},
		{"find . -type f | xargs grep -l x", "", false, false},
		{"find . | xargs -I{} cat {}", "{}", false, false},
		{"find . | xargs -I{} cat /{}", "/{}", true, false},
		{"find . -printf '%p' | xargs cat", "", true, false},
		{"find / | xargs cat", "", true, false},
		{"find . 2>&1 | xargs cat", "", true, false},
		{"find . | xargs -a list cat", "", true, false},
		{"ls | xargs cat", "", true, false},
		{"timeout 5 cat /etc/x", "/etc/x", true, false},
		{"env -C /etc cat shadow", "shadow", true, true},
		{"sha256sum -c sums", "sums", true, false},
		{"cat .ENV", ".ENV", false, true},
		{"cat Server.Key", "Server.Key", false, true},
		{"cat prod.env .envrc", "prod.env .envrc", false, true},
		{"cat deploy_rsa", "deploy_rsa", false, true},
		{"cat id_rsa.pub", "id_rsa.pub", false, false},
		{"cat *.go", "*.go", false, false},
		{"cat *", "*", false, true},
		{"cat *.p?m", "*.p?m", false, true},
		{"cat .e*", ".e*", false, true},
		{"cat i[d]_rsa", "i[d]_rsa", false, true},
		{"cat src/*.go docs/*.md", "src/*.go docs/*.md", false, false},
		{"cat .s?h/config", ".s?h/config", false, true},
		{"cat */config", "*/config", false, false},
		{"cat '*.pem'", "*.pem", false, true},
		{"echo $OPENAI_API_KEY", "", false, true},
		{"echo $HOME $USER $PWD $1 $? $f $lower_key", "", false, true},
		{"echo $HOME $USER $PWD $1 $? $f", "", false, false},
		{"echo $JAVA_HOME", "", false, true},
		{"x=$GH_TOKEN", "", false, true},
		{"for x in $SECRET; do :; done", "", false, true},
		{"cat <<EOF\n$API_KEY\nEOF", "", false, true},
		{"cat <<'EOF'\n$API_KEY\nEOF", "", false, false},
		{"cat .env.example", ".env.example", false, false},
		{"find . -name '*.pem'", ".", false, false},
		{"find . -name '*.pem' -exec cat {} +", "{}", false, true},
		{"find . -name '*.py' -not -path './venv/*' -exec wc -l {} +", "{}", false, false},
		{"find . -name '*.pem' | xargs cat", "", true, false},
		{"find . ! -name '*.pem' | xargs cat", "", false, false},
		// for loops over files inside.
		{`for f in *.go; do wc -l "$f"; done`, `"$f"`, false, false},
		{"for f in a b/c; do cat $f ${f}; done", "$f ${f}", false, false},
		{`for f in *.go; do cat "src/$f.txt"; done`, `"src/$f.txt"`, false, false},
		{`for f in *.go; do cat "/$f"; done`, `"/$f"`, true, false},
		{`for f in *.go; do cat "$f/../.."; done`, `"$f/../.."`, true, false},
		{`for f in a b; do cat "$f$f"; done`, `"$f$f"`, true, false},
		{`for f in *.go; do cat "$f.pem"; done`, `"$f.pem"`, true, false}, // may be a secret: not known to be harmless
		{`for f in /etc/*; do cat "$f"; done`, `"$f"`, true, false},
		{`for f in *.pem; do cat "$f"; done`, `"$f"`, true, false},
		{`for f in $(ls); do cat "$f"; done`, `"$f"`, true, false},
		{`for f in a; do read f; cat "$f"; done`, `"$f"`, true, false},
		{`for f in a; do f=/etc/x; cat "$f"; done`, `"$f"`, true, false},
		{`for f in a; do printf -vf /etc/x; cat "$f"; done`, `"$f"`, true, false},
		{`for f in a; do read 'f'; cat "$f"; done`, `"$f"`, true, false},
		{`for f in a; do : ${f:=/x}; cat "$f"; done`, `"$f"`, true, false},
		{`for f in a; do (( f++ )); cat "$f"; done`, `"$f"`, true, false},
		{`for f in a; do for f in /x; do :; done; cat "$f"; done`, `"$f"`, true, false},
		{`for f in a; do cat "${f%.go}"; done`, `"${f%.go}"`, true, false},
		{`for f in a; do :; done; cat "$f"`, `"$f"`, true, false},
		{`for f in *.go; do cat "$g"; done`, `"$g"`, true, false},
		{"IFS= read -r line < f", "", false, false},
		{"sort --files0-from=- ", "-", true, false},
		{"wc -l --files0-from=list", "list", true, false},
		{"file -f names", "names", true, false},
		{"grep --file=pats f", "pats f", false, false},
		{"jq . /etc/x --args a", "/etc/x", true, false},
		{"jq --args . a /etc/x", "", false, false},
		{"find . | xargs -I{} cat {}/../x", "{}/../x", true, false},
		{"find . | xargs -I{} cat {}.pem", "{}.pem", true, false},
		{"find . | xargs -I{} cat src/{}", "src/{}", true, false}, // may name a secret: * could be .env
		{"cat .git/config", ".git/config", false, true},
		{"cat sub/.git/config", "sub/.git/config", false, true},
		{"cat config", "config", false, false},
		{`for f in a; do let "f=1"; cat "$f"; done`, `"$f"`, true, false},
		{"find . | xargs -d . cat", "", true, false},
		{"find . | xargs -d '\\n' cat", "", false, false},
		{"find --help | xargs cat", "", true, false},
		{"find -D help | xargs cat", "", true, false},
		{"while read l; do cat; done < <(ls)", "", false, false},
	}
	for _, tt := range tests {
		a, _ := Parse(tt.src)
		if len(a.Commands) == 0 {
			t.Errorf("Parse(%q): no commands", tt.src)
			continue
		}
		last := a.Commands[len(a.Commands)-1]
		if got := strings.Join(last.Files, " "); got != tt.files {
			t.Errorf("Parse(%q) files = %q, want %q", tt.src, got, tt.files)
		}
		outside, secrets := false, false
		for _, c := range a.Commands {
			outside = outside || len(c.Outside) > 0
			secrets = secrets || len(c.Secrets) > 0
		}
		if outside != tt.outside {
			t.Errorf("Parse(%q) outside = %v, want %v (%+v)", tt.src, outside, tt.outside, a.Commands)
		}
		if secrets != tt.secrets {
			t.Errorf("Parse(%q) secrets = %v, want %v (%+v)", tt.src, secrets, tt.secrets, a.Commands)
		}
	}
}

func TestGlobsMeet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		g, pat string
		want   bool
	}{
		{"*.go", "*.pem", false},
		{"*.go", ".env*", false}, // the shell's * does not match a leading dot
		{"*.go", "*_rsa", false},
		{"*", "*_rsa", true},
		{"*", ".env*", false},
		{"?env", ".env*", false},
		{".e?v", ".env*", true},
		{".*", ".env*", true},
		{"*.p?m", "*.pem", true},
		{"i?_rsa", "*_rsa", true},
		{"id_*", "*_rsa", true},
		{"notes*", "*.pem", true},
		{"*.md", "credentials", false},
		{"cred*", "credentials", true},
		{"*s", "credentials", true},
		{"?", "shadow", false},
		{"??????", "shadow", true},
		{"*", "shadow-", true},
		{"[a-z]*", "*.key", true},
		{"*", ".ssh", false},
		{".s*", ".ssh", true},
		{"**", "*_history", true},
		{"*.", "*.", true},
		{"?", "*", true},
		{"", "*", true},
		{"*", "", true},
		{"*", ".", false},
	}
	for _, tt := range tests {
		if got := globsMeet(tt.g, tt.pat); got != tt.want {
			t.Errorf("globsMeet(%q, %q) = %v, want %v", tt.g, tt.pat, got, tt.want)
		}
	}
}

// TestWrapperChains checks that chains of wrappers, which repeat the
// words after them in every command, cost bounded work: they are asked,
// and the collected commands and arguments stay within the limits.
func TestWrapperChains(t *testing.T) {
	t.Parallel()
	for name, src := range wrapperChains() {
		a, _ := Parse(src)
		if !a.NeedsReview() {
			t.Errorf("%s: needs no review", name)
		}
		args := 0
		for _, c := range a.Commands {
			args += len(c.Args)
			if len(c.Via) > maxWrappers {
				t.Errorf("%s: a command under %d wrappers", name, len(c.Via))
			}
		}
		if args > maxBytes/16 || len(a.Commands) > maxCommands {
			t.Errorf("%s: %d commands with %d arguments in all", name, len(a.Commands), args)
		}
	}
}

// wrapperChains are hostile strings for the limits on wrappers and words.
func wrapperChains() map[string]string {
	return map[string]string{
		"xargs":       strings.Repeat("xargs ", 10000) + "ls",
		"env braces":  strings.TrimSpace(strings.Repeat("env{"+strings.Repeat(",", 255)+"} ", 250)) + " ls",
		"timeout":     strings.Repeat("timeout 1 ", 6000) + "ls",
		"sudo":        strings.Repeat("sudo ", 12000) + "ls",
		"find -exec":  strings.Repeat("find . -exec ", 3000) + "ls" + strings.Repeat(" ;", 3000),
		"braces 1..n": "ls " + strings.Repeat("{1..256} ", 6000),
		"short":       strings.Repeat("nice ", maxWrappers+1) + "ls",
	}
}

func BenchmarkWrapperChains(b *testing.B) {
	for name, src := range wrapperChains() {
		b.Run(strings.ReplaceAll(name, " ", "-"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = Parse(src)
			}
		})
	}
}

func TestParseError(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"ls; (", "echo 'x", "if; then", "ls |", "bash -c 'echo \"x'", "ls && && rm"} {
		a, err := Parse(src)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) error = %v, want a *ParseError", src, err)
		}
		if a == nil || !a.NeedsReview() || a.Err == nil {
			t.Errorf("Parse(%q) = %+v: an unparsable string must need review", src, a)
		}
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	deep := "rm x"
	for range DefaultMaxDepth + 2 {
		deep = "sh -c " + quoteWord(deep)
	}
	a, _ := Parse(deep)
	if !a.NeedsReview() {
		t.Error("nesting deeper than the limit needs review")
	}
	a, _ = Parse(strings.Repeat("ls;", maxCommands+10))
	if !a.NeedsReview() || len(a.Commands) > maxCommands {
		t.Errorf("%d commands, review %v: want the limit and a review", len(a.Commands), a.Reasons())
	}
	a, _ = Parse(strings.Repeat("x", MaxInput+1))
	if !a.NeedsReview() {
		t.Error("input over MaxInput needs review")
	}
	a, _ = Parse("echo {1..100000}")
	if !a.NeedsReview() {
		t.Error("a huge brace expansion needs review")
	}
}

func TestDialect(t *testing.T) {
	t.Parallel()
	p := Parser{Dialect: POSIX}
	if _, err := p.Parse("[[ x ]] && ls"); err != nil {
		t.Logf("posix: %v", err)
	}
	if _, err := (&Parser{Dialect: "fish"}).Parse("ls"); err == nil {
		t.Error("an unknown dialect is an error")
	}
	a, err := (&Parser{Dialect: Zsh}).Parse("ls; rm x")
	if err != nil || names(a) != "ls rm" {
		t.Errorf("zsh: %q %v", names(a), err)
	}
}

func TestCommandString(t *testing.T) {
	t.Parallel()
	a, _ := Parse(`grep -n 'a b' f 2>/dev/null`)
	if got, want := a.Commands[0].String(), `grep -n 'a b' f 2>/dev/null`; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// TestUnknownFiles checks which commands name files only known at run
// time (Command.Unknown: any file, a secret one inside the working
// directory too) apart from those that only lie outside it, which the
// kernel's read-only view confines (issue 21's build 5): names a find or
// git ls-files printed from inside are known to be inside; a pattern of
// every file with an extension chooses no secret file more than a
// recursive read does; git commands that print the remotes' URLs read a
// secret; tollgate's own state is a secret.
func TestUnknownFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src                              string
		unknown, outside, secrets, write bool // any command's
	}{
		{"cat /etc/os-release", false, true, false, false},
		{"ls -la ..", false, true, false, false},
		{"cat $f", true, true, false, false},
		{`cat "$(echo .env)"`, true, true, false, false},
		{"ls $d", false, true, false, false}, // names only
		{"cat /etc/os-release $(echo .env)", true, true, false, false},
		{"cat < $f", true, true, false, false},
		{"ls | xargs cat", true, true, false, false},
		{"sha256sum -c sums.txt", true, true, false, false},
		{"wc -l --files0-from=list", true, true, false, false},
		{`jq -n 'import "x" as $x; $x'`, true, true, false, false},
		{"find . -name '*.go' | xargs cat", false, false, false, false},
		{"git ls-files | xargs wc -l", false, false, false, false},
		{"git --no-pager ls-files -z | xargs -0 cat", false, false, false, false},
		{"wc -l $(git ls-files '*.go')", false, false, false, false},
		{`wc -l "$(find . -name '*.md')"`, false, false, false, false},
		{"wc -l $(git ls-files '*.pem')", true, true, true, false},
		{"git ls-files ':/' | xargs cat", true, true, false, false},
		{"git ls-files -s | xargs cat", true, true, false, false},
		{"git -C .. ls-files | xargs cat", true, true, false, false},
		{"git ls-files -o -i --exclude-standard | xargs cat", true, true, false, false},
		{"git ls-files ../x | xargs cat", true, true, false, false},
		{"cat *.yaml", false, false, false, false},
		{"grep -rn key --include='*.yaml' .", false, false, false, false},
		{"cat *.pem", false, false, true, false},
		{"cat *.env", false, false, true, false},
		{"grep -rn key --include='*.key' .", false, false, true, false},
		{"find . -name '*.env' -exec cat {} +", false, false, true, false},
		{"cat ~/.local/state/tollgate/tollgate.db", false, true, true, false},
		{"cat ~/.config/tollgate/gateway.token", false, true, true, false},
		{"grep -a x tollgate.db-wal", false, false, true, false},
		{"cat tokens.yaml", false, false, true, false},
		{"cat ~/.config/gh/hosts.yml", false, true, true, false},
		{"cat /etc/ssh/ssh_host_ed25519_key", false, true, true, false},
		{"cat secrets/db.yml", false, false, true, false},
		{"git remote", false, false, false, false},
		{"git remote -v", false, false, true, false},
		{"git remote --verbose", false, false, true, false},
		{"git remote get-url --push origin", false, false, true, false},
		{"git remote show origin", false, false, true, false},
		{"git remote add up https://example.com/x.git", false, false, false, true},
		{"git remote set-url origin x", false, false, false, true},
		{"git config --get user.email", false, false, false, false},
		{"git config user.name", false, false, false, false},
		{"git config --global --get core.editor", false, false, false, false},
		{"git config get init.defaultBranch", false, false, false, false},
		{"git config --get remote.origin.url", false, false, true, false},
		{"git config remote.upstream.pushurl", false, false, true, false},
		{"git config --get http.https://github.com/.extraheader", false, false, true, false},
		{"git config --get credential.helper", false, false, true, false},
		{"git config --get github.token", false, false, true, false},
		{"git config -l", false, false, true, false},
		{"git config --list --show-origin", false, false, true, false},
		{"git config --get-regexp user", false, false, true, false},
		{"git config list", false, false, true, false},
		{"git config -f .env --get x.y", false, false, true, false},
		{"git config user.name x", false, false, false, true},
		{"git config --unset user.name", false, false, false, true},
		{"git config set user.name x", false, false, false, true},
		{"git config --add x.y z", false, false, false, true},
	}
	for _, tt := range tests {
		a, err := Parse(tt.src)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.src, err)
			continue
		}
		var unknown, outside, secrets, write bool
		for _, c := range a.Commands {
			unknown = unknown || len(c.Unknown) > 0
			outside = outside || len(c.Outside) > 0
			secrets = secrets || len(c.Secrets) > 0
			write = write || c.Writes
		}
		if unknown != tt.unknown || outside != tt.outside || secrets != tt.secrets || write != tt.write {
			t.Errorf("Parse(%q): unknown %v, outside %v, secrets %v, writes %v; want %v, %v, %v, %v (%+v)",
				tt.src, unknown, outside, secrets, write, tt.unknown, tt.outside, tt.secrets, tt.write, a.Commands)
		}
	}
}
