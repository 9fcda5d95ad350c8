package shell

import (
	"fmt"
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
		e.runsDownloaded(c, add, downloads)
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

	redirectWriteEffects(c, add, named)

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
		reviewEffects(c, add, modelSaid)
	}

	if said == 0 && c.Name != "" && c.Name != "eval" && !readers[c.Name] && known[c.Name].check == nil {
		// A program it has no model of, or one its model found nothing
		// to say of (rm with no file): never "harmless".
		add(EffectUnknown, RiskMedium, "runs "+c.label()+", whose effects tollgate does not know", nil)
	}

	outsideEffects(c, add, named, downloaded)
}

// runsDownloaded adds the code an interpreter, or a command named at run
// time, runs from what the string downloads: what a fetcher feeds it on
// standard input or in a substitution, and files downloaded before.
func (e *effects) runsDownloaded(c *Command, add addFunc, downloads map[string][]string) {
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

// redirectWriteEffects adds the files c's redirections write, and notes
// them in named.
func redirectWriteEffects(c *Command, add addFunc, named map[string]bool) {
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
}

// reviewEffects turns c's reasons for review into effects; modelSaid is
// how many effects the models of c added.
func reviewEffects(c *Command, add addFunc, modelSaid int) {
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

// outsideEffects adds the files outside the working directory, and the
// secrets, that no effect above named; when c runs downloaded code, that
// effect already says what its files named at run time are.
func outsideEffects(c *Command, add addFunc, named map[string]bool, downloaded bool) {
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
// notes in git.go, vars.go and words.go).
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
