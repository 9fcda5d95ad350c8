// Package providererr writes the message of a model provider's API error
// (package provider/anthropic, provider/openai) one way for every
// provider:
//
//	anthropic: rate limited (HTTP 429 rate_limit_error: slow down) request-id req_1; gave up after 2 retries
//	openai: server error mid-stream (server_error: boom) from http://localhost:11434/v1
package providererr

import (
	"fmt"
	"net/http"
	"strings"
)

// Parts are what the message says, in order.
type Parts struct {
	// Provider begins the message: "anthropic", "openai".
	Provider string
	// StatusCode is the HTTP status; 200 for an error that came in the
	// middle of a stream (said as "mid-stream").
	StatusCode int
	// Kind is the error's kind (authentication, rate limit, server), or
	// nil: its text says what failed, after 403's "permission denied".
	Kind error
	// Details are the API's error type (and code), in the parenthesis
	// after the status; empty ones and repeats are left out.
	Details []string
	// Message is the API's explanation.
	Message string
	// Source follows the parenthesis: " request-id ...", " from URL".
	Source string
	// Hint, if set, ends the message: what to check ("; check ...").
	Hint string
	// Retried says the kind is one the provider retries (rate limits,
	// server errors): the message then says how many retries it made,
	// Retries, when there were any and the error is not mid-stream.
	Retried bool
	Retries int
}

// String is the message.
func (p Parts) String() string {
	var b strings.Builder
	b.WriteString(p.Provider + ": ")
	switch {
	case p.StatusCode == http.StatusForbidden:
		b.WriteString("permission denied")
	case p.Kind != nil:
		b.WriteString(p.Kind.Error())
	default:
		b.WriteString("request failed")
	}
	var detail []string
	if p.StatusCode == http.StatusOK {
		b.WriteString(" mid-stream")
	} else {
		detail = append(detail, fmt.Sprintf("HTTP %d", p.StatusCode))
	}
	for _, s := range p.Details {
		if s != "" && !strings.Contains(strings.Join(detail, " "), s) {
			detail = append(detail, s)
		}
	}
	fmt.Fprintf(&b, " (%s", strings.Join(detail, " "))
	if p.Message != "" {
		b.WriteString(": " + p.Message)
	}
	b.WriteString(")" + p.Source + p.Hint)
	if p.Retried && p.StatusCode != http.StatusOK && p.Retries > 0 {
		fmt.Fprintf(&b, "; gave up after %d %s", p.Retries, plural(p.Retries, "retry", "retries"))
	}
	return b.String()
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
