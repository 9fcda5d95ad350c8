package mcpgate_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/mcpgate"
)

func TestParseFlag(t *testing.T) {
	for _, c := range []struct {
		flag    string
		command string
		args    []string
		url     string
	}{
		{"github=github-mcp-server stdio", "github-mcp-server", []string{"stdio"}, ""},
		{`fs=npx -y @modelcontextprotocol/server-filesystem "/home/me/My Docs" '/tmp/a b' c\ d`, "npx", []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/me/My Docs", "/tmp/a b", "c d"}, ""},
		{" spaced = server  --flag  ", "server", []string{"--flag"}, ""},
		// Not a glob: nothing is run, nothing is matched.
		{"ls=lister *.go", "lister", []string{"*.go"}, ""},
		{"docs=https://docs.example.com/mcp?key=a=b", "", nil, "https://docs.example.com/mcp?key=a=b"},
		{"local=http://127.0.0.1:8080/mcp", "", nil, "http://127.0.0.1:8080/mcp"},
	} {
		got, err := mcpgate.ParseFlag(c.flag)
		if err != nil {
			t.Errorf("%q: %v", c.flag, err)
			continue
		}
		wantName := strings.TrimSpace(strings.SplitN(c.flag, "=", 2)[0])
		if got.Name != wantName || got.Command != c.command || !slices.Equal(got.Args, c.args) || got.URL != c.url {
			t.Errorf("%q: %+v, want name %q command %q args %q url %q", c.flag, got, wantName, c.command, c.args, c.url)
		}
	}

	for _, c := range []struct {
		flag string
		want []string
	}{
		{"github-mcp-server stdio", []string{"NAME=COMMAND"}},
		{"gh=", []string{"NAME=COMMAND"}},
		{"=server", []string{`server name ""`, "letters, digits"}},
		{"my server=server", []string{`server name "my server"`}},
		{"a__b=server", []string{`server name "a__b"`, `"__"`, "mcp__<server>__<tool>"}},
		{"a.b=server", []string{`server name "a.b"`}},
		{strings.Repeat("x", 33) + "=server", []string{"1 to 32"}},
		{"gh=github-mcp-server --token $GITHUB_TOKEN", []string{"not run by a shell", "$ would not expand", "env"}},
		{"gh=server ${TOKEN}", []string{"$ would not expand"}},
		{"gh=server $(cat token)", []string{"$ would not expand"}},
		{`gh=server "unclosed`, []string{"does not split into words"}},
		{"gh=server | tee log", []string{"does not split into words"}},
		{"gh=ftp://example.com/mcp", nil}, // a command named ftp://...: odd, but a command
		{"gh=https://", []string{"not an http(s) URL"}},
	} {
		_, err := mcpgate.ParseFlag(c.flag)
		if c.want == nil {
			if err != nil {
				t.Errorf("%q: %v", c.flag, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%q: accepted", c.flag)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q does not say %q", c.flag, err, w)
			}
		}
	}
}

func TestParseConfig(t *testing.T) {
	t.Setenv("MCPGATE_TEST_GH_TOKEN", "ghp_x")
	t.Setenv("MCPGATE_TEST_DOCS_TOKEN", "docs_y")
	servers, err := mcpgate.ParseConfig("claude.json", []byte(`{
	  "theme": "dark",
	  "globalShortcut": {"key": "ctrl+space"},
	  "mcpServers": {
	    "github": {"command": "github-mcp-server", "args": ["stdio"],
	               "env": {"GITHUB_TOKEN": "${MCPGATE_TEST_GH_TOKEN}"}, "inherit_env": false, "cwd": "/tmp",
	               "timeout": "90s"},
	    "docs": {"type": "streamable-http", "url": "https://docs.example.com/mcp",
	             "headers": {"Authorization": "Bearer ${MCPGATE_TEST_DOCS_TOKEN}"}, "timeout": 45},
	    "a-local_one": {"type": "stdio", "command": "./server"}
	  }
	}`))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range servers {
		names = append(names, s.Name)
	}
	if want := []string{"a-local_one", "docs", "github"}; !slices.Equal(names, want) {
		t.Fatalf("servers %q, want %q (in name order)", names, want)
	}
	local, docs, gh := servers[0], servers[1], servers[2]
	if gh.Command != "github-mcp-server" || !slices.Equal(gh.Args, []string{"stdio"}) || gh.Dir != "/tmp" ||
		gh.Env["GITHUB_TOKEN"] != "${MCPGATE_TEST_GH_TOKEN}" || time.Duration(gh.Timeout) != 90*time.Second {
		t.Errorf("github: %+v (env is expanded when the server starts, not in the config)", gh)
	}
	if docs.URL != "https://docs.example.com/mcp" || docs.Headers["Authorization"] != "Bearer ${MCPGATE_TEST_DOCS_TOKEN}" || time.Duration(docs.Timeout) != 45*time.Second {
		t.Errorf("docs: %+v", docs)
	}
	if local.Command != "./server" || local.Timeout != 0 {
		t.Errorf("a-local_one: %+v", local)
	}

	// The "servers" key (VS Code's) is read too.
	servers, err = mcpgate.ParseConfig("mcp.json", []byte(`{"servers": {"x": {"type": "http", "url": "http://localhost:3000/mcp"}}, "inputs": []}`))
	if err != nil || len(servers) != 1 || servers[0].Name != "x" || servers[0].URL != "http://localhost:3000/mcp" {
		t.Errorf("servers key: %+v %v", servers, err)
	}

	// The durations as written back.
	b, err := json.Marshal(gh)
	if err != nil || !strings.Contains(string(b), `"timeout":"1m30s"`) {
		t.Errorf("marshalled: %s %v", b, err)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name, config string
		want         []string
	}{
		{"not JSON", `{"mcpServers": `, []string{"cfg.json", "not a JSON object"}},
		{"a list", `[{"mcpServers": {}}]`, []string{"cfg.json is not a JSON object: it is an array"}},
		{"no servers", `{"theme": "dark"}`, []string{"cfg.json", `no "mcpServers"`}},
		{"servers not an object", `{"mcpServers": []}`, []string{`"mcpServers" is not an object`}},
		{"unknown server key", `{"mcpServers": {"gh": {"command": "x", "enviroment": {}}}}`, []string{"server gh", `unknown key "enviroment"`, "cfg.json"}},
		{"a key of the wrong type", `{"mcpServers": {"gh": {"command": ["x", "y"]}}}`, []string{"server gh", `"command" should be a string, not an array`}},
		{"args not a list", `{"mcpServers": {"gh": {"command": "x", "args": "stdio"}}}`, []string{"server gh", `"args" should be a list of strings`}},
		{"server not an object", `{"mcpServers": {"gh": "github-mcp-server"}}`, []string{"server gh is not a JSON object", `{"command": ...}`}},
		{"sse", `{"mcpServers": {"old": {"type": "sse", "url": "https://x.example.com/sse"}}}`, []string{"server old", "SSE", "not supported", "streamable HTTP"}},
		{"unknown type", `{"mcpServers": {"w": {"type": "websocket", "url": "https://x.example.com/"}}}`, []string{"server w", `"websocket"`, `"stdio" or "http"`}},
		{"command and url", `{"mcpServers": {"both": {"command": "x", "url": "https://x.example.com/mcp"}}}`, []string{"server both", "a command or a url, not both"}},
		{"neither", `{"mcpServers": {"none": {"args": ["x"]}}}`, []string{"server none", "give a command", "or a url"}},
		{"stdio type with url", `{"mcpServers": {"s": {"type": "stdio", "url": "https://x.example.com/mcp"}}}`, []string{"server s", `type "stdio" does not go with a url`}},
		{"http type with command", `{"mcpServers": {"h": {"type": "http", "command": "x"}}}`, []string{"server h", `type "http" does not go with a command`}},
		{"not http", `{"mcpServers": {"f": {"url": "file:///tmp/x"}}}`, []string{"server f", "not an http(s) URL"}},
		{"env for a url", `{"mcpServers": {"u": {"url": "https://x.example.com/mcp", "env": {"A": "b"}}}}`, []string{"server u", "for a command, not a url"}},
		{"headers for a command", `{"mcpServers": {"c": {"command": "x", "headers": {"A": "b"}}}}`, []string{"server c", "headers are for a url", "env"}},
		{"unset env var", `{"mcpServers": {"gh": {"command": "x", "env": {"GITHUB_TOKEN": "${MCPGATE_TEST_NOT_SET}"}}}}`, []string{"server gh", "${MCPGATE_TEST_NOT_SET} is not set", "cfg.json"}},
		{"unset header var", `{"mcpServers": {"d": {"url": "https://x.example.com/mcp", "headers": {"Authorization": "Bearer ${MCPGATE_TEST_NOT_SET}"}}}}`, []string{"server d", "header Authorization", "${MCPGATE_TEST_NOT_SET} is not set"}},
		{"bad duration", `{"mcpServers": {"gh": {"command": "x", "timeout": "90 seconds"}}}`, []string{"server gh", `"90 seconds" is not a duration`, `"90s"`}},
		{"duration of another type", `{"mcpServers": {"gh": {"command": "x", "timeout": true}}}`, []string{"server gh", "a duration is a string"}},
		{"negative timeout", `{"mcpServers": {"gh": {"command": "x", "timeout": "-1s"}}}`, []string{"server gh", "negative"}},
		{"bad name", `{"mcpServers": {"my server": {"command": "x"}}}`, []string{`server name "my server"`}},
		// Each is reported, in name order.
		{"two bad servers", `{"mcpServers": {"b": {}, "a": {"type": "sse", "url": "https://x.example.com/sse"}}}`, []string{"server a: the SSE transport", "(in cfg.json)\nmcpgate: server b: give a command"}},
	} {
		_, err := mcpgate.ParseConfig("cfg.json", []byte(c.config))
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if strings.Contains(err.Error(), "Go ") || strings.Contains(err.Error(), "mcpgate.") {
			t.Errorf("%s: error %q speaks Go", c.name, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", c.name, err, w)
			}
		}
	}
}

func TestLoadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"x": {"command": "srv"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	servers, err := mcpgate.LoadConfig(path)
	if err != nil || len(servers) != 1 || servers[0].Command != "srv" {
		t.Errorf("%+v %v", servers, err)
	}
	_, err = mcpgate.LoadConfig(filepath.Join(t.TempDir(), "missing.json"))
	if err == nil || !strings.Contains(err.Error(), "reading the config") || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
}

func TestCheckNames(t *testing.T) {
	ok := []mcpgate.ServerConfig{{Name: "a"}, {Name: "b"}}
	if err := mcpgate.CheckNames(ok); err != nil {
		t.Error(err)
	}
	err := mcpgate.CheckNames(append(ok, mcpgate.ServerConfig{Name: "a"}))
	if err == nil || !strings.Contains(err.Error(), "two servers are named a") {
		t.Errorf("duplicate: %v", err)
	}
}
