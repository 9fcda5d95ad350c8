package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// writeJSON writes v with status, never escaping <, > and & (people read
// these values, and shell commands are full of '>').
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := encodeJSON(v)
	if err != nil {
		// Only a value of ours that cannot be encoded gets here: a bug,
		// reported as one rather than as half a body.
		body = []byte(`{"error":{"code":"internal","message":"the response cannot be encoded"}}`)
		status = http.StatusInternalServerError
	}
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// encodeJSON is json.Marshal without HTML escaping.
func encodeJSON(v any) ([]byte, error) { return jsontext.Marshal(v) }

// rawJSON is stored JSON (payloads, arguments, answers, messages, event
// data) on its way out. Stored JSON was often written by json.Marshal,
// which escapes <, > and & as \u003c, \u003e and \u0026: MarshalJSON
// writes those three as themselves, compacts the text and keeps
// everything else as it was written (key order, numbers digit for digit,
// other escapes).
type rawJSON []byte

// MarshalJSON implements json.Marshaler.
func (r rawJSON) MarshalJSON() ([]byte, error) {
	if len(bytes.TrimSpace(r)) == 0 {
		return []byte("null"), nil
	}
	out, err := unescapeHTML(r)
	if err != nil {
		// Stores keep valid JSON; should one hold anything else, it is
		// shown as the text it is rather than failing the response.
		return json.Marshal(string(r))
	}
	return out, nil
}

var errBadJSON = errors.New("server: not valid JSON")

// unescapeHTML compacts valid JSON text and turns the escapes \u003c,
// \u003e and \u0026 (any case) back into <, > and &.
func unescapeHTML(src []byte) ([]byte, error) {
	if !json.Valid(src) {
		return nil, errBadJSON
	}
	out := make([]byte, 0, len(src))
	inString := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if !inString {
			switch c {
			case ' ', '\t', '\n', '\r':
				continue
			case '"':
				inString = true
			}
			out = append(out, c)
			continue
		}
		switch c {
		case '"':
			inString = false
			out = append(out, c)
		case '\\':
			// json.Valid vouched for the escape: a letter after the
			// backslash, and four hex digits after a 'u'.
			if src[i+1] == 'u' {
				if lit, ok := htmlEscape(src[i+2 : i+6]); ok {
					out = append(out, lit)
				} else {
					out = append(out, src[i:i+6]...)
				}
				i += 5
				continue
			}
			out = append(out, c, src[i+1])
			i++
		default:
			out = append(out, c)
		}
	}
	return out, nil
}

// htmlEscape reports which of <, > and & the four hex digits name.
func htmlEscape(hex []byte) (byte, bool) {
	if hex[0] != '0' || hex[1] != '0' {
		return 0, false
	}
	switch {
	case hex[2] == '3' && (hex[3] == 'c' || hex[3] == 'C'):
		return '<', true
	case hex[2] == '3' && (hex[3] == 'e' || hex[3] == 'E'):
		return '>', true
	case hex[2] == '2' && hex[3] == '6':
		return '&', true
	}
	return 0, false
}

// timeFormat is RFC 3339 in UTC with microseconds, the precision every
// store keeps.
const timeFormat = "2006-01-02T15:04:05.000000Z07:00"

// jsonTime is a time as RFC 3339 in UTC, or null when zero.
type jsonTime time.Time

// MarshalJSON implements json.Marshaler.
func (t jsonTime) MarshalJSON() ([]byte, error) {
	tt := time.Time(t)
	if tt.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + tt.UTC().Format(timeFormat) + `"`), nil
}
