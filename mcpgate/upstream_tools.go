package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/agent"
)

// toolName is what model APIs accept as a tool name.
var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// AgentName is the agent tool name of an MCP server's tool.
func AgentName(server, tool string) string { return "mcp__" + server + "__" + tool }

// listTools reads every page of the server's tools and keeps the usable
// ones: a tool whose name no model API accepts, whose schema does not
// compile, or that is listed twice is left out with a problem, and the
// rest of the server's tools stay.
func (u *Upstream) listTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, []string, error) {
	var tools []*mcp.Tool
	var problems []string
	seen := map[string]bool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, nil, err
		}
		name := AgentName(u.cfg.Name, t.Name)
		switch {
		case seen[t.Name]:
			problems = append(problems, fmt.Sprintf("server %s lists tool %q twice; the second is left out", u.cfg.Name, t.Name))
			continue
		case !toolName.MatchString(name):
			problems = append(problems, fmt.Sprintf("server %s: tool %q is left out: %s is not a name model APIs accept (letters, digits, '_' and '-', at most 64)", u.cfg.Name, t.Name, name))
			continue
		}
		if _, err := inputSchema(t); err != nil {
			problems = append(problems, fmt.Sprintf("server %s: tool %q is left out: %v", u.cfg.Name, t.Name, err))
			continue
		}
		seen[t.Name] = true
		tools = append(tools, t)
	}
	return tools, problems, nil
}

// inputSchema is the tool's input schema as the agent validates it.
func inputSchema(t *mcp.Tool) (*jsonschema.Schema, error) {
	if t.InputSchema == nil {
		return nil, errors.New("it has no input schema")
	}
	b, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("its input schema does not encode: %w", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("its input schema is malformed: %w", err)
	}
	if err := agent.CheckSchema(&s); err != nil {
		return nil, fmt.Errorf("its input schema is malformed: %w", err)
	}
	return &s, nil
}

func (u *Upstream) refreshTools() {
	u.mu.Lock()
	cs := u.session
	u.mu.Unlock()
	if cs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(u.ctx, connectTimeout)
	defer cancel()
	tools, problems, err := u.listTools(ctx, cs)
	if err != nil {
		u.log.Warn("tollgate: an MCP server said its tools changed, and listing them failed", "err", err)
		return
	}
	u.mu.Lock()
	if u.session == cs {
		u.tools, u.problems = tools, problems
	}
	u.mu.Unlock()
	for _, p := range problems {
		u.log.Warn("tollgate: an MCP server's tool is left out", "problem", p)
	}
	if u.opts.ToolsChanged != nil {
		u.opts.ToolsChanged(u.cfg.Name)
	}
}
