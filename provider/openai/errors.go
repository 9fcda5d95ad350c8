package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/tollgate-ai/tollgate/internal/providererr"
)

// Kinds of failure, for errors.Is. An [*Error] wraps one of the first three
// (or none, for other rejected requests); a reply cut short wraps
// ErrIncomplete.
var (
	// ErrAuth: the server refused the credentials (401) or their
	// permissions (403).
	ErrAuth = errors.New("authentication failed")
	// ErrRateLimited: 429, still after the retries.
	ErrRateLimited = errors.New("rate limited")
	// ErrServer: 5xx, still after the retries, or an error reported in the
	// middle of a stream.
	ErrServer = errors.New("server error")
	// ErrIncomplete: the reply stopped before its end (connection cut, or a
	// stream without a finish_reason). No partial message is returned.
	ErrIncomplete = errors.New("incomplete reply")
)

// Error is an error reported by the server, after the retries the SDK made.
// It unwraps to its kind ([ErrAuth], [ErrRateLimited], [ErrServer]) when it
// has one, and to the SDK's error.
type Error struct {
	// StatusCode is the HTTP status; 200 for an error that arrived in the
	// middle of a stream.
	StatusCode int
	// Type and Code are the server's error type and code, when it gives them.
	Type, Code string
	// Message is the server's explanation.
	Message string
	// BaseURL is the server that was called.
	BaseURL string
	// Retries is how many retries the provider allowed (the SDK stops
	// earlier when the server says a retry is pointless).
	Retries int

	keyed bool
	kind  error
	err   error
}

func (e *Error) Error() string {
	p := providererr.Parts{Provider: "openai", StatusCode: e.StatusCode, Kind: e.kind, Details: []string{e.Type, e.Code},
		Message: e.Message, Source: " from " + e.BaseURL, Retries: e.Retries}
	switch e.kind {
	case ErrAuth:
		if e.keyed {
			p.Hint = "; check OPENAI_API_KEY (or Options.APIKey)"
		} else {
			p.Hint = "; no API key is set: set OPENAI_API_KEY (or Options.APIKey)"
		}
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
		return fmt.Errorf("openai: %w", ctxErr)
	}
	e := &Error{BaseURL: p.baseURL, Retries: p.maxRetries, keyed: p.keyed, err: err}
	var apiErr *sdk.Error
	var streamErr *ssestream.StreamError
	switch {
	case errors.As(err, &apiErr):
		e.StatusCode, e.Type, e.Code, e.Message = apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Message
	case errors.As(err, &streamErr):
		e.StatusCode = http.StatusOK
		e.Type, e.Code, e.Message = streamError(streamErr.Event.Data)
		if e.Message == "" {
			e.Message = streamErr.Message
		}
	default:
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Op == "dial" {
			return fmt.Errorf("openai: cannot reach %s (is the server running?): %w", p.baseURL, err)
		}
		if midStream {
			return fmt.Errorf("openai: %w: %w", ErrIncomplete, err)
		}
		return fmt.Errorf("openai: %w", err)
	}
	e.kind = kind(e.StatusCode)
	return e
}

func kind(status int) error {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ErrAuth
	case status == http.StatusTooManyRequests:
		return ErrRateLimited
	case status >= 500 || status == http.StatusOK: // 200: failed mid-stream
		return ErrServer
	}
	return nil
}

// streamError reads an error event: {"error": {"message", "type", "code"}}.
// The code is a string for OpenAI and a number for some other servers.
func streamError(data []byte) (typ, code, msg string) {
	var ev struct {
		Error struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return "", "", ""
	}
	code = strings.Trim(string(ev.Error.Code), `"`)
	if code == "null" {
		code = ""
	}
	return ev.Error.Type, code, ev.Error.Message
}

// normalizeErrorBody rewrites error bodies that OpenAI-compatible servers
// shape differently ({"message": ...} at the top level, as vLLM sends, or
// FastAPI's {"detail": ...}, or plain text) into OpenAI's
// {"error": {...}}, so the SDK reports them with their status and message.
var normalizeErrorBody option.Middleware = func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(r)
	if err != nil || res == nil || res.StatusCode < 400 || res.Body == nil {
		return res, err
	}
	body, readErr := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	_ = res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(body))
	if readErr != nil {
		return res, nil
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) == nil {
		if e, ok := top["error"]; ok && len(e) > 0 && e[0] == '{' {
			return res, nil // OpenAI's own shape
		}
	}
	var inner any
	switch {
	case top["message"] != nil:
		top["message"] = asText(top["message"])
		inner = top
	case top["detail"] != nil:
		inner = map[string]json.RawMessage{"message": asText(top["detail"])}
	case top["error"] != nil: // {"error": "text"}, as Ollama's native API sends
		inner = map[string]json.RawMessage{"message": asText(top["error"])}
	default:
		msg := strings.TrimSpace(string(body))
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		inner = map[string]string{"message": msg}
	}
	fixed, _ := json.Marshal(map[string]any{"error": inner})
	res.Body = io.NopCloser(bytes.NewReader(fixed))
	res.ContentLength = int64(len(fixed))
	res.Header.Set("Content-Type", "application/json")
	return res, nil
}

// asText returns raw as a JSON string: itself if it is one, else its text.
func asText(raw json.RawMessage) json.RawMessage {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return raw
	}
	b, _ := json.Marshal(string(raw))
	return b
}
