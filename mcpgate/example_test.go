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
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/internal/mcptest"
	"github.com/tollgate-ai/tollgate/mcpgate"
	"github.com/tollgate-ai/tollgate/policy"
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
	// mcpgate: "gh=github-mcp-server --token $GITHUB_TOKEN": the command is not run by a shell, so $ would not expand; give variables in a config file's env
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

// A gateway between an MCP client and a server: the policy allows echo,
// hides delete_repo, and asks about the rest.
func ExampleNewGateway() {
	srv := mcptest.NewServer(nil, nil)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer ts.Close()
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	servers, err := mcpgate.ConnectAll(ctx, []mcpgate.ServerConfig{{Name: "t", URL: ts.URL}}, &mcpgate.Options{Logger: quiet, KeepResults: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer servers.Close()
	pol, err := policy.Parse("gateway.yaml", []byte(`version: 1
default: ask
rules:
  - {name: reads, tool: mcp__t__echo, action: allow}
  - {name: no-deletes, tool: "mcp__*__delete_*", action: block, reason: not for agents}
`), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := mcpgate.NewGateway(mcpgate.GatewayConfig{Servers: servers, Store: memory.New(), Policy: pol.HITL(),
		Hidden: func(tool string, _ map[string]any) bool { return pol.Blocks(tool) }, Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := g.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer g.Shutdown(ctx)

	// The client (over stdio or HTTP in real life; in memory here).
	ct, st := mcp.NewInMemoryTransports()
	if _, err := g.Server().Connect(ctx, st, nil); err != nil {
		fmt.Println(err)
		return
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "ide", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cs.Close()
	list, _ := cs.ListTools(ctx, nil)
	var names []string
	for _, t := range list.Tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	fmt.Println(slices.Contains(names, "echo"), slices.Contains(names, "delete_repo"))

	res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_repo", Arguments: map[string]any{"repo": "x"}})
	fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// true false
	// echo: hi
	// true tollgate: the call was blocked by the policy: not for agents
}
