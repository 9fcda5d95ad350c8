package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/storeurl"
	"github.com/tollgate-ai/tollgate/mcpgate"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/server"
)

func init() {
	register("mcp-gateway", "an MCP server that holds any MCP client's tool calls for the policy and for approval", gatewayCmd)
}

const gatewayHelp = `usage: tollgate mcp-gateway --mcp NAME=COMMAND|URL ... [flags]

Fronts MCP servers for any MCP client (a desktop assistant, an IDE agent):
the client connects to the gateway instead of the servers, and every tool
call passes the policy. Allowed calls go through; blocked tools are hidden
from the client's tool list and refused; asked calls wait — the client
gets progress notifications meanwhile — until a person approves, denies or
edits them on the reviewer page (--addr), from 'tollgate questions' or the
API, or, for rules with elicit: true, in the client itself.

The client reaches the gateway over streamable HTTP at http://ADDR/mcp with
a bearer token, or over stdio with --stdio (the client starts the gateway;
the page still listens on --addr). Each call is a thread in the store: who
called what through which server, the decision, the answer, the result.
Tools are named mcp__<server>__<tool> in policies. Without --policy every
call asks.

examples:
  tollgate mcp-gateway --mcp 'fs=npx -y @modelcontextprotocol/server-filesystem /tmp/work'
      the MCP endpoint http://127.0.0.1:8090/mcp (its token in ~/.config/tollgate/gateway.token),
      the reviewer page http://127.0.0.1:8090/
  tollgate mcp-gateway --stdio --mcp-config ~/.config/tollgate/mcp.json --policy gateway.yaml
      for a client's config: {"command": "tollgate", "args": ["mcp-gateway", "--stdio", ...]}
  tollgate mcp-gateway --addr 127.0.0.1:9000 --token-file ~/.config/tollgate/mcp-token \
      --reviewer-token-file ~/.config/tollgate/reviewer-token --progress 10s --shutdown-grace 30s --mcp-config mcp.json
  tollgate mcp-gateway --tokens tokens.yaml --mcp-config mcp.json
      the page's sign-ins from a tokens file, as for serve
  tollgate mcp-gateway --dev --mcp-config mcp.json
      no sign-in on the page: anything on this machine can approve (trials only)
`

// gatewayPolicy is the gateway's policy without --policy: every call asks.
const gatewayPolicy = `version: 1
default: ask
rules:
  - name: every-call-asks
    description: the gateway's default, without --policy
    tool: "*"
    action: ask
    impact: a tool of an MCP server; no policy file says more
`

func gatewayCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("mcp-gateway", gatewayHelp, stderr)
	addr := fs.String("addr", envDefault("TOLLGATE_GATEWAY_ADDR", "127.0.0.1:8090"), "the `host:port` of the reviewer page, the API and (without --stdio) the MCP endpoint /mcp [TOLLGATE_GATEWAY_ADDR]")
	storeURL := storeFlag(fs, gatewayStore())
	stdio := fs.Bool("stdio", false, "serve one MCP client on standard input and output (the client starts the gateway); logs go to stderr")
	tokenFile := fs.String("token-file", envDefault("TOLLGATE_GATEWAY_TOKEN_FILE", configFile("gateway.token")), "the `file` holding the MCP endpoint's bearer token; made (mode 0600) if missing; TOLLGATE_GATEWAY_TOKEN gives the token itself [TOLLGATE_GATEWAY_TOKEN_FILE]")
	policyFile := fs.String("policy", envDefault("TOLLGATE_POLICY", ""), "the policy `file` (reloaded when it changes); tools are mcp__<server>__<tool>; without it every call asks [TOLLGATE_POLICY]")
	tokensFile := fs.String("tokens", envDefault("TOLLGATE_TOKENS_FILE", ""), "the page's and API's tokens `file`, as for serve (without it: one reviewer token, see --reviewer-token-file) [TOLLGATE_TOKENS_FILE]")
	reviewerFile := fs.String("reviewer-token-file", envDefault("TOLLGATE_GATEWAY_REVIEWER_TOKEN_FILE", configFile("gateway.reviewer-token")), "without --tokens, the `file` of the token reviewers sign in to the page (and the API) with; made (0600) if missing; keep it where the gated agent cannot read it [TOLLGATE_GATEWAY_REVIEWER_TOKEN_FILE]")
	dev := fs.Bool("dev", false, "no authentication on the page and the API (loopback only): then anything on this machine, the gated agent too, can approve its calls")
	stateInRoots := fs.Bool("allow-state-in-mcp-roots", false, "start even though the store, the policy or a tokens file is inside a directory a stdio MCP server is given (its root): its tools could read the reviewers' token there, or rewrite the policy, and approve their own calls, e.g. --allow-state-in-mcp-roots")
	progress := fs.Duration("progress", 5*time.Second, "how often a client whose call waits for a person gets a progress notification (clients give up after a silence, often 60s)")
	grace := fs.Duration("shutdown-grace", 10*time.Second, "on SIGTERM, how long calls already running upstream get to finish; calls waiting for a person are answered at once with a retryable error")
	var reload string
	policyReloadFlag(fs, &reload)
	var mcpf mcpFlags
	mcpf.register(fs.FlagSet)
	if code, done := parseFlagsOnly(fs, args, stdout); done {
		return code
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	w := newWiring("tollgate mcp-gateway", stderr, log)
	defer w.close()
	// In stdio mode standard output is the protocol: tollgate says nothing
	// there.
	say := stdout
	if *stdio {
		say = stderr
	}

	configs, err := mcpf.configs()
	if err != nil {
		return w.fail(withCode(2, err))
	}
	if len(configs) == 0 {
		return w.fail(withCode(2, errors.New("no MCP servers to front: give --mcp NAME=COMMAND (or NAME=URL) or --mcp-config FILE")))
	}
	if err := storePassword(fs, *storeURL); err != nil {
		return w.fail(err)
	}
	// Attack D of issue 21: the gateway's tokens in a directory its
	// filesystem server reads, returned by an allowed read_file.
	tokens, reviewerWhere, err := gatewayAccess(configs, *storeURL, *tokenFile, *reviewerFile, *policyFile, *tokensFile, *addr, *dev, *stateInRoots, log)
	if err != nil {
		return w.fail(withCode(2, err))
	}
	notices := &noticeBoard{}
	watch, err := w.watch(ctx, reload, notices.policyLoosened)
	if err != nil {
		return w.fail(err)
	}
	approval, hidden, policyName, err := gatewayPolicyOf(ctx, *policyFile, log, watch)
	if err != nil {
		return w.fail(withCode(2, err))
	}
	mcpToken, tokenWhere, err := gatewayMCPToken(*stdio, *tokenFile, tokens)
	if err != nil {
		return w.fail(withCode(2, err))
	}

	gw := &gatewaying{storeURL: *storeURL, configs: configs, stdio: *stdio, mcpToken: mcpToken,
		gcfg: mcpgate.GatewayConfig{Policy: approval, Hidden: hidden, Progress: *progress, Logger: log, Version: version},
		scfg: server.Config{Logger: log, Tokens: tokens, DevMode: *dev, ListenAddr: *addr, Notices: notices.list}}
	if err := gw.wire(ctx, w); err != nil {
		return w.fail(err)
	}
	return gatewayUntilStopped(ctx, gw.g, gw.srv, gw.hs, gw.servers, gw.serveErr, gatewaySaid{say: say, url: gw.url, reviewerWhere: reviewerWhere,
		tokenWhere: tokenWhere, store: *storeURL, policy: policyName, stdio: *stdio}, *grace, log)
}

// gatewaying is what mcp-gateway wires from its checked flags (the first
// fields, set by gatewayCmd) and then serves (those after the blank line,
// set by wire).
type gatewaying struct {
	storeURL string
	configs  []mcpgate.ServerConfig
	stdio    bool
	mcpToken string
	// gcfg and scfg are the gateway's and the server's configurations as
	// the flags give them.
	gcfg mcpgate.GatewayConfig
	scfg server.Config

	url      string // of the page
	servers  *mcpgate.Servers
	g        *mcpgate.Gateway
	srv      *server.Server
	hs       *http.Server
	serveErr chan error
}

// wire binds the gateway's address, opens its store (its own: one that
// tollgate serve replicas serve is refused), connects the MCP servers it
// fronts, starts the gateway on them and the server of its page and API,
// and serves HTTP: the page, the API and (without stdio) the MCP endpoint
// /mcp with its bearer token. What it made w closes.
func (gw *gatewaying) wire(ctx context.Context, w *wiring) error {
	ln, err := w.listen(gw.scfg.ListenAddr)
	if err != nil {
		return err
	}
	// Replicas would resume the gateway's threads with their own agent,
	// which has none of these tools.
	store, err := w.openStore(ctx, gw.storeURL, "this database is served by tollgate serve replicas: give the gateway a store of its own (another database or schema, or sqlite:PATH)", gatewayStore())
	if err != nil {
		return err
	}
	servers, started, err := gatewayServers(ctx, gw.configs, w.log)
	if err != nil {
		return err
	}
	w.later(func() { servers.Close() })
	gw.servers, gw.url = servers, "http://"+ln.Addr().String()+"/"
	gcfg := gw.gcfg
	gcfg.Servers, gcfg.Store, gcfg.ReviewURL = servers, store, gw.url
	if gw.g, err = mcpgate.NewGateway(gcfg); err != nil {
		return err
	}
	if err := gw.g.Start(ctx); err != nil {
		return err
	}
	started.Store(gw.g)
	scfg := gw.scfg
	scfg.Host, scfg.Model = gw.g.Host(), "MCP gateway (each thread is one call of an MCP client)"
	if gw.srv, err = reviewServer(scfg, "MCP gateway"); err != nil {
		_ = gw.g.Shutdown(context.WithoutCancel(ctx))
		return err
	}
	more := map[string]http.Handler{}
	if !gw.stdio {
		h, err := gw.g.HTTPHandler(gw.mcpToken)
		if err != nil {
			_ = gw.g.Shutdown(context.WithoutCancel(ctx)) // before its store closes
			return withCode(2, err)
		}
		more["/mcp"] = h
	}
	gw.hs = newHTTPServer(gw.srv, w.log, more)
	gw.serveErr = make(chan error, 2)
	go func() { gw.serveErr <- gw.hs.Serve(ln) }()
	return nil
}

// gatewayServers connects the MCP servers the gateway fronts (the caller
// closes them), warning of each tool left out. Once the gateway is stored
// in started, it tells its clients when a server's tools change.
func gatewayServers(ctx context.Context, configs []mcpgate.ServerConfig, log *slog.Logger) (*mcpgate.Servers, *atomic.Pointer[mcpgate.Gateway], error) {
	// A server's tools can change once the gateway runs (it said so, or
	// it was restarted): the gateway tells its clients.
	started := new(atomic.Pointer[mcpgate.Gateway])
	changed := func(server string) {
		if g := started.Load(); g != nil {
			g.ToolsChanged(server)
		}
	}
	servers, err := mcpgate.ConnectAll(ctx, configs, &mcpgate.Options{Logger: log, KeepResults: true, ToolsChanged: changed})
	if err != nil {
		return nil, nil, err
	}
	for _, p := range servers.Problems() {
		log.Warn("tollgate: MCP " + p)
	}
	return servers, started, nil
}

// gatewaySaid is what the gateway says when it starts: where its page and
// endpoint are, and with which tokens.
type gatewaySaid struct {
	say                                           io.Writer
	url, reviewerWhere, tokenWhere, store, policy string
	stdio                                         bool
}

// gatewayUntilStopped says where the gateway is, serves until ctx ends,
// the listener fails or the stdio client goes, then stops in order.
func gatewayUntilStopped(ctx context.Context, g *mcpgate.Gateway, srv *server.Server, hs *http.Server, servers *mcpgate.Servers, serveErr chan error, said gatewaySaid, grace time.Duration, log *slog.Logger) int {
	say, url, reviewerWhere, tokenWhere := said.say, said.url, said.reviewerWhere, said.tokenWhere
	fmt.Fprintln(say, "tollgate:", mcpSummary(servers))
	if reviewerWhere != "" {
		fmt.Fprintf(say, "tollgate: reviewers sign in to the page with the token %s\n", reviewerWhere)
	}
	if said.stdio {
		fmt.Fprintf(say, "tollgate %s: MCP gateway on stdio; reviewer page %s (store %s, policy %s)\n", version, url, storeurl.Redacted(said.store), said.policy)
		go func() {
			err := g.ServeStdio(ctx)
			if err == nil {
				err = errors.New("the MCP client closed the connection")
			}
			serveErr <- err
		}()
	} else {
		fmt.Fprintf(say, "tollgate %s: MCP endpoint %smcp (bearer token %s); reviewer page %s (store %s, policy %s)\n", version, url, tokenWhere, url, storeurl.Redacted(said.store), said.policy)
	}

	select {
	case err := <-serveErr:
		log.Info("tollgate: stopping", "why", err)
	case <-ctx.Done():
		log.Info("tollgate: shutting down", "grace", grace.String())
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	// Waiting calls are answered first (a retryable error), while their
	// clients are still connected; then the page and the API stop.
	if err := g.Shutdown(shutCtx); err != nil {
		log.Warn("tollgate: stopping the gateway's runs", "err", err)
	}
	srv.Close()
	if err := hs.Shutdown(shutCtx); err != nil {
		log.Warn("tollgate: requests still open at shutdown were cut", "err", err)
	}
	fmt.Fprintln(say, "tollgate: stopped")
	return 0
}

// gatewayAccess checks who may reach the gateway's page and API, and what
// its MCP servers may reach: tollgate's state inside a directory a stdio
// server is given is refused (unless stateInRoots), the tokens are
// loaded, dev mode takes a loopback address, and without tokens the
// reviewers' token is read or made (reviewerWhere says where). An error
// is a flag's (exit status 2).
func gatewayAccess(configs []mcpgate.ServerConfig, storeURL, tokenFile, reviewerFile, policyFile, tokensFile, addr string, dev, stateInRoots bool, log *slog.Logger) (tokens []server.Token, reviewerWhere string, err error) {
	var files []string
	for env, f := range map[string]string{"TOLLGATE_GATEWAY_TOKEN": tokenFile, "TOLLGATE_GATEWAY_REVIEWER_TOKEN": reviewerFile} {
		if os.Getenv(env) == "" {
			files = append(files, f)
		}
	}
	state := statePaths(storeURL, append(files, policyFile, tokensFile)...)
	for _, r := range mcpRoots(configs) {
		p := stateInside(r.dir, state)
		if p == "" {
			continue
		}
		if !stateInRoots {
			return nil, "", fmt.Errorf("%s is inside %s, a directory MCP server %s is given: an allowed call of its tools could read it (the reviewers' token) or rewrite it, and approve its own calls; keep it elsewhere (--store, --token-file, --reviewer-token-file, --tokens, --policy), or give --allow-state-in-mcp-roots to take that risk", p, r.dir, r.server)
		}
		log.Warn("tollgate's state is inside a directory an MCP server is given: its tools can read and rewrite it (--allow-state-in-mcp-roots)", "path", p, "server", r.server, "dir", r.dir)
	}
	tokens, err = loadTokens(tokensFile)
	if err != nil {
		return nil, "", err
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, "", fmt.Errorf("--addr %q: want host:port, such as 127.0.0.1:8090", addr)
	}
	if dev && !isLoopback(addr) {
		return nil, "", fmt.Errorf("--dev (no authentication) only listens on a loopback address, not %s", addr)
	}
	// Unlike serve, the gateway has no dev mode by default: the agent it
	// gates runs on this machine, and could approve its own calls.
	if len(tokens) == 0 && !dev {
		secret, where, err := secretFile("TOLLGATE_GATEWAY_REVIEWER_TOKEN", reviewerFile, "the reviewers' token")
		if err != nil {
			return nil, "", err
		}
		tokens = []server.Token{{Name: "reviewer", Role: server.RoleAdmin, SHA256: server.HashToken(secret)}}
		reviewerWhere = where
	}
	return tokens, reviewerWhere, nil
}

// gatewayMCPToken is the MCP endpoint's bearer token and where it is kept
// (none on stdio); it must not be a token of the page, or the gated agent
// could approve its own calls.
func gatewayMCPToken(stdio bool, tokenFile string, tokens []server.Token) (mcpToken, tokenWhere string, err error) {
	if !stdio {
		if mcpToken, tokenWhere, err = secretFile("TOLLGATE_GATEWAY_TOKEN", tokenFile, "the MCP endpoint's token"); err != nil {
			return "", "", err
		}
	}
	// The MCP client's token must not sign in to the page: the client
	// would approve its own calls.
	if mcpToken != "" {
		for _, t := range tokens {
			if t.SHA256 == server.HashToken(mcpToken) {
				return "", "", fmt.Errorf("the MCP endpoint's token is also a token of the page (%s): give them different tokens, or the gated agent can approve its own calls", t.Name)
			}
		}
	}
	return mcpToken, tokenWhere, nil
}

type mcpRoot struct{ server, dir string }

// mcpRoots are the directories the stdio MCP servers are given on their
// command lines (a filesystem server's roots, where its tools read and
// write): every argument that names an existing directory, relative ones
// from the server's working directory. Servers reached by URL say nothing
// of theirs.
func mcpRoots(configs []mcpgate.ServerConfig) []mcpRoot {
	var out []mcpRoot
	for _, c := range configs {
		if c.Command == "" {
			continue
		}
		base := c.Dir
		if base == "" {
			base = "."
		}
		if d, err := expandHome(base); err == nil {
			base = d
		}
		for _, a := range c.Args {
			if strings.HasPrefix(a, "-") {
				continue
			}
			p, err := expandHome(a)
			if err != nil {
				continue
			}
			if !filepath.IsAbs(p) {
				p = filepath.Join(base, p)
			}
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				out = append(out, mcpRoot{c.Name, p})
			}
		}
	}
	return out
}

// gatewayPolicyOf loads the policy file (watched for changes) or the
// gateway's default, and says which tools it blocks whatever their
// arguments (hidden from the clients' tool lists).
func gatewayPolicyOf(ctx context.Context, file string, log *slog.Logger, w policyWatch) (hitl.Policy, func(string, map[string]any) bool, string, error) {
	if file == "" {
		p, err := policy.Parse("the gateway's built-in policy", []byte(gatewayPolicy), nil)
		if err != nil {
			return nil, nil, "", err
		}
		return p.HITL(), func(string, map[string]any) bool { return false }, "built in: every call asks", nil
	}
	rp, err := watchedPolicy(ctx, file, log, "tollgate: policy reloaded; clients see the tools it hides at their next tools/list", w)
	if err != nil {
		return nil, nil, "", err
	}
	return rp.HITL(), func(tool string, _ map[string]any) bool { return rp.Blocks(tool) }, file, nil
}

// secretFile is a token: the environment variable's value, else the
// file's content, else a new token written to the file (0600). A file
// others can read is refused: it holds a secret. what names the token in
// messages.
func secretFile(env, file, what string) (token, where string, err error) {
	if t := strings.TrimSpace(os.Getenv(env)); t != "" {
		if len(t) < 16 {
			return "", "", fmt.Errorf("%s is shorter than 16 characters", env)
		}
		return t, "from " + env, nil
	}
	file, err = expandHome(file)
	if err != nil {
		return "", "", err
	}
	info, err := os.Stat(file)
	switch {
	case err == nil:
		if info.Mode().Perm()&0o077 != 0 {
			return "", "", fmt.Errorf("%s (%s) can be read by others (mode %v): chmod 600 %s", file, what, info.Mode().Perm(), file)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return "", "", fmt.Errorf("reading %s: %w", what, err)
		}
		t := strings.TrimSpace(string(b))
		if len(t) < 16 {
			return "", "", fmt.Errorf("the token in %s is shorter than 16 characters", file)
		}
		return t, "in " + file, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", "", fmt.Errorf("reading %s: %w", what, err)
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", "", err
	}
	t := base64.RawURLEncoding.EncodeToString(raw[:])
	if dir := filepath.Dir(file); dir != "." {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", "", err
		}
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", "", fmt.Errorf("writing %s: %w", what, err)
	}
	if _, err := f.WriteString(t + "\n"); err != nil {
		f.Close()
		return "", "", err
	}
	if err := f.Close(); err != nil {
		return "", "", err
	}
	return t, "in " + file + " (new)", nil
}
