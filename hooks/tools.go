package hooks

import (
	"context"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/tollgate-ai/tollgate/agent"
)

// The agents' built-in tools, with their arguments as the agents send
// them (Claude Code 2.1; Codex sends Bash with command only). Fields the
// agents add later are let through to the policy, which sees every
// argument; the ones named here are checked (type, and required), and an
// edit must keep to them.
func builtinSchemas() map[string]*jsonschema.Schema {
	str := func(desc string) *jsonschema.Schema { return &jsonschema.Schema{Type: "string", Description: desc} }
	obj := func(required []string, props map[string]*jsonschema.Schema) *jsonschema.Schema {
		return &jsonschema.Schema{Type: "object", Required: required, Properties: props}
	}
	num := &jsonschema.Schema{Type: "number"}
	integer := &jsonschema.Schema{Type: "integer", Minimum: ptr(0.0)}
	boolean := &jsonschema.Schema{Type: "boolean"}
	strList := &jsonschema.Schema{Type: "array", Items: &jsonschema.Schema{Type: "string"}}
	edit := obj([]string{"old_string", "new_string"}, map[string]*jsonschema.Schema{
		"old_string": str("the text to replace"), "new_string": str("the text to put in its place"), "replace_all": boolean})
	return map[string]*jsonschema.Schema{
		"Bash": obj([]string{"command"}, map[string]*jsonschema.Schema{
			"command":                   str("the shell command, run in the agent's shell in its working directory"),
			"description":               str("what the command does, as the agent says"),
			"timeout":                   num,
			"run_in_background":         boolean,
			"dangerouslyDisableSandbox": boolean,
		}),
		"Read": obj([]string{"file_path"}, map[string]*jsonschema.Schema{
			"file_path": str("the absolute path of the file to read"), "offset": integer, "limit": integer, "pages": str("")}),
		"Write": obj([]string{"file_path", "content"}, map[string]*jsonschema.Schema{
			"file_path": str("the absolute path of the file to write"), "content": str("the whole new content of the file")}),
		"Edit": obj([]string{"file_path", "old_string", "new_string"}, map[string]*jsonschema.Schema{
			"file_path": str("the absolute path of the file to change"), "old_string": str("the text to replace"),
			"new_string": str("the text to put in its place"), "replace_all": boolean}),
		"MultiEdit": obj([]string{"file_path", "edits"}, map[string]*jsonschema.Schema{
			"file_path": str("the absolute path of the file to change"),
			"edits":     {Type: "array", Items: edit}}),
		"NotebookEdit": obj([]string{"notebook_path", "new_source"}, map[string]*jsonschema.Schema{
			"notebook_path": str("the absolute path of the notebook"), "new_source": str("the cell's new source"),
			"cell_id": str(""), "cell_type": str(""), "edit_mode": str("")}),
		"WebFetch": obj([]string{"url", "prompt"}, map[string]*jsonschema.Schema{
			"url": str("the address fetched"), "prompt": str("what to make of the page")}),
		"WebSearch": obj([]string{"query"}, map[string]*jsonschema.Schema{
			"query": str("what is searched for"), "allowed_domains": strList, "blocked_domains": strList}),
		"Glob": obj([]string{"pattern"}, map[string]*jsonschema.Schema{
			"pattern": str("the file name pattern"), "path": str("where to look (default: the working directory)")}),
		"Grep": obj([]string{"pattern"}, map[string]*jsonschema.Schema{
			"pattern": str("the regular expression"), "path": str("where to look (default: the working directory)"), "glob": str("")}),
	}
}

func ptr[T any](v T) *T { return &v }

// toolSet makes the agent tools the relayed calls are checked against:
// the built-in ones with their schemas, an MCP server's tool (named
// mcp__SERVER__TOOL) and any other with an object of any shape. Each name
// gets one tool, made once (agent.Config.ToolFor must give the same tool
// for a name every time).
type toolSet struct {
	schemas map[string]*jsonschema.Schema
	handler func(ctx context.Context, args map[string]any) (agent.ToolResult, error)
	made    sync.Map // name -> *agent.Tool
}

// maxToolName bounds a tool's name: an agent's tool names are short.
const maxToolName = 128

// validToolName: printable ASCII, no space; what agents name tools.
func validToolName(name string) bool {
	if name == "" || len(name) > maxToolName {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

func (ts *toolSet) tool(name string) *agent.Tool {
	if t, ok := ts.made.Load(name); ok {
		return t.(*agent.Tool)
	}
	if !validToolName(name) {
		return nil
	}
	// Idempotent: the tool only tells the agent's hook what was decided,
	// so a run cut off while it ran tells it again when it resumes.
	opts := &agent.ToolOptions{Schema: ts.schemas[name], Idempotent: true}
	if server, tool, ok := mcpName(name); ok {
		// What a hook knows of an MCP tool: its server and its name. The
		// server's hints never reach the hook.
		opts.Annotations = map[string]any{"mcp_server": server, "mcp_tool": tool}
	}
	t, _ := ts.made.LoadOrStore(name, agent.NewRawTool(name, "A tool of a coding agent, run by the agent once tollgate allows it.", ts.handler, opts))
	return t.(*agent.Tool)
}

// mcpName splits mcp__SERVER__TOOL.
func mcpName(name string) (server, tool string, ok bool) {
	rest, ok := strings.CutPrefix(name, "mcp__")
	if !ok {
		return "", "", false
	}
	server, tool, ok = strings.Cut(rest, "__")
	return server, tool, ok && server != "" && tool != ""
}
