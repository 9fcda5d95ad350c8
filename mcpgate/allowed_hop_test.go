package mcpgate_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/mcpgate"
)

// probeServer is an MCP server with one tool, probe, that records the
// progress token each call carried and answers with a result that has
// _meta of its own.
type probeServer struct {
	mu     sync.Mutex
	tokens []any
}

func (p *probeServer) url(t *testing.T) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "probe", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "probe"}, func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		p.mu.Lock()
		p.tokens = append(p.tokens, req.Params.GetProgressToken())
		p.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "probed " + a.Text}},
			Meta: mcp.Meta{"probe/k": "v"}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// An allowed call asks the server for progress only when its client
// asked for it (the server's progress goes to the client only), and the
// thread keeps the server's result as it came, whatever the SDK adds to
// the one the client gets (run with -race: the two are not shared).
func TestGatewayAllowedCallHop(t *testing.T) {
	p := &probeServer{}
	w := newGateway(t, gwOptions{servers: []mcpgate.ServerConfig{{Name: "t", URL: p.url(t)}},
		policy: "version: 1\ndefault: ask\nrules:\n  - {name: probes, tool: mcp__t__probe, action: allow}\n"})
	with := &mcp.CallToolParams{Name: "probe", Arguments: map[string]any{"text": "a"}}
	with.SetProgressToken("tok-probe")
	for i, params := range []*mcp.CallToolParams{with, {Name: "probe", Arguments: map[string]any{"text": "b"}}} {
		res, err := w.client.CallTool(context.Background(), params)
		if err != nil || res.IsError || text(res) != "probed "+params.Arguments.(map[string]any)["text"].(string) {
			t.Fatalf("call %d: %v %+v", i, err, res)
		}
		if res.Meta["probe/k"] != "v" {
			t.Errorf("call %d: the client got _meta %v, not the server's", i, res.Meta)
		}
	}
	p.mu.Lock()
	tokens := p.tokens
	p.mu.Unlock()
	if len(tokens) != 2 || tokens[0] == nil || tokens[1] != nil {
		t.Errorf("the server got progress tokens %v, want one for the call whose client asked, none for the other", tokens)
	}

	var ths []*checkpoint.Thread
	eventually(t, "both threads to go idle", func() bool {
		var err error
		ths, _, err = w.store.ListThreads(context.Background(), checkpoint.ThreadFilter{Status: checkpoint.ThreadIdle})
		return err == nil && len(ths) == 2
	})
	for _, th := range ths {
		th, err := w.store.LoadThread(context.Background(), th.ID)
		if err != nil {
			t.Fatal(err)
		}
		var msgs []agent.Message
		if err := json.Unmarshal(th.Messages, &msgs); err != nil || len(msgs) != 4 || msgs[2].Result == nil {
			t.Fatalf("thread %s: %v %s", th.ID, err, th.Messages)
		}
		kept, _ := json.Marshal(msgs[2].Result.Details["mcp_result"])
		var res struct {
			Meta    map[string]any `json:"_meta"`
			Content []any          `json:"content"`
		}
		if err := json.Unmarshal(kept, &res); err != nil || len(res.Meta) != 1 || res.Meta["probe/k"] != "v" || len(res.Content) != 1 {
			t.Errorf("thread %s keeps the result %s, not the server's as it came", th.ID, kept)
		}
	}
}
