package shell

import "strings"

// This file models git: the global options, the subcommands that write
// or run programs, and the files and revisions git reads.

// gitGlobal are git's options before the subcommand that neither run
// programs nor change which repository or configuration git reads.
var gitGlobal = map[string]bool{
	"-v": true, "-h": true, "--version": true, "--help": true,
	"-P": true, "--no-pager": true, "--no-replace-objects": true, "--no-lazy-fetch": true,
	"--no-optional-locks": true, "--no-advice": true, "--literal-pathspecs": true,
	"--glob-pathspecs": true, "--noglob-pathspecs": true, "--icase-pathspecs": true,
	"--html-path": true, "--man-path": true, "--info-path": true, "--exec-path": true,
}

// gitGlobalValue are the global options that take the next argument.
var gitGlobalValue = map[string]bool{
	"-c": true, "-C": true, "--git-dir": true, "--work-tree": true, "--namespace": true,
	"--super-prefix": true, "--config-env": true, "--attr-source": true,
}

func checkGit(c *check) {
	i := 0
	for ; i < len(c.args); i++ {
		a := c.args[i].val
		if !strings.HasPrefix(a, "-") {
			break
		}
		if gitGlobal[a] || strings.HasPrefix(a, "--list-cmds=") {
			continue
		}
		if gitGlobalValue[a] {
			i++
		}
		c.reviewf("uses the git option %s, which can run programs or change the repository and configuration git uses", a)
	}
	if i >= len(c.args) {
		return
	}
	sub := c.args[i].val
	spec := optSpec{}
	if sub == "grep" {
		spec = optSpec{shortVal: "efABCm", shortOptVal: "O"}
	}
	opts, operands, _ := spec.parse(c.args[i+1:])
	for _, o := range opts {
		switch {
		case o.is(0, "--output"),
			o.name == "-o" && (sub == "format-patch" || sub == "archive"):
			c.writes("git " + sub + " writes to a file (" + o.name + ")")
		case o.is(0, "--upload-pack", "--receive-pack", "--exec", "--extcmd", "--open-files-in-pager", "--template", "--config"),
			o.name == "-O" && sub == "grep",
			o.name == "-u" && (sub == "clone" || sub == "ls-remote" || sub == "archive"),
			o.name == "-x" && (sub == "rebase" || sub == "difftool"),
			o.name == "-c" && (sub == "clone" || sub == "submodule"):
			c.reviewf("git %s %s runs a program or sets configuration", sub, o.name)
		case o.is(0, "--ext-diff", "--filters"), o.is(0, "--textconv") && len(o.name) > len("--text"):
			c.reviewf("git %s %s runs a program the configuration names (an external diff, textconv or filter driver)", sub, o.name)
		case sub == "cat-file" && (o.name == "--batch" || len(o.name) > len("--batch-") && strings.HasPrefix("--batch-command", o.name)):
			c.secret("git cat-file " + o.name + " prints any object named on its standard input, which may be a committed secret")
		}
	}
	switch sub {
	case "branch":
		checkGitBranch(c, opts, operands)
	case "stash", "worktree":
		// Only listing and showing read.
		if len(operands) == 0 && sub == "stash" || len(operands) > 0 && operands[0].val != "list" && !(sub == "stash" && operands[0].val == "show") {
			c.writes("git " + sub + " changes the repository or the working tree")
		}
	case "tag":
		checkGitTag(c, c.args[i+1:])
	case "remote":
		checkGitRemote(c, opts, operands)
	case "config":
		checkGitConfig(c, c.args[i+1:])
	}
	gitFiles(c, sub, c.args[i+1:])
	switch sub {
	case "cat-file", "show":
		gitObjectIDs(c, sub, opts, operands)
	}
	switch sub {
	case "filter-branch", "filter-repo":
		c.review("git " + sub + " runs shell filters")
	case "submodule", "bisect":
		for _, op := range operands {
			if op.val == "foreach" || op.val == "run" {
				c.review("git " + sub + " " + op.val + " runs a command")
			}
		}
	}
}

// gitObjectIDs notes git cat-file -p, cat-file TYPE and git show of an
// object named by its id: the object may be a committed secret file, and
// no name shows it (git show HEAD:.env does; git show 3f2a9c1 does not).
func gitObjectIDs(c *check, sub string, opts []opt, operands []word) {
	objects := operands
	if sub == "cat-file" {
		content := false
		for _, o := range opts {
			if o.name == "-p" || o.is(0, "--textconv", "--filters") {
				content = true
			}
		}
		if len(operands) > 1 && operands[0].static && !content {
			switch operands[0].val {
			case "blob", "tree", "commit", "tag":
				content = true
			}
			objects = operands[1:]
		}
		if !content {
			return
		}
	}
	for _, op := range objects {
		if !op.static || isObjectID(op.val) {
			c.secret("git " + sub + " of an object named by id, which may be a committed secret file: " + op.val)
			return
		}
	}
}

// isObjectID reports whether v names an object by its (abbreviated) id,
// perhaps peeled (^{}, ^{blob}); an ancestor (id~2, id^) is a commit.
func isObjectID(v string) bool {
	if i := strings.IndexAny(v, "^~@"); i >= 0 {
		if !strings.Contains(v[i:], "{") {
			return false
		}
		v = v[:i]
	}
	if len(v) < 4 || len(v) > 64 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// gitBranchList are the options of git branch that only list branches;
// gitBranchFilters also put it in list mode, where operands are patterns.
var (
	gitBranchList = []string{"--all", "--remotes", "--list", "--verbose", "--quiet", "--abbrev", "--no-abbrev",
		"--column", "--no-column", "--color", "--no-color", "--sort", "--format", "--show-current", "--ignore-case",
		"--omit-empty", "--merged", "--no-merged", "--contains", "--no-contains", "--points-at"}
	gitBranchFilters = []string{"--list", "--merged", "--no-merged", "--contains", "--no-contains", "--points-at"}
)

// checkGitBranch counts git branch as a write unless it only lists:
// creating, deleting, renaming branches and setting their upstream or
// description change the repository and its configuration.
func checkGitBranch(c *check, opts []opt, operands []word) {
	list := false
	for _, o := range opts {
		switch {
		case o.is('l', gitBranchFilters...):
			list = true
		case o.is('a'), o.is('r'), o.is('q'), o.is('i'), o.is('v'), o.is(0, gitBranchList...):
		default:
			c.writes("git branch changes branches or their configuration (" + o.name + ")")
			return
		}
	}
	if len(operands) > 0 && !list {
		c.writes("git branch creates a branch (" + operands[0].val + ")")
	}
}

// gitURLs is why printing git's remote URLs or configuration counts as
// reading a secret: a token may be kept in a remote's URL
// (https://user:TOKEN@host, as GitLab CI's checkouts do), and in
// http.extraHeader (as actions/checkout does).
const gitURLs = ", where a token may be kept (https://user:TOKEN@host, http.extraHeader)"

// checkGitRemote counts git remote as a write unless it only lists the
// remotes' names: -v, get-url and show print their URLs, a secret read;
// add, set-url, remove, prune, update, ... change the remotes or fetch.
func checkGitRemote(c *check, opts []opt, operands []word) {
	verbose := false
	for _, o := range opts {
		switch {
		case o.is('v', "--verbose"):
			verbose = true
		case o.is(0, "--push", "--all"), o.name == "-n":
		default:
			c.reviewf("git remote has an option the analysis does not know (%s)", o.name)
		}
	}
	sub := ""
	if len(operands) > 0 {
		sub = operands[0].val
	}
	switch {
	case sub == "" && !verbose:
	case sub == "" || sub == "get-url" || sub == "show":
		what := "git remote -v"
		if sub != "" {
			what = "git remote " + sub
		}
		c.secret(what + " prints the remotes' URLs" + gitURLs)
	default:
		c.writes("git remote " + sub + " changes the remotes or fetches from one")
	}
}

// checkGitConfig counts git config as a write unless it only reads, and
// a read of what may hold a token (a remote's URL, http.*, credential.*,
// url.*, a key named like a secret; every key: --list, --get-regexp) as
// reading a secret. A --file it reads is checked as a file.
func checkGitConfig(c *check, args []word) {
	opts, operands, _ := optSpec{shortVal: "f", longVal: []string{"--file", "--blob", "--type", "--default", "--comment", "--value"}}.parse(args)
	read, list, write := false, false, false
	sub := ""
	if len(operands) > 0 && operands[0].static {
		switch operands[0].val {
		case "get", "list", "set", "unset", "rename-section", "remove-section", "edit":
			sub = operands[0].val
			operands = operands[1:]
		}
	}
	switch sub {
	case "get":
		read = true
	case "list":
		list = true
	case "":
	default:
		write = true
	}
	for _, o := range opts {
		switch {
		case o.name == "--get" || o.is(0, "--get-all", "--get-color", "--get-colorbool"):
			read = true
		case o.is('l', "--list", "--get-regexp", "--get-urlmatch", "--regexp", "--all", "--url"):
			list = true
		case o.is('f', "--file"):
			c.file(o.value(), false)
		case o.is(0, "--blob"):
			c.secret("git config --blob reads the configuration from a blob, which may be a committed secret file")
		case o.is('z', "--null", "--local", "--global", "--system", "--worktree", "--includes", "--no-includes",
			"--show-origin", "--show-scope", "--name-only", "--type", "--bool", "--int", "--bool-or-int", "--path",
			"--expiry-date", "--default", "--fixed-value", "--no-type"):
		case o.is('e', "--add", "--replace-all", "--unset", "--unset-all", "--rename-section", "--remove-section",
			"--edit", "--comment", "--value"):
			write = true
		default:
			c.reviewf("git config has an option the analysis does not know (%s)", o.name)
		}
	}
	if sub == "" && !read && !list && !write {
		// git config NAME reads it; git config NAME VALUE sets it.
		if len(operands) > 1 {
			write = true
		} else {
			read = true
		}
	}
	switch {
	case write:
		c.writes("git config changes the configuration")
	case list:
		c.secret("git config prints every key" + gitURLs)
	case read && len(operands) > 0 && (!operands[0].static || secretGitKey(operands[0].val)):
		c.secret("git config prints " + operands[0].val + gitURLs)
	}
}

// secretGitKey reports whether a git configuration key may hold a token:
// a remote's URL, anything of http, https, credential or url (whose
// subsection is itself a URL), or a key named like a secret.
func secretGitKey(key string) bool {
	k := strings.ToLower(key)
	section, rest, _ := strings.Cut(k, ".")
	last := k[strings.LastIndexByte(k, '.')+1:]
	switch {
	case section == "remote" && (last == "url" || last == "pushurl"),
		section == "http" || section == "https" || section == "credential" || section == "url",
		rest == "":
		return true
	}
	for _, w := range []string{"token", "secret", "pass", "cred", "auth", "key", "cookie"} {
		if strings.Contains(last, w) {
			return true
		}
	}
	return false
}

// checkGitTag counts git tag as a write unless it only lists: with no
// operand, or in list mode (-l and the filters), where operands are
// patterns.
func checkGitTag(c *check, args []word) {
	opts, operands, _ := optSpec{shortOptVal: "n", longVal: []string{"--sort", "--format"}}.parse(args)
	list := false
	for _, o := range opts {
		switch {
		case o.is('l', "--list", "--contains", "--no-contains", "--points-at", "--merged", "--no-merged"):
			list = true
		case o.is('n'), o.is('i', "--sort", "--format", "--column", "--no-column", "--color", "--no-color",
			"--ignore-case", "--omit-empty"):
		default:
			c.writes("git tag changes tags (" + o.name + ")")
			return
		}
	}
	if len(operands) > 0 && !list {
		c.writes("git tag creates a tag (" + operands[0].val + ")")
	}
}

// gitFiles records the files a git subcommand may read: its operands
// (paths, or revisions, which are harmless to check), the path of a
// REV:path, and option values. A pathspec is a pattern.
func gitFiles(c *check, sub string, args []word) {
	spec := optSpec{}
	pattern := false
	if sub == "grep" {
		spec = optSpec{shortVal: "efABCm", shortOptVal: "O", longVal: []string{"--max-depth", "--context", "--after-context", "--before-context", "--max-count", "--threads"}}
		pattern = true
	}
	opts, operands, _ := spec.parse(args)
	for _, o := range opts {
		if sub == "grep" && (o.is('e') || o.is('f', "--file")) {
			pattern = false
		}
		if o.is('f', "--file") && sub == "grep" || !o.attached && o.is(0, "--contents", "--ignore-revs-file", "--exclude-from", "--pathspec-from-file") {
			c.file(o.value(), false)
		}
	}
	// git log -L START,END:FILE and -L :FUNC:FILE name a file.
	for k, a := range args {
		v, ok := strings.CutPrefix(a.val, "-L")
		if !a.static || !ok || sub == "blame" {
			continue
		}
		if v == "" && k+1 < len(args) {
			v = args[k+1].val
		}
		if j := strings.LastIndexByte(v, ':'); j >= 0 {
			c.gitFile(word{val: v[j+1:], static: true})
		}
	}
	// An option's word may end in a file (-O<orderfile>, --output=FILE,
	// --contents=FILE): check every way it could.
	for _, a := range args {
		if !a.static || len(a.val) < 2 || a.val[0] != '-' || a.val == "--" {
			continue
		}
		if strings.HasPrefix(a.val, "--") {
			if _, v, ok := strings.Cut(a.val, "="); ok {
				c.gitFile(word{val: v, static: true, glob: a.glob})
			}
			continue
		}
		for k := 2; k < len(a.val) && k < 64; k++ {
			if outsidePath(a.val[k:], a.glob) != "" || secretPath(a.val[k:], true) {
				c.gitFile(word{val: a.val[k:], static: true, glob: a.glob})
				break
			}
		}
	}
	switch sub {
	case "branch", "describe", "rev-parse", "tag", "for-each-ref", "show-ref", "remote", "config":
		return // operands are names, patterns or revisions, not paths
	}
	if pattern && len(operands) > 0 {
		operands = operands[1:]
	}
	for _, op := range operands {
		c.gitFile(op)
	}
}

// gitFile records a git operand: a path or pathspec, a revision, or
// REV:path, whose path part is checked for secrets too.
func (c *check) gitFile(w word) {
	c.file(word{val: w.val, static: w.static, glob: w.glob || w.static}, false)
	if !w.static {
		return
	}
	// Pathspec magic that starts at the top of the repository (:/,
	// :(top)), which may lie above the working directory.
	if v := w.val; strings.HasPrefix(v, ":/") || strings.HasPrefix(v, ":(") && strings.Contains(v[:max(strings.IndexByte(v, ')'), 0)], "top") {
		c.outside("a pathspec from the top of the repository, which may lie above the working directory: " + v)
	}
	// REV:path, :path and :N:path: the path follows one of the first
	// colons. (It is a path from the top of the repository, which is
	// taken to be the working directory, unless it starts with ./ or
	// ../.)
	rest := w.val
	for range 3 {
		i := strings.IndexByte(rest, ':')
		if i < 0 {
			return
		}
		rest = rest[i+1:]
		if why := outsidePath(rest, true); why != "" && rest != "" && !strings.HasPrefix(rest, "/") {
			c.outside("a path in a revision that climbs out of the working directory: " + w.val)
		}
		if secretPath(rest, true) {
			c.secret(w.val)
			return
		}
	}
}
