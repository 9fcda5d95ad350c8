package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/cluster"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/mcpgate"
	"github.com/tollgate-ai/tollgate/server"
	"github.com/tollgate-ai/tollgate/server/web"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

// The wiring the serving commands share (run, serve, mcp-gateway): each
// keeps its flags, their checks and what it prints, and builds what they
// have in common here: the listener, the store, the policy's reloads, the
// MCP servers, the agent's configuration, the host and the HTTP server.

// wiring builds the parts of one command, each with the exit status its
// failure means (exitError), and closes them in the reverse order of
// their making (close).
type wiring struct {
	// cmd starts each message the command says on stderr:
	// "tollgate serve".
	cmd    string
	stderr io.Writer
	log    *slog.Logger
	// closers close what was made, the last made first.
	closers []func()
}

// newWiring is the wiring of the command cmd; the caller defers close.
func newWiring(cmd string, stderr io.Writer, log *slog.Logger) *wiring {
	return &wiring{cmd: cmd, stderr: stderr, log: log}
}

// exitError is an error that comes with the command's exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withCode gives err (nil: none) the exit status code.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// fail says err on stderr after the command's name, and returns the exit
// status it means: an exitError's, else 1.
func (w *wiring) fail(err error) int {
	fmt.Fprintln(w.stderr, w.cmd+":", err)
	if e := (*exitError)(nil); errors.As(err, &e) {
		return e.code
	}
	return 1
}

// later has close call f.
func (w *wiring) later(f func()) { w.closers = append(w.closers, f) }

// close closes what was made, the last made first.
func (w *wiring) close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
	w.closers = nil
}

// listen binds addr (closed at close). A serving command binds first: a
// second one started by mistake on a busy port must stop before it
// touches the store.
func (w *wiring) listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	w.later(func() { ln.Close() })
	return ln, nil
}

// openStore opens the command's store (closed at close), its directory
// made first when it is one of defaults (openStore). A command that
// drives its runs alone, with no lease (run, mcp-gateway), gives
// refuseServed: on a store tollgate serve replicas serve (cluster mode)
// it would drive their runs too, with its own agent, so the store is
// refused with that message (exit status 2).
func (w *wiring) openStore(ctx context.Context, url, refuseServed string, defaults ...string) (checkpoint.Store, error) {
	store, err := openStore(ctx, url, defaults...)
	if err != nil {
		return nil, err
	}
	w.later(func() { store.Close() })
	if pg, ok := store.(*postgres.Store); ok && refuseServed != "" {
		served, err := cluster.InUse(ctx, pg)
		if err != nil {
			return nil, err
		}
		if served {
			return nil, withCode(2, errors.New(refuseServed))
		}
	}
	return store, nil
}

// watch reads --policy-reload (mode): how the command's policy files are
// reloaded, each reload that loosens one told to loosened. Told to reload
// on SIGHUP only, the command no longer stops on it (holdHUP), built-in
// policies or not. A mode it does not know: exit status 2.
func (w *wiring) watch(ctx context.Context, mode string, loosened func(file string, looser []string)) (policyWatch, error) {
	manual, err := parsePolicyReload(mode)
	if err != nil {
		return policyWatch{}, withCode(2, err)
	}
	if manual {
		holdHUP(ctx, w.log)
	}
	return policyWatch{manual: manual, loosened: loosened}, nil
}

// connectMCP connects the MCP servers whose tools an agent gets (none:
// nil), closed at close; warn hears of each tool left out (connectMCP).
func (w *wiring) connectMCP(ctx context.Context, configs []mcpgate.ServerConfig, warn func(string)) (*mcpgate.Servers, error) {
	servers, err := connectMCP(ctx, configs, w.log, warn)
	if err != nil {
		return nil, err
	}
	if servers != nil {
		w.later(func() { servers.Close() })
	}
	return servers, nil
}

// agentOf is the agent configuration of serve and run: the model, the
// policy lp (its approval, its digest, and the bash tool's confinement
// as sandbox enforces what it decides) and the bash tool with opts. The
// tools of MCP servers are added to it by withMCP. An error is a flag's
// (exit status 2).
func agentOf(store checkpoint.Store, provider agent.Provider, model agent.Model, lp *loadedPolicy, sandbox *sandboxFlags, opts bash.Options, log *slog.Logger) (agent.Config, error) {
	bashOpts, err := sandbox.options(opts.Dir, opts, lp.decide)
	if err != nil {
		return agent.Config{}, withCode(2, err)
	}
	cfg := bashAgent(store, provider, model, bashOpts, lp.approval, log)
	cfg.PolicyDigest = lp.digest
	return cfg, nil
}

// startHost makes and starts a host on cfg. With events > 0 it is
// subscribed to its events from the start, with a buffer of that many
// (unsubscribed at close).
func (w *wiring) startHost(ctx context.Context, cfg host.Config, events int) (*host.Host, <-chan agent.Event, error) {
	h, err := host.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	var ch <-chan agent.Event
	if events > 0 {
		var unsubscribe func()
		ch, unsubscribe = h.Subscribe(events)
		w.later(unsubscribe)
	}
	if err := h.Start(ctx); err != nil {
		return nil, nil, err
	}
	return h, ch, nil
}

// reviewServer is the API and the reviewer page of serve and mcp-gateway
// on cfg, the page naming the model pageModel. An error is exit status 2.
func reviewServer(cfg server.Config, pageModel string) (*server.Server, error) {
	cfg.Page = web.Handler(web.Options{DevMode: cfg.DevMode, Model: pageModel, Version: version})
	srv, err := server.New(cfg)
	return srv, withCode(2, err)
}

// newHTTPServer is the http.Server of serve and mcp-gateway: srv's API
// and page (their request bodies read in a bounded time) and the handlers
// of more by pattern, with bounded header reads and idle connections,
// its errors logged as warnings.
func newHTTPServer(srv *server.Server, log *slog.Logger, more map[string]http.Handler) *http.Server {
	h := readDeadline(srv.Handler(), 30*time.Second)
	if more != nil {
		mux := http.NewServeMux()
		mux.Handle("/", h)
		for pattern, m := range more {
			mux.Handle(pattern, m)
		}
		h = mux
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}
