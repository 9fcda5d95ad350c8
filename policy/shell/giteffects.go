package shell

import (
	"path"
	"slices"
	"strings"
)

// This file holds the effects of git: what each subcommand does to the
// working tree, the history and the remotes.

// gitEffect: what a git subcommand does to the history, the working tree
// and remotes.
func gitEffect(c *Command, add addFunc, named map[string]bool) {
	i := 0
	for i < len(c.Args) && strings.HasPrefix(c.Args[i], "-") {
		if gitGlobalValue[c.Args[i]] {
			i++
		}
		i++
	}
	if i >= len(c.Args) {
		return
	}
	g := &gitCall{add: add, sub: c.Args[i], rest: c.Args[i+1:]}
	g.ops, g.flags = operands(g.rest)
	if len(g.ops) > 0 {
		g.first = g.ops[0]
	}
	switch g.sub {
	case "push", "pull", "fetch", "ls-remote", "remote", "clone", "submodule":
		g.remoteEffect()
	case "commit":
		if hasFlag(g.flags, 0, "--amend") {
			g.hist(RiskHigh, "rewrites the last commit")
		} else {
			g.hist(RiskMedium, "adds a commit to the current branch")
		}
	case "rebase", "filter-branch", "filter-repo", "replace":
		g.hist(RiskHigh, "rewrites commits")
	case "reset":
		if hasFlag(g.flags, 0, "--hard", "--keep", "--merge") {
			g.hist(RiskHigh, "moves the branch and throws away uncommitted changes")
		} else {
			g.hist(RiskMedium, "moves the branch or unstages changes")
		}
	case "checkout", "switch", "restore":
		if hasFlag(g.flags, 'f', "--force", "--discard-changes") || g.sub == "restore" || slices.Contains(g.rest, "--") || g.first == "." {
			g.hist(RiskHigh, "throws away uncommitted changes")
		} else if g.first != "" {
			add(EffectWrite, RiskMedium, "changes the files of the working tree to "+g.first+" (git "+g.sub+")", []string{g.first})
		}
	case "clean":
		g.cleanEffect()
	case "merge", "cherry-pick", "revert", "am", "apply", "mergetool":
		g.hist(RiskMedium, "adds commits or changes to the current branch")
	case "branch":
		if hasFlag(g.flags, 'D') || hasFlag(g.flags, 'd', "--delete") {
			s, objs := objects(g.ops)
			add(EffectGitHistory, RiskHigh, "deletes the branch "+s+" (git branch)", objs)
		} else if c.Writes {
			g.hist(RiskMedium, "creates or changes branches")
		}
	case "tag":
		if hasFlag(g.flags, 'd', "--delete") {
			g.hist(RiskHigh, "deletes tags")
		} else if c.Writes {
			g.hist(RiskMedium, "creates or changes tags")
		}
	case "stash":
		switch g.first {
		case "list", "show":
		case "drop", "clear":
			g.hist(RiskHigh, "throws away stashed changes")
		default:
			g.hist(RiskMedium, "sets uncommitted changes aside or brings them back")
		}
	case "update-ref", "reflog", "gc", "prune", "notes", "worktree":
		if g.sub == "reflog" && (g.first == "" || g.first == "show") {
			return
		}
		g.hist(RiskHigh, "changes references or prunes objects")
	case "rm", "mv":
		s, objs := objects(g.ops)
		if g.sub == "rm" && !hasFlag(g.flags, 0, "--cached") {
			add(EffectDelete, RiskMedium, "deletes "+s+" and stages the deletion (git rm)", objs)
		} else {
			add(EffectWrite, RiskMedium, "moves or unstages "+s+" (git "+g.sub+")", objs)
		}
	case "add", "stage":
		s, _ := objects(g.ops)
		add(EffectWrite, RiskLow, "stages "+s+" for the next commit (git add)", nil)
	case "init":
		add(EffectWrite, RiskMedium, "creates a git repository", nil)
	case "config":
		if !hasFlag(g.flags, 'l', "--list", "--get", "--get-all", "--get-regexp") && len(g.ops) >= 2 {
			add(EffectWrite, RiskMedium, "changes git's configuration: "+g.ops[0], []string{g.ops[0]})
		}
	case "status", "log", "diff", "show", "blame", "rev-parse", "ls-files", "ls-tree", "cat-file", "grep", "shortlog", "describe", "rev-list", "help", "version", "count-objects", "whatchanged", "name-rev", "for-each-ref", "show-ref", "var", "check-ignore", "verify-commit":
	default:
		add(EffectUnknown, RiskMedium, "runs git "+g.sub+", whose effects tollgate does not know", nil)
	}
}

// gitCall is one git command as gitEffect reads it: the subcommand, the
// arguments after it, and among those the operands, the first of them,
// and the flags.
type gitCall struct {
	add   addFunc
	sub   string
	rest  []string
	ops   []string
	flags []string
	first string
}

// hist adds an effect on the history.
func (g *gitCall) hist(risk Risk, text string) {
	g.add(EffectGitHistory, risk, text+" (git "+g.sub+")", nil)
}

// remote adds a connection to the remote first names, a host or a name.
func (g *gitCall) remote(verb string) {
	r := g.first
	if r == "" {
		r = "the default remote"
	} else if h := hostsOf([]string{r}); len(h) > 0 {
		r = h[0]
	} else {
		r = "the remote " + r
	}
	g.add(EffectNetwork, RiskMedium, verb+" "+r+" (git "+g.sub+")", []string{r})
}

// remoteEffect: the subcommands that talk to remotes or change them.
func (g *gitCall) remoteEffect() {
	switch g.sub {
	case "push":
		g.remote("connects to")
		force := hasFlag(g.flags, 'f', "--force", "--force-with-lease", "--force-if-includes", "--mirror", "--delete", "--prune") || hasFlag(g.flags, 'd') ||
			slices.ContainsFunc(g.ops, func(o string) bool { return strings.HasPrefix(o, "+") || strings.HasPrefix(o, ":") })
		if force {
			g.hist(RiskHigh, "rewrites or deletes history on the remote")
		} else {
			g.hist(RiskMedium, "publishes commits to the remote")
		}
	case "pull":
		g.remote("connects to")
		g.hist(RiskMedium, "merges or rebases the remote's commits into the current branch")
	case "fetch", "ls-remote", "remote":
		if g.sub == "remote" && g.first != "update" {
			if g.first != "" && g.first != "show" && g.first != "-v" {
				g.add(EffectWrite, RiskMedium, "changes the repository's remotes (git remote "+g.first+")", nil)
			}
			return
		}
		if g.sub == "remote" {
			g.first = ""
		}
		g.remote("connects to")
	case "clone":
		g.remote("downloads a repository from")
		dest := ""
		if len(g.ops) > 1 {
			dest = g.ops[1]
		} else if g.first != "" {
			dest = strings.TrimSuffix(path.Base(strings.TrimSuffix(g.first, "/")), ".git")
		}
		if dest != "" {
			g.add(EffectWrite, riskOf(dest), "writes the repository into "+dest+where(dest), []string{dest})
		}
	case "submodule":
		if g.first == "update" || g.first == "add" || g.first == "sync" {
			g.add(EffectNetwork, RiskMedium, "downloads submodules (git submodule "+g.first+")", nil)
		}
	}
}

// cleanEffect: git clean deletes untracked files when forced.
func (g *gitCall) cleanEffect() {
	if hasFlag(g.flags, 'n', "--dry-run") || !hasFlag(g.flags, 'f', "--force") {
		return
	}
	what := "untracked files"
	if hasFlag(g.flags, 'd') {
		what = "untracked files and directories"
	}
	if hasFlag(g.flags, 'X') {
		what = "ignored files"
	}
	in := "the working tree"
	if len(g.ops) > 0 {
		in, _ = objects(g.ops)
	}
	text := "deletes " + what + " in " + in
	if hasFlag(g.flags, 'x') {
		text = "deletes " + what + " in " + in + ", ignored ones too"
	}
	g.add(EffectDelete, RiskHigh, text+" (git clean)", g.ops)
}
