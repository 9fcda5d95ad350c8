package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/agent"
)

// Servers are connections to several MCP servers, whose tools an agent
// uses.
type Servers struct {
	list []*Upstream
}

// ConnectAll connects to every server; if one fails, those connected are
// closed and the error says which failed and why.
func ConnectAll(ctx context.Context, configs []ServerConfig, opts *Options) (*Servers, error) {
	if err := CheckNames(configs); err != nil {
		return nil, err
	}
	s := &Servers{}
	for _, c := range configs {
		u, err := Connect(ctx, c, opts)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.list = append(s.list, u)
	}
	return s, nil
}

// Upstreams are the connections, in the order configured.
func (s *Servers) Upstreams() []*Upstream { return s.list }

// Get returns the server named name, or nil.
func (s *Servers) Get(name string) *Upstream {
	for _, u := range s.list {
		if u.Name() == name {
			return u
		}
	}
	return nil
}

// Tools returns every server's tools as agent tools (see
// [Upstream.AgentTools]).
func (s *Servers) Tools() []*agent.Tool {
	var out []*agent.Tool
	for _, u := range s.list {
		out = append(out, u.AgentTools()...)
	}
	return out
}

// Problems says which tools of which servers were left out, and why.
func (s *Servers) Problems() []string {
	var out []string
	for _, u := range s.list {
		out = append(out, u.Problems()...)
	}
	return out
}

// Close closes every connection.
func (s *Servers) Close() error {
	var errs []error
	for _, u := range s.list {
		errs = append(errs, u.Close())
	}
	return errors.Join(errs...)
}

// AgentTools returns the server's tools as agent tools named
// mcp__<server>__<tool>, with the server's input schemas (arguments are
// validated against them before any policy sees the call) and annotations
// ([Annotations]). Every call of one passes the agent's middleware — the
// policy, approvals — like any other tool's. None is idempotent, whatever
// the server's hints say: a call found executing after a crash is
// reported as of unknown outcome, never made again.
func (u *Upstream) AgentTools() []*agent.Tool {
	return u.agentTools(nil)
}

// agentTools are AgentTools whose calls run in wrap(ctx), when wrap is
// set.
func (u *Upstream) agentTools(wrap func(context.Context) context.Context) []*agent.Tool {
	var out []*agent.Tool
	for _, t := range u.Tools() {
		out = append(out, u.agentTool(t, wrap))
	}
	return out
}

func (u *Upstream) agentTool(t *mcp.Tool, wrap func(context.Context) context.Context) *agent.Tool {
	schema, _ := inputSchema(t) // listTools kept only tools whose schema compiles
	mcpName := t.Name
	desc := t.Description
	if desc == "" && t.Annotations != nil {
		desc = t.Annotations.Title
	}
	return agent.NewRawTool(AgentName(u.cfg.Name, t.Name), desc, func(ctx context.Context, args map[string]any) (agent.ToolResult, error) {
		raw, err := json.Marshal(args)
		if err != nil {
			return agent.ToolResult{}, fmt.Errorf("mcpgate: encoding the arguments: %w", err)
		}
		if wrap != nil {
			ctx = wrap(ctx)
		}
		res, err := u.Call(ctx, mcpName, raw)
		if err != nil {
			return agent.ToolResult{}, err
		}
		return u.toolResult(mcpName, res), nil
	}, &agent.ToolOptions{Schema: schema, Annotations: Annotations(u.cfg.Name, t), Timeout: u.cfg.callTimeout() + pingTimeout + restartWait})
}

// Annotations are what policies and reviewers are shown of an MCP tool:
// mcp_server and mcp_tool, its title and description if any, and its
// hints read_only, destructive, idempotent and open_world, with the MCP
// specification's defaults for hints the server left out (destructive and
// open world unless it says otherwise). stated lists the hints the server
// gave itself (read_only and idempotent count only when true: false is
// also what the server says by leaving them out), so that a policy or a
// reviewer can tell "the server says it is destructive" from "the server
// did not say it is read-only". They are the server's claims, not facts.
func Annotations(server string, t *mcp.Tool) map[string]any {
	m := map[string]any{"mcp_server": server, "mcp_tool": t.Name,
		"read_only": false, "destructive": true, "idempotent": false, "open_world": true}
	stated := []string{}
	if a := t.Annotations; a != nil {
		m["read_only"] = a.ReadOnlyHint
		m["idempotent"] = a.IdempotentHint
		if a.ReadOnlyHint {
			stated = append(stated, "read_only")
		}
		if a.DestructiveHint != nil {
			m["destructive"] = *a.DestructiveHint
			stated = append(stated, "destructive")
		}
		if a.IdempotentHint {
			stated = append(stated, "idempotent")
		}
		if a.OpenWorldHint != nil {
			m["open_world"] = *a.OpenWorldHint
			stated = append(stated, "open_world")
		}
		if a.Title != "" {
			m["title"] = a.Title
		}
	}
	m["stated"] = stated
	if t.Description != "" {
		m["description"] = t.Description
	}
	if m["read_only"] == true {
		m["destructive"] = false // the spec: destructive means nothing for a read-only tool
	}
	return m
}

// toolResult is what the model reads of an MCP result: its text, and a
// line for each thing that is not text.
func (u *Upstream) toolResult(tool string, res *mcp.CallToolResult) agent.ToolResult {
	out := agent.ToolResult{Content: ResultText(res), IsError: res.IsError}
	if u.opts.KeepResults {
		if b, err := json.Marshal(res); err == nil {
			out.Details = map[string]any{"mcp_result": json.RawMessage(b)}
		}
	}
	return out
}

// ResultText renders an MCP tool result as text for a model: text content
// as it is, other content as a line that says what it is, structured
// content as JSON when there is no text.
func ResultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image, %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio, %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link %s: %s]", c.Name, c.URI))
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else if c.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s, %d bytes]", c.Resource.URI, len(c.Resource.Blob)))
			}
		default:
			b, _ := json.Marshal(c)
			parts = append(parts, string(b))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}
