package shell

import (
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// This file models the wrappers, which run the command that follows
// their options (sudo, env, nice, timeout, xargs, ...), and the shells
// that run a command string (bash -c, a here-document fed to sh).

// wrapper runs the command that follows its options and skip operands.
func wrapper(name string, spec optSpec, skip int) func(*check) {
	spec.stopAtOperand = true
	return func(c *check) {
		_, _, rest := spec.parse(c.args)
		rest = min(rest+skip, len(c.args))
		c.run(name, c.args[rest:], false)
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
