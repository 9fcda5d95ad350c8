package shell

import "strings"

// This file models the shell builtins that run code from strings and
// files, or assign variables that change what runs.

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
