package shell

import (
	"fmt"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// This file holds what every command's check uses (options, launches,
// reasons), the table of the commands the package knows, and the models
// of find and of the readers whose options write or run programs (sort,
// tar, pagers, ...). Each family of its own has a file: git.go; sed.go,
// awk.go and jq.go; wrappers.go; builtins.go; and the option models of
// read-only commands in models.go. Which arguments name files is in
// files.go, and which names may hold credentials in secrets.go.

// check is the analysis of one command by the knowledge the package has of
// its name.
type check struct {
	w     *walker
	cmd   *Command
	args  []word
	extra bool // receives more arguments at run time (xargs)
	// extraInside: the arguments xargs supplies are paths find printed
	// from inside the working directory.
	extraInside bool
	fromFind    bool             // its standard input is find's list of paths inside the working directory
	stdin       *syntax.Redirect // what feeds its standard input, if redirected
	launches    []launch
}

// launch is a command, or a command string, that a command runs.
type launch struct {
	via         string
	words       []word
	extra       bool
	extraInside bool
	env         []string
	envReview   []string

	hasSrc  bool
	src     string
	variant syntax.LangVariant
}

// harmlessOut reports whether the command writing to the file t touches
// no file: t is /dev/null, or a descriptor not open on a file.
func (c *check) harmlessOut(t string) bool {
	return harmlessOut(t, fdState(c.w.fds, c.cmd.Redirects))
}

func (c *check) review(msg string) {
	if !slices.Contains(c.cmd.Review, msg) {
		c.cmd.Review = append(c.cmd.Review, msg)
	}
}

func (c *check) reviewf(format string, a ...any) { c.review(fmt.Sprintf(format, a...)) }

func (c *check) writes(msg string) {
	c.cmd.Writes = true
	c.review(msg)
}

// run records that the command runs the command made of words.
func (c *check) run(via string, words []word, extra bool) {
	if len(words) == 0 {
		return
	}
	env, envReview := splitEnv(&words)
	if len(words) == 0 {
		return
	}
	c.launches = append(c.launches, launch{via: via, words: words, extra: extra, env: env, envReview: envReview})
}

// runExtra records that the command runs the command made of words with
// more arguments added at run time; inside says they are paths inside the
// working directory.
func (c *check) runExtra(via string, words []word, inside bool) {
	n := len(c.launches)
	c.run(via, words, true)
	if len(c.launches) > n {
		c.launches[n].extraInside = inside
	}
}

// runString records that the command runs src as shell code.
func (c *check) runString(via string, src word, v syntax.LangVariant) {
	if !src.static {
		c.reviewf("runs a command string only known at run time: %s", src.val)
		return
	}
	c.launches = append(c.launches, launch{via: via, hasSrc: true, src: src.val, variant: v})
}

// optionSafety reviews arguments that could turn into options the
// analysis cannot see: computed ones, globs, and those xargs adds.
func (c *check) optionSafety() {
	if c.extra {
		c.review("receives more arguments at run time (from xargs), which may be options")
	}
	dashdash := false
	for _, a := range c.args {
		switch {
		case !a.static && !a.procSubst: // <(...) is a /dev/fd/N name
			c.reviewf("has an argument only known at run time, which may be an option: %s", a.val)
		case a.glob && !dashdash:
			c.reviewf("has a pattern the shell replaces by file names, which may start with '-' and act as options: %s", a.val)
		case a.val == "--":
			dashdash = true
		}
	}
}

// splitEnv removes leading NAME=value words (env, sudo) and returns them.
func splitEnv(words *[]word) (env, review []string) {
	ws := *words
	for len(ws) > 0 && ws[0].static {
		name, _, ok := strings.Cut(ws[0].val, "=")
		if !ok || !validName(name) {
			break
		}
		env = append(env, ws[0].val)
		if msg := assignRisk(name, true); msg != "" {
			review = append(review, msg)
		}
		ws = ws[1:]
	}
	*words = ws
	return env, review
}

func validName(s string) bool {
	if s == "" || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// opt is one option as a program would read it.
type opt struct {
	name     string // "-o", or "--output" as written (perhaps abbreviated)
	val      string
	hasVal   bool
	attached bool // the value is part of the option's word (-oFILE, --output=FILE)
	valWord  word // the word the value comes from, for its static and glob marks
}

// value returns the option's value as a word.
func (o opt) value() word {
	w := o.valWord
	w.val = o.val
	return w
}

// is reports whether the option is the short option short (0 for none) or
// one of the long options, which GNU programs accept abbreviated.
func (o opt) is(short byte, longs ...string) bool {
	if short != 0 && len(o.name) == 2 && o.name[0] == '-' && o.name[1] == short {
		return true
	}
	if len(o.name) > 2 && strings.HasPrefix(o.name, "--") {
		for _, l := range longs {
			if strings.HasPrefix(l, o.name) {
				return true
			}
		}
	}
	return false
}

// optSpec describes a program's options well enough to find their values.
type optSpec struct {
	shortVal      string   // short options with a value: -o FILE, -oFILE
	shortOptVal   string   // short options with an optional attached value: -i.bak
	longVal       []string // long options with a value: --output FILE
	stopAtOperand bool     // options end at the first operand (wrappers)
}

// parse splits args into options and operands. With stopAtOperand it stops
// at the first operand and returns its index as rest.
func (s optSpec) parse(args []word) (opts []opt, operands []word, rest int) {
	return s.parseInto(args, nil, nil)
}

// parseInto is parse appending to opts and operands, which may be scratch
// space to reuse.
func (s optSpec) parseInto(args []word, opts []opt, operands []word) ([]opt, []word, int) {
	for i := 0; i < len(args); i++ {
		a := args[i].val
		if !args[i].static {
			if s.stopAtOperand {
				return opts, operands, i
			}
			operands = append(operands, args[i])
			continue
		}
		if a == "--" {
			if s.stopAtOperand {
				return opts, operands, i + 1
			}
			return opts, append(operands, args[i+1:]...), len(args)
		}
		if len(a) < 2 || a[0] != '-' {
			if s.stopAtOperand {
				return opts, operands, i
			}
			operands = append(operands, args[i])
			continue
		}
		if strings.HasPrefix(a, "--") {
			name, val, has := strings.Cut(a, "=")
			o := opt{name: name, val: val, hasVal: has, attached: has, valWord: args[i]}
			if !has && s.takesLong(name) && i+1 < len(args) {
				o.val, o.hasVal, o.valWord = args[i+1].val, true, args[i+1]
				i++
			}
			opts = append(opts, o)
			continue
		}
		for j := 1; j < len(a); j++ {
			name := a[:1] + a[j:j+1]
			switch {
			case strings.IndexByte(s.shortVal, a[j]) >= 0:
				switch {
				case j+1 < len(a):
					opts = append(opts, opt{name: name, val: a[j+1:], hasVal: true, attached: true, valWord: args[i]})
				case i+1 < len(args):
					opts = append(opts, opt{name: name, val: args[i+1].val, hasVal: true, valWord: args[i+1]})
					i++
				default:
					opts = append(opts, opt{name: name})
				}
				j = len(a)
			case strings.IndexByte(s.shortOptVal, a[j]) >= 0:
				opts = append(opts, opt{name: name, val: a[j+1:], hasVal: j+1 < len(a), attached: true, valWord: args[i]})
				j = len(a)
			default:
				opts = append(opts, opt{name: name})
			}
		}
	}
	return opts, operands, len(args)
}

func (s optSpec) takesLong(name string) bool {
	for _, l := range s.longVal {
		if strings.HasPrefix(l, name) {
			return true
		}
	}
	return false
}

// info is what the package knows about a command name.
type info struct {
	check func(*check)
	// options is set for commands with options that run programs or write
	// files: an argument the analysis cannot read may be such an option.
	options bool
}

var known map[string]info

func init() {
	known = map[string]info{
		// Wrappers: they run the command that follows their options.
		"sudo":     {checkSudo, true},
		"sudoedit": {func(c *check) { c.writes("edits files as another user (sudoedit)") }, true},
		"doas":     {checkDoas, true},
		"env":      {checkEnv, true},
		"nice":     {wrapper("nice", optSpec{shortVal: "n", longVal: []string{"--adjustment"}}, 0), true},
		"nohup":    {wrapper("nohup", optSpec{}, 0), true},
		"timeout":  {wrapper("timeout", optSpec{shortVal: "sk", longVal: []string{"--signal", "--kill-after"}}, 1), true},
		"stdbuf":   {wrapper("stdbuf", optSpec{shortVal: "ioe", longVal: []string{"--input", "--output", "--error"}}, 0), true},
		"ionice":   {wrapper("ionice", optSpec{shortVal: "cnp", longVal: []string{"--class", "--classdata", "--pid", "--pgid", "--uid"}}, 0), true},
		"setsid":   {wrapper("setsid", optSpec{}, 0), true},
		"chroot":   {checkChroot, true},
		"exec":     {wrapper("exec", optSpec{shortVal: "a"}, 0), true},
		"builtin":  {wrapper("builtin", optSpec{}, 0), true},
		"command":  {checkCommand, true},
		"time":     {checkTime, true},
		"xargs":    {checkXargs, true},
		"busybox":  {checkBusybox, true},
		"flock":    {checkFlock, true},
		"watch":    {checkWatch, true},
		"su":       {checkSu, true},
		"runuser":  {checkSu, true},

		// Code from strings and files.
		"eval":      {checkEval, false},
		"source":    {checkSource, false},
		".":         {checkSource, false},
		"trap":      {checkTrap, false},
		"alias":     {checkAlias, false},
		"hash":      {flagOpt('p', "maps a command name to another program (hash -p)"), false},
		"enable":    {flagOpt('f', "loads a builtin from a shared library (enable -f)"), false},
		"mapfile":   {checkMapfile, false},
		"readarray": {checkMapfile, false},
		"complete":  {checkComplete, false},
		"compgen":   {checkComplete, false},
		"bind":      {flagOpt('x', "binds a key to a shell command (bind -x)"), false},
		"fc":        {func(c *check) { c.review("runs commands again from the history (fc)") }, false},
		"let":       {checkLet, false},
		"printf":    {checkPrintf, false},
		"read":      {checkRead, false},
		"unset":     {checkUnset, false},
		"getopts":   {checkGetopts, false},
		"wait":      {checkWait, false},
		"export":    {checkExport, false},
		"declare":   {checkExport, false},
		"typeset":   {checkExport, false},
		"local":     {checkExport, false},
		"readonly":  {checkExport, false},
		"test":      {checkTest, false},
		"[":         {checkTest, false},

		// Readers with options that run programs or write files.
		"find":   {checkFind, true},
		"git":    {checkGit, true},
		"sed":    {checkSed, true},
		"sort":   {checkSort, true},
		"tar":    {checkTar, true},
		"less":   {checkPager, true},
		"more":   {checkPager, true},
		"most":   {checkPager, true},
		"pg":     {checkPager, true},
		"man":    {badOpts(optSpec{shortVal: "PCMLmSsep"}, "runs a program as pager, browser or formatter", "PHX", "--pager", "--html", "--browser"), true},
		"rg":     {badOpts(optSpec{shortVal: "efgtTAmBCEjMr", longVal: []string{"--pre", "--hostname-bin"}}, "runs a program on the files it searches", "", "--pre", "--hostname-bin"), true},
		"date":   {modelled(dateModel, checkDate), true},
		"join":   {modelled(joinModel, nil), false},
		"column": {modelled(columnModel, nil), false},
		"diff":   {modelled(diffModel, nil), false},
		"cat":    {modelled(catModel, nil), false},
		"head":   {modelled(headModel, nil), false},
		"tail":   {modelled(tailModel, nil), false},
		"wc":     {modelled(wcModel, nil), false},
		"cut":    {modelled(cutModel, nil), false},
		"ls":     {modelled(lsModel, nil), false},
		"grep":   {modelled(grepModel, nil), false},
		"egrep":  {modelled(grepModel, nil), false},
		"fgrep":  {modelled(grepModel, nil), false},
		"tree":   {checkTree, true},
		"tac":    {checkTac, false},
		"uniq":   {modelled(uniqModel, checkUniq), true},
		"xxd":    {outputOperand(optSpec{shortVal: "cglosn"}, 1), true},
		"file":   {badOpts(optSpec{shortVal: "efFmP"}, "writes a compiled magic file", "C", "--compile"), true},
		"yq":     {checkYq, true},
		"tee":    {checkTee, true},
	}
	for _, name := range []string{"awk", "gawk", "mawk", "nawk", "original-awk"} {
		known[name] = info{checkAwk, true}
	}
	for _, name := range []string{"sh", "bash", "rbash", "dash", "ash", "zsh", "ksh", "mksh", "lksh", "pdksh", "posh", "yash"} {
		known[name] = info{checkShell, true}
	}
}

// badOpts reviews the command when one of the options is given.
func badOpts(spec optSpec, msg string, shorts string, longs ...string) func(*check) {
	return func(c *check) {
		opts, _, _ := spec.parse(c.args)
		for _, o := range opts {
			bad := o.is(0, longs...)
			for i := 0; i < len(shorts) && !bad; i++ {
				bad = o.is(shorts[i])
			}
			if bad {
				c.reviewf("%s (%s)", msg, o.name)
			}
		}
	}
}

// outputOperand flags a command that writes to its operand number n
// (counting from 0), as uniq IN OUT and xxd IN OUT do.
func outputOperand(spec optSpec, n int) func(*check) {
	return func(c *check) {
		_, operands, _ := spec.parse(c.args)
		outputOperandN(c, operands, n)
	}
}

// outputOperandN flags a command that writes to its operand number n:
// one that is there, or that a word before it may become, since a
// pattern, or find -exec's {} before +, stands for several words.
func outputOperandN(c *check, operands []word, n int) {
	if len(operands) > n && !c.harmlessOut(operands[n].val) {
		c.writes("writes its output to the file " + operands[n].val)
		return
	}
	for _, op := range operands[:min(n+1, len(operands))] {
		if op.glob || op.multi {
			c.writes("writes its output to its operand number " + fmt.Sprint(n+1) + ", which " + op.val + " may become")
			return
		}
	}
}

func checkFind(c *check) {
	args := c.args
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.static {
			continue
		}
		switch a.val {
		case "-exec", "-execdir", "-ok", "-okdir":
			end := -1
			for j := i + 1; j < len(args); j++ {
				if args[j].static && (args[j].val == ";" || args[j].val == "+" && j > i+1 && args[j-1].val == "{}") {
					end = j
					break
				}
			}
			if end < 0 {
				c.review("has " + a.val + " without its terminating ';' or '+'")
				return
			}
			inner := args[i+1 : end]
			if args[end].val == "+" {
				// {} before + stands for as many paths as fit.
				inner = slices.Clone(inner)
				inner[len(inner)-1].multi = true
			}
			c.run("find "+a.val, inner, false)
			i = end
		case "-delete":
			c.writes("deletes the files it finds (-delete)")
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			target := ""
			if i+1 < len(args) {
				target = args[i+1].val
			}
			c.writes(fmt.Sprintf("writes to the file %s (%s)", target, a.val))
		}
	}
	findFiles(c)
}

// findFiles records find's starting points, the files its tests name and
// the name patterns that choose what -exec reads.
func findFiles(c *check) {
	args := c.args
	i := 0
	for ; i < len(args); i++ {
		a := args[i].val
		if !args[i].static {
			break
		}
		if a == "-D" {
			i++
			continue
		}
		if !(a == "-H" || a == "-L" || a == "-P" || strings.HasPrefix(a, "-O")) {
			break
		}
	}
	for ; i < len(args); i++ {
		a := args[i]
		if a.static && (strings.HasPrefix(a.val, "-") || a.val == "(" || a.val == "!" || a.val == ")" || a.val == ",") {
			break
		}
		c.file(a, false)
	}
	for ; i < len(args); i++ {
		a := args[i]
		if !a.static || i+1 >= len(args) {
			continue
		}
		v := args[i+1]
		switch {
		case a.val == "-newer" || a.val == "-anewer" || a.val == "-cnewer" || a.val == "-samefile" || a.val == "-f" ||
			strings.HasPrefix(a.val, "-newer") && len(a.val) == 8 && a.val[7] != 't':
			c.file(v, a.val == "-f")
			i++
		case a.val == "-files0-from":
			c.file(v, false)
			c.unknown("takes its starting points from the file " + v.val + " (-files0-from)")
			i++
		case a.val == "-fprint" || a.val == "-fprint0" || a.val == "-fprintf" || a.val == "-fls":
			c.file(v, false)
			i++
		case findPatterns[a.val]:
			i++
		}
	}
	// find only lists names; with -exec it reads the files its patterns
	// choose. (Fed to xargs, see printsPathsInside.)
	if slices.ContainsFunc(args, func(a word) bool {
		return a.static && (a.val == "-exec" || a.val == "-execdir" || a.val == "-ok" || a.val == "-okdir")
	}) {
		for _, p := range findSecretPatterns(args) {
			c.secret(p)
		}
	}
}

// findPatterns are find's tests that choose files by name.
var findPatterns = map[string]bool{
	"-name": true, "-iname": true, "-path": true, "-ipath": true, "-wholename": true, "-iwholename": true,
	"-lname": true, "-ilname": true, "-regex": true, "-iregex": true,
}

// findSecretPatterns returns find's name patterns that may choose secret
// files: any that may match a name on the list (a pattern right after !
// or -not excludes, so it is left out), and any regular expression.
func findSecretPatterns(args []word) []string {
	var out []string
	for i := 0; i+1 < len(args); i++ {
		a, v := args[i], args[i+1]
		if !a.static || !findPatterns[a.val] {
			continue
		}
		i++
		if i >= 2 && args[i-2].static && (args[i-2].val == "!" || args[i-2].val == "-not") {
			continue
		}
		switch {
		case !v.static:
			out = append(out, "a file name pattern only known at run time: "+v.val)
		case a.val == "-regex" || a.val == "-iregex":
			out = append(out, "chooses files by a regular expression, which may match secret file names: "+v.val)
		case secretPath(v.val, true):
			out = append(out, "chooses files by a pattern that may match secret file names: "+v.val)
		}
	}
	return out
}

// endlessDevices never end: a command that reads all of one before it
// writes (sort, tac) fills memory and the disk with temporary files.
var endlessDevices = map[string]bool{"/dev/urandom": true, "/dev/random": true, "/dev/zero": true}

// endless reviews an operand that is an endless device.
func endless(c *check, operands []word) {
	for _, op := range operands {
		if endlessDevices[op.val] {
			c.review("reads all of " + op.val + ", which never ends, filling memory and the disk with temporary files")
		}
	}
}

func checkTac(c *check) {
	_, operands, _ := optSpec{shortVal: "s", longVal: []string{"--separator"}}.parse(c.args)
	endless(c, operands)
}

func checkSort(c *check) {
	spec := optSpec{shortVal: "kotST", longVal: []string{"--key", "--output", "--field-separator", "--buffer-size", "--temporary-directory", "--compress-program", "--files0-from", "--random-source", "--batch-size", "--parallel", "--sort"}}
	opts, operands, _ := spec.parse(c.args)
	sortModel.unknown(c, opts)
	endless(c, operands)
	for _, o := range opts {
		switch {
		case o.is('o', "--output"):
			c.writes("writes its output to the file " + o.val + " (" + o.name + ")")
		case o.is('T', "--temporary-directory"):
			c.writes("writes temporary files into " + o.val + " (" + o.name + ")")
		case o.is(0, "--compress-program"):
			c.reviewf("runs a program to compress temporary files (%s)", o.name)
		}
	}
}

func checkTar(c *check) {
	args := c.args
	if len(args) > 0 && args[0].static && args[0].val != "" && !strings.HasPrefix(args[0].val, "-") {
		// The old form bundles the first argument's letters without a dash.
		args = append([]word{{val: "-" + args[0].val, static: true}}, args[1:]...)
	}
	spec := optSpec{
		shortVal: "fbCFgIKLNTVXH",
		longVal: []string{"--file", "--blocking-factor", "--directory", "--info-script", "--new-volume-script", "--listed-incremental",
			"--use-compress-program", "--starting-file", "--tape-length", "--newer", "--files-from", "--label", "--exclude-from",
			"--format", "--to-command", "--checkpoint-action", "--rmt-command", "--rsh-command", "--index-file"},
	}
	opts, _, _ := spec.parse(args)
	for _, o := range opts {
		switch {
		case o.is('x', "--extract", "--get"), o.is('c', "--create"), o.is('r', "--append"),
			o.is('u', "--update"), o.is('A', "--catenate", "--concatenate"), o.is(0, "--delete"):
			c.writes("creates, changes or extracts files (" + o.name + ")")
		case o.is('I', "--use-compress-program"), o.is('F', "--info-script", "--new-volume-script"),
			o.is(0, "--to-command", "--checkpoint-action", "--rmt-command", "--rsh-command"):
			c.reviewf("runs a program (%s)", o.name)
		case o.is(0, "--index-file"):
			c.writes("writes to the file " + o.val + " (" + o.name + ")")
		case o.is('f', "--file") && strings.Contains(o.val, ":") && !strings.HasPrefix(o.val, "/") && !strings.HasPrefix(o.val, "."):
			c.review("reads an archive on a remote host through a remote shell (" + o.val + ")")
		}
	}
}

func checkPager(c *check) {
	for _, a := range c.args {
		if a.static && strings.HasPrefix(a.val, "+") {
			c.review("runs a command when it starts (" + a.val + "), which can include shell escapes")
		}
	}
	spec := optSpec{shortVal: "bhjkoOpPtTxyzD#", longVal: []string{"--lesskey-file", "--lesskey-src", "--lesskey-content", "--log-file", "--LOG-FILE", "--pattern", "--prompt", "--tag"}}
	opts, _, _ := spec.parse(c.args)
	for _, o := range opts {
		switch {
		case o.is('k', "--lesskey-file", "--lesskey-src", "--lesskey-content"):
			c.review("reads key bindings, which can run commands (" + o.name + ")")
		case o.is('o', "--log-file"), o.is('O', "--LOG-FILE"):
			c.writes("copies its input to the file " + o.val + " (" + o.name + ")")
		}
	}
}

func checkTree(c *check) {
	opts, _, _ := optSpec{shortVal: "LPIoHT", longVal: treeLongVal}.parse(c.args)
	for _, o := range opts {
		switch {
		case o.is('o'):
			c.writes("writes its output to the file " + o.val + " (-o)")
		case o.is('R'):
			c.writes("writes a listing into every directory (-R)")
		}
	}
}

func checkYq(c *check) {
	for _, a := range c.args {
		if !a.static {
			continue
		}
		if a.val == "--inplace" || strings.HasPrefix("--inplace", a.val) && len(a.val) > 4 ||
			len(a.val) > 1 && a.val[0] == '-' && a.val[1] != '-' && strings.Contains(a.val, "i") {
			c.writes("edits files in place (" + a.val + ")")
			return
		}
	}
}

func checkTee(c *check) {
	_, operands, _ := optSpec{longVal: []string{"--output-error"}}.parse(c.args)
	for _, o := range operands {
		if !c.harmlessOut(o.val) {
			c.cmd.Writes = true
		}
	}
}
