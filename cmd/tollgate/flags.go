package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/internal/storeurl"
)

// newFlagSet returns a flag set for one command ("serve", "policy test").
// help is printed, then the flags, by -h and --help on stdout (asking for
// help is not an error: exit 0), and on stderr after a flag error (exit
// 2). Give every flag an example: in an "examples:" block of help, or in
// its usage string as "e.g. --name value" (shared flags do that).
func newFlagSet(name, help string, stderr io.Writer) *flagSet {
	fs := flag.NewFlagSet("tollgate "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	// The flag package calls Usage both for -h (before returning
	// ErrHelp) and on a bad flag; parseFlags prints the help itself.
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, help: help}
}

// flagSet is a command's flags and the help text printed before them.
type flagSet struct {
	*flag.FlagSet
	help string
	// interspersed lets flags come after positional arguments, as in
	// "tollgate policy explain FILE --tool bash"; "--" ends the flags.
	// Args returns the positional arguments either way.
	interspersed bool
	positional   []string
}

// flagDefiner defines flags: a *flagSet, or the *flag.FlagSet in one.
// The helpers that add the same flags to several commands take it.
type flagDefiner interface {
	StringVar(p *string, name, value, usage string)
	BoolVar(p *bool, name string, value bool, usage string)
	DurationVar(p *time.Duration, name string, value time.Duration, usage string)
}

// Args returns the positional arguments left after parsing.
func (fs *flagSet) Args() []string {
	if fs.interspersed {
		return fs.positional
	}
	return fs.FlagSet.Args()
}

// NArg returns the number of positional arguments.
func (fs *flagSet) NArg() int { return len(fs.Args()) }

// Arg returns the i'th positional argument, or "".
func (fs *flagSet) Arg(i int) string {
	if a := fs.Args(); i >= 0 && i < len(a) {
		return a[i]
	}
	return ""
}

func (fs *flagSet) parse(args []string) error {
	if !fs.interspersed {
		return fs.FlagSet.Parse(args)
	}
	fs.positional = nil
	for {
		if err := fs.FlagSet.Parse(args); err != nil {
			return err
		}
		rest := fs.FlagSet.Args()
		if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			fs.positional = append(fs.positional, rest...)
			return nil
		}
		if len(rest) == 0 {
			return nil
		}
		fs.positional = append(fs.positional, rest[0])
		args = rest[1:]
	}
}

// usageError prints "tollgate CMD: message" and where the help is on
// stderr, and returns 2, the exit status of a usage error. (The whole
// help after it buried the one line that mattered.)
func (fs *flagSet) usageError(format string, args ...any) int {
	fmt.Fprintf(fs.Output(), "%s: %s\nsee '%s --help'\n", fs.Name(), fmt.Sprintf(format, args...), fs.Name())
	return 2
}

// printHelp writes the command's help and its flags to w.
func printHelp(fs *flagSet, w io.Writer) {
	fmt.Fprint(w, fs.help)
	if !strings.HasSuffix(fs.help, "\n") {
		fmt.Fprintln(w)
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nflags:")
	fs.VisitAll(func(f *flag.Flag) {
		value, usage := flag.UnquoteUsage(f)
		line := "  " + dashed(f.Name)
		if value != "" {
			line += " " + value
		}
		fmt.Fprintln(w, line)
		usage, example := splitExample(usage)
		lines := wrap(usage, 72)
		if d := defaultText(f); d != "" {
			// Never broken: "(default" and its value stay together.
			d = "(default " + d + ")"
			if last := &lines[len(lines)-1]; len(*last)+1+len(d) <= 72 {
				*last += " " + d
			} else {
				lines = append(lines, d)
			}
		}
		for _, l := range lines {
			fmt.Fprintln(w, "        "+l)
		}
		if example != "" {
			fmt.Fprintln(w, "        e.g. "+example)
		}
	})
}

// splitExample takes the example out of a flag's usage, ", e.g. --x y"
// up to an environment variable's [NAME], to show it on a line of its own.
func splitExample(usage string) (rest, example string) {
	i := strings.Index(usage, ", e.g. ")
	if i < 0 {
		return usage, ""
	}
	example = usage[i+len(", e.g. "):]
	tail := ""
	if j := strings.LastIndex(example, " ["); j >= 0 && strings.HasSuffix(example, "]") {
		example, tail = example[:j], example[j:]
	}
	return usage[:i] + tail, example
}

// dashed writes a flag's name as people type it: -v, --store. The flag
// package takes one dash or two either way.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// defaultText is the default shown after a flag's usage, or "" for a
// zero value. A URL's password, from an environment variable, is hidden.
func defaultText(f *flag.Flag) string {
	switch f.DefValue {
	case "", "false", "0", "0s":
		return ""
	}
	d := storeurl.Redacted(f.DefValue)
	if _, err := time.ParseDuration(d); err == nil || isBool(f) {
		return d
	}
	if _, err := strconv.ParseFloat(d, 64); err == nil {
		return d
	}
	return strconv.Quote(d)
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// wrap breaks s into lines of at most width bytes, at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

// flagCapture is a stdout that records the flag set of the command that
// prints its help to it. Running a command with --help into one is how
// the help test and the completion scripts learn a command's flags: they
// are then the flags the command parses, not a list kept beside it.
type flagCapture struct{ fs *flagSet }

func (c *flagCapture) Write(p []byte) (int, error) { return len(p), nil }

// commandFlags returns the flag set that command c (or its subcommand
// sub) parses, or nil when its --help does not go through parseFlags.
func commandFlags(ctx context.Context, c *command, sub ...string) *flagSet {
	var capture flagCapture
	c.dispatch(ctx, append(slices.Clone(sub), "--help"), strings.NewReader(""), &capture, io.Discard)
	return capture.fs
}

// parseFlags parses args. When done is true the command returns code at
// once: 0 after printing help for -h/--help, 2 after a flag error (the
// error and the help are on stderr).
func parseFlags(fs *flagSet, args []string, stdout io.Writer) (code int, done bool) {
	out := fs.Output()
	fs.SetOutput(io.Discard) // the flag package's own messages: ours are below
	err := fs.parse(args)
	fs.SetOutput(out)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		if c, ok := stdout.(*flagCapture); ok {
			c.fs = fs
		}
		printHelp(fs, stdout)
		return 0, true
	default:
		return fs.usageError("%s", flagError(fs, err)), true
	}
}

// parseFlagsOnly is parseFlags for a command that takes flags and no
// other arguments: an argument is a usage error.
func parseFlagsOnly(fs *flagSet, args []string, stdout io.Writer) (code int, done bool) {
	if code, done := parseFlags(fs, args, stdout); done {
		return code, true
	}
	if fs.NArg() > 0 {
		return fs.usageError("unexpected argument %q (%s takes flags only)", fs.Arg(0), fs.Name()), true
	}
	return 0, false
}

// flagError says what was wrong with a flag, naming it as the help does.
func flagError(fs *flagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if near := closest(name, names); near != "" {
			return fmt.Sprintf("unknown flag %s (did you mean %s?)", dashed(name), dashed(near))
		}
		return fmt.Sprintf("unknown flag %s", dashed(name))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Sprintf("%s needs a value", dashed(name))
	}
	// invalid value "x" for flag -name: reason
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		if i := strings.Index(rest, " for flag -"); i >= 0 {
			val, tail := rest[:i], rest[i+len(" for flag -"):]
			name, _, _ := strings.Cut(tail, ":")
			if f := fs.Lookup(name); f != nil {
				if v, _ := flag.UnquoteUsage(f); v == "duration" {
					return fmt.Sprintf("%s %s: want a duration such as 90s, 5m or 1h30m", dashed(name), val)
				}
			}
			return fmt.Sprintf("%s %s: %s", dashed(name), val, strings.TrimSpace(strings.TrimPrefix(tail, name+":")))
		}
	}
	if rest, ok := strings.CutPrefix(msg, "invalid boolean value "); ok {
		if val, name, ok := strings.Cut(rest, " for -"); ok {
			name, _, _ = strings.Cut(name, ":")
			return fmt.Sprintf("%s=%s: want %s=true or %s=false (or %s alone)", dashed(name), val, dashed(name), dashed(name), dashed(name))
		}
	}
	return msg
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// envDefault returns the environment variable's value, or def.
func envDefault(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// currentUser names the person at the keyboard, recorded with their
// answers: $TOLLGATE_USER, else the login name, else $USER.
func currentUser() string {
	if n := os.Getenv("TOLLGATE_USER"); n != "" {
		return n
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if n := os.Getenv("USER"); n != "" {
		return n
	}
	return "cli"
}

// given reports whether the flag name was set on the command line (not
// taken from its default or the environment).
func given(fs *flagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
