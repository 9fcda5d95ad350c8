package shell

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// This file follows what a pipeline feeds its right side: whether the
// left side prints only paths inside the working directory (find, git
// ls-files), so that xargs on the right, or a command given the output,
// receives paths inside it.

// lastOfPipe and firstOfPipe return the statement at either end of a
// pipeline.
func lastOfPipe(s *syntax.Stmt) *syntax.Stmt {
	for {
		b, ok := s.Cmd.(*syntax.BinaryCmd)
		if !ok || b.Op != syntax.Pipe {
			return s
		}
		s = b.Y
	}
}

func firstOfPipe(s *syntax.Stmt) *syntax.Stmt {
	for {
		b, ok := s.Cmd.(*syntax.BinaryCmd)
		if !ok || b.Op != syntax.Pipe {
			return s
		}
		s = b.X
	}
}

// printsPathsInside reports whether a statement prints only paths of
// files inside the working directory, none chosen by a pattern that may
// match a secret file's name: xargs reading its output, or a command
// given its output ($(...)), receives paths inside it. (Their names are
// trusted, like symbolic links: without -print0 or -z and xargs -0, a name
// with a blank or newline splits into words.) The statement is a find
// (findPrintsInside) or a git ls-files (gitListsInside), with no
// assignment and no redirection but of errors to /dev/null.
func (w *walker) printsPathsInside(s *syntax.Stmt) bool {
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Assigns) > 0 || len(call.Args) == 0 || s.Negated || s.Background || s.Coprocess {
		return false
	}
	for _, r := range s.Redirs {
		// Only errors may go elsewhere, and not into the pipe.
		if r.N == nil || r.N.Value != "2" || r.Op != syntax.RdrOut || r.Word == nil || r.Word.Lit() != "/dev/null" {
			return false
		}
	}
	var args []word
	for _, x := range call.Args {
		u := w.unquote(x)
		if !u.static || hasBrace(x) {
			return false
		}
		args = append(args, u)
	}
	switch normalizeName(args[0].val) {
	case "find":
		return findPrintsInside(args[1:])
	case "git":
		return gitListsInside(args[1:])
	}
	return false
}

// findPrintsInside reports whether find with these arguments prints only
// the paths it finds (-print or -print0, nothing else on its standard
// output), from starting points inside the working directory.
func findPrintsInside(args []word) bool {
	expr := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case !expr && (a.val == "-H" || a.val == "-L" || a.val == "-P" || strings.HasPrefix(a.val, "-O")):
		case !expr && !strings.HasPrefix(a.val, "-") && a.val != "(" && a.val != "!" && a.val != ")":
			if outsideWord(a) != "" {
				return false
			}
		default:
			expr = true
			switch a.val {
			case "-exec", "-execdir", "-ok", "-okdir", "-printf", "-fprintf", "-fprint", "-fprint0", "-ls", "-fls",
				"-files0-from", "-delete", "-f", "-D", "-help", "--help", "-version", "--version":
				return false // prints other things, or takes paths from elsewhere
			}
		}
	}
	// Paths a pattern chooses that may be secret files are not trusted
	// as xargs's input: what xargs runs would read them.
	return len(findSecretPatterns(args)) == 0
}

// gitLsFilesOptions are the git ls-files options after which it prints
// only paths, relative to the working directory. Not -i (--ignored): it
// chooses the files git is told to ignore, where secrets are kept (.env).
var gitLsFilesOptions = map[string]bool{
	"-c": true, "--cached": true, "-d": true, "--deleted": true, "-m": true, "--modified": true, "-o": true,
	"--others": true, "-k": true, "--killed": true, "--exclude-standard": true,
	"-z": true, "--directory": true, "--no-empty-directory": true, "--error-unmatch": true, "--deduplicate": true,
	"--recurse-submodules": true, "--sparse": true, "--full-name": true, "--": true,
}

// gitListsInside reports whether git with these arguments is a git
// ls-files that prints only paths of files inside the working directory:
// none of git's options before it but those that change nothing of that,
// only the options that print paths alone (not -s, -t, --format, ...),
// and pathspecs that stay inside, none a pattern that may match a secret
// file's name (git ls-files '*.pem').
func gitListsInside(args []word) bool {
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i].val, "-"); i++ {
		switch args[i].val {
		case "-P", "--no-pager", "--no-optional-locks", "--no-replace-objects", "--no-lazy-fetch", "--no-advice",
			"--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs":
		default:
			return false
		}
	}
	if i >= len(args) || args[i].val != "ls-files" {
		return false
	}
	for _, a := range args[i+1:] {
		switch {
		case gitLsFilesOptions[a.val]:
		case strings.HasPrefix(a.val, "--exclude=") || strings.HasPrefix(a.val, "-x") && len(a.val) > 2:
			// A pattern of names left out: fewer paths.
		case strings.HasPrefix(a.val, "-"):
			return false
		case strings.HasPrefix(a.val, ":") || outsidePath(a.val, true) != "" || secretPath(a.val, true):
			return false // pathspec magic (:/ is the top), outside, or secret
		}
	}
	return true
}
