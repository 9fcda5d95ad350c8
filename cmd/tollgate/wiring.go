package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/cluster"
)

// The wiring the serving commands share (run, serve, mcp-gateway): each
// keeps its flags and what it prints, and builds what they have in common
// here: the store and the HTTP server.

// openOwnStore opens the store of a command that drives its runs alone,
// with no lease (run, mcp-gateway), its directory made first when it is
// one of defaults (openStore). served says that tollgate serve replicas
// serve it (cluster mode): the command would drive their runs too, with
// its own agent. The caller closes the store, served or not.
func openOwnStore(ctx context.Context, url string, defaults ...string) (store checkpoint.Store, served bool, err error) {
	store, err = openStore(ctx, url, defaults...)
	if err != nil {
		return nil, false, err
	}
	if pg, ok := store.(*postgres.Store); ok {
		if served, err = cluster.InUse(ctx, pg); err != nil {
			store.Close()
			return nil, false, err
		}
	}
	return store, served, nil
}

// newHTTPServer is the http.Server of serve and mcp-gateway: bounded
// header reads and idle connections, its errors logged as warnings.
func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}
