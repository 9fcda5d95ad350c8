// Package server is the HTTP layer of tollgate serve: the JSON API of
// API.md (threads, messages, questions and answers, abort, resume, the
// audit trail), live events as server-sent events, the reviewer page at
// "/", authentication, /healthz, /readyz and /metrics. It is a thin layer
// over package host, which drives the runs, hitl, which checks answers,
// and the checkpoint store.
//
// Quick start:
//
//	h, _ := host.New(host.Config{Store: store, Agent: agent.Config{Provider: model, Tools: tools, Middleware: mw}})
//	_ = h.Start(ctx)
//	tokens, _ := server.LoadTokens("tokens.yaml")
//	srv, _ := server.New(server.Config{Host: h, Tokens: tokens, Page: page})
//	hs := &http.Server{Addr: ":8080", Handler: srv.Handler()}
//	go hs.ListenAndServe()
//	// ... on shutdown: streams first, then the listener, then the host.
//	srv.Close()
//	hs.Shutdown(ctx)
//	h.Shutdown(ctx)
//
// # Authentication
//
// API calls carry "Authorization: Bearer <token>". A [Token] has a name,
// which every answer records as who gave it, and a [Role]: clients start
// and drive runs, reviewers answer questions (optionally on some threads
// only), admins do everything. The server keeps only the SHA-256 of each
// secret ([HashToken]) and compares in constant time; tokens come from a
// file ([LoadTokens]) or TOLLGATE_TOKENS ([ParseTokensEnv]); [NewToken]
// makes a secret.
//
// The page signs in with POST /v1/session, which sets an HttpOnly,
// SameSite=Strict cookie and returns a CSRF token: every state-changing
// request signed in by the cookie must carry it in X-CSRF-Token, with an
// Origin (or Referer) naming this server. Config.DevMode turns
// authentication off on a loopback address only.
//
// # Live events
//
// Streams read the store's event log, the one complete record, from the
// position the client gives (Last-Event-ID) or from the start (a thread)
// or now (the queue). The host's events and the store's notifications
// only wake them; one poll of the log's head serves every stream, for
// events written by other processes.
package server
