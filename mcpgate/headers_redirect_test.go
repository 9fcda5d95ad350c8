package mcpgate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/internal/mcptest"
	"github.com/tollgate-ai/tollgate/mcpgate"
)

// A server's configured headers (its credentials) go to that server
// only: not to another host the server redirects its requests to.
func TestUpstreamHeadersNotSentToARedirectsHost(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	mcpH := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcptest.NewServer(&mcptest.Ledger{}, nil) }, nil)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			mu.Lock()
			leaked = append(leaked, a)
			mu.Unlock()
		}
		mcpH.ServeHTTP(w, r)
	}))
	defer other.Close()
	// 127.0.0.1 and localhost: two hosts to http.Client.
	otherURL := "http://localhost" + other.URL[len("http://127.0.0.1"):]
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherURL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer first.Close()
	t.Setenv("REVGW_TOKEN", "secret")
	u, err := mcpgate.Connect(context.Background(), mcpgate.ServerConfig{Name: "r", URL: first.URL,
		Headers: map[string]string{"Authorization": "Bearer ${REVGW_TOKEN}"}}, nil)
	if err != nil {
		t.Skipf("the redirect is not followed: %v", err)
	}
	defer u.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Errorf("the server's Authorization header went to the host it redirected to (%d requests, %q)", len(leaked), leaked[0])
	}
}
