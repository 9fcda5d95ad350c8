package mcpgate_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/internal/mcptest"
	"github.com/tollgate-ai/tollgate/mcpgate"
)

func ExampleParseFlag() {
	// --mcp 'NAME=COMMAND ARGS...': split as a shell would, without one.
	c, _ := mcpgate.ParseFlag(`fs=mcp-server-filesystem --root "/home/me/My Notes"`)
	fmt.Printf("%s: %s %q\n", c.Name, c.Command, c.Args)

	// --mcp NAME=URL: a streamable HTTP server.
	c, _ = mcpgate.ParseFlag("docs=https://docs.example.com/mcp")
	fmt.Printf("%s: %s\n", c.Name, c.URL)

	// No shell runs the command, so nothing would expand $: secrets go in
	// a config file's env, as ${VAR}.
	_, err := mcpgate.ParseFlag("gh=github-mcp-server --token $GITHUB_TOKEN")
	fmt.Println(err)
	// Output:
	// fs: mcp-server-filesystem ["--root" "/home/me/My Notes"]
	// docs: https://docs.example.com/mcp
	// mcp: "gh=github-mcp-server --token $GITHUB_TOKEN": the command is not run by a shell, so $ would not expand; give variables in a config file's env
}

func ExampleUpstream_AgentTools() {
	// An MCP server (here the test server, in process) over streamable
	// HTTP.
	srv := mcptest.NewServer(nil, nil)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer ts.Close()

	u, err := mcpgate.Connect(context.Background(), mcpgate.ServerConfig{Name: "t", URL: ts.URL},
		&mcpgate.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer u.Close()

	// Agent tools, named mcp__<server>__<tool>, for agent.Config.Tools.
	tools := u.AgentTools()
	slices.SortFunc(tools, func(a, b *agent.Tool) int { return strings.Compare(a.Name(), b.Name()) })
	for _, tool := range tools {
		fmt.Println(tool.Name())
	}
	// A tool whose input schema does not compile is left out, and said so.
	for _, p := range u.Problems() {
		why := strings.SplitN(p, ":", 3) // server, tool, the schema compiler's words
		fmt.Println(why[0] + ":" + why[1])
	}
	// What the server says of a tool, with the MCP specification's
	// defaults, for policies ("when: annotations.destructive == false")
	// and reviewers.
	for _, tool := range tools {
		if tool.Name() == "mcp__t__write_note" {
			a := tool.Annotations()
			fmt.Println("write_note: destructive:", a["destructive"], "read_only:", a["read_only"], "open_world:", a["open_world"])
		}
	}
	// Output:
	// mcp__t__delete_repo
	// mcp__t__echo
	// mcp__t__fail
	// mcp__t__slow
	// mcp__t__structured
	// mcp__t__write_note
	// server t: tool "bad_schema" is left out
	// write_note: destructive: false read_only: false open_world: true
}
