package mcpgate

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func (u *Upstream) transport() (mcp.Transport, error) {
	if u.cfg.URL != "" {
		headers := http.Header{}
		for k, v := range u.cfg.Headers {
			x, err := expand(v)
			if err != nil {
				return nil, fmt.Errorf("mcpgate: server %s: header %s: %w", u.cfg.Name, k, err)
			}
			headers.Set(k, x)
		}
		var rt http.RoundTripper = u.web
		if len(headers) > 0 {
			// A request is cloned to add them: only a server that has
			// headers pays for it.
			to, err := url.Parse(u.cfg.URL)
			if err != nil {
				return nil, fmt.Errorf("mcpgate: server %s: url: %w", u.cfg.Name, err)
			}
			rt = &withHeaders{headers: headers, origin: originOf(to), next: u.web}
		}
		return &mcp.StreamableClientTransport{Endpoint: u.cfg.URL, HTTPClient: &http.Client{Transport: rt}}, nil
	}
	cmd := exec.Command(u.cfg.Command, u.cfg.Args...)
	cmd.Dir = u.cfg.Dir
	env, err := u.env()
	if err != nil {
		return nil, err
	}
	cmd.Env = env
	u.stderr.reset()
	cmd.Stderr = &logWriter{tail: u.stderr, log: u.log}
	u.mu.Lock()
	u.starting = cmd
	u.mu.Unlock()
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil
}

// passedEnv is what a stdio server gets of tollgate's environment unless
// its config says inherit_env: what programs need to run, not the keys
// tollgate holds (a third-party server is not given ANTHROPIC_API_KEY).
var passedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM",
	"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR", "SYSTEMROOT", "APPDATA", "LOCALAPPDATA", "USERPROFILE"}

func (u *Upstream) env() ([]string, error) {
	var env []string
	if u.cfg.InheritEnv {
		env = os.Environ()
	} else {
		for _, k := range passedEnv {
			if v, ok := os.LookupEnv(k); ok {
				env = append(env, k+"="+v)
			}
		}
	}
	keys := make([]string, 0, len(u.cfg.Env))
	for k := range u.cfg.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, err := expand(u.cfg.Env[k])
		if err != nil {
			return nil, fmt.Errorf("mcpgate: server %s: env %s: %w", u.cfg.Name, k, err)
		}
		env = append(env, k+"="+v)
	}
	return env, nil
}

// maxIdlePerServer bounds the idle connections kept to an HTTP server:
// as many as the calls a gateway makes at once, within reason.
const maxIdlePerServer = 64

// withHeaders adds a server's configured headers (its credentials) to the
// requests that go to that server: its URL's scheme, host and port. A
// request the server redirects elsewhere goes without them, as
// http.Client's own redirects drop Authorization for another host.
type withHeaders struct {
	headers http.Header
	origin  origin // the configured URL's
	next    http.RoundTripper
}

func (w *withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	if !w.origin.same(originOf(r.URL)) {
		return w.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, v := range w.headers {
		r.Header[k] = v
	}
	return w.next.RoundTrip(r)
}

// origin is a URL's scheme, host and port (the scheme's default when the
// URL has none).
type origin struct{ scheme, host, port string }

func originOf(u *url.URL) origin {
	o := origin{scheme: u.Scheme, host: u.Hostname(), port: u.Port()}
	if o.port == "" {
		switch strings.ToLower(o.scheme) {
		case "http":
			o.port = "80"
		case "https":
			o.port = "443"
		}
	}
	return o
}

// same: schemes and hosts compare without case, as in URLs.
func (o origin) same(p origin) bool {
	return strings.EqualFold(o.scheme, p.scheme) && strings.EqualFold(o.host, p.host) && o.port == p.port
}
