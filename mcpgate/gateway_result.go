package mcpgate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
)

func (g *Gateway) waitingMessage(thread string, e exposedTool) string {
	qs, _, err := g.cfg.Store.ListQuestions(context.Background(), checkpoint.QuestionFilter{ThreadID: thread, Status: checkpoint.QuestionPending, Limit: 1})
	if err != nil || len(qs) == 0 {
		return fmt.Sprintf("tollgate: %s of %s is running", e.tool.Name, e.upstream.Name())
	}
	msg := fmt.Sprintf("tollgate: waiting for a person to approve %s of %s (question %s, thread %s)", e.tool.Name, e.upstream.Name(), qs[0].ID, thread)
	if !qs[0].Deadline.IsZero() {
		msg += fmt.Sprintf("; it times out at %s", qs[0].Deadline.UTC().Format(time.RFC3339))
	}
	if g.cfg.ReviewURL != "" {
		msg += "; answer at " + g.cfg.ReviewURL
	}
	return msg
}

// clientResult is what the client receives for the run's tool result: the
// upstream's result as it came, or an error result that says why the call
// was not made.
func (g *Gateway) clientResult(r agent.ToolResult) *mcp.CallToolResult {
	if raw, ok := r.Details["mcp_result"]; ok {
		res := decodeResult(raw)
		if res == nil {
			return errorResult("tollgate: the server's result could not be read back")
		}
		// A reviewer's edit is the client's to know: what ran is not what
		// it asked for.
		if trace, _ := r.Details["hitl"].(map[string]any); trace["decision"] == "edit" {
			by, _ := trace["by"].(string)
			edited, _ := json.Marshal(trace["edited_args"])
			note := fmt.Sprintf("tollgate: a reviewer (%s) edited the arguments before the call ran; it ran with %s", by, edited)
			res.Content = append([]mcp.Content{&mcp.TextContent{Text: note}}, res.Content...)
			if res.Meta == nil {
				res.Meta = mcp.Meta{}
			}
			res.Meta["tollgate/edited_args"] = trace["edited_args"]
		}
		return res
	}
	trace, _ := r.Details["hitl"].(map[string]any)
	decision, _ := trace["decision"].(string)
	g.mu.Lock()
	closing := g.closing
	g.mu.Unlock()
	if closing && decision == "aborted" {
		return retryable(shuttingDown)
	}
	switch decision {
	case "policy_deny":
		return errorResult("tollgate: the call was blocked by the policy: " + r.Content)
	case "human_deny":
		by, _ := trace["by"].(string)
		if by != "" {
			by = " (" + by + ")"
		}
		return errorResult("tollgate: a reviewer denied the call" + by + ": " + r.Content)
	case "timed_out":
		return errorResult("tollgate: nobody approved the call in time, so it was not made")
	case "aborted":
		return errorResult("tollgate: the call was aborted: " + r.Content)
	}
	if r.IsError {
		return errorResult("tollgate: " + r.Content)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.Content}}}
}

// decodeResult reads back the server's result kept in a tool result's
// details (json.RawMessage in the run, a decoded value once stored).
func decodeResult(raw any) *mcp.CallToolResult {
	var b []byte
	switch v := raw.(type) {
	case json.RawMessage:
		b = v
	default:
		b, _ = json.Marshal(v)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(b, &res); err != nil {
		return nil
	}
	return &res
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// shuttingDown is the retryable answer to a call the gateway's shutdown
// came before.
const shuttingDown = "the MCP gateway is shutting down: the call was not made; call it again in a moment"

// retryable is an error result a client may retry: the call was not made.
func retryable(text string) *mcp.CallToolResult {
	r := errorResult("tollgate: " + text)
	r.Meta = mcp.Meta{"tollgate/retryable": true}
	return r
}

func describeClient(ss *mcp.ServerSession) string {
	name := "unknown client"
	if ss == nil {
		return name
	}
	if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil {
		name = p.ClientInfo.Name
		if p.ClientInfo.Version != "" {
			name += " " + p.ClientInfo.Version
		}
	}
	if id := ss.ID(); id != "" {
		name += " (session " + shorten(id, 12) + ")"
	}
	return name
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
