package hitl

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// The answer nearly every approve question gets — {"decision": …,
// "digest": …} and perhaps a reason, all plain strings — is read and
// written here without encoding/json's generic decoder: checkAnswer's
// general path (encode, look for duplicate keys, decode into any,
// encode, decode into ApproveAnswer, encode and canonicalize again) was
// about 60 allocations of every approval cycle. What this path takes
// gives exactly what the general path gives (TestApproveFastMatchesGeneral);
// anything else — an edit, an escape in a string, a key written
// otherwise, a duplicate key, invalid UTF-8 — goes the general way,
// which also says what is wrong.

// plainApprove returns answer as an ApproveAnswer when it is one without
// edited arguments whose strings are valid UTF-8 (an ApproveAnswer, a
// pointer to one, or JSON text that flatApprove reads); ok false: the
// general path decides.
func plainApprove(answer any) (a ApproveAnswer, ok bool) {
	switch x := answer.(type) {
	case ApproveAnswer:
		a = x
	case *ApproveAnswer:
		if x == nil {
			return a, false
		}
		a = *x
	case json.RawMessage:
		return flatApprove(x)
	case []byte:
		return flatApprove(x)
	default:
		return a, false
	}
	// Invalid UTF-8 would come back from the general path's round trip
	// as U+FFFD: not the same strings.
	ok = a.EditedArgs == nil && utf8.ValidString(a.Decision) && utf8.ValidString(a.Reason) && utf8.ValidString(a.Digest)
	return a, ok
}

// flatApprove reads raw when it is one JSON object whose keys are
// "decision", "reason" and "digest", each at most once, as written (no
// escape), and whose values are strings without escapes or control
// characters, in valid UTF-8, with JSON white space around any token:
// then what encoding/json would decode is the bytes between the quotes.
// ok false for anything else.
func flatApprove(raw []byte) (a ApproveAnswer, ok bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return a, false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return a, skipSpace(raw, i+1) == len(raw)
	}
	var seen [3]bool
	for {
		var key, val string
		if key, i, ok = plainString(raw, i); !ok {
			return a, false
		}
		if i = skipSpace(raw, i); i >= len(raw) || raw[i] != ':' {
			return a, false
		}
		if val, i, ok = plainString(raw, skipSpace(raw, i+1)); !ok {
			return a, false
		}
		var field *string
		var n int
		switch key {
		case "decision":
			field, n = &a.Decision, 0
		case "reason":
			field, n = &a.Reason, 1
		case "digest":
			field, n = &a.Digest, 2
		default:
			return a, false
		}
		if seen[n] {
			return a, false
		}
		seen[n], *field = true, val
		if i = skipSpace(raw, i); i >= len(raw) {
			return a, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return a, skipSpace(raw, i+1) == len(raw)
		default:
			return a, false
		}
	}
}

// plainString reads the JSON string at raw[i] when it holds no escape
// and no control character and is valid UTF-8; next is the index after
// its closing quote.
func plainString(raw []byte, i int) (s string, next int, ok bool) {
	if i >= len(raw) || raw[i] != '"' {
		return "", i, false
	}
	for j := i + 1; j < len(raw); j++ {
		switch c := raw[j]; {
		case c == '"':
			b := raw[i+1 : j]
			if !utf8.Valid(b) {
				return "", i, false
			}
			return string(b), j + 1, true
		case c == '\\' || c < 0x20:
			return "", i, false
		}
	}
	return "", i, false
}

// skipSpace returns the index of the first byte from i on that is not
// JSON white space.
func skipSpace(raw []byte, i int) int {
	for i < len(raw) {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// encodeApprove is a's canonical JSON (what canonicalJSON(mustJSON(a))
// gives), for an answer without edited arguments whose strings are valid
// UTF-8: keys in byte order, the empty reason and digest left out.
func encodeApprove(a *ApproveAnswer) (json.RawMessage, error) {
	m := make(map[string]string, 3)
	m["decision"] = a.Decision
	if a.Reason != "" {
		m["reason"] = a.Reason
	}
	if a.Digest != "" {
		m["digest"] = a.Digest
	}
	return jsontext.Marshal(m)
}
