package openai

import "testing"

// The whole message of each form of *Error, as users read it.
func TestErrorMessage(t *testing.T) {
	t.Parallel()
	const url = "http://localhost:11434/v1"
	for _, c := range []struct {
		e    *Error
		want string
	}{
		{&Error{StatusCode: 401, Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key", BaseURL: url, keyed: true, kind: ErrAuth},
			"openai: authentication failed (HTTP 401 invalid_request_error invalid_api_key: Incorrect API key) from " + url + "; check OPENAI_API_KEY (or Options.APIKey)"},
		{&Error{StatusCode: 401, BaseURL: url, kind: ErrAuth},
			"openai: authentication failed (HTTP 401) from " + url + "; no API key is set: set OPENAI_API_KEY (or Options.APIKey)"},
		{&Error{StatusCode: 403, Type: "403", Code: "forbidden", BaseURL: url, keyed: true, kind: ErrAuth},
			"openai: permission denied (HTTP 403 forbidden) from " + url + "; check OPENAI_API_KEY (or Options.APIKey)"},
		{&Error{StatusCode: 429, Type: "rate_limit", Code: "rate_limit", Retries: 3, BaseURL: url, kind: ErrRateLimited},
			"openai: rate limited (HTTP 429 rate_limit) from " + url + "; gave up after 3 retries"},
		{&Error{StatusCode: 200, Message: "boom", Retries: 2, BaseURL: url, kind: ErrServer},
			"openai: server error mid-stream (: boom) from " + url},
		{&Error{StatusCode: 404, Message: "model not found", BaseURL: url},
			"openai: request failed (HTTP 404: model not found) from " + url},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}
