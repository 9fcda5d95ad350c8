package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-ai/tollgate/apiclient"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/hooks"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/policy/learn"
)

// Config builds a [Server]. Host is required, and Tokens unless DevMode.
type Config struct {
	// Host drives the runs; the server reads and writes its store.
	Host *host.Host
	// Logger receives one line per request and the server's own
	// messages. Zero: slog.Default().
	Logger *slog.Logger
	// Tokens are the API tokens ([LoadTokens], [ParseTokensEnv]).
	Tokens []Token
	// DevMode turns authentication off: every request is an admin named
	// "dev". New refuses it unless ListenAddr is a loopback address.
	DevMode bool
	// ListenAddr is the address the server listens on ("127.0.0.1:8080"),
	// checked for DevMode.
	ListenAddr string
	// Model names the model the runs use, shown on the page
	// (GET /v1/session).
	Model string
	// Page is the reviewer page, served at "/". Zero: 404 at "/".
	Page http.Handler
	// Registry receives the server's metrics, served at /metrics. Zero: a
	// new registry, with the Go and process collectors.
	Registry *prometheus.Registry
	// Collectors are more metrics to serve at /metrics with the server's
	// own (tollgate serve's cluster mode adds its replica's).
	Collectors []prometheus.Collector
	// MaxBodyBytes limits request bodies (413 beyond). Zero: 1 MiB.
	MaxBodyBytes int64
	// Clock times sessions. Zero: the system clock.
	Clock clock.Clock
	// PingInterval is how often an idle event stream gets a ": ping"
	// comment. Zero: 15s.
	PingInterval time.Duration
	// PollInterval is how often the server looks at the store's event log
	// for events written by other processes (one query for all streams),
	// while an event stream is open; with none, it does not look. Zero:
	// 2s.
	PollInterval time.Duration
	// SessionTTL is how long a page stays signed in. Zero: 12h.
	SessionTTL time.Duration
	// MaxSessions caps the sessions kept in memory; beyond it the one
	// closest to its expiry is signed out. Zero: 10000.
	MaxSessions int
	// Notices, when set, says what every reviewer should know of the
	// server itself (its tools run unconfined, its policy was loosened by
	// a reload): GET /v1/session lists them for reviewers and admins, and
	// the page shows each as a banner. It is called on each such request.
	Notices func() []Notice
	// MaxStreamsPerToken caps the event streams one token keeps open at
	// once, by bearer or through any page session it signed in (each
	// holds a connection, a goroutine and a share of every wake-up): a
	// stream beyond it is refused with 429 too_many_streams. Zero: 32;
	// negative: no cap.
	MaxStreamsPerToken int
	// Learning, when set, is the policy file in force for a thread's
	// calls, and reviewers may answer "approve, and allow calls like
	// this" (package policy/learn): proposals with their blast radius,
	// learned rules listed, approved by a second reviewer, revoked and
	// exported under /v1/rules. Nil: the routes answer 404 learning_off.
	// Give the same policy a learn.Source of the host's store, so that
	// the rules learned here allow.
	Learning func(threadID string) *policy.Policy
	// Hooks, if set, takes coding agents' hooks at POST /v1/hooks/{agent}
	// (client tokens only); its threads take no messages from the API.
	Hooks *hooks.Service
	// Notifications, when set, are served: /notify/ (Slack's buttons,
	// mail links) and GET /v1/notify/deliveries.
	Notifications *Notifications
	// Warnings, when set, are what is wrong though the server can serve
	// (replicas that decide by different policies, say): /readyz lists
	// each on a line of its own after "ok", still 200.
	Warnings func() []string
}

// Server is the HTTP layer of tollgate serve: the JSON API of API.md, the
// event streams, the reviewer page, health and metrics.
type Server struct {
	host    *host.Host
	hooks   *hooks.Service
	store   checkpoint.Store
	log     *slog.Logger
	clock   clock.Clock
	dev     bool
	model   string
	maxBody int64
	ping    time.Duration
	poll    time.Duration
	auth    *authenticator
	metrics *metrics
	mux     *http.ServeMux
	handler http.Handler

	ctx       context.Context // ended by Close
	cancel    context.CancelFunc
	loops     sync.WaitGroup
	closeOnce sync.Once
	wake      *broadcaster
	head      *logHead
	listening *streamGate
	warnings  func() []string
	counts    countCache
	streams   streamCounts
	notices   func() []Notice
	learn     *learn.Service // nil: no learning

	notifications *Notifications
}

// Notice is something a reviewer should know of the server itself, shown
// on the page as a banner until it no longer holds.
type Notice struct {
	// Code tells notices apart: "unconfined", "sandbox",
	// "policy_loosened".
	Code string
	// Message says it in a reviewer's words.
	Message string
	// At is when it happened; zero for a state the server started in.
	At time.Time
}

// New returns a server for cfg. It subscribes to the host's events and the
// store's notifications at once (for metrics and live streams); call
// [Server.Close] to let them go.
func New(cfg Config) (*Server, error) {
	if cfg.Host == nil {
		return nil, errors.New("server: Config.Host is required")
	}
	s := &Server{
		host: cfg.Host, hooks: cfg.Hooks, store: cfg.Host.Store(), log: cfg.Logger, clock: cfg.Clock,
		dev: cfg.DevMode, model: cfg.Model, maxBody: cfg.MaxBodyBytes,
		ping: cfg.PingInterval, poll: cfg.PollInterval, mux: http.NewServeMux(), notices: cfg.Notices,
		notifications: cfg.Notifications, warnings: cfg.Warnings,
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.clock == nil {
		s.clock = clock.Real
	}
	if s.maxBody <= 0 {
		s.maxBody = 1 << 20
	}
	if s.ping <= 0 {
		s.ping = 15 * time.Second
	}
	if s.poll <= 0 {
		s.poll = 2 * time.Second
	}
	s.streams = streamCounts{max: cfg.MaxStreamsPerToken, open: map[string]int{}}
	if s.streams.max == 0 {
		s.streams.max = DefaultMaxStreamsPerToken
	}
	ttl, maxSessions := cfg.SessionTTL, cfg.MaxSessions
	if ttl <= 0 {
		ttl = 12 * time.Hour
	}
	if maxSessions <= 0 {
		maxSessions = 10000
	}
	tokens := cfg.Tokens
	if cfg.DevMode {
		tokens = nil
		if !loopbackAddr(cfg.ListenAddr) {
			return nil, fmt.Errorf("server: dev mode turns authentication off, so it listens only on a loopback address (127.0.0.1:PORT, [::1]:PORT, localhost:PORT), not %q", cfg.ListenAddr)
		}
		s.log.Warn("tollgate: DEV MODE: no authentication, every request is an admin named \"dev\"; never use it on a shared machine",
			"listen", cfg.ListenAddr)
		if len(cfg.Tokens) > 0 {
			s.log.Warn("tollgate: dev mode ignores the tokens it was given", "tokens", len(cfg.Tokens))
		}
	} else if len(cfg.Tokens) == 0 {
		return nil, errors.New("server: no tokens: give Config.Tokens (a tokens file or TOLLGATE_TOKENS), or DevMode on a loopback address")
	}
	var err error
	if s.auth, err = newAuthenticator(tokens, s.clock, ttl, maxSessions); err != nil {
		return nil, err
	}
	if s.metrics, err = newMetrics(cfg.Registry, cfg.Collectors, s); err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wake = newBroadcaster()
	s.head = &logHead{store: s.store}
	s.learn = s.newLearning(cfg.Learning)
	s.listening = newStreamGate()
	s.routes(cfg.Page)
	s.handler = http.HandlerFunc(s.serve)
	if err := s.startLoops(); err != nil {
		s.cancel()
		s.metrics.unregister()
		return nil, err
	}
	return s, nil
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Close ends the event streams (an http.Server's Shutdown waits for open
// streams, so call Close first or alongside it) and the server's
// subscriptions, and takes its metrics off the registry. The host is not
// touched: shut it down after. Requests other than streams are still
// served; /readyz says 503.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.loops.Wait()
		s.metrics.unregister()
	})
	return nil
}

// handlerFunc is an API handler. id is nil on public routes. An error is
// written as the API's error body (see errors.go).
type handlerFunc func(w http.ResponseWriter, r *http.Request, id *identity) error

func (s *Server) routes(page http.Handler) {
	s.api("POST /v1/session", public, s.createSession)
	s.api("GET /v1/session", anyone, s.getSession)
	s.api("DELETE /v1/session", anyone, s.deleteSession)

	s.api("POST /v1/threads", threadsWrite, s.createThread)
	s.api("GET /v1/threads", threadsRead, s.listThreads)
	s.api("GET /v1/threads/{id}", threadsRead, s.getThread)
	s.api("POST /v1/threads/{id}/messages", threadsWrite, s.postMessage)
	s.api("POST /v1/threads/{id}/abort", threadsWrite, s.abortThread)
	s.api("POST /v1/threads/{id}/resume", threadsWrite, s.resumeThread)
	s.api("GET /v1/threads/{id}/events", threadsRead, s.listEvents)
	s.api("GET /v1/threads/{id}/stream", threadsRead, s.streamThread)

	s.api("GET /v1/questions", review, s.listQuestions)
	s.api("GET /v1/questions/{thread}/{id}", review, s.getQuestion)
	s.api("POST /v1/questions/{thread}/{id}/answer", review, s.answerQuestion)
	s.api("GET /v1/stream", review, s.streamAll)
	s.ruleRoutes()
	s.api("GET /v1/notify/deliveries", review, s.listDeliveries)
	if n := s.notifications; n != nil && n.Handler != nil {
		s.mux.Handle("/notify/", n.Handler)
	}

	s.mux.HandleFunc("POST /v1/hooks/{agent}", s.hook)
	s.api("GET /v1/hooks", threadsWrite, s.hookInfo)

	s.mux.HandleFunc("/v1/", s.unknownRoute)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	s.mux.HandleFunc("GET /readyz", s.ready)
	s.mux.Handle("GET /metrics", s.metrics.handler())
	if page == nil {
		page = http.NotFoundHandler()
	}
	s.mux.Handle("/", page)
}

var accessNeeds = map[access]string{
	threadsWrite: "starting and driving runs needs a client or admin token",
	review:       "questions and answers need a reviewer or admin token",
}

// api mounts an API handler behind authentication and the route's access.
func (s *Server) api(pattern string, a access, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		// Answers, arguments and sessions are nobody's cache's business.
		w.Header().Set("Cache-Control", "no-store")
		var id *identity
		if a != public {
			var e *apiError
			id, e = s.authenticate(r)
			if e != nil {
				s.writeError(w, r, e)
				return
			}
			setWho(r, id.name)
			if !id.may(a) {
				s.writeError(w, r, forbidden("token %q is a %s: %s", id.name, id.role, accessNeeds[a]))
				return
			}
		}
		if err := h(w, r, id); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// unknownRoute answers API paths no route serves: 405 with Allow when
// other methods are served there, else 404.
func (s *Server) unknownRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := s.mux.Handler(probe); p != "" && p != "/v1/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		s.writeError(w, r, newError(http.StatusMethodNotAllowed, codeMethod, "%s is not served at %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")))
		return
	}
	s.writeError(w, r, notFound("no API route at %s (see API.md)", r.URL.Path))
}

// reqInfo is what the request log line says of a request, filled in as
// it is served.
type reqInfo struct {
	id  string
	who string
	err *apiError
}

type infoKey struct{}

func infoOf(r *http.Request) *reqInfo {
	i, _ := r.Context().Value(infoKey{}).(*reqInfo)
	if i == nil {
		return &reqInfo{}
	}
	return i
}

func setWho(r *http.Request, name string) { infoOf(r).who = name }

// serve wraps every request: a request id, panics turned into 500s, and
// one log line at the end — never a token or a body.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := &reqInfo{id: requestID(r)}
	r = r.WithContext(context.WithValue(r.Context(), infoKey{}, info))
	rec := &recorder{ResponseWriter: w}
	w.Header().Set("X-Request-Id", info.id)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("tollgate: panic serving a request", "request_id", info.id, "route", r.Pattern,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if !rec.wrote {
				s.writeError(rec, r, newError(http.StatusInternalServerError, codeInternal, "the server failed (a bug; see the server log)"))
			}
		}
		status := rec.status
		if !rec.wrote {
			status = http.StatusOK
		}
		attrs := []slog.Attr{
			slog.String("method", r.Method), slog.String("route", r.Pattern), slog.Int("status", status),
			slog.Duration("duration", time.Since(start)), slog.String("who", info.who), slog.String("request_id", info.id),
		}
		level := slog.LevelInfo
		if probes[r.Pattern] && status < 500 {
			level = slog.LevelDebug // every few seconds, from machines
		}
		if info.err != nil {
			attrs = append(attrs, slog.String("code", info.err.code))
			if info.err.status >= 500 {
				level = slog.LevelError
				attrs = append(attrs, slog.String("err", info.err.Error()))
			}
		}
		s.log.LogAttrs(context.WithoutCancel(r.Context()), level, "http request", attrs...)
	}()
	s.mux.ServeHTTP(rec, r)
}

var probes = map[string]bool{"GET /healthz": true, "GET /readyz": true, "GET /metrics": true}

// requestID returns the request's id: the one a proxy in front gave it
// when it looks like one, else a new one.
func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= 64 && !strings.ContainsFunc(id, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.')
	}) {
		return id
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// writeError writes err as the API's error body.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := classify(err)
	info := infoOf(r)
	info.err = e
	if e.store {
		s.metrics.storeErrors.Inc()
	}
	msg := e.message
	if e.status >= 500 {
		msg += " (request " + info.id + ")"
	}
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate"`)
	}
	writeJSON(w, e.status, apiclient.ErrorBody{Error: apiclient.ErrorDetail{Code: e.code, Message: msg, Problems: e.problems}, Question: e.question})
}

// recorder notes the status a handler writes, for the log.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

// Flush lets event streams push each event out at once.
func (r *recorder) Flush() {
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// decode reads a JSON object body into v: at most MaxBodyBytes (413
// beyond), no unknown fields, one value. An empty body is allowed when
// emptyOK (v keeps its zero value).
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) error {
	data, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if emptyOK {
			return nil
		}
		return badRequest("the body is empty: send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("%s", jsonProblem(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("the body holds more than one JSON value")
	}
	return nil
}

// readBody reads the whole body, up to the limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, badRequest("reading the body: %v", err)
	}
	return data, nil
}

// jsonProblem says what is wrong with a body in the caller's terms.
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Sprintf("field %q must be a %s, not a %s", typ.Field, typ.Type, typ.Value)
		}
		return fmt.Sprintf("the body must be a JSON object, not a %s", typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: the body ends too early"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// ready answers 200 when a cheap store read succeeds within 2s, with the
// server's warnings.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.ctx.Err() != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "closing\n")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	_, err := s.store.LoadThread(ctx, "tollgate:readyz")
	if err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
		s.metrics.storeErrors.Inc()
		s.log.Warn("tollgate: readiness check: the store does not answer", "err", err)
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "store unavailable\n")
		return
	}
	_, _ = io.WriteString(w, "ok\n")
	if s.warnings != nil {
		for _, warning := range s.warnings() {
			_, _ = io.WriteString(w, "warning: "+warning+"\n")
		}
	}
}
