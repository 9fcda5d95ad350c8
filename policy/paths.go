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
	for n := len(parts); n > 0; n-- {
		prefix := strings.Join(parts[:n], "/")
		if prefix == "" {
			prefix = "/"
		}
		r, err := filepath.EvalSymlinks(prefix)
		if err == nil {
			// What follows does not exist here: a ".." in it cancels a
			// name that does not exist (the kernel would refuse the path).
			return path.Join(append([]string{r}, parts[n:]...)...), true
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", false
		}
		if _, err := os.Lstat(prefix); !errors.Is(err, fs.ErrNotExist) {
			return "", false // it exists (a dangling link), or cannot be told
		}
	}
	return path.Clean(p), true
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

// linkedNames is what the relative names of c — its files, its
// redirections' targets — lead to through the symbolic links under dir:
// a name that resolves out of dir, into a .git directory or to a secret's
// name is returned in out (or secrets), to be noted as the analysis notes
// such a name written out. The analysis reads names, never the file
// system; a cloned project can hold a link named notes.txt to .env, or
// home/ to /root. cds are the other directories the names may be
// relative to, those the command string's cd commands enter (cdDirs): a
// name is looked up under each, and noted if it leads out under any.
func linkedNames(c *shell.Command, dir string, cds ...string) (out, secrets []string) {
	if dir == "" || !path.IsAbs(dir) {
		return nil, nil
	}
	rd, ok := resolve(path.Clean(dir))
	if !ok {
		return nil, nil
	}
	names := slices.Clone(c.Files)
	for _, r := range c.Redirects {
		if !r.Dynamic && r.Target != "" && r.Op != "<<<" && r.Op != ">&" && r.Op != "<&" {
			names = append(names, r.Target)
		}
	}
	bases := append([]string{dir}, cds...)
	if len(names)*len(bases) > maxLinkChecks {
		// Each name is a few look-ups on every evaluation of the call:
		// past this many, the command is taken to reach outside.
		return []string{fmt.Sprintf("%d files, too many to check for symbolic links", len(names))}, nil
	}
	for _, f := range names {
		if f == "" || strings.HasPrefix(f, "/") || strings.HasPrefix(f, "~") || strings.HasPrefix(f, "-") ||
			strings.ContainsAny(f, "$`*?[]{}\\\n\x00") || slices.Contains(c.Outside, f) {
			continue
		}
		isOut, isSecret := false, false
		for _, b := range bases {
			p := path.Join(b, f)
			r, ok := resolve(p)
			switch {
			case ok && r == path.Clean(p) && insideByName(r, path.Clean(dir)):
				continue // no link on the way
			case !ok || !insideByName(r, rd) || shell.InGitDir(r) && !shell.InGitDir(f):
				isOut = true
			}
			isSecret = isSecret || ok && shell.SecretPath(r) && !shell.SecretPath(f)
		}
		if isOut {
			out = append(out, f)
		}
		if isSecret {
			secrets = append(secrets, f)
		}
	}
	return out, secrets
}

// maxCdDirs is how many directories cdDirs follows a command string into.
const maxCdDirs = 8

// cdDirs are the directories other than dir that the relative names of
// the commands may be relative to: those the string's cd and pushd enter
// (cd sub && cat notes.txt reads sub/notes.txt, which a link can lead out
// of the project while ./notes.txt does not exist). Each static target is
// followed from every directory found before it, as the analysis does
// not know which ran; a target computed at run time, or one out of dir,
// is already noted outside by the analysis. tooMany reports that more
// than maxCdDirs were found: the commands are then taken to reach
// outside. None without a cd, the common case.
func cdDirs(cmds []shell.Command, dir string) (dirs []string, tooMany bool) {
	if dir == "" || !path.IsAbs(dir) {
		return nil, false
	}
	for i := range cmds {
		c := &cmds[i]
		if c.Name != "cd" && c.Name != "pushd" || len(c.Files) == 0 {
			continue
		}
		t := c.Files[0]
		if t == "" || strings.HasPrefix(t, "~") || strings.HasPrefix(t, "-") || strings.ContainsAny(t, "$`*?[]{}\\\n\x00") {
			continue
		}
		from := append([]string{dir}, dirs...)
		for _, b := range from {
			d := path.Join(b, t)
			if path.IsAbs(t) {
				d = path.Clean(t)
			}
			if d == dir || slices.Contains(dirs, d) {
				continue
			}
			if len(dirs) == maxCdDirs {
				return nil, true
			}
			dirs = append(dirs, d)
		}
	}
	return dirs, false
}

// maxLinkChecks is how many names of one command linkedNames looks up.
const maxLinkChecks = 64

// inDir is c as it stands in dir: the files it names by absolute paths
// inside dir taken off its Outside list (insideDir), and the relative
// names that symbolic links lead out of dir, into .git or to a secret —
// looked up in dir and in the directories cds the command string's cd
// commands enter — added to its Outside or Secrets (linkedNames). nil
// when nothing changes.
func inDir(c *shell.Command, dir string, cds ...string) *shell.Command {
	in := insideDir(c, dir)
	base := c
	if in != nil {
		base = in
	}
	out, secrets := linkedNames(base, dir, cds...)
	if len(out) == 0 && len(secrets) == 0 {
		return in
	}
	cp := *base
	cp.Outside = append(slices.Clone(base.Outside), out...)
	cp.Secrets = append(slices.Clone(base.Secrets), secrets...)
	return &cp
}

// withOutside is c (as in, when inDir changed it) with note added to its
// Outside list.
func withOutside(c, in *shell.Command, note string) *shell.Command {
	base := c
	if in != nil {
		base = in
	}
	cp := *base
	cp.Outside = append(slices.Clone(base.Outside), note)
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
