package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/apiclient"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/policy/learn"
)

// Error codes of the API (API.md, "Errors").
const (
	codeBadRequest      = "bad_request"
	codeUnauthenticated = "unauthenticated"
	codeForbidden       = "forbidden"
	codeCSRF            = "csrf"
	codeNotFound        = "not_found"
	codeMethod          = "method_not_allowed"
	codeConflict        = "conflict"
	codeAlreadyAnswered = "already_answered"
	codeRunActive       = "run_active"
	codeNoRun           = "no_run"
	codeDigestMismatch  = "digest_mismatch"
	codeDigestRequired  = "digest_required"
	codeExpired         = "expired"
	codeAborted         = "aborted"
	codeTooLarge        = "too_large"
	codeTooManyStreams  = "too_many_streams"
	codeInvalidAnswer   = "invalid_answer"
	codeInternal        = "internal"
	codeUnavailable     = "unavailable"
)

// apiError is an error with its HTTP status and the body that says it.
type apiError struct {
	status   int
	code     string
	message  string
	problems []agent.Problem
	// question is the stored question, for answers refused because it
	// was resolved already (who won, and how).
	question *apiclient.Question
	// cause is logged, never sent.
	cause error
	// store: the store failed (counted in tollgate_store_errors_total).
	store bool
}

func (e *apiError) Error() string {
	if e.cause != nil {
		return e.message + ": " + e.cause.Error()
	}
	return e.message
}

func (e *apiError) Unwrap() error { return e.cause }

func newError(status int, code, format string, a ...any) *apiError {
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, a...)}
}

func badRequest(format string, a ...any) *apiError {
	return newError(http.StatusBadRequest, codeBadRequest, format, a...)
}

func forbidden(format string, a ...any) *apiError {
	return newError(http.StatusForbidden, codeForbidden, format, a...)
}

func notFound(format string, a ...any) *apiError {
	return newError(http.StatusNotFound, codeNotFound, format, a...)
}

// sentinels maps the errors of hitl, host and checkpoint to statuses and
// codes, in the order they are tested: ErrAborted wraps
// checkpoint.ErrConflict, as ErrAlreadyAnswered does, so it comes first;
// hitl's ErrUnknownQuestion wraps checkpoint.ErrNotFound.
var sentinels = []struct {
	err    error
	status int
	code   string
}{
	{hitl.ErrUnknownQuestion, http.StatusNotFound, codeNotFound},
	{hitl.ErrAborted, http.StatusGone, codeAborted},
	{hitl.ErrAlreadyAnswered, http.StatusConflict, codeAlreadyAnswered},
	{hitl.ErrExpired, http.StatusGone, codeExpired},
	{hitl.ErrDigestMismatch, http.StatusConflict, codeDigestMismatch},
	{hitl.ErrDigestRequired, http.StatusUnprocessableEntity, codeDigestRequired},
	{hitl.ErrWrongKind, http.StatusUnprocessableEntity, codeInvalidAnswer},
	{hitl.ErrInvalidAnswer, http.StatusUnprocessableEntity, codeInvalidAnswer},
	{host.ErrRunActive, http.StatusConflict, codeRunActive},
	{agent.ErrNoRun, http.StatusConflict, codeNoRun},
	{host.ErrClosed, http.StatusServiceUnavailable, codeUnavailable},
	{host.ErrNotStarted, http.StatusServiceUnavailable, codeUnavailable},
	{learn.ErrNotLearnable, http.StatusUnprocessableEntity, codeNotLearnable},
	{learn.ErrDigest, http.StatusConflict, codeDigestMismatch},
	{learn.ErrNotApproved, http.StatusConflict, codeConflict},
	{checkpoint.ErrSelfApproval, http.StatusForbidden, codeForbidden},
	{checkpoint.ErrBadCursor, http.StatusBadRequest, codeBadRequest},
	{checkpoint.ErrNotFound, http.StatusNotFound, codeNotFound},
}

// classify turns any error of a handler into an apiError.
func classify(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	e := &apiError{cause: err, message: err.Error()}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		e.status, e.code = http.StatusRequestEntityTooLarge, codeTooLarge
		e.message = fmt.Sprintf("the body is over the limit of %d bytes", mbe.Limit)
		return e
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			e.status, e.code, e.message = s.status, s.code, trimPrefix(err, s.err)
			break
		}
	}
	switch e.code {
	case "":
	case codeInvalidAnswer:
		var ve *agent.ValidationError
		if errors.As(err, &ve) && len(ve.Problems) > 0 {
			e.problems = ve.Problems
		} else {
			// The policy's refusal, or a wrong shape for the kind: one
			// problem about the whole answer.
			e.problems = []agent.Problem{{Path: "", Message: e.message}}
		}
		return e
	case codeRunActive:
		e.message += ": wait for it to finish, answer its questions, or abort it"
		return e
	case codeNotLearnable:
		e.message = "no rule can be learned from this call: " + e.message
		return e
	case codeNoRun:
		e.message = "the thread has no unfinished run to resume"
		return e
	case codeBadRequest:
		e.message = "bad cursor: pass the next_cursor of the same list, unchanged"
		return e
	case codeUnavailable:
		e.message = "the host is not running yet: try again in a moment"
		if errors.Is(err, host.ErrClosed) {
			e.message = "the server is shutting down: try again in a moment"
		}
		return e
	default:
		return e
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		e.status, e.code, e.store = http.StatusServiceUnavailable, codeUnavailable, true
		e.message = "the store did not answer in time: try again"
	case errors.Is(err, checkpoint.ErrUnavailable):
		// A write may have been made: an answer's retry gets 409 with the
		// answer that won, a message's (with its idempotency key) the run.
		e.status, e.code, e.store = http.StatusServiceUnavailable, codeUnavailable, true
		e.message = "the store cannot be reached just now: try again in a moment"
	case errors.Is(err, context.Canceled):
		// The caller went away (or the server is closing): nobody reads
		// this, but the log says what happened.
		e.status, e.code = http.StatusServiceUnavailable, codeUnavailable
		e.message = "the request was cancelled"
	default:
		// A store (or other internal) failure: the details go to the log,
		// where the request id finds them; the caller learns what failed.
		e.status, e.code, e.store = http.StatusInternalServerError, codeInternal, true
		e.message = "the store failed to serve this request (see the server log)"
	}
	return e
}

// trimPrefix is err's message without the text of the sentinel it wraps,
// which is the same for every error of its kind.
func trimPrefix(err, sentinel error) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, sentinel.Error()+": "); ok {
		msg = rest
	}
	for _, pkg := range []string{"hitl: ", "host: ", "agent: ", "checkpoint: ", "learn: "} {
		msg = strings.TrimPrefix(msg, pkg)
	}
	return msg
}
