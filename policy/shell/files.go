package shell

import (
	"strings"
)

// This file finds the files a command names, and which of them may lie
// outside the working directory or hold credentials (secrets.go says
// which names may). A command the
// analysis does not know is taken to name a file with every operand and
// every --name=value; for those it knows, option values that are counts,
// patterns or formats are left out, which only makes fewer asks.

// fileSpec describes which arguments of a program name files.
type fileSpec struct {
	opts      optSpec
	fileShort string   // short options whose value names a file
	fileLong  []string // long options whose value names a file
	// textLong are long options written with an attached value (--color=
	// auto) that is not a file. The value of a long option that is neither
	// here nor in opts.longVal is taken for a file.
	textLong []string
	// first: the first operand is a pattern, script or program, unless one
	// of firstShort or firstLong (grep -e, -f) gives it instead.
	first      bool
	firstShort string
	firstLong  []string
	// patShort and patLong give file name patterns (grep --include): the
	// files they select are read.
	patShort string
	patLong  []string
	// noOperands: no operand names a file (echo, tr, wrappers).
	noOperands bool
	// meta: only names and metadata are read (ls, stat), so the files are
	// checked for the working directory but not for secrets.
	meta bool
	// namesShort and namesLong are options whose value is a file of file
	// names to read (sort --files0-from=-, file -f). That file is read for
	// its content: its lines come back in messages (du: cannot access
	// 'LINE').
	namesShort string
	namesLong  []string
	// contentShort and contentLong are options whose value is a file read
	// for its content by a command that otherwise reads only metadata
	// (file -m, tree --hintro), and contentFlags make its operands such
	// files (tree --fromfile reads its listing from them, and prints it).
	contentShort string
	contentLong  []string
	contentFlags []string
}

// fileRules maps command names to how their arguments name files.
var fileRules map[string]func(*check)

// noFiles is the rule of commands whose arguments name no file.
func noFiles(*check) {}

func init() {
	grep := fileSpec{
		opts: optSpec{shortVal: "efABCmdD", longVal: []string{"--regexp", "--file", "--after-context", "--before-context", "--context",
			"--max-count", "--directories", "--devices", "--label", "--include", "--exclude", "--exclude-dir", "--exclude-from",
			"--binary-files", "--group-separator"}},
		fileShort: "f", fileLong: []string{"--file", "--exclude-from"},
		textLong: []string{"--color", "--colour"},
		first:    true, firstShort: "ef", firstLong: []string{"--regexp", "--file"},
		patLong: []string{"--include"},
	}
	rg := fileSpec{
		opts: optSpec{shortVal: "efgtTAmBCEjMrd", longVal: []string{"--regexp", "--file", "--glob", "--iglob", "--type", "--type-not",
			"--after-context", "--before-context", "--context", "--encoding", "--threads", "--max-columns", "--replace",
			"--max-count", "--max-depth", "--ignore-file", "--type-add", "--type-clear", "--colors", "--sort", "--sortr",
			"--max-filesize", "--path-separator", "--dfa-size-limit", "--regex-size-limit", "--pre", "--pre-glob",
			"--hostname-bin", "--hyperlink-format", "--context-separator", "--field-context-separator",
			"--field-match-separator", "--engine", "--generate", "--color"}},
		fileShort: "f", fileLong: []string{"--file", "--ignore-file"},
		first: true, firstShort: "ef", firstLong: []string{"--regexp", "--file", "--files", "--type-list"},
		patShort: "g", patLong: []string{"--glob", "--iglob"},
	}
	plain := func(shortVal string, longVal ...string) func(*check) {
		return fileSpec{opts: optSpec{shortVal: shortVal, longVal: longVal}}.apply
	}
	meta := func(shortVal string, longVal ...string) func(*check) {
		return fileSpec{opts: optSpec{shortVal: shortVal, longVal: longVal}, meta: true}.apply
	}
	checksum := func(c *check) {
		spec := fileSpec{opts: optSpec{}}
		spec.apply(c)
		opts, _, _ := spec.opts.parse(c.args)
		for _, o := range opts {
			if o.is('c', "--check") {
				c.unknown("reads the files a checksum list names (" + o.name + ")")
			}
		}
	}
	fileRules = map[string]func(*check){
		"grep": grep.apply, "egrep": grep.apply, "fgrep": grep.apply,
		"rg": rg.apply,
		"ls": fileSpec{opts: optSpec{shortVal: "ITw", longVal: []string{"--block-size", "--format", "--hide", "--ignore", "--indicator-style", "--quoting-style", "--sort", "--tabsize", "--time", "--time-style", "--width"}}, textLong: []string{"--color", "--hyperlink"}, meta: true}.apply,
		"tree": fileSpec{opts: optSpec{shortVal: "LPIoHT", longVal: treeLongVal}, fileShort: "o",
			contentLong: []string{"--hintro", "--houtro", "--infofile"}, contentFlags: []string{"--fromfile"}, meta: true}.apply,
		"stat": meta("c", "--format", "--printf"),
		"du":   fileSpec{opts: optSpec{shortVal: "BdtX", longVal: []string{"--block-size", "--max-depth", "--threshold", "--exclude", "--exclude-from", "--files0-from", "--time-style"}}, fileShort: "X", fileLong: []string{"--exclude-from"}, namesLong: []string{"--files0-from"}, meta: true}.apply,
		"df":   meta("Btx", "--block-size", "--type", "--exclude-type"),
		"file": fileSpec{opts: optSpec{shortVal: "efFmP", longVal: []string{"--exclude", "--files-from", "--separator", "--magic-file", "--parameter"}},
			contentShort: "m", contentLong: []string{"--magic-file"}, namesShort: "f", namesLong: []string{"--files-from"}, meta: true}.apply,
		"realpath": fileSpec{opts: optSpec{}, fileLong: []string{"--relative-to", "--relative-base"}, meta: true}.apply,
		"readlink": meta(""),
		"cat":      plain(""), "tac": plain("s", "--separator"), "rev": plain(""),
		"head": plain("nc", "--lines", "--bytes"), "tail": plain("ncs", "--lines", "--bytes", "--sleep-interval", "--pid", "--max-unchanged-stats"),
		"wc":   fileSpec{opts: optSpec{longVal: []string{"--files0-from"}}, namesLong: []string{"--files0-from"}}.apply,
		"nl":   plain("bdfhilnsvw", "--body-numbering", "--section-delimiter", "--footer-numbering", "--header-numbering", "--line-increment", "--join-blank-lines", "--number-format", "--number-separator", "--starting-line-number", "--number-width"),
		"fold": plain("w", "--width"), "paste": plain("d", "--delimiters"), "comm": plain("", "--output-delimiter"),
		"join":   fileSpec{opts: joinModel.spec()}.apply,
		"column": fileSpec{opts: columnModel.spec()}.apply,
		"cut":    plain("bcdf", "--bytes", "--characters", "--delimiter", "--fields", "--output-delimiter"),
		"sort": fileSpec{opts: optSpec{shortVal: "kotST", longVal: []string{"--key", "--output", "--field-separator", "--buffer-size", "--temporary-directory", "--compress-program", "--files0-from", "--random-source", "--batch-size", "--parallel", "--sort"}},
			fileShort: "oT", fileLong: []string{"--output", "--temporary-directory", "--random-source"}, namesLong: []string{"--files0-from"}}.apply,
		"uniq":   fileSpec{opts: uniqModel.spec()}.apply,
		"diff":   fileSpec{opts: diffModel.spec(), fileShort: "SX", fileLong: []string{"--exclude-from", "--from-file", "--to-file", "--starting-file"}, textLong: []string{"--color"}}.apply,
		"cmp":    plain("in", "--ignore-initial", "--bytes"),
		"less":   fileSpec{opts: optSpec{shortVal: "bhjkoOpPtTxyzD#", longVal: []string{"--lesskey-file", "--lesskey-src", "--lesskey-content", "--log-file", "--LOG-FILE", "--pattern", "--prompt", "--tag", "--tag-file"}}, fileShort: "koOT", fileLong: []string{"--lesskey-file", "--lesskey-src", "--log-file", "--LOG-FILE", "--tag-file"}}.apply,
		"more":   plain("n", "--lines"),
		"md5sum": checksum, "sha1sum": checksum, "sha224sum": checksum, "sha256sum": checksum, "sha384sum": checksum,
		"sha512sum": checksum, "b2sum": checksum, "cksum": checksum, "sum": checksum,
		"date":  fileSpec{opts: optSpec{shortVal: "dfrs", shortOptVal: "I", longVal: []string{"--date", "--file", "--reference", "--set"}}, fileShort: "fr", fileLong: []string{"--file", "--reference"}, textLong: []string{"--iso-8601", "--rfc-3339", "--rfc-email", "--resolution"}, noOperands: true}.apply,
		"xargs": fileSpec{opts: optSpec{shortVal: "adEILnPs", shortOptVal: "eil", longVal: []string{"--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--process-slot-var", "--max-lines", "--replace", "--eof"}, stopAtOperand: true}, fileShort: "a", fileLong: []string{"--arg-file"}, textLong: []string{"--process-slot-var", "--replace", "--eof", "--max-lines"}, noOperands: true}.apply,
		"time":  fileSpec{opts: optSpec{shortVal: "fo", longVal: []string{"--format", "--output"}, stopAtOperand: true}, fileShort: "o", fileLong: []string{"--output"}, noOperands: true}.apply,
		"env":   fileSpec{opts: optSpec{shortVal: "uCS", longVal: []string{"--unset", "--chdir", "--split-string"}, stopAtOperand: true}, fileShort: "C", fileLong: []string{"--chdir"}, textLong: []string{"--default-signal", "--ignore-signal", "--block-signal"}, noOperands: true, meta: true}.apply,
		"sudo": fileSpec{opts: optSpec{shortVal: "CDghpRrTtUu", longVal: []string{"--close-from", "--chdir", "--group", "--host", "--prompt", "--chroot", "--role", "--command-timeout", "--type", "--other-user", "--user"}, stopAtOperand: true},
			fileShort: "DR", fileLong: []string{"--chdir", "--chroot"}, noOperands: true, meta: true}.apply,
		"cd": checkCdFiles, "pushd": checkCdFiles,
		"popd": func(c *check) { c.outside("popd returns to a directory from the stack, which may be outside") },
		"test": checkTestFiles, "[": checkTestFiles,
		"jq": checkJqFiles,
		// Handled where their options are read.
		"find": noFiles, "git": noFiles, "sed": noFiles, "awk": noFiles, "gawk": noFiles, "mawk": noFiles, "nawk": noFiles,
		"original-awk": noFiles,
	}
	for _, name := range []string{
		"echo", "printf", "pwd", "whoami", "id", "uname", "basename", "dirname", "which", "type", "true", "false", ":",
		"read", "tr", "sleep", "seq", "yes", "hostname", "nproc", "arch", "tty", "groups", "logname", "users",
		"nice", "nohup", "timeout", "stdbuf", "ionice", "setsid", "exec", "builtin", "command", "doas", "watch",
		"let", "export", "declare", "typeset", "local", "readonly", "unset", "alias", "hash", "trap", "eval",
		"shift", "return", "exit", "break", "continue", "wait", "jobs", "set", "shopt", "getopts", "mapfile", "readarray",
	} {
		fileRules[name] = noFiles
	}
}

// apply records the files named by the command's arguments.
func (s fileSpec) apply(c *check) {
	w := c.w
	opts, operands, _ := s.opts.parseInto(c.args, w.opts[:0], w.operands[:0])
	w.opts, w.operands = opts, operands // keep the space for the next command
	first := s.first
	meta := s.meta
	for _, o := range opts {
		if len(s.contentFlags) > 0 && o.is(0, s.contentFlags...) {
			meta = false
		}
	}
	for _, o := range opts {
		if s.first && o.is(shortOf(o, s.firstShort), s.firstLong...) {
			first = false
		}
		if !o.hasVal {
			continue
		}
		v := o.value()
		long := strings.HasPrefix(o.name, "--")
		switch {
		case o.is(shortOf(o, s.patShort), s.patLong...):
			c.namePattern(v)
		case o.is(shortOf(o, s.contentShort), s.contentLong...):
			c.file(v, false)
		case o.is(shortOf(o, s.namesShort), s.namesLong...):
			// Reads the files named in that file (or on standard input).
			c.file(v, false)
			c.unknown("reads the files named in " + v.val + " (" + o.name + ")")
		case o.is(shortOf(o, s.fileShort), s.fileLong...):
			c.file(v, s.meta)
		case long && o.attached && !o.is(0, s.textLong...) && !s.opts.takesLong(o.name):
			c.file(v, s.meta)
		}
	}
	if s.opts.stopAtOperand || s.noOperands {
		return
	}
	if first && len(operands) > 0 {
		operands = operands[1:]
	}
	for _, op := range operands {
		c.file(op, meta)
	}
}

// treeLongVal are tree's long options that take a value.
var treeLongVal = []string{"--charset", "--filelimit", "--timefmt", "--sort", "--hintro", "--houtro", "--infofile"}

// shortOf returns o's short option letter if it is one of letters, else 0.
func shortOf(o opt, letters string) byte {
	if len(o.name) == 2 && o.name[0] == '-' && strings.IndexByte(letters, o.name[1]) >= 0 {
		return o.name[1]
	}
	return 0
}

// defaultFiles is the rule of a command the analysis does not know: every
// operand names a file, and so does every --name=value.
func defaultFiles(c *check) {
	fileSpec{opts: optSpec{}}.apply(c)
}

func checkCdFiles(c *check) {
	_, operands, _ := optSpec{}.parse(c.args)
	if len(operands) == 0 {
		c.outside(c.cmd.Name + " without a directory goes to the home directory")
		return
	}
	d := operands[0]
	if d.static && (d.val == "-" || strings.HasPrefix(d.val, "+") || strings.HasPrefix(d.val, "-")) {
		c.outside(c.cmd.Name + " " + d.val + " goes to a directory the analysis does not know")
		return
	}
	c.file(d, false)
}

// fileTests are the unary test operators that look at a file.
var fileTests = map[string]bool{
	"-a": true, "-b": true, "-c": true, "-d": true, "-e": true, "-f": true, "-g": true, "-h": true, "-k": true,
	"-p": true, "-r": true, "-s": true, "-u": true, "-w": true, "-x": true, "-G": true, "-L": true, "-N": true,
	"-O": true, "-S": true,
}

func checkTestFiles(c *check) {
	args := c.args
	for i, a := range args {
		if !a.static {
			continue
		}
		switch {
		case fileTests[a.val] && i+1 < len(args):
			c.file(args[i+1], true)
		case (a.val == "-nt" || a.val == "-ot" || a.val == "-ef") && i > 0 && i+1 < len(args):
			c.file(args[i-1], true)
			c.file(args[i+1], true)
		}
	}
}

// files applies the command's file rule, and checks the files its
// redirections open.
func (c *check) files() {
	rule, ok := fileRules[c.cmd.Name]
	if !ok {
		rule = defaultFiles
	}
	rule(c)
	if c.extra && !c.extraInside && !isNoFiles(c.cmd.Name) {
		c.unknown("receives arguments at run time (from xargs), which may name any file")
	}
}

func isNoFiles(name string) bool {
	switch name {
	case "echo", "printf", "true", "false", ":", "basename", "dirname":
		return true
	}
	return false
}

// file records that the command opens or lists the file w names; meta
// means only its name and metadata are read. Every file found outside is
// noted (up to MaxNotes): a policy that knows the directory takes off the
// ones inside it (policy's insideDir), and must see the others. Once a
// file is found secret, later ones are recorded but not checked: one is
// enough to ask.
func (c *check) file(w word, meta bool) {
	if c.cmd.Files == nil {
		c.cmd.Files = make([]string, 0, min(len(c.args), 8))
	}
	c.cmd.Files = append(c.cmd.Files, w.val)
	if computed(w) && !meta {
		// Any file, a secret one inside too, read for its content:
		// checked whatever was found outside before. (Names and metadata
		// alone are not checked for secrets.)
		if len(c.cmd.Unknown) == 0 {
			c.unknown(outsideWord(w))
		}
	} else if why := outsideWord(w); why != "" {
		c.outside(why)
	}
	if !meta && w.static && len(c.cmd.Secrets) == 0 && (secretPath(w.val, w.glob) || inGitDir(w.val, w.glob)) {
		c.secret(w.val)
	}
}

// namePattern records a file name pattern (find -name, grep --include):
// the files it selects are read, so it is checked for secrets.
func (c *check) namePattern(w word) {
	if !w.static {
		c.secret("a file name pattern only known at run time: " + w.val)
		return
	}
	if secretName(strings.ToLower(w.val), true) {
		c.secret(w.val)
	}
}

func (c *check) outside(why string) {
	addNote(&c.cmd.Outside, why)
}

// unknown notes that the command may name any file, inside the working
// directory too (see Command.Unknown); it is outside as well.
func (c *check) unknown(why string) {
	addNote(&c.cmd.Outside, why)
	addNote(&c.cmd.Unknown, why)
}

func addNote(notes *[]string, why string) {
	if len(*notes) < maxNotes && !containsString(*notes, why) {
		*notes = append(*notes, why)
	}
}

// computed: the word names a file only known at run time, which may be
// any file.
func computed(w word) bool {
	return !w.static && !w.inside && !w.procSubst
}

func (c *check) secret(why string) {
	if len(c.cmd.Secrets) < maxNotes && !containsString(c.cmd.Secrets, why) {
		c.cmd.Secrets = append(c.cmd.Secrets, why)
	}
}

// MaxNotes bounds the Outside, Unknown and Secrets entries of one
// command: a list that holds MaxNotes may have left some out.
const MaxNotes = 16

const maxNotes = MaxNotes

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// redirectFiles checks the files a command's redirections open.
func redirectFiles(cmd *Command) {
	for _, r := range cmd.Redirects {
		if !opensFile(r) {
			continue
		}
		switch {
		case r.Dynamic:
			why := "a redirection to or from a file named at run time: " + r.Target
			addNote(&cmd.Outside, why)
			addNote(&cmd.Unknown, why)
		default:
			if why := outsidePath(r.Target, false); why != "" {
				addNote(&cmd.Outside, why)
			}
		}
		if !r.Dynamic && secretPath(r.Target, false) && len(cmd.Secrets) < maxNotes && !containsString(cmd.Secrets, r.Target) {
			cmd.Secrets = append(cmd.Secrets, r.Target)
		}
	}
}

// opensFile reports whether a redirection opens a file: not a
// here-document or here-string, and not a duplicated or closed
// descriptor.
func opensFile(r Redirect) bool {
	switch r.Op {
	case "<<", "<<-", "<<<":
		return false
	case ">&", "<&":
		if r.Dynamic {
			return true
		}
		t := strings.TrimSuffix(r.Target, "-")
		return !(t == "" || isDigits(t))
	}
	return true
}

// deviceFiles are files outside the working directory that are safe to
// name: they hold no data of the machine's.
var deviceFiles = map[string]bool{
	"/dev/null": true, "/dev/zero": true, "/dev/random": true, "/dev/urandom": true, "/dev/stdin": true,
	"/dev/stdout": true, "/dev/stderr": true, "/dev/tty": true, "-": true,
}

// outsideWord says why the file a word names may lie outside the working
// directory, or "".
func outsideWord(w word) string {
	switch {
	case w.procSubst:
		return "" // <(...) is a pipe
	case w.inside:
		return ""
	case !w.static:
		return "a file named at run time: " + w.val
	}
	return outsidePath(w.val, w.glob)
}

// outsidePath says why p may name a file outside the working directory:
// it is absolute, starts with ~, climbs out with .., or is a pattern that
// can match .. ("" when it stays inside). Symbolic links inside the
// working directory are trusted.
func outsidePath(p string, glob bool) string {
	if deviceFiles[p] {
		return ""
	}
	if fd, ok := strings.CutPrefix(p, "/dev/fd/"); ok && isDigits(fd) {
		return ""
	}
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") {
		return p
	}
	depth := 0
	for rest := p; rest != ""; {
		comp := rest
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			comp, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		switch {
		case comp == "" || comp == ".":
		case comp == "..":
			if depth--; depth < 0 {
				return p
			}
		case glob && globsMeet(comp, ".."):
			return p // .* can match ..
		default:
			depth++
		}
	}
	return ""
}
