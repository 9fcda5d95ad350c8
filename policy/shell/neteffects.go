package shell

import (
	"net/url"
	"slices"
	"strings"
)

// This file holds the effects of commands that reach the network: ssh and
// its kin, package managers, containers, and downloads (curl, wget),
// with the hosts they name.

func remoteEffect(c *Command, add addFunc, named map[string]bool) {
	spec := optSpec{shortVal: "bcDeEFIiJlLmOopQRSWw", longVal: nil}
	if c.Name != "ssh" {
		spec = optSpec{shortVal: "pswWiqcxX"}
	}
	_, ops, _ := spec.parse(staticWords(c.Args))
	if len(ops) == 0 {
		return
	}
	host := ops[0].val
	if _, h, ok := strings.Cut(host, "@"); ok {
		host = h
	}
	if hs := hostsOf([]string{ops[0].val}); len(hs) > 0 {
		host = hs[0]
	}
	add(EffectNetwork, RiskMedium, "connects to "+host, []string{host})
	if c.Name == "ssh" && len(ops) > 1 {
		var words []string
		for _, o := range ops[1:] {
			words = append(words, o.val)
		}
		add(EffectUnknown, RiskHigh, "runs a command on "+host+": "+strings.Join(words, " "), []string{host})
	}
}

// packageEffect: package managers that download packages, and run their
// install scripts.
func packageEffect(c *Command, add addFunc, named map[string]bool) {
	ops, _ := operands(c.Args)
	sub := ""
	if len(ops) > 0 {
		sub = ops[0]
	}
	registry := map[string]string{"npm": "the npm registry", "pnpm": "the npm registry", "yarn": "the npm registry", "bun": "the npm registry", "npx": "the npm registry",
		"pip": "the Python package index", "pip3": "the Python package index", "pipx": "the Python package index", "uv": "the Python package index", "uvx": "the Python package index", "poetry": "the Python package index",
		"gem": "rubygems.org", "bundle": "rubygems.org", "cargo": "crates.io", "go": "the Go module proxy", "composer": "packagist.org"}[c.Name]
	switch {
	case c.Name == "npx" || c.Name == "uvx" || c.Name == "pipx" && sub == "run" || c.Name == "go" && sub == "run" && slices.ContainsFunc(ops, func(o string) bool { return strings.Contains(o, "@") }):
		pkg := sub
		if c.Name == "pipx" || c.Name == "go" {
			pkg = ""
			if len(ops) > 1 {
				pkg = ops[1]
			}
		}
		add(EffectRunDownloaded, RiskHigh, "runs "+pkg+", downloaded from "+registry, []string{registry})
	case slices.Contains([]string{"install", "i", "add", "ci", "update", "upgrade", "sync", "get", "build", "download", "fetch", "publish", "require"}, sub) ||
		(c.Name == "yarn" || c.Name == "bundle" || c.Name == "uv" && sub == "") && sub == "":
		if c.Name == "go" && (sub == "build" || sub == "install" && !slices.ContainsFunc(ops, func(o string) bool { return strings.Contains(o, "@") })) {
			add(EffectWrite, RiskMedium, "builds Go programs (and may download modules from "+registry+")", nil)
			return
		}
		if sub == "publish" {
			add(EffectNetwork, RiskHigh, "publishes a package to "+registry, []string{registry})
			return
		}
		if sub == "build" || sub == "download" || sub == "fetch" || c.Name == "go" {
			add(EffectNetwork, RiskMedium, "downloads packages from "+registry, []string{registry})
			if sub == "build" {
				add(EffectUnknown, RiskMedium, "runs the project's build ("+c.Name+" build)", nil)
			}
			return
		}
		add(EffectRunDownloaded, RiskHigh, "installs packages from "+registry+" and runs their install scripts", []string{registry})
	case sub == "run" || sub == "test" || sub == "exec" || sub == "start":
		add(EffectUnknown, RiskMedium, "runs the project's "+c.Name+" "+strings.Join(ops[:min(2, len(ops))], " ")+", whose effects tollgate does not know", nil)
	case sub == "uninstall" || sub == "remove" || sub == "rm":
		add(EffectDelete, RiskMedium, "removes packages ("+c.Name+" "+sub+")", nil)
	case sub == "" || sub == "list" || sub == "ls" || sub == "show" || sub == "view" || sub == "version" || sub == "help" || sub == "env" || sub == "vet" || sub == "doc":
	default:
		add(EffectUnknown, RiskMedium, "runs "+c.Name+" "+sub+", whose effects tollgate does not know", nil)
	}
}

func systemPackageEffect(c *Command, add addFunc, named map[string]bool) {
	ops, _ := operands(c.Args)
	if len(ops) == 0 {
		return
	}
	switch ops[0] {
	case "install", "upgrade", "update", "dist-upgrade", "full-upgrade", "add", "reinstall", "-S", "-Syu":
		add(EffectRunDownloaded, RiskHigh, "installs system packages from the network and runs their install scripts ("+c.Name+" "+ops[0]+")", nil)
	case "remove", "purge", "autoremove", "uninstall", "del", "erase":
		add(EffectDelete, RiskHigh, "removes system packages ("+c.Name+" "+ops[0]+")", nil)
	case "list", "search", "show", "info", "policy":
	default:
		add(EffectUnknown, RiskMedium, "runs "+c.Name+" "+ops[0]+", whose effects tollgate does not know", nil)
	}
}

func dockerEffect(c *Command, add addFunc, named map[string]bool) {
	ops, _ := operands(c.Args)
	if len(ops) == 0 {
		return
	}
	switch ops[0] {
	case "pull", "push", "login", "search":
		add(EffectNetwork, RiskMedium, "connects to a container registry ("+c.Name+" "+ops[0]+")", nil)
	case "run", "exec", "create", "start", "compose":
		add(EffectUnknown, RiskHigh, "runs containers ("+c.Name+" "+strings.Join(ops[:min(2, len(ops))], " ")+"), which may download images and mount files", nil)
	case "rm", "rmi", "prune", "system", "volume", "image", "container", "network", "kill", "stop":
		if slices.ContainsFunc(ops, func(o string) bool { return o == "prune" || o == "rm" || o == "rmi" }) || ops[0] == "kill" || ops[0] == "stop" {
			add(EffectDelete, RiskHigh, "stops or deletes containers, images or volumes ("+c.Name+" "+strings.Join(ops[:min(2, len(ops))], " ")+")", nil)
		}
	case "build":
		add(EffectUnknown, RiskMedium, "builds an image, running the Dockerfile's commands ("+c.Name+" build)", nil)
	case "ps", "images", "inspect", "logs", "version", "info":
	default:
		add(EffectUnknown, RiskMedium, "runs "+c.Name+" "+ops[0]+", whose effects tollgate does not know", nil)
	}
}

// fetch: what curl, wget and the like connect to, send and write.
func (e *effects) fetch(c *Command, add addFunc, named map[string]bool, downloads map[string][]string) {
	hosts := hostsOf(c.Args)
	if len(hosts) == 0 {
		hosts = []string{"the network"}
	}
	hs, hobjs := objects(hosts)
	var out []string
	upload := false
	args := c.Args
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "-o" || a == "--output" || (c.Name == "wget" && (a == "-O" || a == "--output-document")):
			out = append(out, next())
		case strings.HasPrefix(a, "--output=") || strings.HasPrefix(a, "--output-document="):
			_, v, _ := strings.Cut(a, "=")
			out = append(out, v)
		case len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.IndexByte(a, outOpt(c.Name)) > 0:
			// A bundle such as -sSo FILE, -qO- or -oFILE.
			if v := a[strings.IndexByte(a, outOpt(c.Name))+1:]; v != "" {
				out = append(out, v)
			} else {
				out = append(out, next())
			}
		case c.Name == "curl" && (a == "-O" || a == "--remote-name" || a == "--remote-name-all"):
			out = append(out, "the file named as the URL's last part")
		case a == "-d" || a == "--data" || a == "--data-binary" || a == "--data-raw" || a == "--data-urlencode" || a == "-F" || a == "--form" ||
			a == "-T" || a == "--upload-file" || a == "--post-data" || a == "--post-file" || a == "--json" ||
			strings.HasPrefix(a, "--data") || strings.HasPrefix(a, "--post-") || strings.HasPrefix(a, "--upload-file=") || strings.HasPrefix(a, "--json="):
			upload = true
		case a == "-X" || a == "--request" || a == "--method":
			if m := strings.ToUpper(next()); m != "GET" && m != "HEAD" {
				upload = true
			}
		}
	}
	if c.Name == "wget" && len(out) == 0 && !slices.Contains(args, "--spider") {
		out = append(out, "a file named as the URL's last part")
	}
	verb := "connects to "
	if upload {
		verb = "sends data to "
	}
	risk := RiskMedium
	if upload {
		risk = RiskHigh
	}
	add(EffectNetwork, risk, verb+hs, hobjs)
	for _, o := range out {
		if o == "" || o == "-" || o == "/dev/null" || o == "/dev/stdout" {
			continue
		}
		add(EffectWrite, riskOf(o), "writes "+o+" (downloaded from "+hs+")"+where(o), []string{o})
		named[o] = true
		downloads[o] = append(downloads[o], hosts...)
		downloads["./"+strings.TrimPrefix(o, "./")] = append(downloads["./"+strings.TrimPrefix(o, "./")], hosts...)
	}
}

// outOpt is the short option of a fetcher that names the file it writes.
func outOpt(name string) byte {
	if name == "wget" {
		return 'O'
	}
	return 'o'
}

// hostsOf returns the hosts that URL-like arguments name, in order,
// each once: scheme://host/..., user@host:path, and bare host.tld/path.
func hostsOf(args []string) []string {
	var out []string
	for _, a := range args {
		if h := hostOf(a); h != "" && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

func hostOf(a string) string {
	if strings.HasPrefix(a, "-") {
		if _, v, ok := strings.Cut(a, "="); ok && strings.Contains(v, "://") {
			a = v
		} else {
			return ""
		}
	}
	if i := strings.Index(a, "://"); i > 0 {
		if u, err := url.Parse(a); err == nil && u.Hostname() != "" {
			return u.Hostname()
		}
		rest := a[i+3:]
		if j := strings.IndexAny(rest, "/?#"); j >= 0 {
			rest = rest[:j]
		}
		if _, h, ok := strings.Cut(rest, "@"); ok {
			rest = h
		}
		return rest
	}
	if h := remotePath(a); h != "" {
		return h
	}
	host, _, _ := strings.Cut(a, "/")
	host, _, _ = strings.Cut(host, ":")
	if isHostName(host) {
		return host
	}
	return ""
}

// remotePath returns the host of an scp-like user@host:path, or "".
func remotePath(a string) string {
	i := strings.IndexByte(a, ':')
	if i <= 0 || strings.Contains(a[:i], "/") {
		return ""
	}
	h := a[:i]
	if _, hh, ok := strings.Cut(h, "@"); ok {
		h = hh
	}
	if isHostName(h) || strings.Contains(a[:i], "@") && h != "" {
		return h
	}
	return ""
}

// isHostName reports whether s looks like a DNS name with a dot and a
// top-level part of letters (example.com), or an IPv4 address.
func isHostName(s string) bool {
	dot := strings.LastIndexByte(s, '.')
	if dot <= 0 || dot == len(s)-1 || len(s) > 253 {
		return false
	}
	for _, r := range s {
		if !(r == '.' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	tld := s[dot+1:]
	allDigits := strings.Trim(s, "0123456789.") == ""
	if allDigits {
		return strings.Count(s, ".") == 3
	}
	for _, r := range tld {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			return false
		}
	}
	// A file name such as notes.txt or main.go is not a host.
	return !fileSuffixes[strings.ToLower(tld)]
}

var fileSuffixes = map[string]bool{
	"txt": true, "md": true, "go": true, "py": true, "js": true, "ts": true, "sh": true, "json": true, "yaml": true, "yml": true,
	"toml": true, "log": true, "c": true, "h": true, "rs": true, "java": true, "rb": true, "tar": true, "gz": true, "tgz": true,
	"zip": true, "html": true, "css": true, "csv": true, "xml": true, "lock": true, "mod": true, "sum": true, "cfg": true,
	"conf": true, "ini": true, "env": true, "pem": true, "key": true, "png": true, "jpg": true, "svg": true, "pdf": true,
	"bak": true, "tmp": true, "old": true, "out": true, "o": true, "a": true, "so": true, "jsx": true, "tsx": true, "vue": true,
	"lua": true, "pl": true, "php": true, "swift": true, "kt": true, "db": true, "sql": true, "img": true, "iso": true, "bin": true,
}
