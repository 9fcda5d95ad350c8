package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/apiclient"
	"github.com/tollgate-ai/tollgate/clock"
)

// identity is who a request comes from.
type identity struct {
	name    string
	role    Role
	threads []string
	// session is set when the session cookie authenticated the request.
	session *session
}

var devIdentity = &identity{name: "dev", role: RoleAdmin}

// sees reports whether the caller may see the thread.
func (id *identity) sees(threadID string) bool {
	if len(id.threads) == 0 {
		return true
	}
	for _, p := range id.threads {
		if ok, _ := path.Match(p, threadID); ok {
			return true
		}
	}
	return false
}

// access is what a route needs from the caller.
type access int

const (
	// public: no authentication (health, metrics, the page, sign-in).
	public access = iota
	// anyone signed in.
	anyone
	// threadsWrite: create threads, post messages, abort, resume.
	threadsWrite
	// threadsRead: list, read and stream threads and their events.
	threadsRead
	// review: questions, answers, the queue stream.
	review
)

func (id *identity) may(a access) bool {
	switch a {
	case public, anyone:
		return true
	case threadsWrite:
		return id.role == RoleClient || id.role == RoleAdmin
	case threadsRead:
		return true
	case review:
		return id.role == RoleReviewer || id.role == RoleAdmin
	}
	return false
}

type tokenRecord struct {
	hash [sha256.Size]byte
	id   *identity
}

// session is a signed-in page.
type session struct {
	id      *identity
	csrf    string
	expires time.Time
	ended   bool // signed out or pushed out; guarded by authenticator.mu
}

// authenticator knows the tokens and the sessions.
type authenticator struct {
	tokens []tokenRecord
	clock  clock.Clock
	ttl    time.Duration
	max    int

	mu       sync.Mutex
	sessions map[[sha256.Size]byte]*session
}

const sessionCookie = "tollgate_session"

func newAuthenticator(tokens []Token, c clock.Clock, ttl time.Duration, max int) (*authenticator, error) {
	a := &authenticator{clock: c, ttl: ttl, max: max, sessions: map[[sha256.Size]byte]*session{}}
	for i, t := range tokens {
		t.SHA256 = strings.ToLower(t.SHA256)
		if err := t.check(); err != nil {
			return nil, fmt.Errorf("server: token %d (%s): %w", i+1, t.Name, err)
		}
		var rec tokenRecord
		b, _ := hex.DecodeString(t.SHA256)
		copy(rec.hash[:], b)
		rec.id = &identity{name: t.Name, role: t.Role, threads: append([]string(nil), t.Threads...)}
		a.tokens = append(a.tokens, rec)
	}
	if err := checkUnique(tokens); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return a, nil
}

// token returns the identity of a secret, or nil. Every token is compared,
// in constant time, whichever matches.
func (a *authenticator) token(secret string) *identity {
	sum := sha256.Sum256([]byte(secret))
	var found *identity
	for _, t := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.hash[:]) == 1 {
			found = t.id
		}
	}
	return found
}

// maxSessionsPerName bounds the sessions of one token holder (browsers,
// devices) kept at once.
const maxSessionsPerName = 32

// signIn opens a session for id and returns the cookie's value.
func (a *authenticator) signIn(id *identity) (string, *session) {
	key := rand.Text() + rand.Text()
	s := &session{id: id, csrf: rand.Text() + rand.Text(), expires: a.clock.Now().Add(a.ttl)}
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	// One token holder may keep at most maxSessionsPerName sessions: its
	// own oldest goes first, so signing in again and again cannot push
	// other people's sessions out.
	var mine [][sha256.Size]byte
	for k, old := range a.sessions {
		if old.id.name == id.name && now.Before(old.expires) {
			mine = append(mine, k)
		}
	}
	for len(mine) >= maxSessionsPerName {
		oldest := 0
		for i, k := range mine {
			if a.sessions[k].expires.Before(a.sessions[mine[oldest]].expires) {
				oldest = i
			}
		}
		a.dropLocked(mine[oldest])
		mine = append(mine[:oldest], mine[oldest+1:]...)
	}
	if len(a.sessions) >= a.max {
		for k, old := range a.sessions {
			if !now.Before(old.expires) {
				a.dropLocked(k)
			}
		}
	}
	for len(a.sessions) >= a.max {
		// Full of live sessions: the one closest to its end goes.
		var oldest [sha256.Size]byte
		var first time.Time
		for k, old := range a.sessions {
			if first.IsZero() || old.expires.Before(first) {
				oldest, first = k, old.expires
			}
		}
		a.dropLocked(oldest)
	}
	a.sessions[sha256.Sum256([]byte(key))] = s
	return key, s
}

// session returns the live session of a cookie value, or nil.
func (a *authenticator) session(key string) *session {
	h := sha256.Sum256([]byte(key))
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[h]
	if s == nil {
		return nil
	}
	if !a.clock.Now().Before(s.expires) {
		a.dropLocked(h)
		return nil
	}
	return s
}

// live reports whether a stream opened with session s may go on: true for
// bearer tokens and dev mode (s nil), else while the session is signed in
// and unexpired.
func (a *authenticator) live(s *session) bool {
	if s == nil {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.clock.Now().Before(s.expires) {
		return false
	}
	return !s.ended
}

// dropLocked ends the session stored under k.
func (a *authenticator) dropLocked(k [sha256.Size]byte) {
	if s := a.sessions[k]; s != nil {
		s.ended = true
	}
	delete(a.sessions, k)
}

func (a *authenticator) signOut(s *session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, x := range a.sessions {
		if x == s {
			a.dropLocked(k)
		}
	}
}

// stateChanging reports whether a request's method may change state, the
// requests a cross-site page could forge.
func stateChanging(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// sameOrigin reports whether the request's Origin (or, without one, its
// Referer) names the host the request was sent to. found is false when
// the request has neither.
func sameOrigin(r *http.Request) (same, found bool) {
	o := r.Header.Get("Origin")
	if o == "" {
		o = r.Header.Get("Referer")
	}
	if o == "" {
		return false, false
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false, true // "null" and other opaque origins
	}
	return strings.EqualFold(u.Host, r.Host), true
}

func csrfError(format string, a ...any) *apiError {
	return newError(http.StatusForbidden, codeCSRF, format, a...)
}

// authenticate says who sent r: a bearer token, else the session cookie
// (with the CSRF checks on a state-changing request), else nobody.
func (s *Server) authenticate(r *http.Request) (*identity, *apiError) {
	if s.dev {
		if !loopbackHost(r.Host) {
			// A page of another site whose name resolves to 127.0.0.1
			// (DNS rebinding) would otherwise drive this server.
			return nil, forbidden("dev mode serves only loopback host names (localhost, 127.0.0.1, [::1]), not %q", r.Host)
		}
		for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip"} {
			if r.Header.Get(h) != "" {
				// A reverse proxy on this machine would make every client
				// of the proxy an admin: dev mode is for a browser on
				// this machine only.
				return nil, forbidden("dev mode refuses proxied requests (%s header): configure tokens to serve through a proxy", h)
			}
		}
		if same, found := sameOrigin(r); stateChanging(r) && found && !same {
			return nil, csrfError("cross-site request refused: the Origin is not this server")
		}
		return devIdentity, nil
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, secret, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
			return nil, newError(http.StatusUnauthorized, codeUnauthenticated, "the Authorization header must be \"Bearer <token>\"")
		}
		id := s.auth.token(strings.TrimSpace(secret))
		if id == nil {
			return nil, newError(http.StatusUnauthorized, codeUnauthenticated, "unknown token")
		}
		return id, nil
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, newError(http.StatusUnauthorized, codeUnauthenticated, "sign in: send \"Authorization: Bearer <token>\" or sign in with POST /v1/session")
	}
	sess := s.auth.session(c.Value)
	if sess == nil {
		return nil, newError(http.StatusUnauthorized, codeUnauthenticated, "the session has expired or was signed out: sign in again")
	}
	if stateChanging(r) {
		got := r.Header.Get("X-CSRF-Token")
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(sess.csrf)) != 1 {
			return nil, csrfError("a request signed in by cookie needs the session's X-CSRF-Token header")
		}
		if same, found := sameOrigin(r); !same {
			if !found {
				return nil, csrfError("a request signed in by cookie needs an Origin (or Referer) header naming this server")
			}
			return nil, csrfError("cross-site request refused: the Origin is not this server")
		}
	}
	return &identity{name: sess.id.name, role: sess.id.role, threads: sess.id.threads, session: sess}, nil
}

// loopbackHost reports whether a Host header names this machine.
func loopbackHost(hostport string) bool {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// loopbackAddr reports whether a listen address binds only this machine.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "" {
		return false // ":8080" listens on every interface
	}
	return loopbackHost(host)
}

type sessionRequest struct {
	Token string `json:"token"`
}

type sessionResponse struct {
	Name      string         `json:"name"`
	Role      Role           `json:"role"`
	Threads   []string       `json:"threads,omitempty"`
	CSRFToken string         `json:"csrf_token,omitempty"`
	ExpiresAt apiclient.Time `json:"expires_at,omitzero"`
	DevMode   bool           `json:"dev_mode"`
	Model     string         `json:"model,omitempty"`
	// Notices are for those who answer questions (reviewers, admins).
	Notices []noticeJSON `json:"notices,omitempty"`
}

type noticeJSON struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	At      apiclient.Time `json:"at"`
}

func (s *Server) sessionBody(id *identity) sessionResponse {
	b := sessionResponse{Name: id.name, Role: id.role, Threads: id.threads, DevMode: s.dev, Model: s.model}
	if id.session != nil {
		b.CSRFToken, b.ExpiresAt = id.session.csrf, apiclient.Time(id.session.expires)
	}
	if s.notices != nil && id.role != RoleClient {
		for _, n := range s.notices() {
			b.Notices = append(b.Notices, noticeJSON{Code: n.Code, Message: n.Message, At: apiclient.Time(n.At)})
		}
	}
	return b
}

// POST /v1/session: sign the page in with a token.
func (s *Server) createSession(w http.ResponseWriter, r *http.Request, _ *identity) error {
	if s.dev {
		// Nobody signs in: the page learns it is in dev mode.
		id, e := s.authenticate(r)
		if e != nil {
			return e
		}
		return s.getSession(w, r, id)
	}
	if same, found := sameOrigin(r); found && !same {
		// Signing a victim's browser in as someone else is an attack too.
		return csrfError("cross-site sign-in refused: the Origin is not this server")
	}
	var req sessionRequest
	if err := s.decode(w, r, &req, false); err != nil {
		return err
	}
	if req.Token == "" {
		return badRequest("token is missing")
	}
	id := s.auth.token(req.Token)
	if id == nil {
		return newError(http.StatusUnauthorized, codeUnauthenticated, "unknown token")
	}
	key, sess := s.auth.signIn(id)
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: key, Path: "/",
		Expires: sess.expires, MaxAge: int(s.auth.ttl / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	setWho(r, id.name)
	writeJSON(w, http.StatusCreated, s.sessionBody(&identity{name: id.name, role: id.role, threads: id.threads, session: sess}))
	return nil
}

// GET /v1/session: who is signed in.
func (s *Server) getSession(w http.ResponseWriter, _ *http.Request, id *identity) error {
	writeJSON(w, http.StatusOK, s.sessionBody(id))
	return nil
}

// DELETE /v1/session: sign out.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, id *identity) error {
	if id.session != nil {
		s.auth.signOut(id.session)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	w.WriteHeader(http.StatusNoContent)
	return nil
}
