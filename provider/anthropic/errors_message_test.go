package anthropic

import "testing"

// The whole message of each form of *Error, as users read it.
func TestErrorMessage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		e    *Error
		want string
	}{
		{&Error{StatusCode: 401, Type: "authentication_error", Message: "invalid x-api-key", RequestID: "req_1", kind: ErrAuth},
			"anthropic: authentication failed (HTTP 401 authentication_error: invalid x-api-key) request-id req_1; check ANTHROPIC_API_KEY (or Options.APIKey)"},
		{&Error{StatusCode: 403, Type: "permission_error", kind: ErrAuth},
			"anthropic: permission denied (HTTP 403 permission_error); check ANTHROPIC_API_KEY (or Options.APIKey)"},
		{&Error{StatusCode: 429, Type: "rate_limit_error", Message: "slow down", Retries: 1, kind: ErrRateLimited},
			"anthropic: rate limited (HTTP 429 rate_limit_error: slow down); gave up after 1 retry"},
		{&Error{StatusCode: 529, Type: "overloaded_error", Retries: 2, kind: ErrServer},
			"anthropic: server error (HTTP 529 overloaded_error); gave up after 2 retries"},
		{&Error{StatusCode: 200, Type: "overloaded_error", Message: "Overloaded", Retries: 2, kind: ErrServer},
			"anthropic: server error mid-stream (overloaded_error: Overloaded)"},
		{&Error{StatusCode: 400, Message: "bad model"},
			"anthropic: request failed (HTTP 400: bad model)"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}
