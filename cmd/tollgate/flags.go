package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
)

// newFlagSet returns a flag set for one command. help is printed, then
// the flags, by -h and --help on stdout (asking for help is not an
// error: exit 0), and on stderr after a flag error (exit 2).
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
}

// printHelp writes the command's help and its flags to w.
func printHelp(fs *flagSet, w io.Writer) {
	fmt.Fprint(w, fs.help)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nflags:")
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

// parseFlags parses args. When done is true the command returns code at
// once: 0 after printing help for -h/--help, 2 after a flag error (the
// error and the help are on stderr).
func parseFlags(fs *flagSet, args []string, stdout io.Writer) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		printHelp(fs, stdout)
		return 0, true
	default:
		// The flag package has printed the error on stderr.
		fmt.Fprintln(fs.Output())
		printHelp(fs, fs.Output())
		return 2, true
	}
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool { return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help" }

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
