package mcpgate

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio serves one client on standard input and output (a desktop
// assistant or an IDE starts the gateway as its MCP server) until the
// client closes the connection or ctx ends.
func (g *Gateway) ServeStdio(ctx context.Context) error {
	return g.server.Run(ctx, &mcp.StdioTransport{})
}

// HTTPHandler serves MCP clients over streamable HTTP. Every request must
// carry "Authorization: Bearer <token>": the gateway runs tools with the
// upstreams' credentials, so an open endpoint would lend them to anyone
// who can reach it. Sessions idle for an hour are closed.
func (g *Gateway) HTTPHandler(token string) (http.Handler, error) {
	if len(token) < 16 {
		return nil, errors.New("mcpgate: the HTTP endpoint needs a bearer token of at least 16 characters")
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server },
		&mcp.StreamableHTTPOptions{Logger: g.log, SessionTimeout: time.Hour})
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate-mcp-gateway"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"unauthorized","message":"send the gateway's token: Authorization: Bearer <token>"}` + "\n"))
			return
		}
		session := r.Header.Get("Mcp-Session-Id")
		if r.Method == http.MethodDelete {
			// The SDK's close of the session waits for the handlers of
			// its calls: they are given up first, not at their next ping.
			g.sessionEnded(session)
		}
		h.ServeHTTP(w, r)
		if r.Context().Err() != nil {
			// The request ended because its client's connection was lost
			// (a stream the SDK cannot resume: it keeps no events): what
			// waits on it has no one to go to, and the pings say so now.
			g.sessionLost(session)
		}
	}), nil
}
