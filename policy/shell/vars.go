package shell

import (
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// This file reads variable assignments and declarations (x=1, export,
// declare, local, ...): which variables change how programs run, and
// which expansions may carry secrets into a command.

// assigns checks variable assignments. prefix is set when they apply to
// one command (NAME=x cmd) rather than to the shell; forRead when that
// command is read, for which IFS is harmless.
func (w *walker) assigns(list []*syntax.Assign, prefix, forRead bool) (env, review []string) {
	for _, as := range list {
		if as.Index != nil {
			w.arith(as.Index)
		}
		if as.Array != nil {
			w.scan(as.Array)
		}
		val := ""
		if as.Value != nil {
			w.scan(as.Value)
			val = w.unquote(as.Value).val
		}
		if as.Name == nil {
			continue
		}
		name := as.Name.Value
		if msg := assignRisk(name, prefix); msg != "" && !(forRead && name == "IFS") {
			if prefix {
				review = append(review, msg)
			} else {
				w.review(as.Pos(), msg)
			}
		}
		env = append(env, name+"="+val)
	}
	return env, review
}

// safeVars are configuration variables that change only how output looks.
var safeVars = map[string]bool{
	"LANG": true, "LANGUAGE": true, "TZ": true, "TERM": true, "NO_COLOR": true,
	"FORCE_COLOR": true, "CLICOLOR": true, "CLICOLOR_FORCE": true, "COLORTERM": true,
	"COLUMNS": true, "LINES": true, "PAGER_DISABLE": true,
}

// assignRisk says why setting name needs review, or "". Variables named in
// upper case are where programs read their configuration from (PATH, IFS,
// LD_PRELOAD, GIT_PAGER, LESSOPEN, BASH_ENV, PS4, ...); rather than chase
// every one that can run a program, only a few known to be harmless pass.
func assignRisk(name string, prefix bool) string {
	if safeVars[name] || strings.HasPrefix(name, "LC_") {
		return ""
	}
	if strings.ContainsFunc(name, func(r rune) bool { return 'a' <= r && r <= 'z' }) {
		return ""
	}
	if prefix {
		return "sets " + name + " for the command; programs read such variables to decide what to run"
	}
	return "sets " + name + ", which can change what later commands run"
}

// decl handles declare, export, local, readonly, typeset and nameref.
func (w *walker) decl(c *syntax.DeclClause, redirs []Redirect) {
	cmd := Command{Name: c.Variant.Value, Path: c.Variant.Value, Redirects: redirs, Writes: anyWrites(redirs), Via: w.via}
	for _, as := range c.Args {
		switch {
		case as.Naked && as.Name == nil && as.Value != nil:
			w.scan(as.Value)
			v := w.unquote(as.Value)
			cmd.Args = append(cmd.Args, v.val)
			switch {
			case !v.static:
				cmd.DynamicArgs = true
				cmd.Review = append(cmd.Review, "declares a variable whose name or options are only known at run time")
			case strings.HasPrefix(v.val, "-") || strings.HasPrefix(v.val, "+"):
				if strings.ContainsAny(v.val[1:], "n") {
					cmd.Review = append(cmd.Review, "declares a name reference, an indirection that can run commands")
				}
			case strings.Contains(v.val, "["):
				cmd.Review = append(cmd.Review, "declares an array element; bash evaluates its subscript, which can run commands")
			default:
				// declare, local, export or readonly of PATH without a
				// value can still change it (local makes it empty, -x
				// exports, -i changes how values are read).
				if msg := assignRisk(v.val, false); msg != "" {
					cmd.Review = append(cmd.Review, c.Variant.Value+" "+v.val+" changes a variable that can change what later commands run")
				}
			}
		case as.Name != nil:
			env, _ := w.assigns([]*syntax.Assign{as}, false, false)
			cmd.Args = append(cmd.Args, env...)
		}
	}
	cmd.Secrets = w.takeSecrets()
	redirectFiles(&cmd)
	w.emit(cmd)
}

// takeSecrets returns the variables expanded so far that may hold
// secrets, and starts collecting afresh.
func (w *walker) takeSecrets() []string {
	s := secretVars(w.vars)
	w.vars = w.vars[:0]
	return s
}

// secretVars returns, as $NAME, the variables of names that may hold
// secrets.
func secretVars(names []string) []string {
	var out []string
	for _, n := range names {
		if isSecretVar(n) && !slices.Contains(out, "$"+n) {
			out = append(out, "$"+n)
		}
	}
	return out
}

// harmlessVars are variables in capitals that hold no secrets.
var harmlessVars = map[string]bool{
	"HOME": true, "PWD": true, "OLDPWD": true, "USER": true, "LOGNAME": true, "SHELL": true, "PATH": true,
	"LANG": true, "LANGUAGE": true, "TERM": true, "TZ": true, "HOSTNAME": true, "HOSTTYPE": true, "OSTYPE": true,
	"MACHTYPE": true, "UID": true, "EUID": true, "PPID": true, "GROUPS": true, "RANDOM": true, "SRANDOM": true,
	"SECONDS": true, "LINENO": true, "BASHPID": true, "BASH": true, "BASH_VERSION": true, "BASH_VERSINFO": true,
	"BASH_SOURCE": true, "BASH_LINENO": true, "BASH_SUBSHELL": true, "FUNCNAME": true, "SHLVL": true,
	"TMPDIR": true, "EDITOR": true, "VISUAL": true, "COLUMNS": true, "LINES": true, "IFS": true, "OPTIND": true,
	"OPTARG": true, "REPLY": true, "PIPESTATUS": true, "EPOCHSECONDS": true, "EPOCHREALTIME": true,
	"MAPFILE": true, "DISPLAY": true, "COLORTERM": true, "TERM_PROGRAM": true, "NO_COLOR": true,
	"GOPATH": true, "GOROOT": true, "GOOS": true, "GOARCH": true, "GOBIN": true, "VIRTUAL_ENV": true,
	"CI": true, "HISTFILE": true, "HISTSIZE": true, "PS1": true, "PS2": true, "PS4": true, "_": true,
}

// secretWords are parts of variable names that suggest a secret.
var secretWords = []string{"key", "token", "secret", "passw", "passphrase", "pwd", "cred", "auth", "private",
	"session", "cookie", "signature", "dsn", "apikey"}

// isSecretVar reports whether a variable may hold a secret: its name has
// a word such as KEY, TOKEN or PASSWORD in it, or it is written in
// capitals, as environment variables are, and is not known to be
// harmless. Special and positional parameters are not.
func isSecretVar(name string) bool {
	if !validName(name) || harmlessVars[name] || strings.HasPrefix(name, "LC_") || strings.HasPrefix(name, "XDG_") {
		return false
	}
	lower := strings.ToLower(name)
	if strings.HasSuffix(lower, "_proxy") && lower != "no_proxy" {
		return true // http_proxy=http://user:password@host
	}
	for _, s := range secretWords {
		if strings.Contains(lower, s) {
			return true
		}
	}
	return !strings.ContainsFunc(name, func(r rune) bool { return 'a' <= r && r <= 'z' })
}
