package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tollgate-ai/tollgate/policy/shell"
)

// PathInside reports whether the file p lies in the directory dir (dir
// itself included): dir must be absolute; p is absolute, or relative to
// dir. By name first: a path that climbs out with "..", one that starts
// with "~" (a shell would expand it; a tool would not), an empty one, and
// any path when dir is not absolute, are not inside. Then by what the
// names are on this machine's file system: the symbolic links of p and
// of dir that exist here are resolved, and p is inside only if what it
// resolves to lies in what dir resolves to — so a link inside the
// project that points out of it (or a dangling one, whose target a write
// would create) is not inside. A path whose existing part cannot be
// resolved here (a directory this process may not read) is not inside; a
// part that does not exist (a file about to be written, a machine whose
// files are elsewhere) is taken by its name. Policy files call it
// path_inside(path, dir).
func PathInside(p, dir string) bool {
	if p == "" || !path.IsAbs(dir) || strings.HasPrefix(p, "~") || strings.ContainsRune(p, 0) {
		return false
	}
	if !path.IsAbs(p) {
		p = dir + "/" + p
	}
	if !insideByName(path.Clean(p), path.Clean(dir)) {
		return false
	}
	rp, ok1 := resolve(p)
	rd, ok2 := resolve(dir)
	return ok1 && ok2 && insideByName(rp, rd)
}

func insideByName(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// maxPath is the longest path resolve reads (Linux's PATH_MAX).
const maxPath = 4096

// resolve is the absolute path p with the symbolic links of its longest
// part that exists here resolved, and the rest as named (clean). false
// when that cannot be told: a part that exists but cannot be resolved (a
// dangling link, a directory this process may not search), or a path
// longer than maxPath.
func resolve(p string) (string, bool) {
	if len(p) > maxPath {
		return "", false // no system opens it; and each part is a look-up
	}
	parts := strings.Split(p, "/")
	eval := func(n int) (string, error) {
		prefix := strings.Join(parts[:n], "/")
		if prefix == "" {
			prefix = "/"
		}
		return filepath.EvalSymlinks(prefix)
	}
	r, err := eval(len(parts))
	if err == nil {
		return path.Clean(r), true
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	// The longest part that exists, by bisection: a walk goes name by
	// name, so a part resolves only if every shorter one does (and a
	// part that does not exist fails with ErrNotExist only if no shorter
	// one failed otherwise). Each look-up costs the path's depth: a deep
	// path that does not exist costs log(depth) of them, not depth.
	lo, hi, rlo := 0, len(parts), "/" // eval(lo) resolves to rlo (0: the root); eval(hi) does not exist
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		r, err := eval(mid)
		switch {
		case err == nil:
			lo, rlo = mid, r
		case errors.Is(err, fs.ErrNotExist):
			hi = mid
		default:
			return "", false
		}
	}
	missing := strings.Join(parts[:hi], "/")
	if _, err := os.Lstat(missing); !errors.Is(err, fs.ErrNotExist) {
		return "", false // it exists (a dangling link), or cannot be told
	}
	// What follows does not exist here: a ".." in it cancels a name that
	// does not exist (the kernel would refuse the path).
	return path.Join(append([]string{rlo}, parts[lo:]...)...), true
}

// PathSecret reports whether the file p may hold credentials by its name
// (.env, *.pem, .ssh/, a repository's config, ...: the shell analysis's
// list) — or, for an absolute p, by the name it has once the symbolic
// links that exist here are resolved: a project's notes.txt that links to
// .env is a secret. Policy files call it path_secret(path).
func PathSecret(p string) bool {
	return shell.SecretPath(p) || linkedTo(p, shell.SecretPath)
}

// PathInGit reports whether the file p lies in a .git directory, by its
// name or, for an absolute p, by what its symbolic links resolve to here:
// a project's tools/ that links to .git/hooks is in .git (a hook written
// there runs at the next commit). Policy files call it path_in_git(path).
func PathInGit(p string) bool {
	return shell.InGitDir(p) || linkedTo(p, shell.InGitDir)
}

// linkedTo reports whether the absolute path p, its symbolic links
// resolved, passes test where p itself did not. A relative p is left to
// its name (it is relative to a directory the caller knows); a path whose
// links cannot be resolved here is left to path_inside, which says it is
// not inside.
func linkedTo(p string, test func(string) bool) bool {
	if !path.IsAbs(p) || strings.ContainsRune(p, 0) {
		return false
	}
	r, ok := resolve(path.Clean(p))
	return ok && r != path.Clean(p) && test(r)
}

// links looks up, for one evaluation of a command string in dir (a
// coding agent's project, serve's --dir), where its relative names lead
// through the symbolic links that exist here: a name that resolves out of
// dir, into a .git directory or to a secret's name is noted as the
// analysis notes such a name written out. The analysis reads names, never
// the file system; a cloned project can hold a link named notes.txt to
// .env, or home/ to /root. Names are looked up under dir and under every
// directory the string's cd commands may enter (cd sub && cat notes.txt
// reads sub/notes.txt). The look-ups of one evaluation are bounded: past
// the bound, or where a name cannot be checked (one computed at run time
// whose value the analysis knows, a path too deep), the command is taken
// to reach outside, as a name written out would be.
type links struct {
	dir   string   // the call's directory, clean
	rd    string   // dir, its links resolved
	bases []string // where relative names may be relative to: dir, then cd targets
	// cdUnknown, when not "", is why the cd targets could not all be
	// followed: every command naming a relative file is then outside.
	cdUnknown string
	left      int // look-ups left
}

const (
	// maxLinkChecks is how many names of one command are looked up.
	maxLinkChecks = 64
	// maxLinkLookups is how many look-ups (a name under a directory, or a
	// pattern's match) one evaluation makes.
	maxLinkLookups = 256
	// maxLinkDepth is how many parts a looked-up path may have.
	maxLinkDepth = 64
	// maxCdDirs is how many directories the cd commands of one string are
	// followed into.
	maxCdDirs = 32
	// maxPatternMatches is how many files one pattern may match under one
	// directory and still be checked.
	maxPatternMatches = 16
)

// newLinks is the look-ups of an evaluation of cmds in dir; nil when dir
// is not an absolute directory that resolves here (names are then only
// names).
func newLinks(cmds []shell.Command, dir string) *links {
	if dir == "" || !path.IsAbs(dir) {
		return nil
	}
	dir = path.Clean(dir)
	rd, ok := resolve(dir)
	if !ok {
		return nil
	}
	l := &links{dir: dir, rd: rd, bases: []string{dir}, left: maxLinkLookups}
	l.followCds(cmds)
	return l
}

// computed reports whether a name is computed at run time (its text holds
// an expansion), so that what it names cannot be looked up.
func computed(name string) bool { return strings.ContainsAny(name, "$`") }

// followCds adds to l.bases the directories the string's cd and pushd
// commands may enter: each target followed from every directory found
// before it, as the analysis does not know which ran (a subshell's cd
// ends with it). A target with ".." is taken both as cd takes it, by
// name (sub/up/.. is sub), and as the kernel does (up/.. is where up's
// link leads, then up one), as cd -P does. A target computed at run
// time that the analysis did not note outside (a loop's value it knows),
// or more than maxCdDirs directories, sets cdUnknown.
func (l *links) followCds(cmds []shell.Command) {
	for i := range cmds {
		c := &cmds[i]
		if c.Name != "cd" && c.Name != "pushd" || len(c.Files) == 0 {
			continue
		}
		t := c.Files[0]
		if t == "" || strings.HasPrefix(t, "~") || strings.HasPrefix(t, "-") || !path.IsAbs(t) && slices.Contains(c.Outside, t) {
			continue // outside already, or not a directory (cd -)
		}
		if computed(t) {
			l.cdUnknown = "cd into a directory named at run time (" + t + "), which the check for symbolic links cannot follow"
			return
		}
		for _, b := range slices.Clone(l.bases) {
			for _, d := range cdTargets(b, t) {
				if slices.Contains(l.bases, d) {
					continue
				}
				if len(l.bases) > maxCdDirs {
					l.cdUnknown = fmt.Sprintf("cd into more than %d directories, too many to check for symbolic links", maxCdDirs)
					return
				}
				l.bases = append(l.bases, d)
			}
		}
	}
}

// cdTargets is where cd t leads from b: by name, and, when t holds "..",
// as the kernel resolves it (left for resolve, not cleaned).
func cdTargets(b, t string) []string {
	if path.IsAbs(t) {
		b = ""
	}
	named := path.Clean(b + "/" + t)
	if !slices.Contains(strings.Split(t, "/"), "..") {
		return []string{named}
	}
	return []string{named, b + "/" + t}
}

// names returns the relative names of c — its files, its redirections'
// targets — that lead out of l.dir, into .git or to a secret, and notes
// for what could not be checked, in out; secrets, those that lead to a
// secret's name.
func (l *links) names(c *shell.Command) (out, secrets []string) {
	names := slices.Clone(c.Files)
	for _, r := range c.Redirects {
		if !r.Dynamic && r.Target != "" && r.Op != "<<<" && r.Op != ">&" && r.Op != "<&" {
			names = append(names, r.Target)
		}
	}
	if len(names) > maxLinkChecks {
		// Each name is a few look-ups on every evaluation of the call:
		// past this many, the command is taken to reach outside.
		return []string{fmt.Sprintf("%d files, too many to check for symbolic links", len(names))}, nil
	}
	relative := false
	if why := followsLinks(c); why != "" {
		out = append(out, why)
	}
	for _, f := range names {
		if f == "" || strings.HasPrefix(f, "/") || strings.HasPrefix(f, "~") || strings.HasPrefix(f, "-") || slices.Contains(c.Outside, f) {
			continue
		}
		relative = true
		if strings.Contains(f, "{}") && slices.ContainsFunc(c.Via, func(v string) bool { return strings.HasPrefix(v, "find -") }) {
			// Whatever find finds, a link among them too, with no name here.
			out = append(out, f+" (the files find hands to "+c.Name+", which may be symbolic links)")
			continue
		}
		if computed(f) {
			// Not noted outside by the analysis: it knows the value (a
			// loop's), but that value is not here to look up.
			out = append(out, f)
			continue
		}
		isOut, isSecret, note := false, false, ""
		for _, b := range l.bases {
			o, s, n := l.lookUp(b, f)
			isOut, isSecret = isOut || o, isSecret || s
			if note == "" {
				note = n
			}
		}
		switch {
		case note != "":
			out = append(out, note)
		case isOut:
			out = append(out, f)
		}
		if isSecret {
			secrets = append(secrets, f)
		}
	}
	if relative && l.cdUnknown != "" {
		out = append(out, l.cdUnknown)
	}
	return out, secrets
}

// linkFollowers are the options by which commands follow every symbolic
// link they meet in the directories they walk (grep -r and find do not):
// what they read through one is not among the names looked up.
var linkFollowers = map[string]struct {
	short string   // letters of a short-option cluster
	long  []string // long options, and single-dash words (find)
}{
	"grep": {"R", []string{"--dereference-recursive"}}, "egrep": {"R", []string{"--dereference-recursive"}},
	"fgrep": {"R", []string{"--dereference-recursive"}}, "rg": {"L", []string{"--follow"}},
	"find": {"", []string{"-L", "-follow"}}, "cp": {"L", []string{"--dereference"}},
	"rsync": {"L", []string{"--copy-links", "--copy-unsafe-links", "--copy-dirlinks"}}, "tar": {"h", []string{"--dereference"}},
}

// followsLinks says why c follows symbolic links wherever they lead ("":
// it does not, by its options).
func followsLinks(c *shell.Command) string {
	f, ok := linkFollowers[c.Name]
	if !ok {
		return ""
	}
	for i, a := range c.Args {
		switch {
		case a == "--":
			return ""
		case slices.Contains(f.long, a) || f.short != "" && !strings.HasPrefix(a, "--") && strings.HasPrefix(a, "-") && strings.ContainsAny(a[1:], f.short),
			c.Name == "tar" && i == 0 && !strings.HasPrefix(a, "-") && strings.ContainsAny(a, f.short): // tar chf
			return c.Name + " " + a + " follows symbolic links, and where they lead is not checked"
		}
	}
	return ""
}

// lookUp checks the name f under the directory b: taken as it is, and,
// if it may be a pattern, every file it matches there. note says why it
// could not be checked.
func (l *links) lookUp(b, f string) (isOut, isSecret bool, note string) {
	paths := []string{b + "/" + f}
	if strings.ContainsAny(f, "*?[") {
		matches, err := filepath.Glob(b + "/" + f)
		if err == nil && len(matches) > maxPatternMatches {
			return true, false, fmt.Sprintf("%s matches more than %d files, too many to check for symbolic links", f, maxPatternMatches)
		}
		paths = append(paths, matches...)
	}
	for _, p := range paths {
		if l.left == 0 {
			return true, false, "more files than can be checked for symbolic links"
		}
		l.left--
		if strings.Count(p, "/") > maxLinkDepth {
			return true, false, f + ": too deep to check for symbolic links"
		}
		// Not cleaned: the kernel resolves a link before the ".." after
		// it (up/.. is where up leads, then up one), resolve does too.
		r, ok := resolve(p)
		switch {
		case ok && r == path.Clean(p) && insideByName(r, l.dir):
			continue // no link on the way
		case !ok || !insideByName(r, l.rd) || shell.InGitDir(r) && !shell.InGitDir(f):
			isOut = true
		}
		isSecret = isSecret || ok && shell.SecretPath(r) && !shell.SecretPath(f)
	}
	return isOut, isSecret, ""
}

// inDir is c as it stands in dir: the files it names by absolute paths
// inside dir taken off its Outside list (insideDir), and the relative
// names that symbolic links lead out of dir, into .git or to a secret
// added to its Outside or Secrets (l.names; l nil: none). nil when
// nothing changes.
func inDir(c *shell.Command, dir string, l *links) *shell.Command {
	in := insideDir(c, dir)
	if l == nil {
		return in
	}
	base := c
	if in != nil {
		base = in
	}
	out, secrets := l.names(base)
	if len(out) == 0 && len(secrets) == 0 {
		return in
	}
	cp := *base
	cp.Outside = append(slices.Clone(base.Outside), out...)
	cp.Secrets = append(slices.Clone(base.Secrets), secrets...)
	return &cp
}

// insideDir is c with the files it names by absolute paths inside dir
// (PathInside: symbolic links resolved) taken off its Outside list: the
// shell analysis knows no directory, and counts every absolute path as
// outside the working directory; a call made in dir (a coding agent's
// project) that names its own files by their absolute paths is not. Only
// a plain name is taken off: not one computed at run time (Unknown), nor
// a pattern, nor one with an expansion. nil when nothing is taken off.
func insideDir(c *shell.Command, dir string) *shell.Command {
	if dir == "" || len(c.Outside) == 0 || len(c.Outside) >= shell.MaxNotes {
		return nil // a full list may have left out a file outside
	}
	var keep []string
	dropped := false
	for _, o := range c.Outside {
		if strings.HasPrefix(o, "/") && !strings.ContainsAny(o, "$`*?[]{}\\\n") &&
			!slices.Contains(c.Unknown, o) && PathInside(o, dir) {
			dropped = true
			continue
		}
		keep = append(keep, o)
	}
	if !dropped {
		return nil
	}
	in := *c
	in.Outside = keep
	if in.Outside == nil {
		in.Outside = []string{}
	}
	return &in
}

// URLHost is the host an http or https URL names, in lower case and
// without its port; "" for anything else (another scheme, no host, a URL
// that does not parse, user information before the host — which a reader
// may take for the host). Policy files call it url_host(url).
func URLHost(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
		return ""
	}
	return strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
}
