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
	w        *walker
	cmd      *Command
	args     []word
	extra    bool             // receives more arguments at run time (xargs)
	stdin    *syntax.Redirect // what feeds its standard input, if redirected
	launches []launch
}

// launch is a command, or a command string, that a command runs.
type launch struct {
	via       string
	words     []word
	extra     bool
	env       []string
	envReview []string

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
		case !a.static:
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
	name   string // "-o", or "--output" as written (perhaps abbreviated)
	val    string
	hasVal bool
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
			o := opt{name: name, val: val, hasVal: has}
			if !has && s.takesLong(name) && i+1 < len(args) {
				o.val, o.hasVal = args[i+1].val, true
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
					opts = append(opts, opt{name: name, val: a[j+1:], hasVal: true})
				case i+1 < len(args):
					opts = append(opts, opt{name: name, val: args[i+1].val, hasVal: true})
					i++
				default:
					opts = append(opts, opt{name: name})
				}
				j = len(a)
			case strings.IndexByte(s.shortOptVal, a[j]) >= 0:
				opts = append(opts, opt{name: name, val: a[j+1:], hasVal: j+1 < len(a)})
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
		"mapfile":   {flagOpt('C', "runs a callback for the lines it reads (-C)"), false},
		"readarray": {flagOpt('C', "runs a callback for the lines it reads (-C)"), false},
		"complete":  {checkComplete, false},
		"compgen":   {checkComplete, false},
		"bind":      {flagOpt('x', "binds a key to a shell command (bind -x)"), false},
		"fc":        {func(c *check) { c.review("runs commands again from the history (fc)") }, false},
		"let":       {checkLet, false},
		"printf":    {checkPrintf, false},
		"read":      {checkSubscripts, false},
		"unset":     {checkSubscripts, false},
		"export":    {checkExport, false},
		"declare":   {checkExport, false},
		"typeset":   {checkExport, false},
		"local":     {checkExport, false},
		"readonly":  {checkExport, false},
		"test":      {checkTest, false},
		"[":         {checkTest, false},

		// Readers with options that run programs or write files.
		"find": {checkFind, true},
		"git":  {checkGit, true},
		"sed":  {checkSed, true},
		"sort": {checkSort, true},
		"tar":  {checkTar, true},
		"less": {checkPager, true},
		"more": {checkPager, true},
		"most": {checkPager, true},
		"pg":   {checkPager, true},
		"man":  {badOpts(optSpec{shortVal: "PCMLmSsep"}, "runs a program as pager, browser or formatter", "PHX", "--pager", "--html", "--browser"), true},
		"rg":   {badOpts(optSpec{shortVal: "efgtTAmBCEjMr", longVal: []string{"--pre", "--hostname-bin"}}, "runs a program on the files it searches", "", "--pre", "--hostname-bin"), true},
		"date": {badOpts(optSpec{shortVal: "dfrIs", longVal: []string{"--date", "--file", "--reference", "--set"}}, "sets the system clock", "s", "--set"), true},
		"tree": {checkTree, true},
		"uniq": {outputOperand(optSpec{shortVal: "fsw"}, 1), true},
		"xxd":  {outputOperand(optSpec{shortVal: "cglosn"}, 1), true},
		"file": {badOpts(optSpec{shortVal: "efFmP"}, "writes a compiled magic file", "C", "--compile"), true},
		"yq":   {checkYq, true},
		"tee":  {checkTee, true},
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
		if len(operands) > n && !harmlessTarget(operands[n].val) {
			c.writes("writes its output to the file " + operands[n].val)
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
	for _, o := range opts {
		switch {
		case o.is('I'), o.name == "-i", o.is(0, "--replace"):
			repl = o.val
			if !o.hasVal || repl == "" {
				repl = "{}"
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
				inner[i].static = false
			}
		}
	}
	c.run("xargs", inner, true)
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

// checkSubscripts reviews builtins that take variable names, in which bash
// evaluates array subscripts.
func checkSubscripts(c *check) {
	for _, a := range c.args {
		if !a.static || strings.Contains(a.val, "[") {
			c.review("names an array element; bash evaluates its subscript, which can run commands")
			return
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
			c.run("find "+a.val, args[i+1:end], false)
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
}

// gitGlobal are git's options before the subcommand that neither run
// programs nor change which repository or configuration git reads.
var gitGlobal = map[string]bool{
	"-v": true, "-h": true, "--version": true, "--help": true, "-p": true, "--paginate": true,
	"-P": true, "--no-pager": true, "--no-replace-objects": true, "--no-lazy-fetch": true,
	"--no-optional-locks": true, "--no-advice": true, "--literal-pathspecs": true,
	"--glob-pathspecs": true, "--noglob-pathspecs": true, "--icase-pathspecs": true,
	"--bare": true, "--html-path": true, "--man-path": true, "--info-path": true, "--exec-path": true,
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
		}
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

func checkSed(c *check) {
	spec := optSpec{shortVal: "efl", shortOptVal: "i", longVal: []string{"--expression", "--file", "--line-length"}}
	opts, operands, _ := spec.parse(c.args)
	var scripts []string
	sandbox, fromFile := false, false
	for _, o := range opts {
		switch {
		case o.is('i', "--in-place"):
			c.writes("edits files in place (" + o.name + ")")
		case o.is('e', "--expression"):
			scripts = append(scripts, o.val)
		case o.is('f', "--file"):
			fromFile = true
			c.review("reads its script from the file " + o.val + ", which the analysis cannot read")
		case o.is(0, "--sandbox"):
			sandbox = true
		}
	}
	if len(scripts) == 0 && !fromFile && len(operands) > 0 {
		scripts = append(scripts, operands[0].val)
	}
	if sandbox {
		return // sed --sandbox refuses e, r and w
	}
	for _, s := range scripts {
		if msg, writes := sedRisk(s); msg != "" {
			if writes {
				c.cmd.Writes = true
			}
			c.review(msg)
		}
	}
}

func checkAwk(c *check) {
	spec := optSpec{
		shortVal:    "fFveEilW",
		shortOptVal: "dDLop",
		longVal:     []string{"--file", "--field-separator", "--assign", "--source", "--exec", "--include", "--load"},
	}
	opts, operands, _ := spec.parse(c.args)
	var progs []string
	sandbox, fromFile := false, false
	for _, o := range opts {
		switch {
		case o.is('f', "--file"), o.is('E', "--exec"), o.is('i', "--include"):
			fromFile = true
			c.review("reads its program from the file " + o.val + ", which the analysis cannot read")
		case o.is('l', "--load"):
			fromFile = true
			c.review("loads a compiled extension (" + o.name + ")")
		case o.is('e', "--source"):
			progs = append(progs, o.val)
		case o.is('d', "--dump-variables"), o.is('p', "--profile"), o.is('o', "--pretty-print"):
			c.writes("writes a file (" + o.name + ")")
		case o.is('D', "--debug"):
			c.review("starts the debugger, which reads commands (" + o.name + ")")
		case o.is('W'):
			if strings.HasPrefix(o.val, "e") || strings.HasPrefix(o.val, "f") {
				fromFile = true
				c.review("reads its program from a file (-W " + o.val + ")")
			}
		case o.is('S', "--sandbox"):
			sandbox = true
		}
	}
	if len(progs) == 0 && !fromFile && len(operands) > 0 {
		progs = append(progs, operands[0].val)
	}
	if sandbox {
		return // awk --sandbox refuses system(), pipes and redirections
	}
	for _, p := range progs {
		if msg := awkRisk(p); msg != "" {
			c.review(msg)
		}
	}
}

func checkSort(c *check) {
	spec := optSpec{shortVal: "kotST", longVal: []string{"--key", "--output", "--field-separator", "--buffer-size", "--temporary-directory", "--compress-program", "--files0-from", "--random-source", "--batch-size", "--parallel", "--sort"}}
	opts, _, _ := spec.parse(c.args)
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
