package shell

import (
	"path"
	"slices"
	"strings"
)

// This file says which paths may hold credentials: files named like
// secrets (.env, keys, .ssh, a repository's config) and a repository's
// .git directory, matched against patterns too, since a glob such as
// .e* may expand to .env.

// SecretPath reports whether a file's path names one that often holds
// credentials, by the list the analysis checks a command's files against
// (the secrets of [Command]): .env files, keys, .ssh and the like, a
// repository's config. It reads the name only.
func SecretPath(p string) bool { return secretPath(p, false) }

// InGitDir reports whether a path is a repository's .git directory or
// below it, where git reads configuration and hooks that run programs.
func InGitDir(p string) bool { return inGitDir(p, false) }

// inGitDir reports whether p is a repository's .git directory or below
// it. Its files may hold tokens (a remote's URL in config), and a command
// that enters it (cd .git && cat config, find .git -name config -exec cat)
// names them by paths no secret-name check can see (found by review).
// git itself reads .git through its own model, not through this.
func inGitDir(p string, glob bool) bool {
	for _, d := range strings.Split(path.Clean(strings.ToLower(p)), "/") {
		if d == ".git" || glob && strings.ContainsAny(d, "*?[") && globsMeet(d, ".git") {
			return true
		}
	}
	return false
}

// Secret names, compared in lower case: the file names (the last
// component) and directory names (any component) that may hold
// credentials. A pattern is a name, "*suffix", or ".prefix*": a trailing
// * only after a leading dot, so that a pattern such as *.go, which the
// shell never matches to a dot file, cannot match one of them.
var (
	secretFiles = []string{
		".env*", "*.env", ".netrc", "_netrc", ".git-credentials", ".gitcookies", ".pgpass", ".npmrc", ".pypirc",
		".yarnrc", ".yarnrc.yml", ".dockercfg", ".vault-token", ".s3cfg", ".boto", ".my.cnf", ".mylogin.cnf",
		".htpasswd", ".terraformrc", "terraform.rc", ".authinfo", ".authinfo.gpg", ".bash_history", ".history",
		"*_history", "credentials", "*credentials.json", "credentials.db", "credentials.toml", "credentials.yml",
		"credentials.yaml", "credentials.xml", "credentials.tfrc.json", "access_tokens.db", "kubeconfig",
		"secrets.yml", "secrets.yaml", "secrets.json", "secrets.toml", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks",
		"*.keystore", "*.kdbx", "*.ppk", "*.tfstate", "*.tfstate.backup", "*_rsa", "*_dsa", "*_ecdsa", "*_ed25519",
		"*_ecdsa_sk", "*_ed25519_sk", "*_xmss", "*_key", "identity", "shadow", "shadow-", "gshadow", "gshadow-",
		"sudoers", "environ", "token",
		// tollgate's own state: its stores and tokens (the sandbox hides
		// them from confined commands; an approved unconfined one would
		// read them).
		"tollgate.db", "tollgate.db-wal", "tollgate.db-shm", "gateway.db", "gateway.db-wal", "gateway.db-shm",
		"gateway.token", "*.reviewer-token", "tokens.yaml", "tokens.yml",
	}
	secretDirs = []string{
		".ssh", ".aws", ".gnupg", ".kube", ".docker", ".azure", ".password-store", ".terraform.d", ".gcloud",
	}
	// secretDirNames are directory names that count only as written, not
	// when a pattern may match them (src/*/x would, and be asked).
	secretDirNames = []string{"secrets"}
	// secretDirPaths are directories named by two or more components:
	// tollgate's own state and configuration, GitHub's command line
	// tools' tokens.
	secretDirPaths = [][]string{{".local", "state", "tollgate"}, {".config", "tollgate"}, {".config", "gh"}, {".config", "hub"}}
)

// secretPath reports whether p may name a file that holds credentials:
// a component is a secret directory, or the last a secret file name. glob
// means p is a shell pattern; it is matched conservatively (any name it
// may match). Letters are compared in lower case, as case-insensitive
// file systems do.
func secretPath(p string, glob bool) bool {
	lp := strings.ToLower(p)
	if glob && !strings.ContainsAny(lp, "*?[") {
		glob = false
	}
	clean := path.Clean(lp)
	// A repository's configuration may hold a token in a remote's URL:
	// .git/config, and a submodule's or worktree's below .git
	// (.git/modules/x/config).
	if dir, base := path.Split(clean); base == "config" || base == "config.worktree" || glob && globsMeet(base, "config") {
		for _, d := range strings.Split(dir, "/") {
			if d == ".git" || glob && globsMeet(d, ".git") {
				return true
			}
		}
	}
	comps := strings.Split(lp, "/")
	for i, comp := range comps {
		for _, d := range secretDirs {
			if comp == d || glob && globsMeet(comp, d) {
				return true
			}
		}
		if slices.Contains(secretDirNames, comp) {
			return true
		}
		for _, dp := range secretDirPaths {
			if i+len(dp) <= len(comps) && componentsMeet(comps[i:i+len(dp)], dp, glob) {
				return true
			}
		}
	}
	return secretName(path.Base(clean), glob)
}

// componentsMeet reports whether path components match a secret
// directory's, one for one.
func componentsMeet(comps, dirs []string, glob bool) bool {
	for k, d := range dirs {
		if comps[k] != d && !(glob && globsMeet(comps[k], d)) {
			return false
		}
	}
	return true
}

// notSecret are names on the list that hold examples, not secrets.
var notSecret = map[string]bool{
	".env.example": true, ".env.sample": true, ".env.template": true, ".env.dist": true, ".env.defaults": true,
	"example.env": true, "sample.env": true, "template.env": true,
}

// secretName reports whether the file name (lower case) may be a secret
// file's; glob means it is a shell pattern. A pattern of every name with
// an extension (*.yaml, *.json) may be a secret file's only when that
// extension is a secret's (*.pem, *.env): it does not choose secrets.yaml
// more than grep -r or find . do, which read every file. (Only a secret
// pattern is then matched, not a secret name that has the extension.)
func secretName(name string, glob bool) bool {
	if !glob && notSecret[name] {
		return false
	}
	if ext, ok := strings.CutPrefix(name, "*."); glob && ok && ext != "" && !strings.ContainsAny(ext, "*?[]/\\") {
		return secretName("-."+ext, false)
	}
	for _, pat := range secretFiles {
		if glob {
			if globsMeet(name, pat) {
				return true
			}
			continue
		}
		switch {
		case strings.HasPrefix(pat, "*"):
			if strings.HasSuffix(name, pat[1:]) {
				return true
			}
		case strings.HasSuffix(pat, "*"):
			if strings.HasPrefix(name, pat[:len(pat)-1]) {
				return true
			}
		case name == pat:
			return true
		}
	}
	return false
}

// maxGlob bounds the patterns globsMeet compares; a longer one is taken
// to match.
const maxGlob = 256

// globsMeet reports whether some file name matches both the shell pattern
// g and the secret pattern pat (whose only special character is *). In g,
// * ? and [...] are special (a class counts as any one character, which
// only errs towards a match), and, as the shell matches file names, a
// name it matches starts with a dot only if g does.
func globsMeet(g, pat string) bool {
	if len(g) > maxGlob {
		return true
	}
	g = simplifyClasses(g)
	noDot := g != "" && g[0] != '.'
	var meet func(i, j int, started bool) bool
	// seen marks the states tried: positions i in g and j in pat, and
	// whether a character of the name has been matched.
	seen := make([]bool, (len(g)+1)*(len(pat)+1)*2)
	// take matches one character of the name; c is what it must be, or 0
	// when both sides leave it free.
	take := func(i, j int, started bool, c byte) bool {
		if noDot && !started && c == '.' {
			return false
		}
		return meet(i, j, true)
	}
	meet = func(i, j int, started bool) bool {
		k := (i*(len(pat)+1) + j) * 2
		if started {
			k++
		}
		if seen[k] {
			return false
		}
		seen[k] = true
		gEnd, pEnd := i == len(g), j == len(pat)
		switch {
		case gEnd && pEnd:
			return true
		case !gEnd && g[i] == '*':
			if meet(i+1, j, started) {
				return true
			}
			switch {
			case pEnd:
				return false
			case pat[j] == '*':
				// Both stars take one free character, or pat's takes none.
				return !started && take(i, j, started, 0) || meet(i, j+1, started)
			}
			return take(i, j+1, started, pat[j]) // g's * takes pat's character
		case !pEnd && pat[j] == '*':
			if meet(i, j+1, started) {
				return true
			}
			if gEnd {
				return false
			}
			if g[i] == '?' {
				return take(i+1, j, started, 0)
			}
			return take(i+1, j, started, g[i])
		case gEnd || pEnd:
			return false
		case g[i] == '?':
			return take(i+1, j+1, started, pat[j])
		}
		return g[i] == pat[j] && take(i+1, j+1, started, g[i])
	}
	return meet(0, 0, false)
}

// simplifyClasses replaces each bracket expression [...] by ?, and
// leaves a [ without its ] as it is.
func simplifyClasses(g string) string {
	if !strings.Contains(g, "[") {
		return g
	}
	var b strings.Builder
	for i := 0; i < len(g); i++ {
		if g[i] == '[' {
			j := i + 1
			if j < len(g) && (g[j] == '!' || g[j] == '^') {
				j++
			}
			if j < len(g) && g[j] == ']' {
				j++
			}
			if k := strings.IndexByte(g[j:], ']'); k >= 0 {
				b.WriteByte('?')
				i = j + k
				continue
			}
		}
		b.WriteByte(g[i])
	}
	return b.String()
}
