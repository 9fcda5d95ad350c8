package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/tollgate-ai/tollgate/internal/providererr"
)

// Kinds of failure, for errors.Is. An [*Error] wraps one of the first three
// (or none, for other rejected requests); a reply cut short wraps
// ErrIncomplete.
var (
	// ErrAuth: the API refused the credentials (401) or their permissions (403).
	ErrAuth = errors.New("authentication failed")
	// ErrRateLimited: 429, still after the retries.
	ErrRateLimited = errors.New("rate limited")
	// ErrServer: 5xx (529 is "overloaded"), still after the retries, or an
	// overloaded or api error reported in the middle of a stream.
	ErrServer = errors.New("server error")
	// ErrIncomplete: the reply stopped before its end (connection cut, or a
	// stream without message_stop). No partial message is returned.
	ErrIncomplete = errors.New("incomplete reply")
)

// Error is an error reported by the API, after the retries the SDK made.
// It unwraps to its kind ([ErrAuth], [ErrRateLimited], [ErrServer]) when it
// has one, and to the SDK's *anthropic.Error.
type Error struct {
	// StatusCode is the HTTP status; 200 for an error event that arrived
	// in the middle of a stream.
	StatusCode int
	// Type is the API's error type, such as "overloaded_error".
	Type string
	// Message is the API's explanation.
	Message string
	// RequestID identifies the request for Anthropic's support.
	RequestID string
	// Retries is how many retries the provider allowed (the SDK stops
	// earlier when the server says a retry is pointless).
	Retries int

	kind error
	err  error
}

func (e *Error) Error() string {
	p := providererr.Parts{Provider: "anthropic", StatusCode: e.StatusCode, Kind: e.kind, Details: []string{e.Type},
		Message: e.Message, Retries: e.Retries}
	if e.RequestID != "" {
		p.Source = " request-id " + e.RequestID
	}
	switch e.kind {
	case ErrAuth:
		p.Hint = "; check ANTHROPIC_API_KEY (or Options.APIKey)"
	case ErrRateLimited, ErrServer:
		p.Retried = true
	}
	return p.String()
}

// Unwrap returns the kind, if any, and the SDK's error.
func (e *Error) Unwrap() []error {
	if e.kind == nil {
		return []error{e.err}
	}
	return []error{e.kind, e.err}
}

// fail turns an error from the SDK into the one Complete returns. A
// cancelled ctx wins over whatever the cancellation caused.
func (p *Provider) fail(ctx context.Context, err error, midStream bool) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("anthropic: %w", ctxErr)
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		typ := string(apiErr.Type())
		return &Error{
			StatusCode: apiErr.StatusCode,
			Type:       typ,
			Message:    apiErr.Message,
			RequestID:  apiErr.RequestID,
			Retries:    p.maxRetries,
			kind:       kind(apiErr.StatusCode, typ),
			err:        apiErr,
		}
	}
	if midStream {
		return fmt.Errorf("anthropic: %w: %w", ErrIncomplete, err)
	}
	return fmt.Errorf("anthropic: %w", err)
}

func kind(status int, typ string) error {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden ||
		typ == "authentication_error" || typ == "permission_error":
		return ErrAuth
	case status == http.StatusTooManyRequests || typ == "rate_limit_error":
		return ErrRateLimited
	case status >= 500 || typ == "overloaded_error" || typ == "api_error":
		return ErrServer
	}
	return nil
}
