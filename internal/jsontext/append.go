package jsontext

import (
	"encoding/json"
	"time"
)

// The appenders below let a package encode its own types without
// reflection, byte for byte as Marshal would (see agent's messages). Each
// reports false where it cannot say that: the caller then hands the
// whole value to Marshal.

// AppendString appends s as a JSON string, as Marshal does.
func AppendString(b []byte, s string) []byte { return appendString(b, s, false) }

// AppendValue appends v as Marshal encodes it, for the types Marshal
// encodes without reflection (strings, numbers, json.Number, booleans,
// nil, compact json.RawMessage, and maps and lists of them); ok false for any other (b is then garbage).
func AppendValue(b []byte, v any) ([]byte, bool) { return appendValue(b, v, 0, false) }

// AppendRaw appends raw as encoding/json encodes a [json.RawMessage]
// field: "null" for nil, the text itself when it is valid JSON with no
// white space outside its strings (what encoding/json's compaction would
// leave as it is). ok false otherwise (empty, invalid, or white space to
// take out).
func AppendRaw(b []byte, raw json.RawMessage) ([]byte, bool) {
	if raw == nil {
		return append(b, "null"...), true
	}
	inString, escaped := false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return b, false
		}
	}
	if !Valid(raw) {
		return b, false
	}
	return append(b, raw...), true
}

// AppendTime appends t as its MarshalJSON does (RFC 3339 with
// nanoseconds, quoted); ok false where MarshalJSON fails (a year outside
// 0–9999, a zone hour past 23).
func AppendTime(b []byte, t time.Time) ([]byte, bool) {
	b = append(b, '"')
	n0 := len(b)
	b = t.AppendFormat(b, time.RFC3339Nano)
	// time's own checks (appendStrictRFC3339).
	switch {
	case len(b) < n0+5 || b[n0+4] != '-':
		return b, false
	case b[len(b)-1] != 'Z':
		c := b[len(b)-len("Z07:00")]
		h := b[len(b)-len("07:00"):]
		if '0' <= c && c <= '9' || 10*(h[0]-'0')+(h[1]-'0') >= 24 {
			return b, false
		}
	}
	return append(b, '"'), true
}
