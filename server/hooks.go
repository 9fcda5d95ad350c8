package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/hooks"
	"github.com/tollgate-ai/tollgate/hooks/client"
)

// maxHookBody bounds a hook's payload: an agent writes whole files.
const maxHookBody = 16 << 20

var devHookWarning sync.Once

// POST /v1/hooks/{agent}: a coding agent's hook (see package hooks). It
// always answers in the agent's words — a deny when the token, the agent
// or the request will not do — never with an HTTP error, which an agent
// takes as no answer and decides by its own rules.
func (s *Server) hook(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	a, err := hooks.ParseAgent(r.PathValue("agent"))
	if err != nil {
		s.hookAnswer(w, r, hooks.Response{Status: http.StatusOK, Body: hooks.Refusal("", err.Error())})
		return
	}
	refuse := func(reason string) {
		s.hookAnswer(w, r, hooks.Response{Status: http.StatusOK, Body: hooks.Refusal(a, reason)})
	}
	if s.hooks == nil {
		refuse("this server takes no coding agents' hooks")
		return
	}
	id, e := s.authenticate(r)
	switch {
	case e != nil:
		refuse("the hook's token was refused: " + e.message)
		return
	case s.dev:
		devHookWarning.Do(func() {
			s.log.Warn("tollgate: DEV MODE takes a coding agent's hook: the agent runs on this machine and can answer its own questions through the API; give serve --tokens and the hook a client token")
		})
	case r.Header.Get("Authorization") == "":
		refuse("a hook signs in with its token in an Authorization header, not a page's session")
		return
	case id.role != RoleClient:
		// An agent holding a token that answers questions can approve its
		// own calls.
		refuse("the hook's token " + strconv.Quote(id.name) + " is a " + string(id.role) + "'s, which can answer questions: give the hook a client token (tollgate token new --role client)")
		return
	}
	setWho(r, id.name)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxHookBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			refuse("the hook's input is larger than 16 MiB")
			return
		}
		refuse("the hook's input could not be read: " + err.Error())
		return
	}
	opts := &hooks.CallOptions{Retries: r.Header.Get(client.RetryHeader) == "1"}
	wait := r.Header.Get(client.WaitHeader)
	if q := r.URL.Query().Get("wait"); q != "" {
		wait = q
	}
	if wait != "" {
		n, err := strconv.Atoi(wait)
		if err != nil || n <= 0 {
			refuse("the hook's wait is not a number of seconds: " + strconv.Quote(wait))
			return
		}
		opts.Wait = time.Duration(n) * time.Second
	}
	if c := r.Header.Get(client.ConfineHeader); c != "" {
		var conf hooks.Confine
		if err := json.Unmarshal([]byte(c), &conf); err != nil || conf.Exe == "" {
			refuse("the hook's confinement is not readable")
			return
		}
		opts.Confine = &conf
	}
	s.hookAnswer(w, r, s.hooks.Handle(r.Context(), a, body, opts))
}

func (s *Server) hookAnswer(w http.ResponseWriter, r *http.Request, resp hooks.Response) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if resp.Status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// hookInfo is what GET /v1/hooks says to a hook's installer.
type hookInfo struct {
	Agents []string `json:"agents"`
	// MaxTimeoutSeconds is the longest a question waits for a person
	// (0: unknown): a hook must wait longer.
	MaxTimeoutSeconds int `json:"max_timeout_seconds"`
}

// GET /v1/hooks
func (s *Server) hookInfo(w http.ResponseWriter, r *http.Request, _ *identity) error {
	if s.hooks == nil {
		return notFound("this server takes no coding agents' hooks")
	}
	info := hookInfo{MaxTimeoutSeconds: int(s.hooks.MaxTimeout() / time.Second)}
	for _, a := range hooks.Agents {
		info.Agents = append(info.Agents, string(a))
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}
