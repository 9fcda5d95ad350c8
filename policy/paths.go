package policy

import (
	"net/url"
	"path"
	"strings"
)

// PathInside reports whether the file p lies in the directory dir (dir
// itself included), reading both as names, not the file system: dir must
// be absolute; p is absolute, or relative to dir. A path that climbs out
// with "..", one that starts with "~" (a shell would expand it; a tool
// would not), an empty one, and any path when dir is not absolute, are
// not inside. Symbolic links are not followed: a link inside dir that
// points out of it is inside by name (as a coding agent's own tools see
// it, and as the policy's shell analysis sees the working directory).
// Policy files call it path_inside(path, dir).
func PathInside(p, dir string) bool {
	if p == "" || !path.IsAbs(dir) || strings.HasPrefix(p, "~") || strings.ContainsRune(p, 0) {
		return false
	}
	dir = path.Clean(dir)
	if !path.IsAbs(p) {
		p = path.Join(dir, p)
	}
	p = path.Clean(p)
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
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
