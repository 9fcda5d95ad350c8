package mcpgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"mvdan.cc/sh/v3/shell"
)

// ServerConfig says how to reach one MCP server: a command that speaks MCP
// on its standard input and output, or the URL of a streamable HTTP
// endpoint.
type ServerConfig struct {
	// Name names the server in its tools' names (mcp__<Name>__<tool>) and
	// in policies, questions and the audit log. Letters, digits, '-' and
	// '_'; no "__".
	Name string `json:"-"`

	// Command and Args start a stdio server. Env adds variables to the
	// few the command gets from tollgate's own environment (PATH, HOME,
	// USER, LANG, TMPDIR and the like: not tollgate's keys) unless
	// InheritEnv passes all of it. Dir is the working directory.
	Command    string            `json:"command,omitempty"`
	Args       []string          `json:"args,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	InheritEnv bool              `json:"inherit_env,omitempty"`
	Dir        string            `json:"cwd,omitempty"`

	// URL is a streamable HTTP endpoint; Headers go with every request
	// to it (an Authorization header, say), not to another host it
	// redirects to (only URL's scheme, host and port get them). ${VAR} in
	// a header or an Env value
	// is read from tollgate's environment, so that secrets stay out of
	// the file.
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`

	// Type is "stdio" or "http" ("streamable-http" too); empty: from
	// Command or URL.
	Type string `json:"type,omitempty"`

	// Timeout bounds one tool call (a Go duration, "90s"). Zero:
	// DefaultCallTimeout. A call that takes longer is an error result that
	// says its outcome is unknown, and a server that then does not answer
	// a ping is restarted.
	Timeout Duration `json:"timeout,omitempty"`
}

// DefaultCallTimeout bounds a tool call whose server's config sets none.
const DefaultCallTimeout = 2 * time.Minute

// Duration is a time.Duration written as a Go duration string in JSON.
type Duration time.Duration

// UnmarshalJSON reads "90s", "2m" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var secs float64
		if err2 := json.Unmarshal(b, &secs); err2 != nil {
			return fmt.Errorf("a duration is a string such as \"90s\" or a number of seconds")
		}
		*d = Duration(secs * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration (write \"90s\", \"2m\")", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// serverName: no '_' or '-' at either end, and no "__", so that
// mcp__<server>__<tool> names one server's tool (server "a_" with tool
// "b" and server "a" with tool "_b" would both be mcp__a___b).
var serverName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_-]{0,30}[A-Za-z0-9])?$`)

// Check reports what is wrong with the config, in the user's terms.
func (c *ServerConfig) Check() error {
	if !serverName.MatchString(c.Name) || strings.Contains(c.Name, "__") {
		return fmt.Errorf("mcpgate: server name %q: use 1 to 32 letters, digits, '-' and '_', starting and ending with a letter or digit, without \"__\" (it becomes part of tool names: mcp__<server>__<tool>)", c.Name)
	}
	kind := c.Type
	switch kind {
	case "":
	case "stdio", "http":
	case "streamable-http", "streamableHttp", "streamable_http":
		kind = "http"
	case "sse":
		return fmt.Errorf("mcpgate: server %s: the SSE transport is not supported (it is deprecated in MCP); use the server's streamable HTTP endpoint", c.Name)
	default:
		return fmt.Errorf("mcpgate: server %s: type %q: use \"stdio\" or \"http\"", c.Name, c.Type)
	}
	switch {
	case c.Command != "" && c.URL != "":
		return fmt.Errorf("mcpgate: server %s: give a command or a url, not both", c.Name)
	case c.Command == "" && c.URL == "":
		return fmt.Errorf("mcpgate: server %s: give a command (a stdio server) or a url (a streamable HTTP server)", c.Name)
	case c.URL != "" && kind == "stdio", c.Command != "" && kind == "http":
		return fmt.Errorf("mcpgate: server %s: type %q does not go with a %s", c.Name, c.Type, map[bool]string{true: "url", false: "command"}[c.URL != ""])
	}
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("mcpgate: server %s: url %q: not an http(s) URL", c.Name, c.URL)
		}
		if len(c.Env) > 0 || len(c.Args) > 0 || c.Dir != "" || c.InheritEnv {
			return fmt.Errorf("mcpgate: server %s: env, args, cwd and inherit_env are for a command, not a url", c.Name)
		}
	} else if len(c.Headers) > 0 {
		return fmt.Errorf("mcpgate: server %s: headers are for a url, not a command (give a command its secrets in env)", c.Name)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("mcpgate: server %s: timeout %s is negative", c.Name, time.Duration(c.Timeout))
	}
	for _, v := range c.Env {
		if _, err := expand(v); err != nil {
			return fmt.Errorf("mcpgate: server %s: env: %w", c.Name, err)
		}
	}
	for k, v := range c.Headers {
		if _, err := expand(v); err != nil {
			return fmt.Errorf("mcpgate: server %s: header %s: %w", c.Name, k, err)
		}
	}
	return nil
}

func (c *ServerConfig) callTimeout() time.Duration {
	if c.Timeout > 0 {
		return time.Duration(c.Timeout)
	}
	return DefaultCallTimeout
}

// describe is how messages name the server: its name and what it runs.
func (c *ServerConfig) describe() string {
	if c.URL != "" {
		return fmt.Sprintf("%s (%s)", c.Name, c.shownURL())
	}
	return fmt.Sprintf("%s (%s)", c.Name, strings.Join(append([]string{c.Command}, c.Args...), " "))
}

// shownURL is the URL without what may hold a key: its user and query.
func (c *ServerConfig) shownURL() string {
	u, err := url.Parse(c.URL)
	if err != nil {
		return "(a URL that does not parse)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expand replaces ${VAR} with the variable's value; a variable that is not
// set is an error (an empty Authorization header fails far from its
// cause).
func expand(s string) (string, error) {
	var missing []string
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		v, ok := os.LookupEnv(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("${%s} is not set in the environment", missing[0])
	}
	return out, nil
}

// ParseFlag reads a server from a --mcp flag: NAME=COMMAND ARGS... (split
// as a shell would, without running one) or NAME=URL.
func ParseFlag(s string) (ServerConfig, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(rest) == "" {
		return ServerConfig{}, fmt.Errorf("mcpgate: %q: write NAME=COMMAND [ARGS...] or NAME=URL", s)
	}
	c := ServerConfig{Name: strings.TrimSpace(name)}
	rest = strings.TrimSpace(rest)
	if strings.HasPrefix(rest, "http://") || strings.HasPrefix(rest, "https://") {
		c.URL = rest
	} else {
		// Before the split: the splitter refuses $(...) with a message
		// of its own, less clear than this one.
		if strings.Contains(rest, "$") {
			return ServerConfig{}, fmt.Errorf("mcpgate: %q: the command is not run by a shell, so $ would not expand; give variables in a config file's env", s)
		}
		words, err := shell.Fields(rest, func(string) string { return "" })
		if err != nil {
			return ServerConfig{}, fmt.Errorf("mcpgate: %q: the command does not split into words: %v", s, err)
		}
		if len(words) == 0 {
			return ServerConfig{}, fmt.Errorf("mcpgate: %q: no command", s)
		}
		c.Command, c.Args = words[0], words[1:]
	}
	return c, c.Check()
}

// LoadConfig reads MCP servers from a JSON file in the format desktop
// assistants and IDEs use:
//
//	{"mcpServers": {
//	  "github": {"command": "github-mcp-server", "args": ["stdio"],
//	             "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}},
//	  "docs":   {"url": "https://docs.example.com/mcp",
//	             "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}
//	}}
//
// ("servers" is read too). Other top-level keys are left alone, so a
// desktop assistant's own file can be given; a server's unknown keys are
// errors. Servers come in name order.
func LoadConfig(path string) ([]ServerConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mcpgate: reading the config: %w", err)
	}
	return ParseConfig(path, b)
}

// ParseConfig is LoadConfig of a file's content; name is for messages.
func ParseConfig(name string, b []byte) ([]ServerConfig, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("mcpgate: %s is not a JSON object: %w", name, jsonError(err))
	}
	raw, ok := top["mcpServers"]
	if !ok {
		raw, ok = top["servers"]
	}
	if !ok {
		return nil, fmt.Errorf("mcpgate: %s has no \"mcpServers\" object", name)
	}
	var servers map[string]json.RawMessage
	if err := json.Unmarshal(raw, &servers); err != nil {
		return nil, fmt.Errorf("mcpgate: %s: \"mcpServers\" is not an object of servers: %w", name, jsonError(err))
	}
	var out []ServerConfig
	var errs []error
	for _, n := range slices.Sorted(maps.Keys(servers)) { // errors in name order too
		r := servers[n]
		if !bytes.HasPrefix(bytes.TrimSpace(r), []byte("{")) {
			errs = append(errs, fmt.Errorf("mcpgate: %s: server %s is not a JSON object (write {\"command\": ...} or {\"url\": ...})", name, n))
			continue
		}
		var c ServerConfig
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			errs = append(errs, fmt.Errorf("mcpgate: %s: server %s: %w", name, n, jsonError(err)))
			continue
		}
		c.Name = n
		if err := c.Check(); err != nil {
			errs = append(errs, fmt.Errorf("%w (in %s)", err, name))
			continue
		}
		out = append(out, c)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b ServerConfig) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// jsonError says what is wrong with the file's JSON in its terms rather
// than Go's ("Go struct field ServerConfig.command").
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Errorf("it is %s", aOrAn(te.Value))
		}
		want := "a " + te.Type.String()
		switch te.Type.Kind() {
		case reflect.String:
			want = "a string"
		case reflect.Slice:
			want = "a list of strings"
		case reflect.Map:
			want = "an object of strings"
		case reflect.Bool:
			want = "true or false"
		}
		return fmt.Errorf("%q should be %s, not %s", te.Field, want, aOrAn(te.Value))
	}
	if key, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("unknown key %s (a server has command, args, env, inherit_env, cwd, url, headers, type and timeout)", key)
	}
	return err
}

func aOrAn(jsonType string) string {
	if strings.HasPrefix(jsonType, "a") || strings.HasPrefix(jsonType, "o") {
		return "an " + jsonType
	}
	return "a " + jsonType
}

// CheckNames reports servers named twice.
func CheckNames(servers []ServerConfig) error {
	seen := map[string]bool{}
	for _, s := range servers {
		if seen[s.Name] {
			return fmt.Errorf("mcpgate: two servers are named %s", s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}
