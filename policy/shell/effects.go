package shell

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
)

// This file says what a command string would do, in words a reviewer
// reads before approving it: what it deletes, writes, downloads and runs,
// where it connects, what it reads outside the working directory, what it
// does to git history. It reads the analysis (the commands, their files,
// redirections and what feeds their input); it decides nothing.

// EffectKind is what kind of thing an [Effect] does.
type EffectKind string

// The kinds of effects, from the most to the least worrying.
const (
	// EffectRunDownloaded: runs code it downloads (curl URL | sh, npm install).
	EffectRunDownloaded EffectKind = "run_downloaded"
	// EffectDelete: deletes files (rm, git clean, find -delete).
	EffectDelete EffectKind = "delete"
	// EffectGitHistory: changes git history or throws away changes
	// (commit, rebase, reset --hard, push --force).
	EffectGitHistory EffectKind = "git_history"
	// EffectPrivilege: runs a command as another user (sudo).
	EffectPrivilege EffectKind = "privilege"
	// EffectSecrets: may read credentials.
	EffectSecrets EffectKind = "secrets"
	// EffectUnknown: runs code whose effects the analysis cannot tell (a
	// program it does not know, a command computed at run time).
	EffectUnknown EffectKind = "unknown"
	// EffectWrite: creates or changes files.
	EffectWrite EffectKind = "write"
	// EffectNetwork: connects to other machines.
	EffectNetwork EffectKind = "network"
	// EffectReadOutside: reads files outside the working directory.
	EffectReadOutside EffectKind = "read_outside"
	// EffectRead: reads inside the working directory only.
	EffectRead EffectKind = "read"
)

// Risk is how much harm an effect, or a whole command string, can do.
type Risk string

// The risk levels, from the lowest.
const (
	// RiskLow: reads inside the working directory, changes nothing.
	RiskLow Risk = "low"
	// RiskMedium: changes files inside the working directory, uses the
	// network, reads outside it, or runs a program whose effects are not
	// known.
	RiskMedium Risk = "medium"
	// RiskHigh: deletes recursively or outside the working directory,
	// runs downloaded code, rewrites git history, reads credentials, runs
	// as another user, or runs code the analysis cannot see.
	RiskHigh Risk = "high"
)

func (r Risk) rank() int {
	switch r {
	case RiskLow:
		return 1
	case RiskMedium:
		return 2
	case RiskHigh:
		return 3
	}
	return 0
}

// Max returns the higher of two risks.
func (r Risk) Max(o Risk) Risk {
	if o.rank() > r.rank() {
		return o
	}
	return r
}

// Effect is one thing a command string would do.
type Effect struct {
	Kind EffectKind `json:"kind"`
	// Text says it in words, with its objects: "deletes build/
	// recursively", "runs code downloaded from example.com".
	Text string `json:"text"`
	// Objects are what it acts on: files, hosts, a git remote; at most
	// maxObjects of them (Text says how many more).
	Objects []string `json:"objects,omitempty"`
	// Command is the command that does it, as [Command.String] writes it.
	Command string `json:"command"`
	Risk    Risk   `json:"risk"`
}

// Bounds on what Effects returns: a hostile string of a thousand
// commands is summed up, not listed.
const (
	maxEffects = 40
	maxObjects = 5
)

// Effects says what the command string would do: every effect of every
// command, in the order of the commands, each once. A string that
// changes nothing the analysis can see reads as one [EffectRead]. The
// list is what a static reading can tell, no more: a program it does not
// know is an [EffectUnknown], never "harmless".
func (a *Analysis) Effects() []Effect {
	e := effects{a: a}
	downloads := map[string][]string{} // files fetchers wrote -> the hosts
	for i := range a.Commands {
		e.command(i, downloads)
	}
	for _, r := range a.Review {
		// What the string does beyond its commands' reach: never "harmless".
		risk := RiskMedium
		if strings.Contains(r, "does not parse") || strings.Contains(r, "not analysed") || strings.Contains(r, "can run commands") {
			risk = RiskHigh
		}
		e.add(Effect{Kind: EffectUnknown, Text: "may do what the analysis cannot see: " + r, Risk: risk})
	}
	if len(e.list) == 0 {
		e.add(Effect{Kind: EffectRead, Text: "reads inside the working directory only, and changes nothing", Risk: RiskLow})
	}
	if e.dropped > 0 {
		e.list = append(e.list, Effect{Kind: EffectUnknown, Text: fmt.Sprintf("and %d more effects not listed", e.dropped), Risk: RiskHigh})
	}
	return e.list
}

// RiskOf returns the highest risk of the effects (RiskLow for none).
func RiskOf(effects []Effect) Risk {
	r := RiskLow
	for _, e := range effects {
		r = r.Max(e.Risk)
	}
	return r
}

type effects struct {
	a       *Analysis
	list    []Effect
	dropped int
}

func (e *effects) add(x Effect) {
	if slices.ContainsFunc(e.list, func(y Effect) bool { return y.Kind == x.Kind && y.Text == x.Text }) {
		return
	}
	if len(e.list) >= maxEffects {
		e.dropped++
		return
	}
	e.list = append(e.list, x)
}

// objects writes names for a sentence: "a, b and 3 more"; it returns the
// names kept.
func objects(names []string) (string, []string) {
	kept := names[:min(len(names), maxObjects)]
	s := strings.Join(kept, ", ")
	if n := len(names) - len(kept); n > 0 {
		s += fmt.Sprintf(" and %d more", n)
	}
	return s, slices.Clone(kept)
}

// where marks a file outside the working directory.
func where(p string) string {
	if outsidePath(p, strings.ContainsAny(p, "*?[")) != "" {
		return " (outside the working directory)"
	}
	return ""
}

// anyOutside reports whether one of the paths may lie outside.
func anyOutside(paths []string) bool {
	return slices.ContainsFunc(paths, func(p string) bool { return outsidePath(p, strings.ContainsAny(p, "*?[")) != "" })
}

// operands returns the arguments that are not options, and the options,
// of a command whose options take no values (rm, touch, mkdir, ...).
func operands(args []string) (ops, flags []string) {
	for i, a := range args {
		if a == "--" {
			return append(ops, args[i+1:]...), flags
		}
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			continue
		}
		ops = append(ops, a)
	}
	return ops, flags
}

// given names the operands a command gets at run time beside its own
// words, or "": the names xargs passes it, find -exec's {}, a word
// computed at run time ($f, $(...)).
func given(c *Command, ops []string) string {
	for _, v := range c.Via {
		if v == "xargs" {
			return "the names xargs passes it"
		}
	}
	for _, o := range ops {
		switch {
		case o == "{}":
			return "each file find finds"
		case strings.ContainsAny(o, "$`"):
			return "files named at run time (" + o + ")"
		}
	}
	return ""
}

// hasFlag reports whether flags hold the short letter (in a bundle such
// as -rf) or one of the long names.
func hasFlag(flags []string, short byte, longs ...string) bool {
	for _, f := range flags {
		if strings.HasPrefix(f, "--") {
			name, _, _ := strings.Cut(f, "=")
			if slices.Contains(longs, name) {
				return true
			}
			continue
		}
		if short != 0 && strings.IndexByte(f[1:], short) >= 0 {
			return true
		}
	}
	return false
}

// interpreters run code given to them on their standard input, in a -c
// string, or in a file operand. The shells' -c strings (and eval's
// words) are analysed as commands; the others' code is not read.
var interpreters = map[string]bool{
	"sh": true, "bash": true, "rbash": true, "dash": true, "ash": true, "zsh": true, "ksh": true, "mksh": true, "lksh": true, "posh": true, "yash": true,
	"fish": false, "python": false, "python2": false, "python3": false, "perl": false, "ruby": false, "node": false, "nodejs": false, "deno": false,
	"bun": false, "php": false, "lua": false, "tclsh": false, "pwsh": false, "Rscript": false, "osascript": false,
	"eval": true, "source": false, ".": false,
}

// fetchers download from a URL.
var fetchers = map[string]bool{"curl": true, "wget": true, "fetch": true, "aria2c": true, "http": true, "https": true, "xh": true, "lwp-download": true}

// readers only read or print (their writes, if any, are in Writes and
// Redirects), or only run the command they wrap, which is a command of
// the analysis too.
var readers = map[string]bool{
	"ls": true, "cat": true, "head": true, "tail": true, "grep": true, "egrep": true, "fgrep": true, "rg": true, "find": true,
	"wc": true, "pwd": true, "echo": true, "printf": true, "stat": true, "file": true, "du": true, "df": true, "tree": true,
	"which": true, "type": true, "whoami": true, "id": true, "uname": true, "date": true, "basename": true, "dirname": true,
	"realpath": true, "readlink": true, "sort": true, "uniq": true, "cut": true, "tr": true, "nl": true, "rev": true, "tac": true,
	"column": true, "fold": true, "paste": true, "comm": true, "join": true, "diff": true, "cmp": true, "md5sum": true,
	"sha1sum": true, "sha256sum": true, "sha512sum": true, "jq": true, "yq": true, "sed": true, "awk": true, "gawk": true,
	"mawk": true, "less": true, "more": true, "xargs": true, "cd": true, "read": true, "true": true, "false": true, "test": true,
	"[": true, "time": true, "timeout": true, "command": true, "env": true, "nice": true, "nohup": true, "stdbuf": true,
	"ionice": true, "exec": true, "builtin": true, "hostname": true, "sleep": true, "seq": true, "yes": true, "expr": true,
	"printenv": true, "xxd": true, "od": true, "hexdump": true, "strings": true, "base64": true, "man": true, "tee": true,
	"export": true, "declare": true, "local": true, "typeset": true, "readonly": true, "unset": true, "set": true, "shift": true,
	"wait": true, "jobs": true, "let": true, ":": true, "getopts": true, "tput": true, "clear": true,
	"setsid": true, "flock": true, "watch": true, "busybox": true, "chroot": true, "ps": true, "uptime": true, "free": true,
	"lsof": true, "top": true, "cal": true, "locale": true, "nproc": true, "tty": true, "groups": true, "users": true, "who": true,
}

// command adds the effects of command i.
func (e *effects) command(i int, downloads map[string][]string) {
	c := &e.a.Commands[i]
	str := c.String()
	said := 0 // the effects of this command, each once in the list
	add := func(kind EffectKind, risk Risk, text string, objs []string) {
		said++
		e.add(Effect{Kind: kind, Text: text, Objects: objs, Command: str, Risk: risk})
	}
	named := map[string]bool{} // files an effect of this command names already
	wrote := len(e.list)

	// Code it downloads and runs.
	_, interp := interpreters[c.Name]
	if interp || c.Name == "" && c.Dynamic {
		var hosts []string
		for _, r := range []span{c.stdin, c.subst} {
			for j := r.from; j < r.to && j < len(e.a.Commands); j++ {
				if f := &e.a.Commands[j]; fetchers[f.Name] {
					hosts = append(hosts, hostsOf(f.Args)...)
					if len(hosts) == 0 {
						hosts = append(hosts, "the network")
					}
				}
			}
		}
		for _, arg := range c.Args {
			hosts = append(hosts, downloads[arg]...)
		}
		if len(hosts) > 0 {
			s, objs := objects(dedupe(hosts))
			add(EffectRunDownloaded, RiskHigh, "runs code downloaded from "+s, objs)
		}
	}
	if h, ok := downloads[c.Path]; ok && c.Name != "" {
		s, objs := objects(h)
		add(EffectRunDownloaded, RiskHigh, "runs "+c.Path+", downloaded from "+s, objs)
	}

	if len(c.Via) > 0 {
		switch v := c.Via[len(c.Via)-1]; v {
		case "sudo", "doas", "su", "runuser":
			add(EffectPrivilege, RiskHigh, "runs "+c.label()+" as another user, root by default ("+v+")", nil)
		}
	}

	// Redirections that write.
	for _, r := range c.Redirects {
		if !r.Writes {
			continue
		}
		verb := "writes "
		if r.Op == ">>" || r.Op == "&>>" {
			verb = "appends to "
		}
		risk := RiskMedium
		if where(r.Target) != "" {
			risk = RiskHigh
		}
		add(EffectWrite, risk, verb+r.Target+where(r.Target), []string{r.Target})
		named[r.Target] = true
	}

	switch {
	case c.Dynamic:
		add(EffectUnknown, RiskHigh, "runs a command only known at run time: "+c.Path, nil)
	case c.Name == "":
	case fetchers[c.Name]:
		e.fetch(c, add, named, downloads)
	default:
		if f, ok := effectModels[c.Name]; ok {
			f(c, add, named)
		}
	}
	downloaded := slices.ContainsFunc(e.list[wrote:], func(x Effect) bool { return x.Kind == EffectRunDownloaded })
	if interp && !downloaded {
		switch r := scriptOf(c); {
		case c.DynamicArgs:
			add(EffectUnknown, RiskHigh, "runs code only known at run time ("+c.label()+")", nil)
		case r != "":
			add(EffectUnknown, RiskMedium, "runs "+r+", which tollgate does not read", nil)
		}
	}
	modelSaid := said
	if len(c.Review) > 0 {
		// What the analysis could not vouch for, and no model above says:
		// a reader that writes through an option (sed -i, sort -o, awk's
		// print >), or runs what it cannot see. Never "harmless". An
		// option or a variable that makes the program run another (git -c
		// core.sshCommand=..., --upload-pack, GIT_SSH_COMMAND=...) is said
		// even when a model said what the command does: "connects to the
		// default remote (git fetch)" alone hid that it runs sh -c.
		for _, r := range c.Review {
			if modelSaid > 0 && !runsPrograms(r) {
				continue
			}
			switch {
			case strings.Contains(r, "delet"):
				add(EffectDelete, RiskHigh, c.label()+" "+r, nil)
			case c.Writes && (strings.Contains(r, "writ") || strings.Contains(r, "edit") || strings.Contains(r, "creat") || strings.Contains(r, "chang")):
				add(EffectWrite, RiskMedium, c.label()+" "+r, nil)
			default:
				add(EffectUnknown, RiskMedium, c.label()+" "+r, nil)
			}
		}
	}

	if said == 0 && c.Name != "" && c.Name != "eval" && !readers[c.Name] && known[c.Name].check == nil {
		// A program it has no model of, or one its model found nothing
		// to say of (rm with no file): never "harmless".
		add(EffectUnknown, RiskMedium, "runs "+c.label()+", whose effects tollgate does not know", nil)
	}

	// Files outside the working directory, and secrets, that no effect
	// above named.
	var outside []string
	for _, o := range c.Outside {
		if !named[o] && !(downloaded && strings.HasPrefix(o, "a file named at run time: ")) {
			outside = append(outside, o)
		}
	}
	if len(outside) > 0 {
		s, objs := objects(outside)
		add(EffectReadOutside, RiskMedium, "reads outside the working directory: "+s, objs)
	}
	if len(c.Secrets) > 0 {
		s, objs := objects(c.Secrets)
		add(EffectSecrets, RiskHigh, "may read credentials: "+s, objs)
	}
}

// killEffect says which processes kill signals. Its first argument may
// be the signal (-9, -KILL, -s KILL); the rest are process ids, and a
// negative one is a process group: -1 is every process it may signal
// (kill -9 -1 read as "stops processes: " with none named).
func killEffect(c *Command, add addFunc, named map[string]bool) {
	pids := c.Args
	switch {
	case len(pids) > 0 && (pids[0] == "-s" || pids[0] == "-n"):
		pids = pids[min(2, len(pids)):]
	case len(pids) > 0 && strings.HasPrefix(pids[0], "-") && pids[0] != "--":
		pids = pids[1:]
	}
	if len(pids) > 0 && pids[0] == "--" {
		pids = pids[1:]
	}
	if slices.Contains(pids, "-1") {
		add(EffectUnknown, RiskHigh, "stops every process it may signal (pid -1)", nil)
		return
	}
	s, objs := objects(pids)
	add(EffectUnknown, RiskMedium, "stops processes: "+s, objs)
}

// runsPrograms reports whether a review note says the command may run
// other programs through an option or a variable (see the analysis's
// notes in git.go and walk.go).
func runsPrograms(note string) bool {
	for _, s := range []string{"runs a program", "can run programs", "decide what to run", "runs a command", "can run commands"} {
		if strings.Contains(note, s) {
			return true
		}
	}
	return false
}

// scriptOf says what code an interpreter runs that tollgate does not
// read: "the script x.py", "python3 code given on its command line", ""
// for a shell's -c string and eval's words (analysed as commands).
func scriptOf(c *Command) string {
	ops, flags := operands(c.Args)
	shell := interpreters[c.Name]
	switch {
	case c.Name == "eval":
		return ""
	case c.Name == "source" || c.Name == ".":
		if len(c.Args) > 0 {
			return "the commands of the file " + c.Args[0]
		}
		return ""
	case shell && hasFlag(flags, 'c'):
		return ""
	case !shell && (hasFlag(flags, 'c') || hasFlag(flags, 'e', "--eval") || hasFlag(flags, 'E') || hasFlag(flags, 'r')):
		return c.Name + " code given on its command line"
	case hasFlag(flags, 'm'):
		return "a " + c.Name + " module"
	case len(ops) == 0 || strings.HasPrefix(ops[0], "<("):
		if shell && c.stdin == (span{}) {
			return ""
		}
		return c.Name + " code from its standard input"
	}
	return "the script " + ops[0]
}

type addFunc func(kind EffectKind, risk Risk, text string, objs []string)

// effectModels say what commands that change things do, by name.
var effectModels = map[string]func(c *Command, add addFunc, named map[string]bool){}

func init() {
	for _, n := range []string{"rm", "unlink", "rmdir", "shred", "srm"} {
		effectModels[n] = deleteEffect
	}
	effectModels["find"] = findEffect
	effectModels["git"] = gitEffect
	for _, n := range []string{"touch", "mkdir", "truncate", "mkfifo", "mknod"} {
		effectModels[n] = writeOperands
	}
	for _, n := range []string{"cp", "mv", "install", "ln", "rsync", "scp"} {
		effectModels[n] = copyEffect
	}
	for _, n := range []string{"chmod", "chown", "chgrp", "chattr", "setfacl"} {
		effectModels[n] = modeEffect
	}
	effectModels["tee"] = func(c *Command, add addFunc, named map[string]bool) {
		ops, flags := operands(c.Args)
		verb := "writes "
		if hasFlag(flags, 'a', "--append") {
			verb = "appends to "
		}
		for _, o := range ops {
			if c.Writes && !harmlessOut(o, fdFiles{}) {
				add(EffectWrite, riskOf(o), verb+o+where(o), []string{o})
				named[o] = true
			}
		}
	}
	effectModels["dd"] = func(c *Command, add addFunc, named map[string]bool) {
		for _, a := range c.Args {
			if of, ok := strings.CutPrefix(a, "of="); ok {
				add(EffectWrite, RiskHigh, "writes "+of+" block by block"+where(of), []string{of})
				named[of] = true
			}
		}
	}
	for _, n := range []string{"ssh", "sftp", "telnet", "nc", "ncat", "netcat", "socat", "ftp", "ping", "dig", "nslookup", "host", "whois", "mosh", "traceroute"} {
		effectModels[n] = remoteEffect
	}
	for _, n := range []string{"npm", "pnpm", "yarn", "bun", "pip", "pip3", "pipx", "gem", "cargo", "go", "uv", "poetry", "composer", "bundle", "npx", "uvx"} {
		effectModels[n] = packageEffect
	}
	for _, n := range []string{"apt", "apt-get", "dnf", "yum", "apk", "brew", "pacman", "zypper", "snap"} {
		effectModels[n] = systemPackageEffect
	}
	effectModels["docker"] = dockerEffect
	effectModels["podman"] = dockerEffect
	for _, n := range []string{"pkill", "killall"} {
		effectModels[n] = func(c *Command, add addFunc, named map[string]bool) {
			ops, _ := operands(c.Args)
			s, objs := objects(ops)
			add(EffectUnknown, RiskMedium, "stops processes: "+s, objs)
		}
	}
	effectModels["kill"] = killEffect
	for _, n := range []string{"tar", "unzip", "zip", "gzip", "gunzip", "bzip2", "xz", "7z", "patch", "split"} {
		effectModels[n] = archiveEffect
	}
	for _, n := range []string{"sed", "sort", "uniq", "xxd", "yq"} {
		// Their writes are options the analysis flags (Writes and a
		// reason): see command.
		effectModels[n] = func(*Command, addFunc, map[string]bool) {}
	}
}

func riskOf(p string) Risk {
	if where(p) != "" {
		return RiskHigh
	}
	return RiskMedium
}

func deleteEffect(c *Command, add addFunc, named map[string]bool) {
	ops, flags := operands(c.Args)
	g := given(c, ops)
	if len(ops) == 0 && g == "" {
		return
	}
	recursive := c.Name == "rm" && hasFlag(flags, 'r', "--recursive") || hasFlag(flags, 'R')
	s, objs := objects(ops)
	text := "deletes " + s
	risk := RiskMedium
	if g != "" {
		text, objs, risk = "deletes "+g, nil, RiskHigh
	}
	if recursive {
		text += " recursively"
		risk = RiskHigh
	}
	if anyOutside(ops) {
		text += " (outside the working directory)"
		risk = RiskHigh
	}
	if slices.ContainsFunc(ops, func(o string) bool { return strings.ContainsAny(o, "*?[") }) {
		text += " (every file the pattern matches)"
		risk = RiskHigh
	}
	add(EffectDelete, risk, text, objs)
	for _, o := range ops {
		named[o] = true
	}
}

func findEffect(c *Command, add addFunc, named map[string]bool) {
	if !slices.Contains(c.Args, "-delete") {
		return
	}
	var start []string
	for _, a := range c.Args {
		if strings.HasPrefix(a, "-") || a == "(" || a == "!" {
			break
		}
		start = append(start, a)
	}
	if len(start) == 0 {
		start = []string{"."}
	}
	s, objs := objects(start)
	add(EffectDelete, RiskHigh, "deletes every file find selects under "+s+" (find -delete)", objs)
	for _, o := range start {
		named[o] = true
	}
}

func writeOperands(c *Command, add addFunc, named map[string]bool) {
	ops, _ := operands(c.Args)
	if c.Name == "truncate" {
		ops = ops[:0:0]
		_, operands, _ := optSpec{shortVal: "sr", longVal: []string{"--size", "--reference"}}.parse(staticWords(c.Args))
		for _, o := range operands {
			ops = append(ops, o.val)
		}
	}
	if g := given(c, ops); g != "" {
		ops = []string{g}
	}
	if len(ops) == 0 {
		return
	}
	s, objs := objects(ops)
	verb := map[string]string{"mkdir": "creates the directory ", "truncate": "truncates ", "mkfifo": "creates the pipe ", "mknod": "creates the device "}[c.Name]
	if verb == "" {
		verb = "writes "
	}
	add(EffectWrite, maxRisk(ops), verb+s+outsideNote(ops), objs)
	for _, o := range ops {
		named[o] = true
	}
}

func copyEffect(c *Command, add addFunc, named map[string]bool) {
	spec := optSpec{shortVal: "tSTbm", longVal: []string{"--target-directory", "--suffix", "--backup", "--mode", "--owner", "--group", "--exclude", "--include", "--filter", "--rsh", "--rsync-path", "--port"}}
	if c.Name == "scp" {
		spec = optSpec{shortVal: "cFiJlmoPSDX"}
	}
	if c.Name == "rsync" {
		spec.shortVal = "efBTm"
	}
	opts, ops, _ := spec.parse(staticWords(c.Args))
	var names []string
	for _, o := range ops {
		names = append(names, o.val)
	}
	dest := ""
	for _, o := range opts {
		if o.is('t', "--target-directory") {
			dest = o.val
		}
	}
	if dest == "" && len(names) >= 2 {
		dest, names = names[len(names)-1], names[:len(names)-1]
	}
	if dest == "" || len(names) == 0 {
		return
	}
	var hosts []string
	for _, n := range append([]string{dest}, names...) {
		if h := remotePath(n); h != "" {
			hosts = append(hosts, h)
		}
	}
	s, objs := objects(names)
	flags := make([]string, 0, len(opts))
	for _, o := range opts {
		flags = append(flags, o.name)
	}
	switch {
	case len(hosts) > 0:
		hs, hobjs := objects(dedupe(hosts))
		add(EffectNetwork, RiskMedium, "copies "+s+" to "+dest+" over the network ("+hs+")", hobjs)
		if remotePath(dest) == "" {
			add(EffectWrite, riskOf(dest), "writes "+dest+where(dest), []string{dest})
		}
		if hasFlag(flags, 0, "--delete", "--delete-before", "--delete-after", "--delete-during", "--delete-excluded") {
			add(EffectDelete, RiskHigh, "deletes files in "+dest+" that "+s+" does not have (--delete)", []string{dest})
		}
	case c.Name == "mv":
		add(EffectWrite, maxRisk(append([]string{dest}, names...)), "moves "+s+" to "+dest+outsideNote(append([]string{dest}, names...)), append(objs, dest))
	case c.Name == "ln":
		add(EffectWrite, riskOf(dest), "creates the link "+dest+" to "+s+where(dest), []string{dest})
	default:
		how := ""
		if hasFlag(flags, 'r', "--recursive") || hasFlag(flags, 'R') || hasFlag(flags, 'a', "--archive") {
			how = " recursively"
		}
		add(EffectWrite, riskOf(dest), "copies "+s+how+" to "+dest+where(dest), []string{dest})
		if anyOutside(names) {
			add(EffectReadOutside, RiskMedium, "reads outside the working directory: "+s, objs)
		}
		if hasFlag(flags, 0, "--delete") {
			add(EffectDelete, RiskHigh, "deletes files in "+dest+" that "+s+" does not have (--delete)", []string{dest})
		}
	}
	for _, n := range append(names, dest) {
		named[n] = true
	}
}

func modeEffect(c *Command, add addFunc, named map[string]bool) {
	ops, flags := operands(c.Args)
	if len(ops) < 2 {
		return
	}
	what := map[string]string{"chmod": "the permissions", "chown": "the owner", "chgrp": "the group", "chattr": "the attributes", "setfacl": "the access lists"}[c.Name]
	files := ops[1:]
	if c.Name == "setfacl" {
		files = ops
	}
	s, objs := objects(files)
	text := "changes " + what + " of " + s
	risk := maxRisk(files)
	if hasFlag(flags, 'R', "--recursive") {
		text += " recursively"
		risk = RiskHigh
	}
	add(EffectWrite, risk, text+outsideNote(files), objs)
	for _, f := range files {
		named[f] = true
	}
}

func archiveEffect(c *Command, add addFunc, named map[string]bool) {
	ops, flags := operands(c.Args)
	switch c.Name {
	case "tar":
		if c.Writes {
			s, objs := objects(ops)
			verb := "creates or changes the archive, or extracts files: "
			if len(c.Args) > 0 && (hasFlag(flags, 'x', "--extract", "--get") || !strings.HasPrefix(c.Args[0], "-") && strings.Contains(c.Args[0], "x")) {
				verb = "extracts files from "
			}
			add(EffectWrite, RiskMedium, verb+s, objs)
		}
	case "unzip", "patch":
		s, objs := objects(ops)
		add(EffectWrite, RiskMedium, "writes the files of "+s, objs)
	default:
		if len(ops) == 0 || hasFlag(flags, 'c', "--stdout") || hasFlag(flags, 'l', "--list") || hasFlag(flags, 't', "--test") {
			return
		}
		s, objs := objects(ops)
		add(EffectWrite, maxRisk(ops), c.Name+" writes "+s+" (and may replace the originals)", objs)
	}
	for _, o := range ops {
		named[o] = true
	}
}

// gitEffect: what a git subcommand does to the history, the working tree
// and remotes.
func gitEffect(c *Command, add addFunc, named map[string]bool) {
	i := 0
	for i < len(c.Args) && strings.HasPrefix(c.Args[i], "-") {
		if gitGlobalValue[c.Args[i]] {
			i++
		}
		i++
	}
	if i >= len(c.Args) {
		return
	}
	sub, rest := c.Args[i], c.Args[i+1:]
	ops, flags := operands(rest)
	first := ""
	if len(ops) > 0 {
		first = ops[0]
	}
	hist := func(risk Risk, text string) { add(EffectGitHistory, risk, text+" (git "+sub+")", nil) }
	remote := func(verb string) {
		r := first
		if r == "" {
			r = "the default remote"
		} else if h := hostsOf([]string{r}); len(h) > 0 {
			r = h[0]
		} else {
			r = "the remote " + r
		}
		add(EffectNetwork, RiskMedium, verb+" "+r+" (git "+sub+")", []string{r})
	}
	switch sub {
	case "push":
		remote("connects to")
		force := hasFlag(flags, 'f', "--force", "--force-with-lease", "--force-if-includes", "--mirror", "--delete", "--prune") || hasFlag(flags, 'd') ||
			slices.ContainsFunc(ops, func(o string) bool { return strings.HasPrefix(o, "+") || strings.HasPrefix(o, ":") })
		if force {
			hist(RiskHigh, "rewrites or deletes history on the remote")
		} else {
			hist(RiskMedium, "publishes commits to the remote")
		}
	case "pull":
		remote("connects to")
		hist(RiskMedium, "merges or rebases the remote's commits into the current branch")
	case "fetch", "ls-remote", "remote":
		if sub == "remote" && first != "update" {
			if first != "" && first != "show" && first != "-v" {
				add(EffectWrite, RiskMedium, "changes the repository's remotes (git remote "+first+")", nil)
			}
			return
		}
		if sub == "remote" {
			first = ""
		}
		remote("connects to")
	case "clone":
		remote("downloads a repository from")
		dest := ""
		if len(ops) > 1 {
			dest = ops[1]
		} else if first != "" {
			dest = strings.TrimSuffix(path.Base(strings.TrimSuffix(first, "/")), ".git")
		}
		if dest != "" {
			add(EffectWrite, riskOf(dest), "writes the repository into "+dest+where(dest), []string{dest})
		}
	case "submodule":
		if first == "update" || first == "add" || first == "sync" {
			add(EffectNetwork, RiskMedium, "downloads submodules (git submodule "+first+")", nil)
		}
	case "commit":
		if hasFlag(flags, 0, "--amend") {
			hist(RiskHigh, "rewrites the last commit")
		} else {
			hist(RiskMedium, "adds a commit to the current branch")
		}
	case "rebase", "filter-branch", "filter-repo", "replace":
		hist(RiskHigh, "rewrites commits")
	case "reset":
		if hasFlag(flags, 0, "--hard", "--keep", "--merge") {
			hist(RiskHigh, "moves the branch and throws away uncommitted changes")
		} else {
			hist(RiskMedium, "moves the branch or unstages changes")
		}
	case "checkout", "switch", "restore":
		if hasFlag(flags, 'f', "--force", "--discard-changes") || sub == "restore" || slices.Contains(rest, "--") || first == "." {
			hist(RiskHigh, "throws away uncommitted changes")
		} else if first != "" {
			add(EffectWrite, RiskMedium, "changes the files of the working tree to "+first+" (git "+sub+")", []string{first})
		}
	case "clean":
		if hasFlag(flags, 'n', "--dry-run") || !hasFlag(flags, 'f', "--force") {
			return
		}
		what := "untracked files"
		if hasFlag(flags, 'd') {
			what = "untracked files and directories"
		}
		if hasFlag(flags, 'X') {
			what = "ignored files"
		}
		in := "the working tree"
		if len(ops) > 0 {
			in, _ = objects(ops)
		}
		text := "deletes " + what + " in " + in
		if hasFlag(flags, 'x') {
			text = "deletes " + what + " in " + in + ", ignored ones too"
		}
		add(EffectDelete, RiskHigh, text+" (git clean)", ops)
	case "merge", "cherry-pick", "revert", "am", "apply", "mergetool":
		hist(RiskMedium, "adds commits or changes to the current branch")
	case "branch":
		if hasFlag(flags, 'D') || hasFlag(flags, 'd', "--delete") {
			s, objs := objects(ops)
			add(EffectGitHistory, RiskHigh, "deletes the branch "+s+" (git branch)", objs)
		} else if c.Writes {
			hist(RiskMedium, "creates or changes branches")
		}
	case "tag":
		if hasFlag(flags, 'd', "--delete") {
			hist(RiskHigh, "deletes tags")
		} else if c.Writes {
			hist(RiskMedium, "creates or changes tags")
		}
	case "stash":
		switch first {
		case "list", "show":
		case "drop", "clear":
			hist(RiskHigh, "throws away stashed changes")
		default:
			hist(RiskMedium, "sets uncommitted changes aside or brings them back")
		}
	case "update-ref", "reflog", "gc", "prune", "notes", "worktree":
		if sub == "reflog" && (first == "" || first == "show") {
			return
		}
		hist(RiskHigh, "changes references or prunes objects")
	case "rm", "mv":
		s, objs := objects(ops)
		if sub == "rm" && !hasFlag(flags, 0, "--cached") {
			add(EffectDelete, RiskMedium, "deletes "+s+" and stages the deletion (git rm)", objs)
		} else {
			add(EffectWrite, RiskMedium, "moves or unstages "+s+" (git "+sub+")", objs)
		}
	case "add", "stage":
		s, _ := objects(ops)
		add(EffectWrite, RiskLow, "stages "+s+" for the next commit (git add)", nil)
	case "init":
		add(EffectWrite, RiskMedium, "creates a git repository", nil)
	case "config":
		if !hasFlag(flags, 'l', "--list", "--get", "--get-all", "--get-regexp") && len(ops) >= 2 {
			add(EffectWrite, RiskMedium, "changes git's configuration: "+ops[0], []string{ops[0]})
		}
	case "status", "log", "diff", "show", "blame", "rev-parse", "ls-files", "ls-tree", "cat-file", "grep", "shortlog", "describe", "rev-list", "help", "version", "count-objects", "whatchanged", "name-rev", "for-each-ref", "show-ref", "var", "check-ignore", "verify-commit":
	default:
		add(EffectUnknown, RiskMedium, "runs git "+sub+", whose effects tollgate does not know", nil)
	}
}

func remoteEffect(c *Command, add addFunc, named map[string]bool) {
	spec := optSpec{shortVal: "bcDeEFIiJlLmOopQRSWw", longVal: nil}
	if c.Name != "ssh" {
		spec = optSpec{shortVal: "pswWiqcxX"}
	}
	_, ops, _ := spec.parse(staticWords(c.Args))
	if len(ops) == 0 {
		return
	}
	host := ops[0].val
	if _, h, ok := strings.Cut(host, "@"); ok {
		host = h
	}
	if hs := hostsOf([]string{ops[0].val}); len(hs) > 0 {
		host = hs[0]
	}
	add(EffectNetwork, RiskMedium, "connects to "+host, []string{host})
	if c.Name == "ssh" && len(ops) > 1 {
		var words []string
		for _, o := range ops[1:] {
			words = append(words, o.val)
		}
		add(EffectUnknown, RiskHigh, "runs a command on "+host+": "+strings.Join(words, " "), []string{host})
	}
}

// packageEffect: package managers that download packages, and run their
// install scripts.
func packageEffect(c *Command, add addFunc, named map[string]bool) {
	ops, _ := operands(c.Args)
	sub := ""
	if len(ops) > 0 {
		sub = ops[0]
	}
	registry := map[string]string{"npm": "the npm registry", "pnpm": "the npm registry", "yarn": "the npm registry", "bun": "the npm registry", "npx": "the npm registry",
		"pip": "the Python package index", "pip3": "the Python package index", "pipx": "the Python package index", "uv": "the Python package index", "uvx": "the Python package index", "poetry": "the Python package index",
		"gem": "rubygems.org", "bundle": "rubygems.org", "cargo": "crates.io", "go": "the Go module proxy", "composer": "packagist.org"}[c.Name]
	switch {
	case c.Name == "npx" || c.Name == "uvx" || c.Name == "pipx" && sub == "run" || c.Name == "go" && sub == "run" && slices.ContainsFunc(ops, func(o string) bool { return strings.Contains(o, "@") }):
		pkg := sub
		if c.Name == "pipx" || c.Name == "go" {
			pkg = ""
			if len(ops) > 1 {
				pkg = ops[1]
			}
		}
		add(EffectRunDownloaded, RiskHigh, "runs "+pkg+", downloaded from "+registry, []string{registry})
	case slices.Contains([]string{"install", "i", "add", "ci", "update", "upgrade", "sync", "get", "build", "download", "fetch", "publish", "require"}, sub) ||
		(c.Name == "yarn" || c.Name == "bundle" || c.Name == "uv" && sub == "") && sub == "":
		if c.Name == "go" && (sub == "build" || sub == "install" && !slices.ContainsFunc(ops, func(o string) bool { return strings.Contains(o, "@") })) {
			add(EffectWrite, RiskMedium, "builds Go programs (and may download modules from "+registry+")", nil)
			return
		}
		if sub == "publish" {
			add(EffectNetwork, RiskHigh, "publishes a package to "+registry, []string{registry})
			return
		}
		if sub == "build" || sub == "download" || sub == "fetch" || c.Name == "go" {
			add(EffectNetwork, RiskMedium, "downloads packages from "+registry, []string{registry})
			if sub == "build" {
				add(EffectUnknown, RiskMedium, "runs the project's build ("+c.Name+" build)", nil)
			}
			return
		}
		add(EffectRunDownloaded, RiskHigh, "installs packages from "+registry+" and runs their install scripts", []string{registry})
	case sub == "run" || sub == "test" || sub == "exec" || sub == "start":
		add(EffectUnknown, RiskMedium, "runs the project's "+c.Name+" "+strings.Join(ops[:min(2, len(ops))], " ")+", whose effects tollgate does not know", nil)
	case sub == "uninstall" || sub == "remove" || sub == "rm":
		add(EffectDelete, RiskMedium, "removes packages ("+c.Name+" "+sub+")", nil)
	case sub == "" || sub == "list" || sub == "ls" || sub == "show" || sub == "view" || sub == "version" || sub == "help" || sub == "env" || sub == "vet" || sub == "doc":
	default:
		add(EffectUnknown, RiskMedium, "runs "+c.Name+" "+sub+", whose effects tollgate does not know", nil)
	}
}

func systemPackageEffect(c *Command, add addFunc, named map[string]bool) {
	ops, _ := operands(c.Args)
	if len(ops) == 0 {
		return
	}
	switch ops[0] {
	case "install", "upgrade", "update", "dist-upgrade", "full-upgrade", "add", "reinstall", "-S", "-Syu":
		add(EffectRunDownloaded, RiskHigh, "installs system packages from the network and runs their install scripts ("+c.Name+" "+ops[0]+")", nil)
	case "remove", "purge", "autoremove", "uninstall", "del", "erase":
		add(EffectDelete, RiskHigh, "removes system packages ("+c.Name+" "+ops[0]+")", nil)
	case "list", "search", "show", "info", "policy":
	default:
		add(EffectUnknown, RiskMedium, "runs "+c.Name+" "+ops[0]+", whose effects tollgate does not know", nil)
	}
}

func dockerEffect(c *Command, add addFunc, named map[string]bool) {
	ops, _ := operands(c.Args)
	if len(ops) == 0 {
		return
	}
	switch ops[0] {
	case "pull", "push", "login", "search":
		add(EffectNetwork, RiskMedium, "connects to a container registry ("+c.Name+" "+ops[0]+")", nil)
	case "run", "exec", "create", "start", "compose":
		add(EffectUnknown, RiskHigh, "runs containers ("+c.Name+" "+strings.Join(ops[:min(2, len(ops))], " ")+"), which may download images and mount files", nil)
	case "rm", "rmi", "prune", "system", "volume", "image", "container", "network", "kill", "stop":
		if slices.ContainsFunc(ops, func(o string) bool { return o == "prune" || o == "rm" || o == "rmi" }) || ops[0] == "kill" || ops[0] == "stop" {
			add(EffectDelete, RiskHigh, "stops or deletes containers, images or volumes ("+c.Name+" "+strings.Join(ops[:min(2, len(ops))], " ")+")", nil)
		}
	case "build":
		add(EffectUnknown, RiskMedium, "builds an image, running the Dockerfile's commands ("+c.Name+" build)", nil)
	case "ps", "images", "inspect", "logs", "version", "info":
	default:
		add(EffectUnknown, RiskMedium, "runs "+c.Name+" "+ops[0]+", whose effects tollgate does not know", nil)
	}
}

// fetch: what curl, wget and the like connect to, send and write.
func (e *effects) fetch(c *Command, add addFunc, named map[string]bool, downloads map[string][]string) {
	hosts := hostsOf(c.Args)
	if len(hosts) == 0 {
		hosts = []string{"the network"}
	}
	hs, hobjs := objects(hosts)
	var out []string
	upload := false
	args := c.Args
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "-o" || a == "--output" || (c.Name == "wget" && (a == "-O" || a == "--output-document")):
			out = append(out, next())
		case strings.HasPrefix(a, "--output=") || strings.HasPrefix(a, "--output-document="):
			_, v, _ := strings.Cut(a, "=")
			out = append(out, v)
		case len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.IndexByte(a, outOpt(c.Name)) > 0:
			// A bundle such as -sSo FILE, -qO- or -oFILE.
			if v := a[strings.IndexByte(a, outOpt(c.Name))+1:]; v != "" {
				out = append(out, v)
			} else {
				out = append(out, next())
			}
		case c.Name == "curl" && (a == "-O" || a == "--remote-name" || a == "--remote-name-all"):
			out = append(out, "the file named as the URL's last part")
		case a == "-d" || a == "--data" || a == "--data-binary" || a == "--data-raw" || a == "--data-urlencode" || a == "-F" || a == "--form" ||
			a == "-T" || a == "--upload-file" || a == "--post-data" || a == "--post-file" || a == "--json" ||
			strings.HasPrefix(a, "--data") || strings.HasPrefix(a, "--post-") || strings.HasPrefix(a, "--upload-file=") || strings.HasPrefix(a, "--json="):
			upload = true
		case a == "-X" || a == "--request" || a == "--method":
			if m := strings.ToUpper(next()); m != "GET" && m != "HEAD" {
				upload = true
			}
		}
	}
	if c.Name == "wget" && len(out) == 0 && !slices.Contains(args, "--spider") {
		out = append(out, "a file named as the URL's last part")
	}
	verb := "connects to "
	if upload {
		verb = "sends data to "
	}
	risk := RiskMedium
	if upload {
		risk = RiskHigh
	}
	add(EffectNetwork, risk, verb+hs, hobjs)
	for _, o := range out {
		if o == "" || o == "-" || o == "/dev/null" || o == "/dev/stdout" {
			continue
		}
		add(EffectWrite, riskOf(o), "writes "+o+" (downloaded from "+hs+")"+where(o), []string{o})
		named[o] = true
		downloads[o] = append(downloads[o], hosts...)
		downloads["./"+strings.TrimPrefix(o, "./")] = append(downloads["./"+strings.TrimPrefix(o, "./")], hosts...)
	}
}

// outOpt is the short option of a fetcher that names the file it writes.
func outOpt(name string) byte {
	if name == "wget" {
		return 'O'
	}
	return 'o'
}

// hostsOf returns the hosts that URL-like arguments name, in order,
// each once: scheme://host/..., user@host:path, and bare host.tld/path.
func hostsOf(args []string) []string {
	var out []string
	for _, a := range args {
		if h := hostOf(a); h != "" && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

func hostOf(a string) string {
	if strings.HasPrefix(a, "-") {
		if _, v, ok := strings.Cut(a, "="); ok && strings.Contains(v, "://") {
			a = v
		} else {
			return ""
		}
	}
	if i := strings.Index(a, "://"); i > 0 {
		if u, err := url.Parse(a); err == nil && u.Hostname() != "" {
			return u.Hostname()
		}
		rest := a[i+3:]
		if j := strings.IndexAny(rest, "/?#"); j >= 0 {
			rest = rest[:j]
		}
		if _, h, ok := strings.Cut(rest, "@"); ok {
			rest = h
		}
		return rest
	}
	if h := remotePath(a); h != "" {
		return h
	}
	host, _, _ := strings.Cut(a, "/")
	host, _, _ = strings.Cut(host, ":")
	if isHostName(host) {
		return host
	}
	return ""
}

// remotePath returns the host of an scp-like user@host:path, or "".
func remotePath(a string) string {
	i := strings.IndexByte(a, ':')
	if i <= 0 || strings.Contains(a[:i], "/") {
		return ""
	}
	h := a[:i]
	if _, hh, ok := strings.Cut(h, "@"); ok {
		h = hh
	}
	if isHostName(h) || strings.Contains(a[:i], "@") && h != "" {
		return h
	}
	return ""
}

// isHostName reports whether s looks like a DNS name with a dot and a
// top-level part of letters (example.com), or an IPv4 address.
func isHostName(s string) bool {
	dot := strings.LastIndexByte(s, '.')
	if dot <= 0 || dot == len(s)-1 || len(s) > 253 {
		return false
	}
	for _, r := range s {
		if !(r == '.' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	tld := s[dot+1:]
	allDigits := strings.Trim(s, "0123456789.") == ""
	if allDigits {
		return strings.Count(s, ".") == 3
	}
	for _, r := range tld {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			return false
		}
	}
	// A file name such as notes.txt or main.go is not a host.
	return !fileSuffixes[strings.ToLower(tld)]
}

var fileSuffixes = map[string]bool{
	"txt": true, "md": true, "go": true, "py": true, "js": true, "ts": true, "sh": true, "json": true, "yaml": true, "yml": true,
	"toml": true, "log": true, "c": true, "h": true, "rs": true, "java": true, "rb": true, "tar": true, "gz": true, "tgz": true,
	"zip": true, "html": true, "css": true, "csv": true, "xml": true, "lock": true, "mod": true, "sum": true, "cfg": true,
	"conf": true, "ini": true, "env": true, "pem": true, "key": true, "png": true, "jpg": true, "svg": true, "pdf": true,
	"bak": true, "tmp": true, "old": true, "out": true, "o": true, "a": true, "so": true, "jsx": true, "tsx": true, "vue": true,
	"lua": true, "pl": true, "php": true, "swift": true, "kt": true, "db": true, "sql": true, "img": true, "iso": true, "bin": true,
}

// staticWords turns arguments into words for optSpec.parse.
func staticWords(args []string) []word {
	out := make([]word, len(args))
	for i, a := range args {
		out[i] = word{val: a, static: true}
	}
	return out
}

func dedupe(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func maxRisk(paths []string) Risk {
	if anyOutside(paths) {
		return RiskHigh
	}
	return RiskMedium
}

func outsideNote(paths []string) string {
	if anyOutside(paths) {
		return " (outside the working directory)"
	}
	return ""
}
