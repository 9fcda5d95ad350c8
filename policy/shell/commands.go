package shell

import (
	"fmt"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

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
		"join":   {modelled(joinModel, nil), true},
		"column": {modelled(columnModel, nil), true},
		"diff":   {modelled(diffModel, nil), true},
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

// wrapper runs the command that follows its options and skip operands.
func wrapper(name string, spec optSpec, skip int) func(*check) {
	spec.stopAtOperand = true
	return func(c *check) {
		_, _, rest := spec.parse(c.args)
		rest = min(rest+skip, len(c.args))
		c.run(name, c.args[rest:], false)
	}
}

// flagOpt reviews the command when option short is given.
func flagOpt(short byte, msg string) func(*check) {
	return func(c *check) {
		opts, _, _ := optSpec{}.parse(c.args)
		for _, o := range opts {
			if o.is(short) {
				c.review(msg)
			}
		}
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
	if len(operands) > n && !harmlessTarget(operands[n].val) {
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

func checkSudo(c *check) {
	spec := optSpec{
		shortVal:      "CDghpRrTtUu",
		longVal:       []string{"--close-from", "--chdir", "--group", "--host", "--prompt", "--chroot", "--role", "--command-timeout", "--type", "--other-user", "--user"},
		stopAtOperand: true,
	}
	opts, _, rest := spec.parse(c.args)
	shell := false
	for _, o := range opts {
		switch {
		case o.is('e', "--edit"):
			c.writes("edits files as another user (sudo -e)")
			return
		case o.is('s', "--shell"), o.is('i', "--login"):
			shell = true
		}
	}
	inner := c.args[rest:]
	if len(inner) == 0 && shell {
		c.review("starts a shell, which reads commands the analysis cannot see")
	}
	c.run("sudo", inner, false)
}

func checkDoas(c *check) {
	opts, _, rest := optSpec{shortVal: "uC", stopAtOperand: true}.parse(c.args)
	shell := false
	for _, o := range opts {
		if o.is('s') {
			shell = true
		}
	}
	if rest == len(c.args) && shell {
		c.review("starts a shell, which reads commands the analysis cannot see")
	}
	c.run("doas", c.args[rest:], false)
}

func checkEnv(c *check) {
	spec := optSpec{shortVal: "uCS", longVal: []string{"--unset", "--chdir", "--split-string"}, stopAtOperand: true}
	opts, _, rest := spec.parse(c.args)
	inner := c.args[rest:]
	if len(inner) > 0 && inner[0].static && inner[0].val == "-" {
		inner = inner[1:]
	}
	for _, o := range opts {
		if o.is('S', "--split-string") {
			// env -S splits its value into words much as the shell does.
			c.review("splits a string into a command (env -S)")
			src := o.val
			for _, a := range inner {
				src += " " + quoteWord(a.val)
			}
			c.runString("env -S", word{val: src, static: true}, syntax.LangPOSIX)
			return
		}
	}
	c.run("env", inner, false)
}

func checkChroot(c *check) {
	_, _, rest := optSpec{longVal: []string{"--userspec", "--groups"}, stopAtOperand: true}.parse(c.args)
	if rest+1 >= len(c.args) {
		c.review("starts a shell, which reads commands the analysis cannot see")
		return
	}
	c.run("chroot", c.args[rest+1:], false)
}

func checkCommand(c *check) {
	opts, _, rest := optSpec{stopAtOperand: true}.parse(c.args)
	for _, o := range opts {
		if o.is('v') || o.is('V') {
			return // only looks the name up
		}
	}
	c.run("command", c.args[rest:], false)
}

func checkTime(c *check) {
	opts, _, rest := optSpec{shortVal: "fo", longVal: []string{"--format", "--output"}, stopAtOperand: true}.parse(c.args)
	for _, o := range opts {
		if o.is('o', "--output") {
			c.writes("writes its report to the file " + o.val)
		}
	}
	c.run("time", c.args[rest:], false)
}

func checkXargs(c *check) {
	spec := optSpec{
		shortVal:      "adEILnPs",
		shortOptVal:   "eil",
		longVal:       []string{"--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"},
		stopAtOperand: true,
	}
	opts, _, rest := spec.parse(c.args)
	repl := ""
	inside := c.fromFind
	for _, o := range opts {
		switch {
		case o.is('I'), o.name == "-i", o.is(0, "--replace"):
			repl = o.val
			if !o.hasVal || repl == "" {
				repl = "{}"
			}
		case o.is('a', "--arg-file"):
			inside = false // the arguments come from the file, not find
		case o.is('d', "--delimiter") && o.val != `\n` && o.val != `\0` && o.val != "\n":
			inside = false // split elsewhere, a path's pieces may be absolute
		case o.is(0, "--process-slot-var"):
			if !validName(o.val) {
				c.review("sets a variable whose name the analysis cannot read (" + o.name + ")")
			} else if msg := assignRisk(o.val, true); msg != "" {
				c.review(msg)
			}
		}
	}
	inner := slices.Clone(c.args[rest:])
	if len(inner) == 0 {
		inner = []word{{val: "echo", static: true}}
	}
	if repl != "" {
		// xargs -I puts its input into the words that hold the placeholder.
		for i := range inner {
			if strings.Contains(inner[i].val, repl) {
				in := inner[i]
				inner[i].static = false
				// With find's paths, the word names a file inside when
				// it does with any of them in the placeholder: "." (the
				// starting point) climbs highest, and * stands for any
				// name in the check for secrets.
				inner[i].inside = inside && in.static && (in.val == repl ||
					outsidePath(strings.ReplaceAll(in.val, repl, "."), in.glob) == "" &&
						!secretPath(strings.ReplaceAll(in.val, repl, "*"), true))
			}
		}
	}
	c.runExtra("xargs", inner, inside)
}

func checkBusybox(c *check) {
	if len(c.args) == 0 {
		return
	}
	if first := c.args[0]; first.static && strings.HasPrefix(first.val, "-") {
		if strings.HasPrefix(first.val, "--install") {
			c.writes("installs links for its applets (busybox --install)")
		}
		return
	}
	c.run("busybox", c.args, false)
}

func checkFlock(c *check) {
	spec := optSpec{shortVal: "wEc", longVal: []string{"--timeout", "--conflict-exit-code", "--command"}, stopAtOperand: true}
	opts, _, rest := spec.parse(c.args)
	for _, o := range opts {
		if o.is('c', "--command") {
			c.runString("flock -c", word{val: o.val, static: true}, syntax.LangPOSIX)
			return
		}
	}
	if rest < len(c.args) {
		ops := c.args[rest+1:]
		// flock FILE -c COMMAND: the option may follow the file.
		if len(ops) >= 2 && ops[0].static && (ops[0].val == "-c" || ops[0].val == "--command") {
			c.runString("flock -c", ops[1], syntax.LangPOSIX)
			return
		}
		c.run("flock", ops, false)
	}
}

func checkWatch(c *check) {
	opts, _, rest := optSpec{shortVal: "nq", longVal: []string{"--interval", "--equexit"}, stopAtOperand: true}.parse(c.args)
	for _, o := range opts {
		if o.is('x', "--exec") {
			c.run("watch", c.args[rest:], false)
			return
		}
	}
	// watch joins its arguments and runs them with sh -c.
	parts := make([]string, 0, len(c.args)-rest)
	static := true
	for _, a := range c.args[rest:] {
		parts = append(parts, a.val)
		static = static && a.static
	}
	if len(parts) > 0 {
		c.runString("watch", word{val: strings.Join(parts, " "), static: static}, syntax.LangPOSIX)
	}
}

func checkSu(c *check) {
	opts, _, _ := optSpec{shortVal: "cgGsw", longVal: []string{"--command", "--session-command", "--group", "--supp-group", "--shell", "--whitelist-environment"}}.parse(c.args)
	for _, o := range opts {
		if o.is('c', "--command", "--session-command") {
			c.runString(c.cmd.Name+" -c", word{val: o.val, static: true}, syntax.LangPOSIX)
			return
		}
	}
	c.review("starts a shell, which reads commands the analysis cannot see")
}

// shellDialects maps shells to the language they read.
func shellVariant(name string) syntax.LangVariant {
	switch name {
	case "bash", "rbash":
		return syntax.LangBash
	case "zsh":
		return syntax.LangZsh
	case "ksh", "mksh", "lksh", "pdksh":
		return syntax.LangMirBSDKorn
	}
	return syntax.LangPOSIX
}

func checkShell(c *check) {
	v := shellVariant(c.cmd.Name)
	cmdMode, stdinMode := false, false
	i := 0
options:
	for ; i < len(c.args); i++ {
		a := c.args[i]
		if !a.static {
			return // reviewed by optionSafety
		}
		s := a.val
		switch {
		case s == "--" || s == "-":
			i++
			break options
		case strings.HasPrefix(s, "--"):
			if s == "--rcfile" || s == "--init-file" {
				c.review("reads a startup file the analysis cannot see (" + s + ")")
				i++
			}
		case len(s) > 1 && (s[0] == '-' || s[0] == '+'):
			for _, ch := range s[1:] {
				switch ch {
				case 'c':
					cmdMode = true
				case 's':
					stdinMode = true
				case 'i':
					c.review("starts an interactive shell, which reads startup files")
				case 'o', 'O':
					i++
				}
			}
		default:
			break options
		}
	}
	operands := c.args[min(i, len(c.args)):]
	switch {
	case cmdMode:
		if len(operands) > 0 {
			c.runString(c.cmd.Name+" -c", operands[0], v)
		}
	case len(operands) > 0 && !stdinMode:
		c.review("runs the script " + operands[0].val + ", which the analysis cannot read")
	default:
		if src, ok := c.stdinScript(); ok {
			c.runString(c.cmd.Name+" stdin", word{val: src, static: true}, v)
			return
		}
		c.review("reads commands from its standard input, which the analysis cannot see")
	}
}

// stdinScript returns the text of a here-document or here-string that
// feeds the command, when it is known without running anything.
func (c *check) stdinScript() (string, bool) {
	r := c.stdin
	if r == nil || c.extra {
		return "", false
	}
	switch r.Op {
	case syntax.WordHdoc:
		u := c.w.unquote(r.Word)
		return u.val + "\n", u.static
	case syntax.Hdoc, syntax.DashHdoc:
		if r.Hdoc == nil {
			return "", true
		}
		quoted := r.Word.Lit() == ""
		var b strings.Builder
		for _, p := range r.Hdoc.Parts {
			lit, ok := p.(*syntax.Lit)
			if !ok || (!quoted && strings.ContainsAny(lit.Value, "\\$`")) {
				return "", false
			}
			b.WriteString(lit.Value)
		}
		return b.String(), true
	}
	return "", false
}

func checkEval(c *check) {
	c.review("runs its arguments as shell code (eval)")
	parts := make([]string, len(c.args))
	for i, a := range c.args {
		if !a.static {
			return
		}
		parts[i] = a.val
	}
	c.runString("eval", word{val: strings.Join(parts, " "), static: true}, c.w.variant)
}

func checkSource(c *check) {
	file := ""
	if len(c.args) > 0 {
		file = " " + c.args[0].val
	}
	c.review("runs the commands in the file" + file + ", which the analysis cannot read")
}

func checkTrap(c *check) {
	if len(c.args) < 2 || !c.args[0].static || strings.HasPrefix(c.args[0].val, "-") || c.args[0].val == "" {
		return
	}
	c.review("sets a trap, which runs a command string later")
	c.runString("trap", c.args[0], c.w.variant)
}

func checkAlias(c *check) {
	for _, a := range c.args {
		if strings.Contains(a.val, "=") || !a.static {
			c.review("defines an alias, which changes what a command name runs")
			return
		}
	}
}

func checkComplete(c *check) {
	opts, _, _ := optSpec{shortVal: "AGWXPSoFC"}.parse(c.args)
	for _, o := range opts {
		if o.is('C') || o.is('F') {
			c.review("runs a command or function to complete words (" + o.name + ")")
		}
	}
}

func checkLet(c *check) {
	for _, a := range c.args {
		if !isDigits(a.val) {
			c.review("evaluates arithmetic on variables, whose array subscripts can run commands (let)")
			return
		}
	}
}

func checkPrintf(c *check) {
	if len(c.args) > 0 && c.args[0].static && strings.HasPrefix(c.args[0].val, "-v") {
		c.review("assigns a variable (printf -v); bash evaluates a subscript in its name, which can run commands")
	}
}

// assignsName reviews a builtin's assignment to the variable named by w.
func (c *check) assignsName(w word) {
	switch {
	case !w.static || strings.Contains(w.val, "["):
		c.review("names a variable only known at run time or an array element; bash evaluates its subscript, which can run commands")
	case !validName(w.val):
	default:
		if msg := assignRisk(w.val, false); msg != "" {
			c.review(msg)
		}
	}
}

// checkRead reviews the variables read assigns: its operands and -a.
func checkRead(c *check) {
	opts, operands, _ := optSpec{shortVal: "adinNptu"}.parse(c.args)
	for _, o := range opts {
		if o.is('a') && o.hasVal {
			c.assignsName(o.value())
		}
	}
	for _, op := range operands {
		c.assignsName(op)
	}
}

func checkMapfile(c *check) {
	opts, operands, _ := optSpec{shortVal: "dnOsuCc"}.parse(c.args)
	for _, o := range opts {
		if o.is('C') {
			c.review("runs a callback for the lines it reads (-C)")
		}
	}
	for _, op := range operands {
		c.assignsName(op)
	}
}

func checkUnset(c *check) {
	opts, operands, _ := optSpec{}.parse(c.args)
	for _, o := range opts {
		if o.is('f') {
			return // functions
		}
	}
	for _, op := range operands {
		c.assignsName(op) // unset PATH makes bash run ./ls for ls
	}
}

func checkGetopts(c *check) {
	_, operands, _ := optSpec{}.parse(c.args)
	if len(operands) >= 2 {
		c.assignsName(operands[1])
	}
}

func checkWait(c *check) {
	opts, _, _ := optSpec{shortVal: "p"}.parse(c.args)
	for _, o := range opts {
		if o.is('p') && o.hasVal {
			c.assignsName(o.value())
		}
	}
}

func checkExport(c *check) {
	for _, a := range c.args {
		if !a.static || strings.Contains(a.val, "[") {
			c.review("names a variable only known at run time or an array element; bash evaluates subscripts, which can run commands")
			return
		}
		if strings.HasPrefix(a.val, "-") {
			continue
		}
		name, _, _ := strings.Cut(a.val, "=")
		if msg := assignRisk(name, false); msg != "" {
			c.review(msg)
		}
	}
}

func checkTest(c *check) {
	for i, a := range c.args {
		if a.static && (a.val == "-v" || a.val == "-R") && i+1 < len(c.args) {
			if n := c.args[i+1]; !n.static || strings.Contains(n.val, "[") {
				c.review("tests a variable whose subscript bash evaluates, which can run commands")
			}
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
			c.outside("takes its starting points from the file " + v.val + " (-files0-from)")
			i++
		case a.val == "-fprint" || a.val == "-fprint0" || a.val == "-fprintf" || a.val == "-fls":
			c.file(v, false)
			i++
		case findPatterns[a.val]:
			i++
		}
	}
	// find only lists names; with -exec it reads the files its patterns
	// choose. (Fed to xargs, see findPrintsInside.)
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
	}
	gitFiles(c, sub, c.args[i+1:])
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

func checkSed(c *check) {
	spec := optSpec{shortVal: "efl", shortOptVal: "i", longVal: []string{"--expression", "--file", "--line-length"}}
	opts, operands, _ := spec.parse(c.args)
	var scripts []string
	sandbox, given := false, false
	for _, o := range opts {
		switch {
		case o.is('i', "--in-place"):
			c.writes("edits files in place (" + o.name + ")")
		case o.is('e', "--expression"):
			scripts = append(scripts, o.val)
			given = true
		case o.is('f', "--file"):
			given = true
			c.review("reads its script from the file " + o.val + ", which the analysis cannot read")
			c.file(o.value(), false)
		case o.is(0, "--sandbox"):
			sandbox = true
		}
	}
	if !given && len(operands) > 0 {
		scripts = append(scripts, operands[0].val)
		operands = operands[1:]
	}
	for _, op := range operands {
		c.file(op, false)
	}
	for _, s := range scripts {
		r := sedRisk(s)
		for _, f := range r.reads {
			c.file(word{val: f, static: true}, false)
		}
		if sandbox || r.risk == "" {
			continue // sed --sandbox refuses e, r and w
		}
		if r.writes {
			c.cmd.Writes = true
		}
		c.review(r.risk)
	}
}

// What an awk option does, for the options of gawk (long, or after -W)
// and mawk (after -W).
const (
	awkFlag    = iota // changes nothing that matters here
	awkValue          // takes a value that is neither a file nor code
	awkSandbox        // gawk's sandbox
	awkWrite          // writes a file, named by an optional value
	awkDebug          // reads debugger commands
	awkFile           // takes a file of program text, or a library
	awkSource         // takes program text
)

var awkLongs = map[string]int{}

func init() {
	for kind, names := range map[int][]string{
		awkValue: {"assign", "field-separator", "sprintf", "random"},
		awkFlag: {"lint", "characters-as-bytes", "traditional", "copyright", "gen-pot", "help", "trace", "bignum",
			"use-lc-numeric", "non-decimal-data", "optimize", "no-optimize", "posix", "re-interval", "lint-old", "version",
			"csv", "usage", "interactive", "posix_space"},
		awkSandbox: {"sandbox"},
		awkWrite:   {"dump-variables", "profile", "pretty-print"},
		awkDebug:   {"debug"},
		awkFile:    {"file", "exec", "include", "load"},
		awkSource:  {"source"},
	} {
		for _, n := range names {
			awkLongs[n] = kind
		}
	}
}

// awkLong resolves a long option name, which gawk and mawk accept
// abbreviated: an exact name, or the riskiest of the names it may
// abbreviate. ok is false for a name the analysis does not know.
func awkLong(name string) (kind int, full string, ok bool) {
	if k, exact := awkLongs[name]; exact {
		return k, name, true
	}
	kind = -1
	for n, k := range awkLongs {
		if name != "" && strings.HasPrefix(n, name) && (k > kind || k == kind && n < full) {
			kind, full = k, n
		}
	}
	if kind == awkSandbox {
		kind = awkFlag // an abbreviation may not be what the program reads
	}
	return kind, full, kind >= 0
}

func checkAwk(c *check) {
	args := c.args
	var progs []string
	var operands []word
	given, sandbox := false, false
	// long handles one long option (--name[=value], -W name[=value]);
	// next returns its value when it is not attached.
	long := func(spelled, name string, val word, has bool, next func() (word, bool)) {
		kind, full, ok := awkLong(name)
		if !ok {
			c.review("has an awk option the analysis does not know (" + spelled + ")")
			return
		}
		if !has && kind >= awkFile || !has && kind == awkValue {
			val, has = next()
		}
		switch kind {
		case awkSandbox:
			sandbox = sandbox || c.cmd.Name == "gawk" && full == "sandbox" && name == "sandbox"
		case awkWrite:
			c.writes("writes a file (" + spelled + ")")
		case awkDebug:
			c.review("starts the debugger, which reads commands (" + spelled + ")")
		case awkFile:
			given = true
			c.review("reads program text or a library from a file the analysis cannot read (" + spelled + ")")
			if has {
				c.file(val, false)
			}
		case awkSource:
			given = true
			if !val.static {
				c.review("has an awk program only known at run time (" + spelled + ")")
			}
			progs = append(progs, val.val)
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() (word, bool) {
			if i+1 < len(args) {
				i++
				return args[i], true
			}
			return word{}, false
		}
		v := a.val
		switch {
		case !a.static || len(v) < 2 || v[0] != '-':
			operands = append(operands, a) // a computed one is reviewed by optionSafety
			continue
		case v == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
			continue
		case strings.HasPrefix(v, "--"):
			name, val, has := strings.Cut(v[2:], "=")
			long(v, name, word{val: val, static: true}, has, next)
			continue
		}
		for j := 1; j < len(v); j++ {
			ch := v[j]
			var val word
			has := false
			if strings.IndexByte("fFveEilW", ch) >= 0 || strings.IndexByte("dDLop", ch) >= 0 && j+1 < len(v) {
				if j+1 < len(v) {
					val, has = word{val: v[j+1:], static: true, glob: a.glob}, true
				} else if strings.IndexByte("fFveEilW", ch) >= 0 {
					val, has = next()
				}
				j = len(v)
			}
			switch ch {
			case 'W':
				name, wval, weq := strings.Cut(val.val, "=")
				if !val.static {
					c.review("has an awk -W option only known at run time")
					continue
				}
				long("-W "+val.val, name, word{val: wval, static: true}, weq, next)
			case 'f', 'E', 'i':
				given = true
				c.review("reads its program from a file the analysis cannot read (-" + string(ch) + ")")
				if has {
					c.file(val, false)
				}
			case 'l':
				c.review("loads a compiled extension (-l)")
			case 'e':
				given = true
				if !val.static {
					c.review("has an awk program only known at run time (-e)")
				}
				progs = append(progs, val.val)
			case 'd', 'o', 'p':
				c.writes("writes a file (-" + string(ch) + ")")
			case 'D':
				c.review("starts the debugger, which reads commands (-D)")
			case 'S':
				sandbox = sandbox || c.cmd.Name == "gawk"
			}
		}
	}
	if !given && len(operands) > 0 {
		progs = append(progs, operands[0].val)
		operands = operands[1:]
	}
	for _, op := range operands {
		if op.static {
			if name, _, ok := strings.Cut(op.val, "="); ok && validName(name) {
				continue // an assignment, not a file
			}
		}
		c.file(op, false)
	}
	for _, p := range progs {
		r := awkRisk(p)
		if r.environ {
			c.secret("the environment (awk ENVIRON)")
		}
		// gawk --sandbox refuses system(), pipes, redirections, and new
		// files in ARGV. Other awks ignore or refuse the option, so only
		// gawk by that name is trusted with it.
		if r.risk != "" && !sandbox {
			c.review(r.risk)
		}
	}
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
	opts, _, _ := optSpec{shortVal: "LPIoHT", longVal: []string{"--charset", "--filelimit", "--timefmt", "--sort", "--fromfile"}}.parse(c.args)
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
		if !harmlessTarget(o.val) {
			c.cmd.Writes = true
		}
	}
}
