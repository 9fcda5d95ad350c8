package shell

import "strings"

// This file models jq: its options, and the filters it runs.

// jqFilter is what the analysis learns from a jq filter.
type jqFilter struct {
	environ bool // it reads the environment (env, $ENV)
	modules bool // it loads modules or data files (import, include)
}

// jqRisk reads a jq filter for the builtins that reach past its input:
// env and $ENV, and the directives that load files. Names are looked for
// inside strings and comments too ("\(env.X)" interpolates); only a field
// (.env, right after the dot) and the variable $env are not the builtin:
// jq allows white space and comments between $ and a name, so "$ ENV"
// and "$#\nENV" are $ENV.
func jqRisk(f string) (out jqFilter) {
	for i := 0; i < len(f); i++ {
		c := f[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			continue
		}
		j := i
		for j < len(f) && (f[j] == '_' || 'a' <= f[j] && f[j] <= 'z' || 'A' <= f[j] && f[j] <= 'Z' || '0' <= f[j] && f[j] <= '9') {
			j++
		}
		prev := byte(0)
		if i > 0 {
			prev = f[i-1]
		}
		switch name := f[i:j]; {
		case (name == "ENV" || name == "env") && prev != '.' && !(name == "env" && prev == '$'),
			(name == "ENV" || name == "env") && i > 1 && f[i-2] == '.':
			out.environ = true
		case name == "import" || name == "include" || name == "modulemeta":
			out.modules = true
		}
		i = j - 1
	}
	return out
}

// jq's options: flags, and the long options that take one or two
// values. jq matches long options exactly and accepts short flags
// bundled (-nr); -L may have its directory attached.
var (
	jqShortFlags = "cnesrjaSCMRhVb"
	jqLongFlags  = map[string]bool{
		"--tab": true, "--unbuffered": true, "--stream": true, "--stream-errors": true, "--seq": true,
		"--exit-status": true, "--ascii-output": true, "--join-output": true, "--raw-output": true,
		"--raw-output0": true, "--compact-output": true, "--null-input": true, "--raw-input": true,
		"--slurp": true, "--sort-keys": true, "--color-output": true, "--monochrome-output": true,
		"--binary": true, "--help": true, "--version": true, "--build-configuration": true,
		"--debug-dump-disasm": true, "--debug-trace": true, "--debug-trace=all": true,
	}
	// jqLongValues: how many words follow, and which of them (1-based)
	// names a file.
	jqLongValues = map[string][2]int{
		"--arg": {2, 0}, "--argjson": {2, 0}, "--slurpfile": {2, 2}, "--rawfile": {2, 2}, "--argfile": {2, 2},
		"--indent": {1, 0}, "--library-path": {1, 1},
	}
)

// checkJqFiles reads jq's arguments: the filter, the files it reads, and
// the options whose values are files (--slurpfile, --rawfile, --argfile,
// -L). An option it does not know is asked: it may take values, or read
// a program.
func checkJqFiles(c *check) {
	args := c.args
	fromFile, positional := false, false
	var operands []word
	operand := func(a word) {
		if positional && len(operands) > 0 {
			return // a string for $ARGS, not a file (the filter comes first)
		}
		operands = append(operands, a)
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.static || a.val == "-" || !strings.HasPrefix(a.val, "-") {
			operand(a)
			continue
		}
		if n, ok := jqLongValues[a.val]; ok {
			if f := n[1]; f > 0 && i+f < len(args) {
				c.file(args[i+f], false)
			}
			i += n[0]
			continue
		}
		switch {
		case a.val == "--":
			for _, op := range args[i+1:] {
				operand(op)
			}
			i = len(args)
		case a.val == "--from-file":
			fromFile = true
		case a.val == "--args" || a.val == "--jsonargs":
			positional = true
		case a.val == "--run-tests":
			c.review("runs the jq programs in its test file or standard input, which the analysis cannot read (--run-tests)")
		case jqLongFlags[a.val]:
		case strings.HasPrefix(a.val, "--"):
			c.review("has a jq option the analysis does not know (" + a.val + ")")
		default:
			for j := 1; j < len(a.val); j++ {
				switch ch := a.val[j]; {
				case ch == 'f':
					fromFile = true
				case ch == 'L':
					if j+1 < len(a.val) {
						c.file(word{val: a.val[j+1:], static: true, glob: a.glob}, false)
					} else if i+1 < len(args) {
						c.file(args[i+1], false)
						i++
					}
					j = len(a.val)
				case strings.IndexByte(jqShortFlags, ch) < 0:
					c.review("has a jq option the analysis does not know (-" + string(ch) + ")")
				}
			}
		}
	}
	if len(operands) == 0 {
		return
	}
	filter := operands[0]
	if !fromFile {
		c.scriptWord(filter)
	}
	switch {
	case fromFile:
		c.file(filter, false)
		c.secret("a jq filter read from " + filter.val + ", which may read the environment")
	case !filter.static:
		c.secret("a jq filter only known at run time, which may read the environment")
	default:
		f := jqRisk(filter.val)
		if f.environ {
			c.secret("the environment (jq env, $ENV)")
		}
		if f.modules {
			c.unknown("loads jq modules or data files from its search path (import, include)")
		}
	}
	for _, op := range operands[1:] {
		c.file(op, false)
	}
}
